"""A local Airflow that runs this repository's pipelines, bound to 127.0.0.1 (``make airflow``).

    .venv/bin/python -m jobs.airflow.local start [--port 8080] [--home build/airflow] [--db URL]
    source build/airflow/env.sh          # then `airflow ...` commands in that shell talk to it
    .venv/bin/python -m jobs.airflow.local stop [--home build/airflow]
    .venv/bin/python -m jobs.airflow.local status [--home build/airflow]

``start`` does what a new user otherwise has to find out one by one:

- ``AIRFLOW_HOME`` in ``build/airflow`` (ignored by git); Airflow writes its ``airflow.cfg`` there on
  first use, with secrets of its own that every service shares;
- ``airflow db migrate`` of the metadata database: SQLite in ``AIRFLOW_HOME`` unless ``--db`` (or
  ``$CDC_AIRFLOW_DB``) gives a SQLAlchemy URL; SQLite has one writer, so ``airflow backfill create`` beside
  a running scheduler can fail with "database is locked": PostgreSQL does not;
- the DAGs folder ``dags/``, the plugins folder ``plugins/`` (the pipelines' timetable) and the
  repository on ``PYTHONPATH``, then ``airflow dags reserialize``: the DAGs are listed when the UI opens;
- the connection ``spark_default`` as local Spark (``local[*]``) unless ``$AIRFLOW_CONN_SPARK_DEFAULT``
  gives one;
- SimpleAuthManager with every user an admin: the UI and the REST API need no login (a local Airflow
  only; never on a shared machine);
- ``airflow api-server`` on 127.0.0.1 and the port given, and the Execution API URL its tasks call on
  that port; ``scheduler`` (LocalExecutor), ``dag-processor`` and ``triggerer`` without their log servers,
  which would bind every interface (0.0.0.0:8793 and :8794, clashing with another Airflow): the
  api-server reads the task logs from ``AIRFLOW_HOME/logs`` itself.

Each service runs in a session of its own, its log in ``AIRFLOW_HOME/logs/<service>.log`` and its PID in
``AIRFLOW_HOME/run/<service>.pid``; ``stop`` ends each by that PID, then what is left of its own process
group (the task runners and spark-submit JVMs it started). The Airflow service test
(tests/support/airflow_service.py) starts and stops Airflow through :func:`start` and :func:`stop`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jobs import env as environ

REPO = Path(__file__).resolve().parents[2]  # the checkout this launcher serves
DEFAULT_HOME = REPO / "build" / "airflow"
DEFAULT_PORT = 8080
HOST = "127.0.0.1"
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
VENV_BIN = Path(sys.executable).parent  # airflow and spark-submit
HEALTHY = ("scheduler", "dag_processor", "triggerer")
SPARK_LOCAL = json.dumps({"conn_type": "spark", "host": "local[*]"})


class AirflowStartError(RuntimeError):
    """A service exited or did not become healthy: one line naming it and its log; ``details``, the tails
    of the services' logs."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


@dataclass(frozen=True)
class LocalAirflow:
    home: Path
    port: int
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


