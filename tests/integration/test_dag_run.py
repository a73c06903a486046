"""The demo DAG end to end, and its Python tasks on real servers.

- ``dag.test()`` of two consecutive daily intervals: real Airflow (SQLite metadata db), spark-submit
  on local Spark, a real lake, the reconciliation source through an Airflow connection, and the
  alert email through ``smtp_default`` into an SMTP sink on 127.0.0.1.
- land from a Kafka-protocol broker (Tansu), alert and failure notifier through a real SMTP sink.
"""
from __future__ import annotations

import email
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from email import policy
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from jobs.airflow import lineage
from jobs.airflow import tasks as tasks
from jobs.lake.layout import Lake
from jobs.model.record import safe_part
from jobs.settings import RunSettings
from tests.support.demo_data import generate_demo
from tests.support.openlineage import facets_of, read_events, schema_errors, vendored
from tests.support.paths import REPO
from tests.support.pipelines import pipeline
from tests.support.servers import KafkaMessage, create_topic, free_port, produce
from tests.support.statsd import received_lines, statsd_socket

UTC = UTC
DAY1, DAY2, DAY3 = (datetime(2026, 11, d, tzinfo=UTC) for d in (1, 2, 3))
TABLES = {"shop.public.customers", "shop.public.orders", "shop.public.order_lines"}
STAGES = ["land", "transform", "reconcile", "alert", "expire"]
RECIPIENT = "dq@example.com"
SPARK_SECRET = "sp4rk-Secret-never-shown"
SMTP_ENV = ("AIRFLOW_CONN_SMTP_DEFAULT", "SMTP_HOST", "AIRFLOW__EMAIL__FROM_EMAIL")

RUNNER = """
import json, sys
from datetime import datetime, timezone
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
dag = bag.dags[sys.argv[2]]
# CronDataIntervalTimetable: the run at logical date D covers [D - 1 day, D)
for day in sys.argv[3:]:
    run = dag.test(logical_date=datetime.fromisoformat(day).replace(tzinfo=timezone.utc))
    print("RESULT " + json.dumps({"state": str(run.state), "conf": run.conf,
                                  "tis": {ti.task_id: str(ti.state) for ti in run.get_task_instances()}}))
"""


# a manual run as `airflow dags test <dag> -c '{"start": ..., "end": ...}'` makes it: logical date now; only
# land runs, the other tasks are marked successful (no Spark)
MANUAL_RUNNER = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
run = bag.dags[sys.argv[2]].test(run_conf=json.loads(sys.argv[3]), mark_success_pattern="(?!land$).*")
print("RESULT " + json.dumps({"state": str(run.state),
                              "tis": {ti.task_id: str(ti.state) for ti in run.get_task_instances()}}))
"""


def _airflow_env(tmp_path: Path, pipelines: Path, **extra: str) -> dict[str, str]:
    """An AIRFLOW_HOME of the test's own (SQLite), the repository's plugins, the pipelines of ``pipelines``
    (each file beside its DAG stub) as the DAGs folder; its metadata database migrated."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CDC_", "AIRFLOW_VAR_CDC_", "SMTP_"))},
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(pipelines),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",  # spark-submit lives in the venv
        "PYTHONPATH": str(REPO),
        "CDC_SHUFFLE_PARTITIONS": "2",
        "CDC_JIT": "c1",  # each stage is a fresh JVM on a small interval (jobs.spark.session)
        **extra,
    }
    migrate = subprocess.run([f"{venv_bin}/airflow", "db", "migrate"], env=env, capture_output=True, text=True,
                             timeout=300)
    assert migrate.returncode == 0, migrate.stderr[-2000:]
    return env


