"""Airflow as its users drive it: the local Airflow of ``make airflow`` (jobs/airflow/local.py, started
by tests/support/airflow_service.py), pipelines as YAML files beside their DAG stubs in a DAGs folder of the
test's own, the commands of docs/operations/airflow.md's "Which interval a run covers" run as written (on
the test's DAGs), runs triggered through the REST API, a backfill of a paused DAG, a cleared task, a failing
task's email, and the UI in headless Chromium.

One service for the whole module, and every Spark run counted (each is a spark-submit JVM):

- ``cdc_serial``: 2026-11-01 as ``airflow dags test cdc_serial 2026-11-02``, 2026-11-02 as ``airflow dags
  trigger -c`` with start and end, 2026-11-03 through the REST API, one after the other (3 runs), then
  ``transform`` of 2026-11-02 cleared with its downstream (1 run);
- ``cdc_backfill`` (``paused: true``): the same three intervals as one ``airflow backfill create``, whose runs
  wait while the DAG is paused, then ``airflow dags unpause`` (3 runs), beside ``cdc_serial``;
- ``cdc_broken``: its source folder does not exist, so land fails twice (retries 1) and mails once (no Spark);
- ``cdc_held`` (``paused: true``): the triggers whose interval is the point, never run (no Spark);
- ``cdc_ended`` (``end: 2026-11-03``, paused): ``airflow dags test`` of land alone, the other tasks marked successful
  (no Spark): the day before the data, then a window given as params after the pipeline's end.

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
import shlex
import time
from datetime import UTC, datetime, timedelta
from email import policy
from pathlib import Path

import pytest
from aiosmtpd.smtp import AuthResult

from jobs.model.intervals import run_id_for, utc
from tests.support.airflow_service import airflow_service
from tests.support.paths import REPO
from tests.support.pipelines import blocks, write_pipeline
from tests.support.servers import LOCALHOST
from tests.support.smtp import Inbox, smtp_sink

pytestmark = pytest.mark.integration  # as every test of this folder (tests/integration/conftest.py)
ARTIFACTS = Path(os.environ.get("CDC_TEST_ARTIFACTS", REPO / "test-artifacts"))
STAGES = ("land", "transform", "reconcile", "alert", "expire")
DAYS = ("2026-11-01", "2026-11-02", "2026-11-03")  # the data intervals [day, day + 1)
SERIAL, BACKFILL, BROKEN, HELD, ENDED = "cdc_serial", "cdc_backfill", "cdc_broken", "cdc_held", "cdc_ended"
LAND_ONLY = ["--mark-success-pattern", "(?!land$).*"]  # airflow dags test: the other tasks marked successful
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


def _documented(*words: str, having: str | None = None, lacking: tuple[str, ...] = ()) -> list[str]:
    """The command of docs/operations/airflow.md's block of run intervals that starts ``airflow <words>``
    (with flag ``having``, without the flags ``lacking``), as arguments of ``airflow``, comments dropped."""
    text = (REPO / "docs" / "operations" / "airflow.md").read_text()
    block = text.split("<!-- run-intervals:", 1)[1].split("```bash", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    commands = [shlex.split(line, comments=True) for line in block.splitlines() if line.startswith("airflow ")]
    found = [c[1:] for c in commands if c[1:1 + len(words)] == list(words) and (having is None or having in c)
             and not set(lacking) & set(c)]
    assert len(found) == 1, (words, having, lacking, commands)
    return found[0]


def _on(dag_id: str, argv: list[str]) -> list[str]:
    """A documented command for the demo's DAG, on one of the test's."""
    return [dag_id if a == "cdc_demo" else a for a in argv]


def _messages_between(topics: Path, start: str, end: str) -> int:
    """The demo's messages whose timestamp lies in [start, end), counted from its topic dumps."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    stamps = ds.dataset(str(topics), format="parquet").to_table(columns=["timestamp"])["timestamp"]
    inside = pc.and_(pc.greater_equal(stamps, utc(start)), pc.less(stamps, utc(end)))
    return int(pc.sum(pc.cast(inside, "int64")).as_py())