def airflow_env(home: Path, port: int, database_url: str | None = None, settings: Mapping[str, str] | None = None,
                base_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every service, task and ``airflow`` command of the local Airflow: the shell's
    (``base_env``, default ``os.environ``) without another Airflow's home and settings, then this
    Airflow's, then ``settings`` (e.g. ``AIRFLOW__...`` overrides, ``AIRFLOW_CONN_...`` connections)."""
    base = environ.environment() if base_env is None else base_env
    inherited = {k: v for k, v in base.items() if not k.startswith("AIRFLOW__") and k != "AIRFLOW_HOME"}
    url = f"http://{HOST}:{port}"
    env = {
        **inherited,
        "AIRFLOW_HOME": str(home),
        "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [inherited.get("PYTHONPATH")])]),
        "PATH": f"{VENV_BIN}{os.pathsep}{inherited.get('PATH', '')}",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database_url or f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__API__HOST": HOST,
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "GX_ANALYTICS_ENABLED": inherited.get("GX_ANALYTICS_ENABLED", "false"),
        "AIRFLOW_CONN_SPARK_DEFAULT": inherited.get("AIRFLOW_CONN_SPARK_DEFAULT", SPARK_LOCAL),
    }
    env.update(settings or {})
    return env


def service_argv(name: str, port: int) -> list[str]:
    """The command of one service: nothing of it listens beyond 127.0.0.1."""
    argv = [str(VENV_BIN / "airflow"), name]
    if name == "api-server":
        argv += ["--host", HOST, "--port", str(port)]
    if name in ("scheduler", "triggerer"):
        argv.append("--skip-serve-logs")  # the log server binds every interface; the api-server reads the files
    return argv


def airflow(env: Mapping[str, str], *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    """``airflow <args>`` in the local Airflow's environment."""
    return subprocess.run([str(VENV_BIN / "airflow"), *args], env=dict(env), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def prepare(home: Path, env: Mapping[str, str]) -> None:
    """``airflow db migrate``, then ``airflow dags reserialize``; each one's output in ``logs/``."""
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for name, args in (("db-migrate", ("db", "migrate")), ("dags-reserialize", ("dags", "reserialize"))):
        done = airflow(env, *args)
        (logs / f"{name}.log").write_text(done.stdout + done.stderr)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise AirflowStartError(f"airflow {' '.join(args)} exited {done.returncode}: {last} (log: "
                                    f"{logs / name}.log)", done.stderr[-3000:])


def start(home: Path = DEFAULT_HOME, port: int = DEFAULT_PORT, database_url: str | None = None,
          settings: Mapping[str, str] | None = None, base_env: Mapping[str, str] | None = None,
          timeout: float = 180.0) -> LocalAirflow:
    """Prepare the home, start the four services and wait until the api-server reports them healthy."""
    home = Path(home).resolve()
    running = running_services(home)
    if running:
        raise AirflowStartError(f"Airflow of {home} is already running ({', '.join(running)}): "
                                f"stop it first (python -m jobs.airflow.local stop --home {home})")
    local = LocalAirflow(home, port, airflow_env(home, port, database_url, settings, base_env))
    prepare(home, local.env)
    write_env_file(local)
    (home / "run").mkdir(exist_ok=True)
    try:
        for name in SERVICES:
            _start_service(local, name)
        wait_until_healthy(local, timeout)
    except BaseException:
        stop(home)
        raise
    return local


def _start_service(local: LocalAirflow, name: str) -> None:
    with open(local.home / "logs" / f"{name}.log", "wb") as log:
        # a session of its own: its children (task runners, spark-submit) share its process group
        proc = subprocess.Popen(service_argv(name, local.port), env=local.env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    _pid_file(local.home, name).write_text(f"{proc.pid} {_start_time(proc.pid)}")


def _pid_file(home: Path, name: str) -> Path:
    return Path(home) / "run" / f"{name}.pid"


def process_stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state first), None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    fields = process_stat(pid)
    return fields[19] if fields else None  # starttime: with the PID, names one process for good


def service_pid(home: Path, name: str) -> int | None:
    """The PID of the service's PID file while that very process runs (the PID file also holds its start
    time, so a PID reused by another process is never taken for it)."""
    try:
        pid_text, started = _pid_file(home, name).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    return pid if _start_time(pid) == started and _alive(pid) else None


def running_services(home: Path) -> list[str]:
    return [name for name in SERVICES if service_pid(home, name) is not None]


def log_tails(home: Path, limit: int = 1500) -> str:
    """The tail of every service's log, for an error message."""
    parts = []
    for name in SERVICES:
        with contextlib.suppress(OSError):
            text = (Path(home) / "logs" / f"{name}.log").read_text(errors="replace")
            parts.append(f"---- {name} ----\n{text[-limit:]}")
    return "\n".join(parts)


def health(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/api/v2/monitor/health", timeout=5) as resp:  # noqa: S310
            return json.loads(resp.read())
    except Exception:  # noqa: BLE001 - not up yet
        return None


def wait_until_healthy(local: LocalAirflow, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        dead = [name for name in SERVICES if service_pid(local.home, name) is None]
        if dead:
            raise AirflowStartError(f"Airflow's {', '.join(dead)} exited at start; see "
                                    f"{local.home / 'logs' / dead[0]}.log", log_tails(local.home))
        answer = health(local.port) or {}
        if all((answer.get(part) or {}).get("status") == "healthy" for part in HEALTHY):
            return
        if time.monotonic() > deadline:
            raise AirflowStartError(f"Airflow not healthy on {local.url} after {timeout:.0f}s ({answer}); see "
                                    f"{local.home / 'logs'}", log_tails(local.home))
        time.sleep(0.5)


def stop(home: Path = DEFAULT_HOME, grace_seconds: float = 20.0) -> list[str]:
    """Stop each service by its PID, then what is left of its process group; returns the services stopped."""
    home = Path(home).resolve()
    stopped = []
    for name in ("scheduler", "triggerer", "dag-processor", "api-server"):  # the api-server last: tasks call it
        pid = service_pid(home, name)
        if pid is not None:
            _end(pid, grace_seconds)
            stopped.append(name)
        with contextlib.suppress(OSError):
            _pid_file(home, name).unlink()
    return stopped


def _end(pid: int, grace_seconds: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # its own group (a session of its own): the service and its children


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our child (the test's), now reaped
            return False
    fields = process_stat(pid)
    return fields is not None and fields[0] != "Z"


def write_env_file(local: LocalAirflow) -> Path:
    """``AIRFLOW_HOME/env.sh``: the settings an ``airflow`` command in a shell needs to use this Airflow
    (no secret: those are in its airflow.cfg)."""
    keys = sorted(k for k in local.env if k.startswith("AIRFLOW__") or k in ("AIRFLOW_HOME", "PYTHONPATH", "PATH"))
    if local.env.get("AIRFLOW_CONN_SPARK_DEFAULT") == SPARK_LOCAL:  # its own: no secret in it
        keys.append("AIRFLOW_CONN_SPARK_DEFAULT")
    lines = [f"export {k}={shlex.quote(local.env[k])}" for k in keys]
    path = local.home / "env.sh"
    path.write_text("# source this file: airflow commands then use the local Airflow (jobs/airflow/local.py)\n"
                    + "\n".join(lines) + "\n")
    path.chmod(0o600)  # a --db URL may hold a password
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.airflow.local", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--home", type=Path, default=Path(environ.text("CDC_AIRFLOW_HOME") or DEFAULT_HOME))
    parser.add_argument("--port", type=int, default=int(environ.text("CDC_AIRFLOW_PORT") or DEFAULT_PORT))
    parser.add_argument("--db", default=environ.text("CDC_AIRFLOW_DB") or None, metavar="URL",
                        help="SQLAlchemy URL of the metadata database (default: SQLite in the home)")
    args = parser.parse_args(argv)
    if args.command == "stop":
        stopped = stop(args.home)
        print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return 0
    if args.command == "status":
        running = running_services(args.home)
        print(f"running: {', '.join(running) or 'nothing'}")
        return 0 if running else 3
    try:
        local = start(args.home, args.port, args.db)
    except AirflowStartError as exc:
        print(f"airflow_local: error: {exc}", file=sys.stderr)
        return 1
    print(f"Airflow is up: {local.url} (no login). Logs: {local.home / 'logs'}\n"
          f"In a shell: source {local.home / 'env.sh'}; then e.g. airflow dags list\n"
          f"Stop: make airflow-stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