def _smtp_conn(port: int) -> str:
    # a local sink speaks neither TLS nor SSL; the smtp provider turns both on unless disabled
    return json.dumps({"conn_type": "smtp", "host": "127.0.0.1", "port": port,
                       "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "cdc@example.com"}})


def _subjects(inbox) -> list[str]:
    return [message["Subject"] for message in inbox.messages()]


def _demo_messages_between(topics: Path, start: datetime, end: datetime) -> int:
    stamps = ds.dataset(str(topics), format="parquet").to_table(columns=["timestamp"])["timestamp"]
    inside = pc.and_(pc.greater_equal(stamps, start), pc.less(stamps, end))
    return int(pc.sum(pc.cast(inside, "int64")).as_py())


# ---- the DAG, end to end -------------------------------------------------------------------------
def test_demo_dag_folds_two_daily_intervals_in_order(tmp_path, smtp_sink):
    smtp_port, inbox = smtp_sink
    topics, lake = generate_demo(tmp_path, messages=600), tmp_path / "lake"
    source = topics.with_name("source.db")
    # the source's counts at the end of each day, with the moment each is true (make_demo.py)
    _, path = pipeline(tmp_path, lake=str(lake), source={"files": str(topics)},
                       reconcile={"counts": str(source.with_name("source_counts.json"))},
                       alert={"to": [RECIPIENT]}, sink={"retain_days": 0})
    # OpenLineage's file transport catches every event; the Spark connection holds a password no event may show
    events = tmp_path / "openlineage" / "events.jsonl"
    events.parent.mkdir()
    # and Airflow's metrics path sends StatsD datagrams (with InfluxDB tags) to a socket on 127.0.0.1
    with statsd_socket() as statsd:
        env = _airflow_env(tmp_path, path.parent, AIRFLOW_CONN_SMTP_DEFAULT=_smtp_conn(smtp_port),
                           AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]",
                                                                  "login": "ops", "password": SPARK_SECRET}),
                           AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps({"type": "file", "log_file_path": str(events),
                                                                       "append": True}),
                           AIRFLOW__OPENLINEAGE__NAMESPACE="cdc-test",
                           AIRFLOW__METRICS__STATSD_ON="True", AIRFLOW__METRICS__STATSD_HOST="127.0.0.1",
                           AIRFLOW__METRICS__STATSD_PORT=str(statsd.getsockname()[1]),
                           AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED="True",
                           CDC_CLASS_ARCHIVE=str(tmp_path / "archives"))
        proc = subprocess.run([sys.executable, "-c", RUNNER, str(path.parent), "cdc_demo", "2026-11-02",
                               "2026-11-03"], env=env, capture_output=True, text=True, timeout=1200)
        metrics = _influx_metrics(received_lines(statsd))
    results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 2, (proc.stdout + proc.stderr)[-5000:]
    for result in results:
        assert result["tis"] == {t: "success" for t in STAGES}, (proc.stdout + proc.stderr)[-5000:]
        assert result["state"] == "success"

    # the first day's spark-submit'ed driver recorded the class archive (jobs.spark.class_archive), kept once it
    # exited; the second day's mapped it
    (kept,) = (tmp_path / "archives").iterdir()
    assert kept.name.startswith("spark-classes-") and kept.suffix == ".jsa"

    runs = ["20261101T000000Z_20261102T000000Z", "20261102T000000Z_20261103T000000Z"]
    for run_id, (start, end) in zip(runs, [(DAY1, DAY2), (DAY2, DAY3)]):
        reports = lake / "reports/demo" / f"run={run_id}"
        decode = json.loads((reports / "decode.json").read_text())
        # decode read exactly this interval: one folder per topic, and exactly its messages
        assert decode["raw"] == [str(lake / "raw/demo" / safe_part(t) / f"interval={run_id}") for t in sorted(TABLES)]
        assert decode["balanced"] and decode["total"]["landed"] == _demo_messages_between(topics, start, end) > 0
        for name in ("merge.json", "validation.json", "reconciliation.json", "alert.json", "expire.json"):
            assert (reports / name).is_file(), name
        # the retention counts back from the interval's end: snapshots committed after it (today) stay
        expiry = json.loads((reports / "expire.json").read_text())
        assert expiry["older_than"].startswith(end.strftime("%Y-%m-%dT%H:%M")) and expiry["retain_days"] == 0
        assert {t["table"] for t in expiry["tables"]} == TABLES
        assert all(t["snapshots_expired"] == 0 and t["snapshots_kept"] >= 1 for t in expiry["tables"])

    first = json.loads((lake / "reports/demo" / f"run={runs[0]}" / "reconciliation.json").read_text())
    final = json.loads((lake / "reports/demo" / f"run={runs[1]}" / "reconciliation.json").read_text())
    assert {r["table"] for r in first["tables"]} == TABLES == {r["table"] for r in final["tables"]}
    # day one: its own counts match, day two's are not reached yet (behind, not overdue at the
    # interval's end); day two (folded on top of day one, in order) judges them: every table matches
    for row in first["tables"]:
        assert row["status"] == "match", row
        assert [c["verdict"] for c in row["checkpoints"]] == ["match"]
        assert [c["verdict"] for c in row["pending"]] == ["behind"] and not row["overdue"]
        assert row["pending"][0]["lag"]["seconds"] > 20 * 3600
    assert all(r["status"] == "match" and r["state_rows"] > 0 for r in final["tables"]), final
    assert all([c["verdict"] for c in r["checkpoints"]] == ["match"] and not r["pending"] for r in final["tables"])

    # the published Iceberg tables are what reconcile counted
    from jobs.iceberg.catalog import state_summary

    state = state_summary(Lake.at(str(lake)), "demo")
    assert set(state) == TABLES
    assert {t: s["state_rows"] for t, s in state.items()} == {r["table"]: r["state_rows"] for r in final["tables"]}
    assert all(s["snapshot_id"] for s in state.values())

    # no count alert on either day: a source count the lake has not reached yet is no problem; each day
    # mails only what else it found (the demo's few malformed messages are quarantined on whichever day
    # they fall) through smtp_default
    alerts = [json.loads((lake / "reports/demo" / f"run={r}" / "alert.json").read_text()) for r in runs]
    for alert in alerts:
        assert not {"count_mismatch", "lag"} & {reason["kind"] for reason in alert["reasons"]}
        assert alert["sent"] is bool(alert["reasons"]) and alert["error"] is None
    mailed = [r for r, a in zip(runs, alerts) if a["sent"]]
    assert len(inbox.envelopes) == len(mailed) and all(e.rcpt_tos == [RECIPIENT] for e in inbox.envelopes)
    assert all(run_id in subject for run_id, subject in zip(mailed, _subjects(inbox)))
    _check_lineage(read_events(events), lake, runs, topics)
    assert SPARK_SECRET not in events.read_text()

    # the metrics of each run through Airflow's StatsD client, sent once per run by its alert task
    published = [(tags, value) for name, tags, value in metrics if name == "airflow.cdc.rows.published"]
    assert sorted(published) == sorted((f"pipeline=demo,table={r['table']}", r["state_rows"])
                                       for r in first["tables"] + final["tables"])
    landed = sum(v for name, _tags, v in metrics if name == "airflow.cdc.messages.landed")
    assert landed == sum(json.loads((lake / "reports/demo" / f"run={r}" / "decode.json").read_text())["total"]["landed"]
                         for r in runs)
    # and the land task's, per topic, from its manifests
    assert sum(v for name, _tags, v in metrics if name == "airflow.cdc.land.messages") == landed
    assert {tags for name, tags, _v in metrics if name == "airflow.cdc.land.messages"} == {
        f"pipeline=demo,topic={t}" for t in TABLES}


