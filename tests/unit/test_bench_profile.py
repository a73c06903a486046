"""bench.profile's summary of a JFR recording: stage windows, durations, hottest frames."""
import json
from datetime import UTC, datetime, timedelta

import pytest

from bench.profile import _seconds, stage_windows, summarize

START = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)


def _sample(at: datetime, *frames: str) -> dict:
    """A jdk.ExecutionSample as ``jfr print --json`` prints it (top frame first)."""
    stack = [{"method": {"type": {"name": f"org/example/{f.split('.')[0]}"}, "name": f.split(".")[1]}}
             for f in frames]
    return {"type": "jdk.ExecutionSample",
            "values": {"startTime": at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z", "stackTrace": {"frames": stack}}}


def test_jfr_durations_in_seconds():
    assert _seconds("PT0.176S") == pytest.approx(0.176)
    assert _seconds("PT1M7.5S") == pytest.approx(67.5)
    assert _seconds("PT2H") == 7200
    with pytest.raises(ValueError):
        _seconds("67 s")


def test_stages_are_laid_end_to_end_in_run_order():
    windows = stage_windows(START, {"validate": 2.0, "decode": 10.0, "fold_publish": 5.5})
    assert [(name, (a - START).total_seconds(), (b - START).total_seconds()) for name, a, b in windows] == [
        ("decode", 0.0, 10.0), ("fold_publish", 10.0, 15.5), ("validate", 15.5, 17.5)]


def test_samples_counted_in_their_stage_self_and_inclusive():
    windows = stage_windows(START, {"decode": 10.0, "fold_publish": 5.0})
    at = lambda s: START + timedelta(seconds=s)  # noqa: E731
    samples = [
        _sample(at(1), "Json.parse", "Decoder.decode"),
        _sample(at(2), "Json.parse", "Decoder.decode"),
        _sample(at(3), "Row.copy", "Decoder.decode"),
        # a method twice on one stack counts once inclusive
        _sample(at(11), "Sort.merge", "Sort.merge", "Fold.fold"),
        _sample(at(20), "After.run"),  # after the last stage: in none
        {"type": "jdk.ExecutionSample", "values": {"startTime": "2026-11-23T12:00:01.0Z", "stackTrace": None}},
    ]
    found = summarize(samples, windows, top=2)
    assert found["decode"]["samples"] == 3
    assert found["decode"]["self"] == [("Json.parse", 2), ("Row.copy", 1)]
    assert found["decode"]["inclusive"][0] == ("Decoder.decode", 3)
    assert found["fold_publish"] == {"samples": 1, "self": [("Sort.merge", 1)],
                                     "inclusive": [("Sort.merge", 1), ("Fold.fold", 1)]}


def test_spark_jobs_from_an_event_log(tmp_path):
    from bench.profile import _read_event_log, spark_jobs

    events = [
        {"Event": "SparkListenerApplicationStart"},
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": 1_000, "Stage IDs": [0, 1],
         "Stage Infos": [{"Stage Name": "map at x"}, {"Stage Name": "collect at fold.py:141"}]},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 0,
         "Task Metrics": {"Executor Run Time": 1500, "Executor CPU Time": 1_200_000_000, "JVM GC Time": 100}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 1,
         "Task Metrics": {"Executor Run Time": 500, "Executor CPU Time": 300_000_000, "JVM GC Time": 0}},
        {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": 3_500},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Submission Time": 4_000, "Stage IDs": [2],
         "Stage Infos": [{"Stage Name": "parquet at y"}]},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 2, "Task Metrics": None},  # a failed task: no metrics
        {"Event": "SparkListenerTaskEnd", "Stage ID": 9, "Task Metrics": {"Executor Run Time": 5}},  # no job
    ]
    # rolled logs (Spark 4 writes eventlog_v2_<app>/events_<n>_<app>) are read in order
    folder = tmp_path / "eventlog_v2_local-1"
    folder.mkdir()
    (folder / "events_1_local-1").write_text("\n".join(json.dumps(e) for e in events[:5]) + "\n")
    (folder / "events_2_local-1").write_text("\n".join(json.dumps(e) for e in events[5:]) + "\n")
    (folder / "appstatus_local-1").write_text("")

    jobs = spark_jobs(_read_event_log(str(tmp_path)))
    assert [j["job"] for j in jobs] == [0, 1]
    first, second = jobs
    assert first["call_site"] == "collect at fold.py:141" and first["tasks"] == 2
    assert first["start_s"] == 0 and first["seconds"] == pytest.approx(2.5)
    assert (first["run_s"], first["cpu_s"], first["gc_s"]) == pytest.approx((2.0, 1.5, 0.1))
    assert second["start_s"] == pytest.approx(3.0) and second["seconds"] is None  # never ended
    assert second["tasks"] == 1 and second["run_s"] == 0
