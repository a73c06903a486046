"""Airflow as its users drive it: real services (tests/support/airflow_service.py), pipelines as YAML files
in a pipelines folder of the test's own, runs triggered through the REST API, a backfill through
``airflow backfill create``, a cleared task, a failing task's email, and the UI in headless Chromium.

One service for the whole module, and every Spark run counted (each is a spark-submit JVM):

- ``cdc_serial``: 2026-11-01, -02 and -03 triggered through the REST API one after the other (3 runs), then
  ``transform`` of 2026-11-02 cleared with its downstream (1 run);
- ``cdc_backfill``: the same three intervals as one ``airflow backfill create`` (3 runs), started as soon as
  the service is up so that it runs beside ``cdc_serial``;
- ``cdc_broken``: its source folder does not exist, so land fails twice (retries 1) and mails once (no Spark).

The demo topics hold 2026-11-01 and -02; 2026-11-03 is an interval without messages: land writes an empty
snapshot (a manifest of 0 records per topic) and the run folds nothing, which the comparison covers too.

Run: ``.venv/bin/pytest -s tests/integration/test_airflow_service.py`` (``-s`` prints the timings, also kept in
``$CDC_TEST_ARTIFACTS``, default ``test-artifacts/``, with the screenshots ``airflow-dags.png`` and
``airflow-backfill-runs.png``).
"""
from __future__ import annotations

import email
import json
import os
import time
from datetime import datetime, timedelta
from email import policy
from pathlib import Path

import pytest
from aiosmtpd.smtp import AuthResult

from jobs.intervals import run_id_for, utc
from tests.support.airflow_service import airflow_service
from tests.support.paths import REPO
from tests.support.pipelines import blocks, write_pipeline
from tests.support.servers import LOCALHOST
from tests.support.smtp import Inbox, smtp_sink

pytestmark = pytest.mark.integration  # as every test of this folder (tests/integration/conftest.py)
ARTIFACTS = Path(os.environ.get("CDC_TEST_ARTIFACTS", REPO / "test-artifacts"))
STAGES = ("land", "transform", "reconcile", "alert", "expire")
DAYS = ("2026-11-01", "2026-11-02", "2026-11-03")  # the data intervals [day, day + 1)
SERIAL, BACKFILL, BROKEN = "cdc_serial", "cdc_backfill", "cdc_broken"
SMTP_LOGIN, SMTP_PASSWORD = "cdc-mailer", "smtp-Pa55word-never-in-mail"
ONCALL = "oncall@example.com"
TIMINGS: dict[str, float] = {}


def _timed(name: str, since: float) -> None:
    TIMINGS[name] = round(time.monotonic() - since, 1)
    print(f"[airflow-test] {name}: {TIMINGS[name]}s", flush=True)


def _window(day: str) -> tuple[str, str]:
    start = datetime.fromisoformat(day)
    return f"{day}T00:00:00Z", f"{(start + timedelta(days=1)).date().isoformat()}T00:00:00Z"


def _pipeline_run_id(day: str) -> str:
    start, end = _window(day)
    return run_id_for(utc(start, "start"), utc(end, "end"))


# ---- an SMTP sink that wants a login --------------------------------------------------------------
class _Inbox(Inbox):
    def __init__(self) -> None:
        super().__init__()
        self.logins: list[tuple[bytes, bytes]] = []

    def authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        self.logins.append((auth_data.login, auth_data.password))
        ok = auth_data.login == SMTP_LOGIN.encode() and auth_data.password == SMTP_PASSWORD.encode()
        return AuthResult(success=ok, handled=False)


# ---- the service and its pipelines -----------------------------------------------------------------
class Harness:
    def __init__(self, af, tmp: Path, inbox: _Inbox) -> None:
        self.af, self.tmp, self.inbox = af, tmp, inbox
        self.lakes = {SERIAL: tmp / "lakes" / "serial", BACKFILL: tmp / "lakes" / "backfill"}
        self.serial_runs: dict[str, dict] = {}

    def trigger_serial(self, day: str) -> dict:
        start, end = _window(day)
        run_id = f"rest__{day}"
        self.af.trigger(SERIAL, run_id, start, {"start": start, "end": end})
        run = self.af.wait_for_run(SERIAL, run_id, timeout=600)
        self.serial_runs[day] = run
        return run