def _influx_metrics(lines: list[str]) -> list[tuple[str, str, float]]:
    """(name, InfluxDB tags, value) of StatsD lines ``name,tag=v,...:value|kind``."""
    out = []
    for line in lines:
        name_tags, value = line.split("|")[0].rsplit(":", 1)
        name, _, tags = name_tags.partition(",")
        out.append((name, tags, float(value)))
    return out


def _check_lineage(events: list[dict], lake: Path, runs: list[str], topics: Path) -> None:
    """Each task's OpenLineage events: valid against the spec's schemas; land, transform and reconcile name
    what the run's manifests and reports say they read and wrote."""
    assert events and all(schema_errors(e) == [] for e in events), [schema_errors(e) for e in events]
    datasets_facets = [f for e in events for where, _, f in facets_of(e) if where not in ("run", "job")]
    assert datasets_facets and all(vendored(f["_schemaURL"]) for f in datasets_facets)  # each checked by its own
    done = {}
    for e in events:
        if e["eventType"] == "COMPLETE" and "." in e["job"]["name"]:
            done.setdefault(e["job"]["name"].split(".", 1)[1], []).append(e)
    assert {task: len(found) for task, found in done.items()} == {t: 2 for t in STAGES}
    for run_id, land, transform, reconcile in zip(runs, done["land"], done["transform"], done["reconcile"]):
        reports = lake / "reports/demo" / f"run={run_id}"
        decode, merge = (json.loads((reports / name).read_text()) for name in ("decode.json", "merge.json"))
        raw = [("file", folder) for folder in decode["raw"]]
        assert [(d["namespace"], d["name"]) for d in land["inputs"]] == [("file", str(topics))]
        assert [(d["namespace"], d["name"]) for d in land["outputs"]] == raw
        assert sum(d["outputFacets"]["outputStatistics"]["rowCount"] for d in land["outputs"]) == (
            decode["total"]["landed"])
        _check_transform(transform, lake, decode, merge, json.loads((reports / "validation.json").read_text()))
        tables = {d["name"]: d for d in transform["outputs"] if "symlinks" in d["facets"]}
        counted = [d for d in reconcile["inputs"] if d["name"].endswith("source_counts.json")]
        assert len(counted) == 1 and {d["name"] for d in reconcile["inputs"]} - {counted[0]["name"]} == set(tables)
        judged = counted[0]["inputFacets"]["dataQualityAssertions"]["assertions"]
        assert judged and all(a["success"] and a["expected"] == a["actual"] for a in judged)


