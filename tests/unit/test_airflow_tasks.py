"""The DAG's helpers: windows, run ids, settings, the plan land hands on, spark-submit arguments."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pendulum
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import airflow_tasks as tasks
from jobs.canonical import safe_part
from jobs.land import KAFKA_ARROW_SCHEMA

UTC = UTC
DAY1, DAY2, DAY3 = (datetime(2026, 11, d, tzinfo=UTC) for d in (1, 2, 3))
NO_ENV: dict[str, str] = {}


# ---- windows and run ids -------------------------------------------------------------------------
def test_the_data_interval_is_the_window_of_a_scheduled_run():
    start, end = tasks.resolve_interval({"start": "", "end": ""}, pendulum.datetime(2026, 11, 1, tz="UTC"),
                                        pendulum.datetime(2026, 11, 2, tz="UTC"))
    assert (start, end) == (DAY1, DAY2)
    assert type(start) is datetime  # pendulum is not carried into names or XCom


def test_params_give_the_window_of_a_manual_run_in_utc():
    # a manual run: Airflow gives it a zero-width data interval
    moment = datetime(2026, 11, 5, 13, tzinfo=UTC)
    start, end = tasks.resolve_interval({"start": "2026-11-01T06:00:00+02:00", "end": "2026-11-03"}, moment, moment)
    assert start == datetime(2026, 11, 1, 4, tzinfo=UTC) and end == DAY3
    assert tasks.run_id_for(start, end) == "20261101T040000Z_20261103T000000Z"


@pytest.mark.parametrize(
    "params, data_interval, message",
    [
        ({}, (DAY2, DAY2), "manual run needs params start and end"),
        ({}, (None, None), "no data interval"),
        ({"start": "2026-11-01T00:00:00Z"}, (DAY1, DAY2), "both params start and end"),
        ({"start": "2026-11-02", "end": "2026-11-01"}, (DAY1, DAY2), "empty interval"),
        ({"start": "yesterday", "end": "2026-11-02"}, (DAY1, DAY2), "not an ISO-8601 time"),
        ({"start": "2026-11-01T00:00:00.5Z", "end": "2026-11-02"}, (DAY1, DAY2), "whole seconds"),
    ],
)
def test_unusable_windows_are_refused_with_a_clear_message(params, data_interval, message):
    with pytest.raises(tasks.IntervalError, match=message):
        tasks.resolve_interval(params, *data_interval)


def test_run_id_is_the_interval_and_names_like_the_lake_folders():
    assert tasks.run_id_for(DAY1, DAY2) == "20261101T000000Z_20261102T000000Z"
    # the same instant in another zone names the same run: re-runs and backfills reuse the id
    berlin = pendulum.datetime(2026, 11, 1, 1, tz="Europe/Berlin")
    assert tasks.run_id_for(tasks.resolve_interval({}, berlin, DAY2)[0], DAY2) == "20261101T000000Z_20261102T000000Z"


# ---- settings ------------------------------------------------------------------------------------
def test_settings_default_to_the_bundled_demo():
    cfg = tasks.resolve_settings({}, None, NO_ENV)
    assert cfg.lake == str(tasks.REPO / "demo" / "out" / "airflow-lake")  # not the lake `make demo` fills
    assert cfg.topics_dir == str(tasks.REPO / "demo" / "topics")
    # the demo source's counts at each day's end, with their moments (scripts/make_demo.py)
    assert cfg.source_counts == str(tasks.REPO / "demo" / "source_counts.json")
    assert cfg.max_lag_s == 6 * 3600 and cfg.count_tolerance == "0"
    assert (cfg.pipeline, cfg.fmt, cfg.kafka_bootstrap, cfg.topics, cfg.alert_to) == ("demo", "debezium", "", (), ())
    assert cfg.quarantine_threshold == 0.0


def test_params_win_over_variables_which_win_over_env():
    env = {"CDC_LAKE": "/env-lake", "CDC_PIPELINE": "env_p", "CDC_FORMAT": "qlik", "CDC_ALERT_TO": "env@x.org",
           "CDC_DEMO_TOPICS": "/env-topics", "CDC_SOURCE_COUNTS": "/env-counts.json"}
    variables = {"cdc_pipeline": "var_p", "cdc_format": "canal", "cdc_source_counts": "conn:source_db"}
    params = {"pipeline": "param_p", "lake": "", "alert_to": "a@x.org, b@y.org ,", "source_counts": "/leak.json"}
    cfg = tasks.resolve_settings(params, variables.get, env)
    assert cfg.pipeline == "param_p"  # param
    assert cfg.fmt == "canal"  # Variable
    assert cfg.lake == "/env-lake" and cfg.topics_dir == "/env-topics"  # empty param = not given
    assert cfg.alert_to == ("a@x.org", "b@y.org")
    # source counts may hold a password: never taken from params (stored and shown in clear)
    assert cfg.source_counts == "conn:source_db"


def test_an_empty_env_value_turns_source_counts_off():
    assert tasks.resolve_settings({}, None, {"CDC_SOURCE_COUNTS": ""}).source_counts is None


@pytest.mark.parametrize("threshold", ["lots", "1.5", "-0.1"])
def test_a_quarantine_threshold_must_be_a_fraction(threshold):
    with pytest.raises(ValueError, match="quarantine_threshold"):
        tasks.resolve_settings({"quarantine_threshold": threshold}, None, NO_ENV)


def test_snapshot_retention_settings():
    cfg = tasks.resolve_settings({}, None, NO_ENV)
    assert (cfg.snapshot_retain_days, cfg.snapshot_retain_last) == (7, 10)
    cfg = tasks.resolve_settings({"snapshot_retain_days": "30"}, None, {"CDC_SNAPSHOT_RETAIN_LAST": "3"})
    assert (cfg.snapshot_retain_days, cfg.snapshot_retain_last) == (30, 3)
    for bad in ({"snapshot_retain_days": "a week"}, {"snapshot_retain_days": "-1"}, {"snapshot_retain_last": "0"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            tasks.resolve_settings(bad, None, NO_ENV)


def test_dag_params_offer_the_window_and_every_setting_but_secrets():
    params = tasks.dag_params()
    assert {"start", "end", "lake", "pipeline", "topics_dir", "format", "alert_to"} <= set(params)
    assert "source_counts" not in params
    assert all(p.value == "" for p in params.values())  # empty: the run falls through to Variables/env


# ---- plan and spark-submit arguments -------------------------------------------------------------
def _manifest(topic: str, records: int) -> dict:
    rel = f"raw/demo/{topic}/interval=20261101T000000Z_20261102T000000Z"
    return {"topic": topic, "path": rel, "totals": {"records": records}}


def test_transform_gets_one_raw_per_landed_topic_folder_and_no_other_interval():
    cfg = tasks.resolve_settings({"lake": "/lake", "alert_to": "dq@x.org"}, None, NO_ENV)
    plan = tasks.build_plan(cfg, DAY1, DAY2, [_manifest("shop.public.orders", 5), _manifest("shop.public.customers", 2)],
                            lambda rel: f"/lake/{rel}")
    assert plan.run_id == "20261101T000000Z_20261102T000000Z" and plan.messages == 7
    assert (plan.start, plan.end) == ("2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z")
    args = tasks.transform_args(plan)
    assert args[:9] == ["transform", "--lake", "/lake", "--pipeline", "demo",
                        "--run-id", "20261101T000000Z_20261102T000000Z", "--format", "debezium"]
    raws = [args[i + 1] for i, a in enumerate(args) if a == "--raw"]
    assert raws == ["/lake/raw/demo/shop.public.customers/interval=20261101T000000Z_20261102T000000Z",
                    "/lake/raw/demo/shop.public.orders/interval=20261101T000000Z_20261102T000000Z"]
    assert not any("*" in a for a in args)  # no glob that could pick up a neighbouring interval


def test_the_cli_accepts_the_transform_arguments(tmp_path):
    from jobs.cli import build_parser

    cfg = tasks.resolve_settings({"lake": str(tmp_path)}, None, NO_ENV)
    plan = tasks.build_plan(cfg, DAY1, DAY2, [_manifest("a", 1), _manifest("b", 1)], lambda rel: f"{tmp_path}/{rel}")
    parsed = build_parser().parse_args(tasks.transform_args(plan))
    assert parsed.command == "transform" and parsed.raw == list(plan.raw)
    assert parsed.run_id == plan.run_id and parsed.format == "debezium" and not parsed.keep_changes


def test_keep_changes_reaches_the_transform_as_a_flag():
    plan_of = lambda value: tasks.build_plan(  # noqa: E731
        tasks.resolve_settings({"keep_changes": value}, None, NO_ENV), DAY1, DAY2, [_manifest("t", 1)], str)
    assert "--keep-changes" in tasks.transform_args(plan_of("true"))
    assert "--keep-changes" not in tasks.transform_args(plan_of(""))  # empty param: the default, false
    assert "--keep-changes" not in tasks.transform_args(plan_of("no"))
    with pytest.raises(ValueError, match="keep_changes 'sometimes' is neither true nor false"):
        plan_of("sometimes")


def test_land_outputs_survive_xcom_json():
    cfg = tasks.resolve_settings({"alert_to": "dq@x.org", "quarantine_threshold": "0.01"}, None, NO_ENV)
    plan = tasks.build_plan(cfg, DAY1, DAY2, [_manifest("t", 3)], lambda rel: f"/l/{rel}")
    outputs = json.loads(json.dumps(tasks.land_outputs(plan)))
    assert set(outputs) == {"plan", "transform_args"}
    assert tasks.RunPlan.from_xcom(outputs["plan"]) == plan
    assert outputs["transform_args"] == tasks.transform_args(plan)


def test_nothing_landed_is_an_error():
    cfg = tasks.resolve_settings({}, None, NO_ENV)
    with pytest.raises(ValueError, match="nothing was landed"):
        tasks.build_plan(cfg, DAY1, DAY2, [], str)


# ---- land from topic dumps (real files, real lake folder) -----------------------------------------
def _dump(folder: Path, topic: str, timestamps: list[datetime]) -> None:
    folder.mkdir(parents=True)
    n = len(timestamps)
    table = pa.table({
        "key": [b"k%d" % i for i in range(n)], "value": [b'{"v": %d}' % i for i in range(n)],
        "topic": [topic] * n, "partition": [0] * n, "offset": list(range(n)),
        "timestamp": timestamps, "timestampType": [0] * n, "headers": [[] for _ in range(n)],
    }, schema=KAFKA_ARROW_SCHEMA)
    pq.write_table(table, folder / "part-00000.parquet")


def test_land_lands_each_topic_for_the_window_and_plans_its_folders(tmp_path, monkeypatch):
    topics = tmp_path / "topics"
    hour = timedelta(hours=1)
    _dump(topics / "shop.public.orders", "shop.public.orders", [DAY1, DAY1 + hour, DAY2 - hour, DAY2, DAY2 + hour])
    _dump(topics / "shop.public.customers", "shop.public.customers", [DAY1 + hour, DAY2 + 2 * hour])
    for name in ("CDC_PIPELINE", "CDC_FORMAT", "CDC_TOPICS", "CDC_KAFKA_BOOTSTRAP", "CDC_ALERT_TO"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CDC_LAKE", str(tmp_path / "lake"))
    monkeypatch.setenv("CDC_DEMO_TOPICS", str(topics))
    # an Airflow Variable (here from its env form) wins over CDC_PIPELINE
    monkeypatch.setenv("CDC_PIPELINE", "from_env")
    monkeypatch.setenv("AIRFLOW_VAR_CDC_PIPELINE", "nightly")

    outputs = tasks.land(params={"start": "", "end": ""}, data_interval_start=DAY1, data_interval_end=DAY2)
    plan = tasks.RunPlan.from_xcom(outputs["plan"])
    assert plan.pipeline == "nightly" and plan.run_id == "20261101T000000Z_20261102T000000Z"
    assert plan.topics == ("shop.public.customers", "shop.public.orders")
    assert plan.messages == 3 + 1  # [start, end): the message at exactly DAY2 belongs to the next day
    for topic, folder, expected in zip(plan.topics, plan.raw, (1, 3)):
        assert folder == str(tmp_path / "lake" / "raw" / "nightly" / safe_part(topic)
                             / "interval=20261101T000000Z_20261102T000000Z")
        manifest = json.loads((Path(folder) / "_manifest.json").read_text())
        assert manifest["totals"]["records"] == expected
        landed = pq.read_table(folder, schema=KAFKA_ARROW_SCHEMA)
        assert landed.num_rows == expected
    assert outputs["transform_args"].count("--raw") == 2

    # a re-run of the interval (a retry, a cleared task, a backfill) lands nothing new
    again = tasks.land(params={"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"},
                       data_interval_start=DAY3, data_interval_end=DAY3)
    assert again == outputs


def test_land_from_kafka_needs_topics(tmp_path):
    cfg = tasks.resolve_settings({"lake": str(tmp_path), "kafka_bootstrap": "127.0.0.1:9"}, None, NO_ENV)
    with pytest.raises(ValueError, match="needs topics"):
        tasks.land_interval(cfg, DAY1, DAY2)


# ---- source counts, Spark options, failure notifier ------------------------------------------------
def test_source_counts_from_an_airflow_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SOURCE_PG", json.dumps({
        "conn_type": "postgres", "host": "source-db", "port": 5432, "login": "reader", "password": "p@ss:w/rd",
        "schema": "shop"}))
    monkeypatch.setenv("AIRFLOW_CONN_SOURCE_LITE", json.dumps({"conn_type": "sqlite", "host": "/data/source.db"}))
    url = tasks.source_counts_spec("conn:source_pg")
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    # built by the postgres provider's own hook (PostgresHook.sqlalchemy_url)
    assert (parsed.drivername, parsed.host, parsed.port, parsed.database) == ("postgresql+psycopg", "source-db", 5432, "shop")
    assert (parsed.username, parsed.password) == ("reader", "p@ss:w/rd")  # quoted, not mangled
    assert tasks.source_counts_spec("conn:source_lite") == "sqlite:////data/source.db"
    # no provider installed for MySQL: the pure-Python driver, from the connection's fields
    monkeypatch.setenv("AIRFLOW_CONN_SOURCE_MY", json.dumps({
        "conn_type": "mysql", "host": "db", "login": "r", "password": "pw", "schema": "shop"}))
    assert tasks.source_counts_spec("conn:source_my") == "mysql+pymysql://r:pw@db/shop"
    assert tasks.source_counts_spec("/counts.json") == "/counts.json"
    assert tasks.source_counts_spec(None) is None and tasks.source_counts_spec("") is None


def test_spark_submit_gets_this_repo_and_interpreter_and_optional_conf():
    env = tasks.spark_env()
    assert env["PYTHONPATH"] == str(tasks.REPO) and env["SPARK_SUBMIT_ACTIVE"] == "1"
    assert env["PATH"].split(":")[0] == str(Path(env["PYSPARK_PYTHON"]).parent)  # spark-submit lives there
    assert Path(tasks.APPLICATION).is_file()
    assert tasks.spark_packages(NO_ENV) is None
    # the driver's JVM options go on the command line: they cannot be set from inside the job
    assert "-XX:-DontCompileHugeMethods" in tasks.spark_conf(NO_ENV)["spark.driver.extraJavaOptions"]
    assert "TieredStopAtLevel" not in tasks.spark_conf(NO_ENV)["spark.driver.extraJavaOptions"]
    quick = tasks.spark_conf({"CDC_JIT": "c1"})
    for side in ("driver", "executor"):
        assert quick[f"spark.{side}.extraJavaOptions"].split()[-1] == "-XX:TieredStopAtLevel=1"
        assert "-XX:-DontCompileHugeMethods" in quick[f"spark.{side}.extraJavaOptions"]
    conf = tasks.spark_conf({"CDC_SPARK_CONF": '{"spark.hadoop.fs.s3a.path.style.access": true, '
                                               '"spark.driver.extraJavaOptions": "-Xss4m"}'})
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "True"
    assert conf["spark.driver.extraJavaOptions"] == "-Xss4m"  # the user's conf wins
    with pytest.raises(ValueError, match="JSON object"):
        tasks.spark_conf({"CDC_SPARK_CONF": "[1]"})
    assert tasks.spark_packages({"CDC_SPARK_PACKAGES": " org.apache.hadoop:hadoop-aws:3.4.2 "}) == \
        "org.apache.hadoop:hadoop-aws:3.4.2"


def test_failure_notifier_only_with_recipients():
    assert tasks.failure_notifiers(NO_ENV) == []
    [notifier] = tasks.failure_notifiers({"CDC_ALERT_TO": "a@x.org, b@y.org", "AIRFLOW__EMAIL__FROM_EMAIL": "cdc@x.org"})
    assert notifier.to == ["a@x.org", "b@y.org"] and notifier.smtp_conn_id == "smtp_default"
    assert notifier.from_email == "cdc@x.org"


def test_this_module_stays_light_to_import():
    import subprocess
    import sys

    probe = ("import sys, jobs.airflow_tasks; "
             "print(sorted(m for m in ('pyspark', 'pyarrow', 'airflow', 'sqlalchemy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tasks.REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