def _interval(run: dict) -> tuple[str | None, str | None]:
    return run["data_interval_start"], run["data_interval_end"]


def _first_lines_of_the_pipeline(af, dag_id: str, run_id: str) -> list[str]:
    """What the pipeline's own code logged in the land task, in order (Airflow's lines left out)."""
    events = af.task_log_events(dag_id, run_id, "land")
    return [str(e.get("event")) for e in events if str(e.get("logger", "")).startswith("jobs.")]


def _pipeline_lines_of(output: str) -> list[str]:
    """What the pipeline's own code logged in an ``airflow dags test``, which runs the tasks in its own
    process and logs them there: ``<time> [<level>] <event> [jobs.<module>] loc=...``, in order."""
    return [line.split("] ", 1)[1].rsplit(" [jobs.", 1)[0] for line in output.splitlines()
            if " [jobs." in line and "] " in line]


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
    def __init__(self, af, tmp: Path, inbox: _Inbox, topics: Path) -> None:
        self.af, self.tmp, self.inbox, self.topics = af, tmp, inbox, topics
        self.lakes = {SERIAL: tmp / "lakes" / "serial", BACKFILL: tmp / "lakes" / "backfill",
                      ENDED: tmp / "lakes" / "ended"}
        self.serial_runs: dict[str, dict] = {}
        self.backfill_created = 0.0

    def trigger_serial(self, day: str, note: str | None = None) -> dict:
        """The day's run of cdc_serial through the REST API, with a logical date at the interval's end."""
        start, end = _window(day)
        run_id = f"rest__{day}"
        self.af.trigger(SERIAL, run_id, end, {"start": start, "end": end}, note=note)
        run = self.af.wait_for_run(SERIAL, run_id, timeout=600)
        self.serial_runs[day] = run
        return run

    def run_of(self, dag_id: str, **having) -> dict:
        """The one run of the DAG whose fields are ``having``."""
        [run] = [r for r in self.af.dag_runs(dag_id) if all(r.get(k) == v for k, v in having.items())]
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
        write_pipeline(pipelines, blocks("backfill", tmp / "lakes" / "backfill", alert=alert,
                                         pipeline={"paused": True}, **demo))
        write_pipeline(pipelines, blocks(
            "broken", tmp / "lakes" / "broken", source={"files": str(tmp / "no-such-topics")},
            pipeline={"retries": 1, "retry_delay": "3s"}, alert={"to": [ONCALL], "smtp_connection": "smtp_default"}))
        write_pipeline(pipelines, blocks("held", tmp / "lakes" / "held", pipeline={"paused": True}, **demo))
        write_pipeline(pipelines, blocks("ended", tmp / "lakes" / "ended", pipeline={"end": "2026-11-03", "paused": True},
                                         **demo))
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
                             env={"AIRFLOW__CORE__DAGS_FOLDER": str(pipelines),  # each file beside its DAG stub
                                  "AIRFLOW__EMAIL__FROM_EMAIL": "cdc@example.com"}
                             ) as af:
            h = Harness(af, tmp, inbox, demo_topics)
            af.wait_for_dags([SERIAL, BACKFILL, BROKEN, HELD, ENDED])
            _timed("service up, pipelines parsed", started)
            # what runs in the scheduler's own time starts now, beside the serial runs: the broken pipeline's
            # run, and the backfill of the paused cdc_backfill, which waits until it is unpaused
            start, end = _window(DAYS[0])
            af.trigger(BROKEN, "rest__broken", end, {"start": start, "end": end})
            h.backfill_created = time.monotonic()
            af.cli(*_on(BACKFILL, _documented("backfill", "create")))
            yield h
            _timed("module total", started)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            (ARTIFACTS / "airflow-service-timings.json").write_text(json.dumps(TIMINGS, indent=2))


