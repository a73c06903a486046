"""Airflow 3.3 as its users run it: real services on 127.0.0.1, driven through the REST API, the
command line and the UI in headless Chromium.

    with airflow_service(tmp_path, env={"CDC_PIPELINES_DIR": ...}, connections={...}) as af:
        af.wait_for_dags(["cdc_demo"])
        af.rest("POST", "/api/v2/dags/cdc_demo/dagRuns", {...})
        af.wait_for_run("cdc_demo", run_id, timeout=300)
        af.cli("backfill", "create", "--dag-id", "cdc_demo", ...)
        af.screenshot(af.url("/dags"), png)

What runs is the local Airflow of ``make airflow`` (jobs/airflow/local.py, its ``start`` and ``stop``):
``airflow db migrate``, ``airflow dags reserialize``, then ``airflow api-server`` (UI + REST API + the
Execution API the task runners call), ``airflow scheduler`` (LocalExecutor), ``airflow dag-processor`` and
``airflow triggerer``, each a process of its own session with its log in ``<tmp>/airflow/logs/<name>.log``,
stopped by its PID (and then its own process group: the task runners and spark-submit JVMs it started).
The tests add only what :func:`service_settings` says.

- **Metadata database: PostgreSQL** (tests/support/databases.py's ``postgres_server``). Airflow 3.3 does accept
  SQLite with the LocalExecutor (the SequentialExecutor is gone; ``airflow standalone`` runs LocalExecutor on
  SQLite), but SQLite has one writer: with the scheduler, dag-processor, triggerer and api-server all writing,
  ``airflow backfill create`` failed here with ``sqlite3.OperationalError: database is locked`` (Airflow's own
  backfill API says backfills are "not supported on SQLite under concurrent access"). ``database="sqlite"``
  (the local Airflow's default) remains for a service that only parses and triggers.
- **Auth: SimpleAuthManager with ``simple_auth_manager_all_admins``.** Every request is an admin (a
  middleware adds the token), so the REST API v2 and the UI both work without a login page; ``token()``
  still takes one from ``GET /auth/token`` and ``rest()`` sends it, as a client would.
- **Connections** come from ``AIRFLOW_CONN_*`` environment variables (``connections``: id -> JSON).
- **Fast and small for tests**: the scheduler creates no runs of its own (``use_job_schedule=False``: only
  triggered runs and backfills, so a DAG starting months ago does not start a catch-up run on unpause);
  DAGs are unpaused at creation unless their file says ``paused``; the dag-processor rescans every few
  seconds; ``parallelism=2`` (two cores, Spark jobs).
"""
from __future__ import annotations

import configparser
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.airflow import local as airflow_local
from jobs.airflow.local import SERVICES
from tests.support.servers import LOCALHOST, ServerStartError, free_port

FINISHED = ("success", "failed")
VENV_BIN = Path(sys.executable).parent


class AirflowError(RuntimeError):
    """A REST call or CLI command answered something unexpected; carries the answer and log tails."""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise ServerStartError("headless Chromium is not installed (apt-get install chromium; make setup-dev does)")
    return found