@pytest.fixture(scope="module")
def harness(tmp_path_factory, demo_topics):
    tmp = tmp_path_factory.mktemp("airflow-service")
    inbox = _Inbox()
    with smtp_sink(inbox, authenticator=inbox.authenticate, auth_require_tls=False) as (smtp, _):
        pipelines = tmp / "pipelines"
        alert = {"to": ["dq@example.com"], "smtp_connection": "smtp_default"}
        demo = {"source": {"files": str(demo_topics)}, "reconcile": {"counts": str(demo_topics.with_name("source_counts.json"))}}
        write_pipeline(pipelines, blocks("serial", tmp / "lakes" / "serial", alert=alert, **demo))
        write_pipeline(pipelines, blocks("backfill", tmp / "lakes" / "backfill", alert=alert, **demo))
        write_pipeline(pipelines, blocks(
            "broken", tmp / "lakes" / "broken", source={"files": str(tmp / "no-such-topics")},
            pipeline={"retries": 1, "retry_delay": "3s"}, alert={"to": [ONCALL], "smtp_connection": "smtp_default"}))
        connections = {
            "spark_default": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            # a local sink speaks neither TLS nor SSL; the login is real (the sink checks it)
            "smtp_default": json.dumps({"conn_type": "smtp", "host": LOCALHOST, "port": smtp.port, "login": SMTP_LOGIN,
                                        "password": SMTP_PASSWORD,
                                        "extra": {"disable_tls": True, "disable_ssl": True,
                                                  "from_email": "cdc@example.com"}}),
        }
        started = time.monotonic()
        with airflow_service(tmp, connections=connections,
                             env={"CDC_PIPELINES_DIR": str(pipelines), "AIRFLOW__EMAIL__FROM_EMAIL": "cdc@example.com"}
                             ) as af:
            h = Harness(af, tmp, inbox)
            af.wait_for_dags([SERIAL, BACKFILL, BROKEN])
            _timed("service up, pipelines parsed", started)
            # what runs in the scheduler's own time starts now, beside the REST runs: the backfill and the
            # broken pipeline's run
            # depends_on_past DAGs must name a reprocess behavior (there is nothing to reprocess yet)
            af.cli("backfill", "create", "--dag-id", BACKFILL, "--from-date", DAYS[0], "--to-date", DAYS[-1],
                   "--max-active-runs", "1", "--reprocess-behavior", "failed")
            start, end = _window(DAYS[0])
            af.trigger(BROKEN, "rest__broken", start, {"start": start, "end": end})
            yield h
            _timed("module total", started)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            (ARTIFACTS / "airflow-service-timings.json").write_text(json.dumps(TIMINGS, indent=2))


# ---- the UI and the REST API list every pipeline ------------------------------------------------------
def test_ui_lists_every_configured_pipeline(harness):
    af, started = harness.af, time.monotonic()
    assert af.dag_ids() == sorted([BACKFILL, BROKEN, SERIAL])
    assert af.rest("GET", "/api/v2/importErrors")["import_errors"] == []
    for dag in af.rest("GET", "/api/v2/dags?limit=100")["dags"]:
        assert not dag["is_paused"] and dag["fileloc"].endswith("cdc_pipelines.py"), dag
    png = af.screenshot(af.url("/dags"), ARTIFACTS / "airflow-dags.png")
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for _ in range(3):  # the page renders after its scripts fetched the list: a slow fetch shows "0 Dags"
        dom = af.dump_dom(af.url("/dags"))
        missing = [d for d in (SERIAL, BACKFILL, BROKEN) if d not in dom]
        if not missing:
            break
    assert not missing, f"DAG list page misses {missing}: {dom[-3000:]}"
    _timed("UI: screenshot and DOM of the DAG list", started)