# ---- the UI and the REST API list every pipeline ------------------------------------------------------
def test_ui_lists_every_configured_pipeline(harness):
    af, started = harness.af, time.monotonic()
    assert af.dag_ids() == sorted([BACKFILL, BROKEN, ENDED, HELD, SERIAL])  # cdc_ended: through the plugin
    assert af.rest("GET", "/api/v2/importErrors")["import_errors"] == []
    for dag in af.rest("GET", "/api/v2/dags?limit=100")["dags"]:
        assert dag["fileloc"].endswith(f"/pipelines/{dag['dag_id'].removeprefix('cdc_')}.py"), dag  # its stub
        # pipeline.paused: true for these three; the others follow dags_are_paused_at_creation (false here)
        assert dag["is_paused"] is (dag["dag_id"] in (BACKFILL, ENDED, HELD)), dag
    # nothing of it listens beyond 127.0.0.1: no log server on 0.0.0.0:8793 clashing with another Airflow
    assert af.listening() == {f"{LOCALHOST}:{af.port}"}
    # what `source build/airflow/env.sh` gives a shell is what the services and the CLI calls here run with
    exported = dict(shlex.split(line)[1].split("=", 1) for line in (af.home / "env.sh").read_text().splitlines()
                    if line.startswith("export "))
    assert exported and all(af.env[k] == v for k, v in exported.items())
    assert exported["AIRFLOW__API__HOST"] == LOCALHOST and "AIRFLOW__CORE__PLUGINS_FOLDER" in exported
    png = af.screenshot(af.url("/dags"), ARTIFACTS / "airflow-dags.png")
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for _ in range(3):  # the page renders after its scripts fetched the list: a slow fetch shows "0 Dags"
        dom = af.dump_dom(af.url("/dags"))
        missing = [d for d in (SERIAL, BACKFILL, BROKEN) if d not in dom]
        if not missing:
            break
    assert not missing, f"DAG list page misses {missing}: {dom[-3000:]}"
    _timed("UI: screenshot and DOM of the DAG list", started)


# ---- a backfill of a paused DAG waits until the DAG is unpaused ------------------------------------------
def test_a_backfill_of_a_paused_dag_waits_until_it_is_unpaused(harness):
    af = harness.af
    # the documented `airflow backfill create` (the fixture ran it): one run per interval start in
    # [--from-date, --to-date], both included
    runs = af.dag_runs(BACKFILL)
    assert [(r["run_type"], _interval(r)) for r in runs] == [
        ("backfill", (f"{day}T00:00:00Z", _window(day)[1])) for day in DAYS]
    time.sleep(max(0.0, 15 - (time.monotonic() - harness.backfill_created)))  # the scheduler had time to start them
    runs = af.dag_runs(BACKFILL)
    assert {r["state"] for r in runs} == {"queued"}, runs  # paused: nothing starts, nothing in any log
    assert all(set(af.task_states(BACKFILL, r["dag_run_id"]).values()) <= {None} for r in runs)
    af.cli(*_on(BACKFILL, _documented("dags", "unpause")))
    deadline = time.monotonic() + 120
    while {r["state"] for r in af.dag_runs(BACKFILL)} == {"queued"} and time.monotonic() < deadline:
        time.sleep(1)
    assert "running" in {r["state"] for r in af.dag_runs(BACKFILL)}  # the rest of it: test_backfill_gives_...


