"""The DAGs' helpers: windows, run ids, what land hands on (the interval), the settings a pipeline file gives
the tasks."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pendulum
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.airflow import tasks as tasks
from jobs.config import load_pipeline
from jobs.lake.layout import Lake
from jobs.land.command import KAFKA_ARROW_SCHEMA, landed_folders
from jobs.land.outside import quiet_interval_warning
from jobs.model.record import safe_part
from tests.support.paths import REPO
from tests.support.pipelines import pipeline

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


def test_dag_params_are_the_window_of_a_manual_run_only():
    params = tasks.dag_params()
    # settings live in the pipeline's file: a param could carry a secret in clear, or drift from the file
    assert set(params) == {"start", "end"} and all(p.value == "" for p in params.values())


# ---- what land hands on, and what the transform is given ------------------------------------------
def _manifest(topic: str, records: int) -> dict:
    rel = f"raw/demo/{topic}/interval=20261101T000000Z_20261102T000000Z"
    return {"topic": topic, "path": rel, "totals": {"records": records}}


def test_the_transform_gets_the_pipeline_file_and_the_interval_and_no_setting_as_a_flag(tmp_path):
    from jobs.cli import build_parser
    from jobs.settings import RunSettings

    tables = [{"match": "shop.public.*", "primary_keys": ["id"], "history": True}]
    cfg, path = pipeline(tmp_path, lake=str(tmp_path / "lake"), tables=tables, sink={"keep_changes": True})
    args = tasks.transform_args(str(path), "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z")
    assert args == ["transform", "--pipeline-file", str(path), "--start", "2026-11-01T00:00:00Z",
                    "--end", "2026-11-02T00:00:00Z"]
    # the driver makes the settings the tasks make: the file's, for the interval
    driver = RunSettings.from_args(build_parser().parse_args(args))
    assert driver == RunSettings.from_pipeline(cfg, (DAY1, DAY2))
    assert driver.run_id == "20261101T000000Z_20261102T000000Z" and driver.transform.keep_changes


def test_the_tables_settings_reach_reconcile(tmp_path):
    from jobs.reconcile.checkpoints import Tolerance

    tables = [{"match": "shop.public.*", "count_tolerance": "10,1%"}, {"match": "orders", "key_rows_limit": 7}]
    _, path = pipeline(tmp_path, tables=tables, reconcile={"count_tolerance": "2", "key_rows_limit": 100,
                                                           "max_lag": "90m"})
    settings = tasks.run_settings(str(path), "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z")
    options = settings.reconcile.options(settings.transform.fmt)
    assert options.max_lag_s == 5400 and options.as_of == int(DAY2.timestamp() * 1_000_000)
    assert options.tolerance_of("shop.public.orders") == Tolerance(10, 1.0)
    assert options.tolerance_of("other.x") == Tolerance(2, 0.0)
    assert options.key_rows_limit_of("shop.public.orders") == 7 and options.key_rows_limit_of("shop.x.y") == 100
    assert options.fmt == "debezium" and settings.expire.as_of == DAY2


def test_lands_xcoms_are_the_interval_alone(tmp_path):
    landed = tasks.landed(DAY1, DAY2, [_manifest("t", 3)], lambda rel: f"/l/{rel}")
    assert json.loads(json.dumps(landed.window())) == {"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}
    assert landed.run_id == "20261101T000000Z_20261102T000000Z" and landed.messages == 3


def test_nothing_landed_is_an_error():
    with pytest.raises(ValueError, match="nothing was landed"):
        tasks.landed(DAY1, DAY2, [], str)


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


def test_land_lands_each_topic_for_the_window_and_plans_its_folders(tmp_path):
    topics = tmp_path / "topics"
    hour = timedelta(hours=1)
    _dump(topics / "shop.public.orders", "shop.public.orders", [DAY1, DAY1 + hour, DAY2 - hour, DAY2, DAY2 + hour])
    _dump(topics / "shop.public.customers", "shop.public.customers", [DAY1 + hour, DAY2 + 2 * hour])
    _, path = pipeline(tmp_path, name="nightly", lake=str(tmp_path / "lake"), source={"files": str(topics)})

    outputs = tasks.land(str(path), params={"start": "", "end": ""}, data_interval_start=DAY1, data_interval_end=DAY2)
    assert outputs == {"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}
    cfg = load_pipeline(path)
    plan = tasks.land_interval(cfg, DAY1, DAY2)  # again: the landed interval's manifests, as they are
    assert plan.folders == tuple(str(f) for f in sorted((tmp_path / "lake" / "raw" / "nightly").glob("*/interval=*")))
    assert plan.run_id == "20261101T000000Z_20261102T000000Z"
    assert plan.topics == ("shop.public.customers", "shop.public.orders")
    assert plan.messages == 3 + 1  # [start, end): the message at exactly DAY2 belongs to the next day
    # what the transform of the interval reads: these folders, found in the lake by the run's interval
    assert tuple(landed_folders(Lake.at(cfg.sink.lake), "nightly", DAY1, DAY2)) == plan.folders
    for topic, folder, expected in zip(plan.topics, plan.folders, (1, 3)):
        assert folder == str(tmp_path / "lake" / "raw" / "nightly" / safe_part(topic)
                             / "interval=20261101T000000Z_20261102T000000Z")
        manifest = json.loads((Path(folder) / "_manifest.json").read_text())
        assert manifest["totals"]["records"] == expected
        landed = pq.read_table(folder, schema=KAFKA_ARROW_SCHEMA)
        assert landed.num_rows == expected

    # a re-run of the interval (a retry, a cleared task, a backfill) lands nothing new
    again = tasks.land(str(path), params={"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"},
                       data_interval_start=DAY3, data_interval_end=DAY3)
    assert again == outputs and tasks.land_interval(cfg, DAY1, DAY2) == plan


# ---- the interval a run covers, impossible to miss -----------------------------------------------
@pytest.mark.parametrize("params, run_type, logical_date, says", [
    ({"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}, "manual", None, "from params start and end"),
    ({}, "scheduled", DAY1, "the scheduled data interval"),
    ({}, "backfill", DAY1, "the data interval of a backfill's run at logical date 2026-11-01T00:00:00Z"),
    # `airflow dags test cdc_x 2026-11-02`: Airflow's data interval of a manual run ends at its logical date
    ({}, "manual", DAY2, "the data interval Airflow gives a manual run at logical date 2026-11-02T00:00:00Z: the "
                         "interval of the schedule that ends at or before that date"),
    # `airflow dags trigger --logical-date 2026-10-05`: the CLI takes the interval before the trigger's time
    ({}, "manual", datetime(2026, 10, 5, tzinfo=UTC), "does not end at its logical date 2026-10-05T00:00:00Z"),
])
def test_a_run_says_which_interval_it_covers_and_why(params, run_type, logical_date, says):
    start, end = tasks.resolve_interval(params, DAY1, DAY2)
    text = tasks.covers_text(start, end, tasks.interval_origin(params, run_type, logical_date, DAY2))
    assert text.startswith("run 20261101T000000Z_20261102T000000Z covers [2026-11-01T00:00:00Z, 2026-11-02T00:00:00Z): ")
    assert says in text, text


def test_the_land_tasks_first_log_line_names_the_interval(tmp_path, caplog):
    topics = tmp_path / "topics"
    _dump(topics / "shop.public.orders", "shop.public.orders", [DAY2 + timedelta(hours=1)])
    _, path = pipeline(tmp_path, lake=str(tmp_path / "lake"), source={"files": str(topics)})
    caplog.set_level("INFO")
    tasks.land(str(path), params={"start": "", "end": ""}, data_interval_start=DAY1, data_interval_end=DAY2,
               logical_date=DAY2)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("run 20261101T000000Z_20261102T000000Z covers [2026-11-01T00:00:00Z, "
                               "2026-11-02T00:00:00Z): "), lines
    # the message is a day later: the interval lands nothing, and says so as loudly as it can
    [warning] = [r for r in caplog.records if r.levelname == "WARNING"]
    assert warning.getMessage().startswith("0 messages in [2026-11-01T00:00:00Z, 2026-11-02T00:00:00Z) but the "
                                           "source holds 1 after it (the first at 2026-11-02T01:00:00Z)")
    assert "ends at its logical date" in warning.getMessage() and "params start and end" in warning.getMessage()


def test_a_note_that_cannot_be_written_is_a_warning_and_the_run_goes_on(monkeypatch):
    import logging
    from types import SimpleNamespace

    from tests.support.servers import free_port

    # Airflow's REST API named by the connection, where nothing listens
    monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_API", json.dumps({"conn_type": "http", "host": "127.0.0.1",
                                                               "port": free_port()}))
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # the task's logger itself: Airflow's logging set-up bypasses pytest's capture
    logging.getLogger(tasks.__name__).addHandler(handler)
    try:
        tasks.note_dag_run(SimpleNamespace(dag_id="cdc_demo", run_id="manual__1", note=None), "run r covers [a, b): c")
    finally:
        logging.getLogger(tasks.__name__).removeHandler(handler)
    [warning] = [r.getMessage() for r in records]
    assert warning.startswith("the run's note was not set (URLError") and "airflow_api" in warning, warning


def test_landed_says_what_the_source_holds_outside_an_empty_interval():
    quiet = [{**_manifest("a", 0), "outside": {"before": 2, "after": 0, "last_before": "2026-10-31T22:00:00Z",
                                               "first_after": None, "earliest": None, "latest": None}},
             {**_manifest("b", 0), "outside": {"before": 1, "after": 5, "last_before": "2026-10-31T23:30:00Z",
                                               "first_after": "2026-11-02T00:00:01Z", "earliest": None,
                                               "latest": None}}]
    plan = tasks.landed(DAY1, DAY2, quiet, str)
    assert plan.outside == {"before": 3, "after": 5, "last_before": "2026-10-31T23:30:00Z",
                            "first_after": "2026-11-02T00:00:01Z", "earliest": None, "latest": None}
    warning = quiet_interval_warning(plan.start, plan.end, plan.messages, plan.outside)
    assert warning == ("0 messages in [2026-11-01T00:00:00Z, 2026-11-02T00:00:00Z) but the source holds 3 before it "
                       "(the last at 2026-10-31T23:30:00Z) and 5 after it (the first at 2026-11-02T00:00:01Z): is "
                       "this the interval you meant?")
    # landed from a source that says nothing about outside (an older manifest): no claim either way
    assert tasks.landed(DAY1, DAY2, [_manifest("a", 0)], str).outside is None
    busy = tasks.landed(DAY1, DAY2, [_manifest("a", 3), *quiet[1:]], str)
    assert quiet_interval_warning(busy.start, busy.end, busy.messages, busy.outside) is None


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
    assert tasks.source_counts_spec("/counts.json") == "/counts.json"  # a file (a URL never gets here)
    assert tasks.source_counts_spec(None) is None and tasks.source_counts_spec("") is None


def test_spark_submit_gets_the_pipelines_spark_block(tmp_path, monkeypatch):
    monkeypatch.setenv("CDC_SPARK_ARCHIVE_DIR", str(tmp_path / "archives"))
    cfg, _ = pipeline(tmp_path)
    local = tasks.spark_settings(cfg)
    assert local["env_vars"]["PYTHONPATH"] == str(REPO) and local["py_files"] is None
    assert Path(local["application"]).is_file() and "CDC_ICEBERG_CATALOG" not in local["env_vars"]
    assert local["packages"] is None and "spark.pyspark.python" not in local["conf"]
    cluster, _ = pipeline(tmp_path, name="s3", lake="s3://bucket/lake", sink={"catalog": "lake_catalog"},
                          spark={"conf": {"spark.hadoop.fs.s3a.path.style.access": True,
                                          "spark.driver.extraJavaOptions": "-Xss4m"},
                                 "packages": ["org.apache.hadoop:hadoop-aws:3.4.2"],
                                 "ship_package": True, "executor_python": "/opt/venv/bin/python"})
    parsed = tasks.spark_settings(cluster)
    # the archive is the DAG's macro, rendered where the task runs: not built when the DAG is parsed
    assert parsed["py_files"] == "{{ cdc_jobs_archive() }}" and not (tmp_path / "archives").exists()
    assert str(REPO) not in parsed["env_vars"]["PYTHONPATH"].split(":")  # the archive, not this checkout
    assert parsed["conf"]["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert parsed["conf"]["spark.driver.extraJavaOptions"] == "-Xss4m"  # the pipeline's conf wins
    assert parsed["conf"]["spark.pyspark.python"] == "/opt/venv/bin/python"
    assert parsed["packages"] == "org.apache.hadoop:hadoop-aws:3.4.2"
    assert "CDC_ICEBERG_CATALOG" not in parsed["env_vars"]  # the driver reads the catalog from the file
    shipped = tasks.jobs_archive()
    assert Path(shipped).parent == tmp_path / "archives" and shipped.endswith(".zip")


def test_failure_notifier_only_with_recipients(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__EMAIL__FROM_EMAIL", "cdc@x.org")
    assert tasks.failure_notifiers(pipeline(tmp_path)[0]) == []
    cfg, _ = pipeline(tmp_path, alert={"to": ["a@x.org", "b@y.org"], "smtp_connection": "smtp_dq"})
    [notifier] = tasks.failure_notifiers(cfg)
    assert notifier.to == ["a@x.org", "b@y.org"] and notifier.smtp_conn_id == "smtp_dq"
    assert notifier.from_email is None  # the connection's sender, read when it sends, over Airflow's
    named, _ = pipeline(tmp_path, alert={"to": ["a@x.org"], "from_email": "dq-bot@x.org"})
    assert tasks.failure_notifiers(named)[0].from_email == "dq-bot@x.org"
    off, _ = pipeline(tmp_path, alert={"to": ["a@x.org"], "on_task_failure": False})
    assert tasks.failure_notifiers(off) == []


def test_this_module_stays_light_to_import():
    import subprocess
    import sys

    probe = ("import sys, jobs.airflow.tasks; "
             "print(sorted(m for m in ('pyspark', 'pyarrow', 'airflow', 'sqlalchemy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
