"""A run's settings: what a pipeline file gives a run of an interval, what the command line's flags give, and
the flags given over a file (jobs.settings)."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobs.cli import build_parser
from jobs.settings import RunSettings, SettingsError
from tests.support.pipelines import pipeline

DAY1, DAY2 = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC)
RUN_ID = "20261101T000000Z_20261102T000000Z"
WINDOW = ["--start", "2026-11-01T00:00:00Z", "--end", "2026-11-02T00:00:00Z"]
TABLES = [{"match": "shop.public.*", "primary_keys": ["id"], "history": True, "count_tolerance": "10,1%"},
          {"match": "shop.public.order_lines", "primary_keys": ["order_id", "line_no"], "history": False},
          {"match": "audit_*", "key_rows_limit": 5},
          {"match": "customers", "sensitive_columns": ["email", "ssn"], "value_tolerances": {"score": 0.01}}]


def _args(*argv: str) -> RunSettings:
    return RunSettings.from_args(build_parser().parse_args(list(argv)))


def test_a_pipeline_file_gives_a_run_of_an_interval_every_setting(tmp_path):
    cfg, _ = pipeline(tmp_path, lake=str(tmp_path / "lake"), tables=TABLES,
                      sink={"catalog": "lake_catalog", "state_buckets": 4, "keep_changes": True, "retain_days": 3},
                      reconcile={"connection": "erp", "counts": None, "max_lag": "90m", "capture_delay": "5m"},
                      alert={"to": ["dq@x.org"], "quarantine_threshold": 0.01, "smtp_connection": "smtp_dq"})
    settings = RunSettings.from_pipeline(cfg, (DAY1, DAY2))
    assert (settings.lake, settings.catalog, settings.pipeline, settings.run_id) == (
        str(tmp_path / "lake"), "lake_catalog", "demo", RUN_ID)
    assert settings.lake_at().catalog == "lake_catalog"  # the catalog goes with the lake to open_catalog
    t = settings.transform
    assert (t.fmt, t.raw, t.message_shape, t.state_buckets, t.keep_changes) == ("debezium", (), "auto", 4, True)
    assert t.primary_keys == (("shop.public.*", ("id",)), ("shop.public.order_lines", ("order_id", "line_no")))
    assert t.history == (("shop.public.*", True), ("shop.public.order_lines", False))
    r = settings.reconcile
    assert (r.source_counts, r.max_lag_s, r.capture_delay_s, r.checked_at) == ("conn:erp", 5400, 300, DAY2)
    assert r.table_tolerances == (("shop.public.*", "10,1%"),) and r.table_key_rows_limits == (("audit_*", 5),)
    rules = r.options("debezium").column_rules_of("shop.public.customers")
    assert rules.sensitive == {"email", "ssn"} and rules.tolerances == {"score": 0.01}
    assert r.options("debezium").column_rules_of("shop.public.orders").sensitive == frozenset()
    assert settings.alert.to == ("dq@x.org",) and settings.alert.smtp_connection == "smtp_dq"
    assert settings.expire.as_of == DAY2 and settings.expire.retention() == (3, 10)


def test_the_tables_keys_reach_the_decoders_under_every_form_of_a_table_id(tmp_path):
    cfg, _ = pipeline(tmp_path, tables=TABLES)
    keys = RunSettings.from_pipeline(cfg, (DAY1, DAY2)).transform.decode_options().primary_keys
    assert keys["shop.public.*"] == ("id",)  # a glob over whole table ids, as written
    assert keys["shop.public.order_lines"] == ("order_id", "line_no")
    # a name as in the source: each part in its table-id form (jobs.model.record)
    flags = _args("decode", "--lake", "/l", "--pipeline", "p", "--run-id", "r", "--format", "debezium",
                  "--primary-keys", "shop.Order Details=id")
    assert flags.transform.decode_options().primary_keys == {"shop.Order_Details_fe3ac0d4": ("id",)}


def test_primary_keys_name_a_table_by_its_source_name_even_when_its_id_is_cut():
    from jobs.model.record import make_table_id
    from jobs.settings import TransformSettings

    long_name = "T" * 240
    rules = (("T" * 240, ("id",)), ("shop.public.orders", ("a", "b")))
    keys = TransformSettings(primary_keys=rules).decode_options().primary_keys
    cut_last_part = make_table_id("shop", None, long_name).rsplit(".", 1)[-1]
    assert keys[cut_last_part] == ("id",) and keys[long_name] == ("id",)
    assert keys["shop.public.orders"] == ("a", "b")


def test_the_command_lines_flags_are_a_runs_settings(monkeypatch):
    monkeypatch.setenv("CDC_ICEBERG_CATALOG", "prod")
    monkeypatch.delenv("CDC_STATE_BUCKETS", raising=False)
    settings = _args("run", "--lake", "/l", "--pipeline", "p", "--run-id", "r1", "--format", "maxwell",
                     "--raw", "/a", "--raw", "/b", "--history", "--no-history-of", "shop.public.audit_*",
                     "--max-lag", "6h", "--count-tolerance", "10,0.5%", "--alert-to", "a@x.org")
    assert (settings.lake, settings.pipeline, settings.run_id, settings.catalog) == ("/l", "p", "r1", "prod")
    assert settings.transform.raw == ("/a", "/b") and settings.transform.state_buckets is None
    # --history for every table not named before it: after the rules given, whatever the flags' order
    assert settings.transform.history == (("shop.public.audit_*", False), ("*", True))
    assert settings.reconcile.max_lag_s == 6 * 3600 and settings.reconcile.count_tolerance == "10,0.5%"
    assert settings.reconcile.options("maxwell").key_rows_limit == 10_000  # unset: the stage's default
    assert settings.alert.to == ("a@x.org",) and settings.alert.quarantine_threshold == 0.0
    monkeypatch.setenv("CDC_STATE_BUCKETS", "4")
    assert _args("merge", "--lake", "/l", "--pipeline", "p", *WINDOW).transform.state_buckets == 4
    assert _args("merge", "--lake", "/l", "--pipeline", "p", *WINDOW, "--state-buckets", "0").transform.state_buckets == 0
    assert _args("merge", "--lake", "/l", "--pipeline", "p", *WINDOW).run_id == RUN_ID  # the interval's run id
    monkeypatch.setenv("CDC_STATE_BUCKETS", "many")
    with pytest.raises(ValueError, match="CDC_STATE_BUCKETS='many' is not a whole number"):
        _args("merge", "--lake", "/l", "--pipeline", "p", "--run-id", "r1")


def test_flags_given_over_a_pipeline_file_win_and_lists_replace_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("CDC_ICEBERG_CATALOG", "from-the-environment")
    cfg, path = pipeline(tmp_path, lake=str(tmp_path / "lake"), tables=TABLES)
    from_file = _args("run", "--pipeline-file", str(path), *WINDOW)
    assert from_file == RunSettings.from_pipeline(cfg, (DAY1, DAY2))
    assert from_file.catalog is None  # the file's sink.catalog: the variable is the command line's own
    given = _args("run", "--pipeline-file", str(path), *WINDOW, "--lake", str(tmp_path / "other"),
                  "--primary-keys", "orders=order_id", "--history-of", "orders", "--quarantine-threshold", "0.5")
    assert given.lake == str(tmp_path / "other") and given.pipeline == "demo" and given.run_id == RUN_ID
    assert given.transform.primary_keys == (("orders", ("order_id",)),)
    assert given.transform.history == (("orders", True),)
    assert given.alert.quarantine_threshold == 0.5 and given.reconcile == from_file.reconcile


@pytest.mark.parametrize("argv, message", [
    (["run", "--format", "debezium"], "the following arguments are required: --lake, --pipeline, --run-id"),
    (["validate", "--lake", "/l", "--run-id", "r"], "the following arguments are required: --pipeline"),
    (["validate", "--lake", "/l", "--pipeline", "p", "--start", "2026-11-01"], "give both --start and --end"),
    (["validate", "--lake", "/l", "--pipeline", "p", "--start", "2026-11-02", "--end", "2026-11-01"],
     "--start/--end: interval start 2026-11-02T00:00:00Z is not before its end"),
    (["validate", "--pipeline-file", "/nowhere/p.yaml"], "--pipeline-file needs the run's interval"),
    (["validate", "--pipeline-file", "/nowhere/p.yaml", *WINDOW], "/nowhere/p.yaml: cannot be read (no such file)"),
])
def test_settings_that_cannot_make_a_run_say_what_is_missing(argv, message):
    with pytest.raises(SettingsError) as refused:
        _args(*argv)
    assert str(refused.value).startswith(message), refused.value