# ---- the commands of the docs, and the interval each run covers -----------------------------------------
def test_airflow_dags_test_covers_the_interval_that_ends_at_its_date(harness):
    af, started = harness.af, time.monotonic()
    command = _on(SERIAL, _documented("dags", "test"))
    assert command[-1] == "2026-11-02"  # the docs' example: the first day of the demo's data
    af.cli("dags", "pause", SERIAL)  # as the docs say: the scheduler would run the command's tasks too
    try:
        done = af.cli(*command, timeout=900)
    finally:
        af.rest("PATCH", f"/api/v2/dags/{SERIAL}", {"is_paused": False})
    run = harness.run_of(SERIAL, logical_date="2026-11-02T00:00:00Z")
    harness.serial_runs[DAYS[0]] = run
    assert run["state"] == "success" and af.task_states(SERIAL, run["dag_run_id"]) == {t: "success" for t in STAGES}
    assert (run["run_type"], _interval(run)) == ("manual", _window(DAYS[0]))
    reports = harness.lakes[SERIAL] / "reports" / "serial" / f"run={_pipeline_run_id(DAYS[0])}"
    for name in ("decode.json", "merge.json", "validation.json", "reconciliation.json", "alert.json", "expire.json"):
        assert (reports / name).is_file(), name
    covers = "run 20261101T000000Z_20261102T000000Z covers [2026-11-01T00:00:00Z, 2026-11-02T00:00:00Z): the data " \
             "interval Airflow gives a manual run at logical date 2026-11-02T00:00:00Z"
    lines = _pipeline_lines_of(done.stdout + done.stderr)
    assert lines and lines[0].startswith(covers), lines[:3]  # the land task's first line
    note = af.rest("GET", f"/api/v2/dags/{SERIAL}/dagRuns/{run['dag_run_id']}")["note"]
    landed = _messages_between(harness.topics, *_window(DAYS[0]))
    assert note.startswith(covers) and f"landed {landed} messages" in note and "source holds" not in note, note
    _timed("airflow dags test, 2026-11-01", started)


def test_airflow_dags_trigger_covers_params_start_and_end_or_no_interval(harness):
    af, started = harness.af, time.monotonic()
    af.cli(*_on(SERIAL, _documented("dags", "trigger", having="-c")))
    run = harness.run_of(SERIAL, conf={"start": "2026-11-02T00:00:00Z", "end": "2026-11-03T00:00:00Z"})
    run = af.wait_for_run(SERIAL, run["dag_run_id"], timeout=600)
    harness.serial_runs[DAYS[1]] = run
    assert run["state"] == "success" and run["task_states"] == {t: "success" for t in STAGES}
    assert _interval(run) == (None, None)  # the CLI without --logical-date: params are the interval
    lines = _first_lines_of_the_pipeline(af, SERIAL, run["dag_run_id"])
    assert lines[0] == ("run 20261102T000000Z_20261103T000000Z covers [2026-11-02T00:00:00Z, "
                        "2026-11-03T00:00:00Z): from params start and end"), lines[:3]
    _timed("airflow dags trigger -c, 2026-11-02", started)

    # on the paused cdc_held, runs that never start: only the interval each one was given
    af.cli(*_on(HELD, _documented("dags", "trigger", lacking=("-c", "--logical-date"))))
    assert _interval(harness.run_of(HELD, conf={})) == (None, None)  # land would refuse: no interval
    before = datetime.now(UTC)
    command = _on(HELD, _documented("dags", "trigger", having="--logical-date"))
    af.cli(*command)
    after = datetime.now(UTC)
    run = harness.run_of(HELD, logical_date=command[-1].replace("+00:00", "Z"))
    # the day before the trigger's time (the CLI infers it from now), not the day before the logical date
    days = {(d - timedelta(days=1)).strftime("%Y-%m-%dT00:00:00Z") for d in (before, after)}
    assert run["data_interval_start"] in days and run["data_interval_start"] != "2026-11-04T00:00:00Z", run
    # the UI's form and the REST API: the interval that ends at the logical date
    af.trigger(HELD, "ui__2026-11-06", "2026-11-06T00:00:00Z")
    assert _interval(harness.run_of(HELD, dag_run_id="ui__2026-11-06")) == ("2026-11-05T00:00:00Z",
                                                                            "2026-11-06T00:00:00Z")