# ---- a REST-triggered run --------------------------------------------------------------------------------
def test_run_triggered_through_rest_succeeds(harness):
    started = time.monotonic()
    run = harness.trigger_serial(DAYS[0])
    assert run["state"] == "success", (run, harness.af.task_log(SERIAL, run["dag_run_id"], "land"))
    assert run["task_states"] == {t: "success" for t in STAGES}
    assert run["conf"] == {"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}
    reports = harness.lakes[SERIAL] / "reports" / "serial" / f"run={_pipeline_run_id(DAYS[0])}"
    for name in ("decode.json", "merge.json", "validation.json", "reconciliation.json", "alert.json", "expire.json"):
        assert (reports / name).is_file(), name
    _timed("REST run 2026-11-01", started)


# ---- a backfill equals the same intervals run one by one ------------------------------------------------
def _tables(lake: Path, namespace: str) -> dict[str, dict]:
    """Every Iceberg table of the namespace (state and history): its rows (sorted) and current snapshot."""
    from jobs.lake import Lake
    from jobs.publish import TABLE_ID_PROP, open_catalog

    catalog = open_catalog(Lake.at(str(lake)))
    out = {}
    for ident in catalog.list_tables(namespace):
        table = catalog.load_table(ident)
        table_id = table.properties.get(TABLE_ID_PROP, ident[-1])
        name = f"{table_id} ({ident[-1]})"
        rows = table.scan().to_arrow().to_pylist()
        snapshot = table.current_snapshot()
        out[name] = {"rows": sorted(json.dumps(r, sort_keys=True, default=str) for r in rows),
                     "snapshot_id": snapshot.snapshot_id if snapshot else None,
                     "snapshots": [s.snapshot_id for s in table.metadata.snapshots]}
    return out


def _reconciliation(lake: Path, namespace: str, day: str) -> dict:
    report = json.loads((lake / "reports" / namespace / f"run={_pipeline_run_id(day)}" /
                         "reconciliation.json").read_text())
    # all but what names the lake's own objects: its pipeline (namespace) and its snapshots' ids
    return _without(report, {"snapshot_id", "pipeline"})


def _without(value, keys: set[str]):
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def test_backfill_gives_the_state_of_the_same_intervals_run_one_by_one(harness):
    af, started = harness.af, time.monotonic()
    for day in DAYS[1:]:
        run = harness.trigger_serial(day)
        assert run["task_states"] == {t: "success" for t in STAGES}, (day, run)
    _timed("REST runs 2026-11-02 and -03", started)

    runs = af.wait_for_runs(BACKFILL, len(DAYS), timeout=900)
    _timed("backfill finished (waited after the REST runs)", started)
    assert [r["run_type"] for r in runs] == ["backfill"] * 3
    assert [r["data_interval_start"][:10] for r in runs] == list(DAYS)
    for r in runs:
        assert r["state"] == "success" and af.task_states(BACKFILL, r["dag_run_id"]) == {t: "success" for t in STAGES}
    deadline = time.monotonic() + 60  # the scheduler marks the backfill completed after its last run
    while not (backfills := af.rest("GET", f"/api/v2/backfills?dag_id={BACKFILL}")["backfills"])[0]["completed_at"] \
            and time.monotonic() < deadline:
        time.sleep(1)
    assert len(backfills) == 1 and backfills[0]["completed_at"], backfills

    serial, backfill = _tables(harness.lakes[SERIAL], "serial"), _tables(harness.lakes[BACKFILL], "backfill")
    assert serial and set(serial) == set(backfill)
    for name in serial:
        assert serial[name]["rows"] == backfill[name]["rows"], name
        assert len(serial[name]["snapshots"]) == len(backfill[name]["snapshots"]), name
    for day in DAYS:
        assert _reconciliation(harness.lakes[SERIAL], "serial", day) == \
            _reconciliation(harness.lakes[BACKFILL], "backfill", day), day
    # the last day with messages meets the source's last counts; the empty day after it changes no row
    last = _reconciliation(harness.lakes[SERIAL], "serial", DAYS[1])
    assert last["tables"] and all(t["status"] == "match" for t in last["tables"]), last
    quiet = _reconciliation(harness.lakes[SERIAL], "serial", DAYS[2])
    assert {t["table"]: t["state_rows"] for t in quiet["tables"]} == {t["table"]: t["state_rows"] for t in last["tables"]}
    assert not [t for t in quiet["tables"] if t["status"] == "mismatch"], quiet
    empty = json.loads((harness.lakes[SERIAL] / "reports/serial" / f"run={_pipeline_run_id(DAYS[-1])}" /
                        "decode.json").read_text())
    assert empty["total"]["landed"] == 0, empty["total"]
    af.screenshot(af.url(f"/dags/{BACKFILL}"), ARTIFACTS / "airflow-backfill-runs.png")


# ---- clearing a finished task re-runs it and changes nothing published ----------------------------------
def test_cleared_transform_reruns_and_changes_nothing_published(harness):
    af, started = harness.af, time.monotonic()
    run_id = f"rest__{DAYS[1]}"  # 2026-11-02: a day with data, re-run after 2026-11-03 was published
    before = _tables(harness.lakes[SERIAL], "serial")
    tries = {t: af.task_instance(SERIAL, run_id, t)["try_number"] for t in STAGES}
    cleared = af.rest("POST", f"/api/v2/dags/{SERIAL}/clearTaskInstances", {
        "dry_run": False, "dag_run_id": run_id, "task_ids": ["transform"], "include_downstream": True,
        "only_failed": False, "reset_dag_runs": True})
    assert sorted(ti["task_id"] for ti in cleared["task_instances"]) == sorted(STAGES[1:])
    time.sleep(2)
    run = af.wait_for_run(SERIAL, run_id, timeout=600)
    assert run["state"] == "success" and run["task_states"] == {t: "success" for t in STAGES}
    after_tries = {t: af.task_instance(SERIAL, run_id, t)["try_number"] for t in STAGES}
    assert after_tries["land"] == tries["land"]  # not cleared
    assert all(after_tries[t] == tries[t] + 1 for t in STAGES[1:]), (tries, after_tries)
    assert _tables(harness.lakes[SERIAL], "serial") == before
    _timed("cleared transform re-run", started)


# ---- a failing task mails once, and no secret -------------------------------------------------------------
def test_failed_task_sends_one_email_without_secrets(harness):
    af, inbox, started = harness.af, harness.inbox, time.monotonic()
    run = af.wait_for_run(BROKEN, "rest__broken", timeout=300)
    assert run["state"] == "failed"
    assert run["task_states"]["land"] == "failed"
    assert {run["task_states"][t] for t in STAGES[1:]} == {"upstream_failed"}
    land = af.task_instance(BROKEN, "rest__broken", "land")
    assert land["try_number"] == 2, land  # retried once
    log = af.task_log(BROKEN, "rest__broken", "land", 2)
    assert "no-such-topics" in log, log[-3000:]
    time.sleep(5)  # a second email (one per try) would have arrived by now

    failure_mails = [e for e in inbox.envelopes if ONCALL in e.rcpt_tos]
    assert len(failure_mails) == 1, [m["Subject"] for m in inbox.messages()]
    message = email.message_from_bytes(failure_mails[0].original_content, policy=policy.default)
    assert BROKEN in message["Subject"] and "land" in message["Subject"], message["Subject"]
    assert (SMTP_LOGIN.encode(), SMTP_PASSWORD.encode()) in inbox.logins  # it logged in with the connection's
    secrets = [SMTP_PASSWORD, af.env["AIRFLOW__API_AUTH__JWT_SECRET"], af.env["AIRFLOW__API__SECRET_KEY"]]
    for envelope in inbox.envelopes:  # the failure email and the data-quality alerts of the other pipelines
        raw = envelope.original_content.decode(errors="replace")
        text = "\n".join(str(part.get_content()) for part in
                         email.message_from_bytes(envelope.original_content, policy=policy.default).walk()
                         if not part.is_multipart())
        for secret in secrets:
            assert secret not in raw and secret not in text
    assert SMTP_PASSWORD not in log
    _timed("failure email checked", started)
