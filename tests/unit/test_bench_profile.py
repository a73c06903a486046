"""bench.profile's summary of a JFR recording: stage windows, durations, hottest frames."""
from datetime import datetime, timedelta, timezone

import pytest

from bench.profile import _seconds, stage_windows, summarize

START = datetime(2026, 11, 23, 12, 0, 0, tzinfo=timezone.utc)


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