# ---- pipeline.end: a manual run given start and end runs them; a day without data says so -----------
def test_a_manual_run_after_the_pipelines_end_runs_its_window_and_an_empty_one_says_why(harness):
    af, started = harness.af, time.monotonic()
    # the trial: `dags test` of the date of the data covers the day before it, which holds none
    done = af.cli("dags", "test", ENDED, "2026-11-01", *LAND_ONLY, timeout=300)
    run = harness.run_of(ENDED, logical_date="2026-11-01T00:00:00Z")
    assert run["state"] == "success" and _interval(run) == ("2026-10-31T00:00:00Z", "2026-11-01T00:00:00Z")
    lines = _pipeline_lines_of(done.stdout + done.stderr)
    assert lines[0].startswith("run 20261031T000000Z_20261101T000000Z covers [2026-10-31T00:00:00Z, "), lines[:3]
    assert any(line.startswith("0 messages in [2026-10-31T00:00:00Z, 2026-11-01T00:00:00Z) but the source holds")
               for line in lines), lines
    note = af.rest("GET", f"/api/v2/dags/{ENDED}/dagRuns/{run['dag_run_id']}")["note"]
    assert "landed 0 messages" in note and "**0 messages in [2026-10-31T00:00:00Z" in note, note

    # `end: 2026-11-03`, and a run now (after it) given its window as params: its tasks run
    window = {"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}
    af.cli("dags", "test", ENDED, "-c", json.dumps(window), *LAND_ONLY, timeout=300)
    run = harness.run_of(ENDED, conf=window)
    assert run["state"] == "success"
    assert af.task_states(ENDED, run["dag_run_id"]) == {t: "success" for t in STAGES}
    manifests = list((harness.lakes[ENDED] / "raw" / "ended").glob(f"*/interval={_pipeline_run_id(DAYS[0])}/_manifest.json"))
    assert len(manifests) == 3 and sum(json.loads(m.read_text())["totals"]["records"] for m in manifests) > 0
    _timed("airflow dags test of land: a day without data, a window after the end", started)


# ---- a backfill equals the same intervals run one by one ------------------------------------------------
def _tables(lake: Path, namespace: str) -> dict[str, dict]:
    """Every Iceberg table of the namespace (state and history): its rows (sorted) and current snapshot."""
    from jobs.iceberg.catalog import open_catalog
    from jobs.lake.layout import Lake
    from jobs.model.properties import TABLE_ID_PROP

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


def test_the_readmes_backfill_is_the_documented_one():
    readme = (REPO / "README.md").read_text().replace("\\\n", " ")
    [command] = [shlex.split(line.strip()) for line in readme.splitlines() if line.strip().startswith("airflow backfill")]
    flags = lambda argv: [a for a in argv if a.startswith("--")]  # noqa: E731
    assert flags(command[1:]) == flags(_documented("backfill", "create"))


def test_backfill_gives_the_state_of_the_same_intervals_run_one_by_one(harness):
    af, started = harness.af, time.monotonic()
    run = harness.trigger_serial(DAYS[2], note="Re-run after the source's fix (ticket 42)")
    assert run["task_states"] == {t: "success" for t in STAGES}, run
    assert _interval(run) == _window(DAYS[2])  # a logical date through the REST API: the interval ending there
    # the land task's note comes first; the one the run was triggered with stays below it
    note = run["note"]
    assert note.startswith("run 20261103T000000Z_20261104T000000Z covers [") and \
        note.endswith("\n\nRe-run after the source's fix (ticket 42)"), note
    _timed("REST run 2026-11-03", started)

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
    run_id = harness.serial_runs[DAYS[1]]["dag_run_id"]  # 2026-11-02: a day with data, re-run after -03 published
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
    secrets = [SMTP_PASSWORD, *af.secrets()]
    assert len(secrets) == 4  # the API secret key, the JWT secret and the Fernet key of airflow.cfg
    for envelope in inbox.envelopes:  # the failure email and the data-quality alerts of the other pipelines
        raw = envelope.original_content.decode(errors="replace")
        text = "\n".join(str(part.get_content()) for part in
                         email.message_from_bytes(envelope.original_content, policy=policy.default).walk()
                         if not part.is_multipart())
        for secret in secrets:
            assert secret not in raw and secret not in text
    assert SMTP_PASSWORD not in log
    _timed("failure email checked", started)