def _check_transform(event: dict, lake: Path, decode: dict, merge: dict, validation: dict) -> None:
    import pyiceberg.catalog.sql as sql

    raw = [("file", folder) for folder in decode["raw"]]
    outputs = {d["facets"]["symlinks"]["identifiers"][0]["name"]: d for d in event["outputs"] if d["facets"]}
    assert set(outputs) == {t["iceberg_table"] for t in merge["tables"].values()}
    quarantine = [d for d in event["outputs"] if "quarantine" in d["name"]]
    assert [d["outputFacets"]["outputStatistics"]["rowCount"] for d in quarantine] == (
        [decode["total"]["quarantined"]] if decode["total"]["quarantined"] else [])
    catalog = sql.SqlCatalog("cdc", uri=f"sqlite:///{lake / 'warehouse/catalog.db'}")
    for table_id, report in merge["tables"].items():
        dataset, table = outputs[report["iceberg_table"]], catalog.load_table(report["iceberg_table"])
        assert (dataset["namespace"], dataset["name"]) == ("file", table.metadata.location.removeprefix("file://"))
        summary = table.snapshot_by_id(report["snapshot_id"]).summary
        assert dataset["facets"]["version"]["datasetVersion"] == str(report["snapshot_id"])
        commit = dataset["outputFacets"]["icebergCommitReport"]
        assert commit["snapshotId"] == report["snapshot_id"]
        assert commit["commitMetrics"]["addedRecords"] == int(summary["added-records"])
        assert dataset["outputFacets"]["outputStatistics"]["fileCount"] == int(summary["added-data-files"])
        assert [f["name"] for f in dataset["facets"]["schema"]["fields"]] == [f.name for f in table.schema().fields]
        # a data column comes from its own topic's messages only, one to one
        lineage = dataset["facets"]["columnLineage"]["fields"]
        assert set(lineage) == {f.name for f in table.schema().fields if not f.name.startswith("_cdc_")}
        own = [("file", folder) for folder in decode["raw"] if Path(folder).parent.name == safe_part(table_id)]
        key = report["key_columns"][0]
        assert [(f["namespace"], f["name"], f["field"]) for f in lineage[key]["inputFields"]] == [(*own[0], "value")]
        suite = next(s for s in validation["suites"] if s["table"] == table_id)
        checked = next(d for d in event["inputs"] if d["name"] == dataset["name"])
        assert len(checked["inputFacets"]["dataQualityAssertions"]["assertions"]) == len(suite["results"])
    assert {(d["namespace"], d["name"]) for d in event["inputs"]} == set(raw) | {
        (d["namespace"], d["name"]) for d in outputs.values()}


