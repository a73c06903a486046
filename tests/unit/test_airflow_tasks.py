"""The DAG's helpers: intervals, run ids, stage arguments, settings."""
from datetime import datetime, timezone

import pytest

from jobs import airflow_tasks as tasks

UTC = timezone.utc


def test_data_interval_is_used_and_params_override_it():
    start, end = tasks.resolve_interval({}, datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
    assert (start, end) == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
    start, end = tasks.resolve_interval({"start": "2026-11-01T06:00:00+02:00", "end": "2026-11-03T00:00:00Z"},
                                        datetime(2026, 11, 5, tzinfo=UTC), datetime(2026, 11, 5, tzinfo=UTC))
    assert start == datetime(2026, 11, 1, 4, tzinfo=UTC) and end == datetime(2026, 11, 3, tzinfo=UTC)


def test_zero_width_manual_run_is_refused_with_a_clear_message():
    moment = datetime(2026, 11, 5, tzinfo=UTC)
    with pytest.raises(ValueError, match="needs params start and end"):
        tasks.resolve_interval({"start": "", "end": ""}, moment, moment)


def test_run_id_is_the_interval():
    assert tasks.run_id_for(datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC)) == \
        "20261101T000000Z_20261102T000000Z"


def test_stage_args_and_settings():
    cfg = tasks.settings({"CDC_LAKE": "/l", "CDC_PIPELINE": "p", "CDC_ALERT_TO": "a@x, b@y", "CDC_SOURCE_COUNTS": ""})
    assert cfg.alert_to == ("a@x", "b@y") and cfg.source_counts is None
    args = tasks.stage_args("decode", cfg)
    assert args[:5] == ["decode", "--lake", "/l", "--pipeline", "p"]
    assert "--raw" in args and "xcom_pull(task_ids='land')['raw']" in args[args.index("--raw") + 1]
    assert "--format" not in tasks.stage_args("merge", cfg)
    assert tasks.spark_env()["PYTHONPATH"] == str(tasks.REPO)