@dataclass
class AirflowService:
    home: Path
    port: int
    env: dict[str, str]
    _token: str | None = None

    # ---- addresses and logs ----------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def log_path(self, name: str) -> Path:
        return self.home / "logs" / f"{name}.log"

    def log_tail(self, name: str, limit: int = 3000) -> str:
        try:
            return self.log_path(name).read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def logs(self, limit: int = 1500) -> str:
        """The tail of every service's log, for an assertion message."""
        return "\n".join(f"---- {name} ----\n{self.log_tail(name, limit)}" for name in SERVICES)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """A task try's log as the API serves it (text), for assertion messages."""
        try:
            answer = self.rest("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/"
                               f"{try_number}?full_content=true")
        except AirflowError as exc:
            return str(exc)
        content = answer.get("content") if isinstance(answer, dict) else answer
        if isinstance(content, list):
            return "\n".join(_log_line(line) for line in content)
        return str(content)

    def task_log_events(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> list[dict]:
        """A task try's structured log lines (``event``, ``logger``, ``level``...) as the API serves them."""
        answer = self.rest("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/"
                           f"{try_number}?full_content=true")
        content = answer.get("content") if isinstance(answer, dict) else answer
        return [line for line in content if isinstance(line, dict)] if isinstance(content, list) else []

    def check_alive(self) -> None:
        dead = sorted(set(SERVICES) - set(airflow_local.running_services(self.home)))
        if dead:
            raise ServerStartError(f"Airflow services exited: {dead}\n{self.logs()}")

    def listening(self) -> set[str]:
        """``address:port`` of every TCP socket an Airflow process of the services' process groups listens on
        (Linux /proc: the sockets of their open files, found in /proc/net/tcp and tcp6); the Spark JVMs their
        tasks start are not Airflow's."""
        groups = {airflow_local.service_pid(self.home, name) for name in SERVICES} - {None}
        inodes: set[str] = set()
        for proc in Path("/proc").iterdir():
            fields = airflow_local.process_stat(int(proc.name)) if proc.name.isdigit() else None
            with contextlib.suppress(OSError):
                if not fields or int(fields[2]) not in groups or (proc / "comm").read_text().strip() == "java":
                    continue
                inodes |= _socket_inodes(proc)
        found = set()
        for table in ("tcp", "tcp6"):
            for row in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                    found.add(_address(cols[1]))
        return found

    def secrets(self) -> list[str]:
        """The secrets Airflow generated in its airflow.cfg (shared by every service): never in a log or mail."""
        cfg = configparser.RawConfigParser()
        cfg.read(self.home / "airflow.cfg")
        return [cfg.get(section, key) for section, key in
                (("api", "secret_key"), ("api_auth", "jwt_secret"), ("core", "fernet_key"))
                if cfg.get(section, key, fallback="")]

    # ---- REST API v2 -------------------------------------------------------------------------------
    def token(self) -> str:
        """A JWT from ``GET /auth/token`` (all-admins mode issues one without credentials)."""
        if self._token is None:
            self._token = self._request("GET", "/auth/token", None, auth=False)["access_token"]
        return self._token

    def rest(self, method: str, path: str, json_body: Any = None, *, ok: Iterable[int] = (200, 201, 204)) -> Any:
        """One REST call with the bearer token; the decoded JSON answer (None when empty)."""
        return self._request(method, path, json_body, auth=True, ok=tuple(ok))

    def _request(self, method: str, path: str, json_body: Any, *, auth: bool, ok: tuple[int, ...] = (200, 201, 204)):
        data = None if json_body is None else json.dumps(json_body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        request = urllib.request.Request(self.url(path), data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:  # noqa: S310 - our own local server
                status, body = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        if status not in ok:
            raise AirflowError(f"{method} {path} -> {status}: {body[:2000].decode(errors='replace')}")
        return json.loads(body) if body.strip() else None

    def dag_ids(self) -> list[str]:
        answer = self.rest("GET", "/api/v2/dags?limit=1000")
        return sorted(d["dag_id"] for d in answer["dags"])

    def wait_for_dags(self, dag_ids: Iterable[str], timeout: float = 120.0) -> list[str]:
        """Until the dag-processor has parsed every one of ``dag_ids``; returns all DAG ids then."""
        wanted = set(dag_ids)
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            present = self.dag_ids()
            if wanted <= set(present):
                return present
            if time.monotonic() > deadline:
                errors = self.rest("GET", "/api/v2/importErrors")
                raise AirflowError(f"DAGs {sorted(wanted - set(present))} not parsed after {timeout}s "
                                   f"(present: {present}; import errors: {json.dumps(errors)[:3000]})\n"
                                   f"{self.log_tail('dag-processor')}")
            time.sleep(1.0)

    def trigger(self, dag_id: str, run_id: str, logical_date: str, conf: Mapping[str, Any] | None = None,
                note: str | None = None) -> dict:
        """``POST /api/v2/dags/{id}/dagRuns``: a manual run with this id, logical date, conf and note."""
        return self.rest("POST", f"/api/v2/dags/{dag_id}/dagRuns",
                         {"dag_run_id": run_id, "logical_date": logical_date, "conf": dict(conf or {}), "note": note})

    def dag_runs(self, dag_id: str) -> list[dict]:
        return self.rest("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=logical_date")["dag_runs"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        answer = self.rest("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100")
        return {ti["task_id"]: ti["state"] for ti in answer["task_instances"]}

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict:
        return self.rest("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 600.0, poll: float = 2.0) -> dict:
        """Until the run is success or failed; returns the run (with ``task_states`` added)."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            run = self.rest("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in FINISHED:
                run["task_states"] = self.task_states(dag_id, run_id)
                return run
            if time.monotonic() > deadline:
                raise AirflowError(f"run {dag_id}/{run_id} still {run['state']} after {timeout}s: "
                                   f"{self.task_states(dag_id, run_id)}\n{self.logs()}")
            time.sleep(poll)

    def wait_for_runs(self, dag_id: str, count: int, timeout: float = 900.0, poll: float = 3.0) -> list[dict]:
        """Until the DAG has ``count`` runs, all finished (a backfill's); returns them by logical date."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            runs = self.dag_runs(dag_id)
            if len(runs) >= count and all(r["state"] in FINISHED for r in runs):
                return runs
            if time.monotonic() > deadline:
                raise AirflowError(f"{dag_id}: runs {[(r['dag_run_id'], r['state']) for r in runs]} after "
                                   f"{timeout}s (wanted {count} finished)\n{self.logs()}")
            time.sleep(poll)

    # ---- the command line ----------------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 180.0, check: bool = True) -> subprocess.CompletedProcess:
        """``airflow <args>`` with the services' environment (the CLI talks to the metadata database)."""
        done = subprocess.run([str(VENV_BIN / "airflow"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if check and done.returncode:
            raise AirflowError(f"airflow {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
                               f"{done.stderr[-3000:]}")
        return done

    # ---- the UI in headless Chromium ---------------------------------------------------------------
    def _browse(self, url: str, *args: str, budget_ms: int = 20000) -> subprocess.CompletedProcess:
        profile = tempfile.mkdtemp(prefix="chromium-")
        try:
            # the UI is a single-page app: a virtual time budget lets its scripts fetch and render the page
            # before the screenshot or the DOM dump is taken
            return subprocess.run(
                [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                 "--window-size=1400,900", *args, url],
                capture_output=True, text=True, timeout=180, check=True)
        finally:
            shutil.rmtree(profile, ignore_errors=True)

    def screenshot(self, url: str, png_path: Path) -> Path:
        """A PNG of the page as a user sees it (all-admins mode: no login page in the way)."""
        png_path = Path(png_path)
        png_path.parent.mkdir(parents=True, exist_ok=True)
        self._browse(url, f"--screenshot={png_path}")
        if not png_path.is_file():
            raise AirflowError(f"chromium wrote no screenshot of {url}")
        return png_path

    def dump_dom(self, url: str) -> str:
        """The page's DOM after its scripts ran (``chromium --dump-dom``)."""
        return self._browse(url, "--dump-dom").stdout


def _address(hex_address: str) -> str:
    """/proc/net/tcp's ``0100007F:1F90`` as ``127.0.0.1:8080`` (IPv6: ``[::]:8793``, ``[::1]:...``)."""
    import ipaddress

    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # the kernel prints each 32-bit word in host (little-endian) order
    packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(packed)
    return f"{ip}:{int(port, 16)}" if ip.version == 4 else f"[{ip}]:{int(port, 16)}"


def _log_line(line: Any) -> str:
    """One structured log line as text: its event, and the exception of a failure (type and message)."""
    if not isinstance(line, dict):
        return str(line)
    text = str(line.get("event", ""))
    for error in line.get("error_detail") or []:
        text += f"\n{error.get('exc_type')}: {error.get('exc_value')}"
    return text


# ---- starting and stopping: through jobs/airflow/local.py, as `make airflow` does ---------------
def service_settings(connections: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """What the tests set beyond the local Airflow's own settings: speed on two cores, no runs of the
    scheduler's own, DAGs unpaused at creation unless their file says otherwise, the connections."""
    settings = {
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "2",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
        "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "2",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # small Spark jobs on two cores (jobs.spark.session)
        "CDC_SHUFFLE_PARTITIONS": "2",
        "CDC_SPARK_ADAPTIVE": "false",  # as tests/conftest.py: no re-planning at every shuffle of tiny data
        "CDC_JIT": "c1",
    }
    for conn_id, value in connections.items():
        settings[f"AIRFLOW_CONN_{conn_id.upper()}"] = value
    settings.update(extra)
    return settings


def _test_process_env() -> dict[str, str]:
    """The test process's environment without what would reach into the services from outside the test."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("AIRFLOW_", "AIRFLOW__", "CDC_", "SMTP_", "PYSPARK_", "SPARK_"))}


@contextlib.contextmanager
def _database(kind: str) -> Iterator[str | None]:
    if kind == "sqlite":
        yield None  # the local Airflow's own: SQLite in its home
    elif kind == "postgres":
        from tests.support.databases import postgres_server

        with postgres_server() as url:
            yield url
    else:
        raise ValueError(f"database {kind!r}: sqlite or postgres")


@contextlib.contextmanager
def airflow_service(tmp: Path, *, connections: Mapping[str, str] | None = None,
                    env: Mapping[str, str] | None = None, database: str = "postgres",
                    timeout: float = 180.0) -> Iterator[AirflowService]:
    """The local Airflow of ``make airflow`` (jobs/airflow/local.py) on a free port, AIRFLOW_HOME in
    ``tmp/airflow``, with the tests' settings; stopped on exit."""
    home = Path(tmp) / "airflow"
    started = time.monotonic()
    with _database(database) as database_url:
        port = free_port()
        try:
            local = airflow_local.start(home, port, database_url, service_settings(connections or {}, env or {}),
                                        base_env=_test_process_env(), timeout=timeout)
        except airflow_local.AirflowStartError as exc:
            raise ServerStartError(f"{exc}\n{exc.details}") from None
        print(f"[airflow] services healthy on port {port} ({database}): {time.monotonic() - started:.1f}s", flush=True)
        try:
            yield AirflowService(local.home, local.port, local.env)
        finally:
            airflow_local.stop(local.home)


def _socket_inodes(proc: Path) -> set[str]:
    """The socket inodes of a process's open files. Each descriptor is read on its own: one closed between the
    listing and its read (a request's connection) must not hide the process's other sockets."""
    inodes = set()
    for fd in (proc / "fd").iterdir():
        with contextlib.suppress(OSError):
            link = os.readlink(fd)
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    return inodes