# ---- a manual run given start and end runs them, whatever the pipeline's end ---------------------
def test_a_manual_run_after_the_pipelines_end_runs_its_window(tmp_path, demo_topics):
    lake = tmp_path / "lake"
    _, path = pipeline(tmp_path, name="ended", lake=str(lake), source={"files": str(demo_topics)},
                       pipeline={"start": "2026-11-01", "end": "2026-11-03"})
    env = _airflow_env(tmp_path, path.parent)
    window = {"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}
    proc = subprocess.run([sys.executable, "-c", MANUAL_RUNNER, str(path.parent), "cdc_ended", json.dumps(window)],
                          env=env, capture_output=True, text=True, timeout=600)
    results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 1, (proc.stdout + proc.stderr)[-5000:]
    # the run's logical date (now) is after the pipeline's end: its tasks exist all the same, and land ran
    assert results[0]["tis"] == {t: "success" for t in STAGES}, (proc.stdout + proc.stderr)[-5000:]
    run_id = "20261101T000000Z_20261102T000000Z"
    landed = [json.loads((folder / "_manifest.json").read_text())
              for folder in sorted((lake / "raw/ended").glob(f"*/interval={run_id}"))]
    assert {m["topic"] for m in landed} == TABLES
    assert sum(m["totals"]["records"] for m in landed) == _demo_messages_between(demo_topics, DAY1, DAY2) > 0


# ---- land from Kafka -----------------------------------------------------------------------------
def test_land_task_lands_kafka_topics_into_one_folder_each(kafka_bootstrap, tmp_path):  # noqa: F811
    names = {"orders": "dagtest.orders", "customers": "dagtest.customers"}
    for topic in names.values():
        create_topic(kafka_bootstrap, topic, partitions=2)
    ms = lambda moment: int(moment.timestamp() * 1000)  # noqa: E731
    produce(kafka_bootstrap, names["orders"], [
        KafkaMessage(b'{"n": 1}', partition=0, timestamp_ms=ms(DAY1 + timedelta(hours=1))),
        KafkaMessage(b'{"n": 2}', partition=1, timestamp_ms=ms(DAY1 + timedelta(hours=2))),
        KafkaMessage(b'{"n": 3}', partition=0, timestamp_ms=ms(DAY2)),  # the next interval's
    ])
    produce(kafka_bootstrap, names["customers"], [
        KafkaMessage(b'{"n": 4}', partition=1, timestamp_ms=ms(DAY1 + timedelta(hours=3))),
        KafkaMessage(b'{"n": 5}', partition=1, timestamp_ms=ms(DAY2 + timedelta(hours=1))),
    ])
    # the apache-kafka provider's connection: the consumer's settings in its extra
    os.environ["AIRFLOW_CONN_KAFKA_DAGTEST"] = json.dumps({"conn_type": "kafka",
                                                           "extra": {"bootstrap.servers": kafka_bootstrap}})
    try:
        cfg, _ = pipeline(tmp_path, name="kafka_demo", lake=str(tmp_path / "lake"),
                          source={"files": None, "kafka": {"connection": "kafka_dagtest", "topics": list(names.values())}})
        plan = tasks.land_interval(cfg, DAY1, DAY2)
        nxt = tasks.land_interval(cfg, DAY2, DAY3)
        # its OpenLineage: the topics at the connection's first broker -> each topic's folder of the interval
        land_lineage = lineage.land_lineage(cfg, RunSettings.from_pipeline(cfg, (DAY1, DAY2)))
    finally:
        del os.environ["AIRFLOW_CONN_KAFKA_DAGTEST"]
    assert plan.topics == tuple(sorted(names.values())) and plan.messages == 3
    assert plan.folders == tuple(str(tmp_path / "lake/raw/kafka_demo" / safe_part(t) /
                                     "interval=20261101T000000Z_20261102T000000Z") for t in sorted(names.values()))
    counts = [json.loads((Path(folder) / "_manifest.json").read_text())["totals"]["records"] for folder in plan.folders]
    assert counts == [1, 2]  # customers, orders
    assert nxt.messages == 2 and nxt.run_id == "20261102T000000Z_20261103T000000Z"
    assert [(d.namespace, d.name) for d in land_lineage.inputs] == [
        (f"kafka://{kafka_bootstrap.split(',')[0]}", t) for t in sorted(names.values())]
    assert [(d.namespace, d.name, d.outputFacets["outputStatistics"].rowCount) for d in land_lineage.outputs] == [
        ("file", folder, n) for folder, n in zip(plan.folders, counts)]


# ---- alert and failure notifier through a real SMTP server ---------------------------------------
def _plan_with_reports(lake: Path, alert_to: tuple[str, ...], mismatch: bool) -> tuple[str, str, str]:
    """The alert task's arguments (the pipeline file and the interval) for a run whose reports are written."""
    _, path = pipeline(lake, lake=str(lake), alert={"to": list(alert_to)})
    reports = lake / "reports/demo" / "run=20261101T000000Z_20261102T000000Z"
    reports.mkdir(parents=True)
    (reports / "decode.json").write_text(json.dumps(
        {"total": {"landed": 4, "decoded": 4, "quarantined": 0, "ignored": 0}, "tables": {}}))
    (reports / "validation.json").write_text(json.dumps({"success": True, "suites": []}))
    (reports / "reconciliation.json").write_text(json.dumps({"tables": [
        {"table": "shop.public.<b>orders</b>", "state_rows": 3, "source_rows": 4 if mismatch else 3,
         "status": "mismatch" if mismatch else "match", "snapshot_id": 1}]}))
    return str(path), "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"


@pytest.fixture()
def clean_smtp_env(monkeypatch):
    for name in SMTP_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_alert_task_mails_problems_through_smtp_default(tmp_path, smtp_sink, clean_smtp_env):
    port, inbox = smtp_sink
    clean_smtp_env.setenv("AIRFLOW_CONN_SMTP_DEFAULT", _smtp_conn(port))

    summary = tasks.alert(*_plan_with_reports(tmp_path / "ok", (RECIPIENT,), mismatch=False))
    assert summary == {"sent": False, "problems": 0, "skipped": "no problems", "error": None}
    assert inbox.envelopes == []

    plan = _plan_with_reports(tmp_path / "bad", (RECIPIENT, "oncall@example.com"), mismatch=True)
    assert tasks.alert(*plan)["sent"] is True  # through the pipeline's connection (jobs.alert.smtp)
    assert [e.rcpt_tos for e in inbox.envelopes] == [[RECIPIENT, "oncall@example.com"]]
    msg = email.message_from_bytes(inbox.envelopes[0].original_content, policy=policy.default)
    html = msg.get_body(preferencelist=("html",)).get_content()
    assert "shop.public.&lt;b&gt;orders&lt;/b&gt;" in html and "<b>orders" not in html
    stored = json.loads((tmp_path / "bad/reports/demo/run=20261101T000000Z_20261102T000000Z/alert.json").read_text())
    assert stored["sent"] is True and stored["reasons"][0]["kind"] == "count_mismatch"


def test_alert_task_fails_when_the_email_cannot_go_out(tmp_path, clean_smtp_env):
    clean_smtp_env.setenv("AIRFLOW_CONN_SMTP_DEFAULT", _smtp_conn(free_port()))  # nothing listens there
    plan = _plan_with_reports(tmp_path, (RECIPIENT,), mismatch=True)
    with pytest.raises(tasks.AlertNotSent, match="not sent"):
        tasks.alert(*plan)  # failing makes Airflow retry the email and show the failure
    stored = json.loads((tmp_path / "reports/demo/run=20261101T000000Z_20261102T000000Z/alert.json").read_text())
    assert stored["sent"] is False and stored["error"]

    # without recipients, problems are reported in alert.json and the task succeeds
    quiet = _plan_with_reports(tmp_path / "quiet", (), mismatch=True)
    assert tasks.alert(*quiet) == {"sent": False, "problems": 1, "skipped": "no recipients", "error": None}


def test_failure_notifier_mails_through_smtp_default(tmp_path, smtp_sink, clean_smtp_env):
    from types import SimpleNamespace

    port, inbox = smtp_sink
    clean_smtp_env.setenv("AIRFLOW_CONN_SMTP_DEFAULT", _smtp_conn(port))
    cfg, _ = pipeline(tmp_path, alert={"to": [RECIPIENT]})
    [notifier] = tasks.failure_notifiers(cfg)
    ti = SimpleNamespace(dag_id="cdc_demo", task_id="merge", run_id="scheduled__2026-11-02", state="failed",
                         try_number=2, max_tries=1, hostname="worker-1", log_url="http://airflow/log")
    notifier.notify({"ti": ti})
    assert [e.rcpt_tos for e in inbox.envelopes] == [[RECIPIENT]]
    assert _subjects(inbox) == ["DAG cdc_demo - Task merge - Run ID scheduled__2026-11-02 in State failed"]
