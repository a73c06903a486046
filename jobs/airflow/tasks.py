"""Everything the pipelines' DAGs run, so that the DAG files only wire tasks (jobs.airflow.dags).

Light at import (standard library, jobs.config and jobs.settings only; Airflow, pyarrow and pyspark are
imported inside the functions that need them): the DAG processor imports this module on every parse.

A task gets its pipeline's file (``pipeline_file``) and the run's interval (``start`` and ``end``, which
``land`` resolves: the only XComs, no setting among them), and makes the run's settings of them where it runs
(jobs.settings.RunSettings.from_pipeline), so a fix to a file reaches the next try. The transform task's
spark-submit gets the same three (``transform --pipeline-file FILE --start S --end E``). Secrets stay in
Airflow connections: Kafka (apache-kafka provider), the source database (common-sql hooks), SMTP (smtp
provider), Spark (apache-spark provider).

The run id is the interval, ``20261101T000000Z_20261102T000000Z``: a re-run or a backfill of an
interval reuses it, and every stage is idempotent for a run id.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from jobs.config import PipelineConfig, load_pipeline
from jobs.land.outside import combine, quiet_interval_warning
from jobs.model.intervals import IntervalError, checked, iso, run_id_for, utc
from jobs.settings import RunSettings

LAND_TASK = "land"
TRANSFORM_TASK = "transform"  # decode -> fold + publish -> validate: the one Spark application of a run
AIRFLOW_INTERVAL_HINT = ("An Airflow run covers the interval that ends at its logical date (`airflow dags test "
                         "<dag> <date>` too); params start and end choose another.")

log = logging.getLogger(__name__)


class AlertNotSent(RuntimeError):
    """Problems were found and recipients are set, but the email could not be sent."""


def dag_params() -> dict[str, Any]:
    """The DAG's params: a window of the run's own, instead of its data interval."""
    from airflow.sdk import Param

    return {
        "start": Param("", type="string", title="Interval start",
                       description="ISO-8601, e.g. 2026-11-01T00:00:00Z; empty: the run's data interval, which for "
                       "a run with a logical date is the interval that ends at that date, and which a run "
                       "without one does not have: give start and end."),
        "end": Param("", type="string", title="Interval end",
                     description="ISO-8601, exclusive; empty: the run's data interval"),
    }


# ---- interval and run id (jobs.model.intervals) -------------------------------------------------------
def resolve_interval(params: Mapping[str, Any] | None, data_interval_start: Any,
                     data_interval_end: Any) -> tuple[datetime, datetime]:
    """The run's window [start, end): params ``start`` and ``end`` together (manual runs, or any
    window), else the run's data interval. Empty or inverted windows are refused: they land nothing."""
    params = params or {}
    start_param, end_param = (str(params.get(k) or "").strip() for k in ("start", "end"))
    if start_param or end_param:
        if not (start_param and end_param):
            raise IntervalError("give both params start and end, or neither (to use the data interval)")
        start, end = utc(start_param, "start"), utc(end_param, "end")
    elif data_interval_start is None or data_interval_end is None:
        raise IntervalError("the run has no data interval (triggered without a logical date): give params start "
                            "and end")
    else:
        start, end = utc(data_interval_start, "start"), utc(data_interval_end, "end")
    if end <= start:
        raise IntervalError(
            f"empty interval {start.isoformat()} .. {end.isoformat()}: a manual run needs params start and end"
        )
    return checked(start, end)



def interval_origin(params: Mapping[str, Any] | None, run_type: Any, logical_date: Any,
                    data_interval_end: Any = None) -> str:
    """Where a run's interval comes from, in words (the land task's first log line and the run's note)."""
    if any(str((params or {}).get(k) or "").strip() for k in ("start", "end")):
        return "from params start and end"
    kind = str(getattr(run_type, "value", run_type) or "")
    at = iso(utc(logical_date)) if logical_date is not None else None
    if kind == "scheduled":
        return "the scheduled data interval"
    if kind == "backfill" and at:
        return f"the data interval of a backfill's run at logical date {at} (the interval that starts there)"
    if kind == "manual" and at and data_interval_end is not None and utc(data_interval_end) <= utc(logical_date):
        return (f"the data interval Airflow gives a manual run at logical date {at}: the interval of the schedule "
                "that ends at or before that date (`airflow dags test <dag> <date>` covers the interval that ends "
                "at <date>); params start and end choose another")
    if kind == "manual" and at:
        return (f"the data interval Airflow gave this manual run, which does not end at its logical date {at} "
                "(`airflow dags trigger --logical-date` takes the interval before the time of the trigger); "
                "params start and end choose another")
    return "the run's data interval"


def covers_text(start: datetime, end: datetime, origin: str) -> str:
    return f"run {run_id_for(start, end)} covers [{iso(start)}, {iso(end)}): {origin}"


# ---- what land hands on: the interval, and what it landed -----------------------------------------
def run_settings(pipeline_file: str, start: str, end: str) -> RunSettings:
    """The settings of the run of ``pipeline_file`` over [start, end) (land's XComs), from the file as it is."""
    return RunSettings.from_pipeline(load_pipeline(pipeline_file), (utc(start, "start"), utc(end, "end")))


def transform_args(pipeline_file: str, start: Any, end: Any) -> list[Any]:
    """Arguments of ``jobs/cli.py transform``: the file and the interval (land's XComs), of which the driver
    makes the run's settings; it reads the folders landed for the interval, never another one beside them."""
    return [TRANSFORM_TASK, "--pipeline-file", pipeline_file, "--start", start, "--end", end]


@dataclass(frozen=True)
class Landed:
    """What land brought for a run: one folder per topic, their messages, and what the source holds outside
    the interval (jobs.land.outside)."""

    run_id: str
    start: str
    end: str
    topics: tuple[str, ...]
    folders: tuple[str, ...]
    messages: int
    outside: dict[str, Any] | None = None
    totals: tuple[Mapping[str, int], ...] = ()  # each topic's manifest totals: records, bytes, files

    def window(self) -> dict[str, str]:
        """land's XComs (``multiple_outputs``): the interval the later tasks make the run's settings of."""
        return {"start": self.start, "end": self.end}


def landed(start: datetime, end: datetime, manifests: list[Mapping[str, Any]],
           lake_join: Callable[[str], str]) -> Landed:
    """What the manifests of a landing say; ``lake_join`` turns a lake-relative folder into a full path."""
    if not manifests:
        raise ValueError("nothing was landed: no topic found (check the source block's topics and location)")
    ordered = sorted(manifests, key=lambda m: m["topic"])
    return Landed(run_id=run_id_for(start, end), start=iso(start), end=iso(end),
                  topics=tuple(m["topic"] for m in ordered), folders=tuple(lake_join(m["path"]) for m in ordered),
                  messages=sum(int(m["totals"]["records"]) for m in ordered),
                  outside=combine(m.get("outside") for m in ordered), totals=tuple(m["totals"] for m in ordered))


# ---- task callables ------------------------------------------------------------------------------
def land_interval(cfg: PipelineConfig, start: datetime, end: datetime) -> Landed:
    """Land [start, end) of every topic of the pipeline's source (jobs.land.command, as the command line)."""
    from jobs.lake.layout import Lake, check_name
    from jobs.land.command import TopicSource, land_source

    check_name("pipeline", cfg.name)
    lake = Lake.at(cfg.sink.lake, cfg.sink.catalog)
    lake.check_usable()
    s = cfg.source
    if s.kafka is not None:
        source = TopicSource("kafka", s.kafka.bootstrap, tuple(s.kafka.topics), s.kafka.connection)
    else:
        source = TopicSource(s.location, getattr(s, s.location), tuple(s.topics))
    return landed(start, end, land_source(source, lake, cfg.name, start, end), lake.join)


def land(pipeline_file: str, params: Mapping[str, Any] | None = None, data_interval_start: Any = None,
         data_interval_end: Any = None, logical_date: Any = None, dag_run: Any = None,
         **_context: Any) -> dict[str, str]:
    """Airflow callable of the land task; returns its XComs, the run's interval (:meth:`Landed.window`). Its
    first log line says which interval the run covers and why; the run's note says it too, with what landed."""
    start, end = resolve_interval(params, data_interval_start, data_interval_end)
    origin = interval_origin(params, getattr(dag_run, "run_type", None), logical_date, data_interval_end)
    covers = covers_text(start, end, origin)
    log.info(covers)
    cfg = load_pipeline(pipeline_file)
    run = land_interval(cfg, start, end)
    what = f"landed {run.messages} messages of {len(run.topics)} topics"
    log.info("%s for run %s", what, run.run_id)
    warning = quiet_interval_warning(run.start, run.end, run.messages, run.outside)
    if warning:
        warning += f" {AIRFLOW_INTERVAL_HINT}"
        log.warning(warning)
    if dag_run is not None:
        note_dag_run(dag_run, "\n\n".join(filter(None, [f"{covers}; {what}.", warning and f"**{warning}**"])))
    from jobs.metrics import AirflowStats, land_metrics, send_safely

    # once the landing succeeded, its last step: a retry sends them only if no earlier try did
    send_safely(AirflowStats(), land_metrics(cfg.name, run.topics, run.totals))
    return run.window()


# ---- the run's note ----------------------------------------------------------------------------------
API_CONNECTION = "airflow_api"  # optional: Airflow's REST API and a user allowed to edit DAG runs
NOTE_LIMIT = 1000  # characters Airflow keeps of a note


def note_dag_run(dag_run: Any, text: str) -> None:
    """Sets the DAG run's note through Airflow's REST API (a task may not write the metadata database), keeping
    a note someone else wrote below it. A note that cannot be set is a warning in the task's log, never a
    failure: the task's first log line says the same."""
    ours = text[:text.index(" covers [")] if " covers [" in text else text
    try:
        base, token = _api_session()
        url = f"{base}/api/v2/dags/{quote(dag_run.dag_id, safe='')}/dagRuns/{quote(dag_run.run_id, safe='')}"
        previous = _api_request("GET", url, token, None).get("note") or ""  # the task's context does not hold it
        if previous and not previous.startswith(ours):  # ours from an earlier try is replaced, not repeated
            text = f"{text[:max(0, NOTE_LIMIT - len(previous) - 2)]}\n\n{previous}"  # theirs kept whole
        _api_request("PATCH", url, token, {"note": text[:NOTE_LIMIT]})
    except Exception as exc:  # noqa: BLE001 - whatever fails here, the run goes on
        log.warning("the run's note was not set (%s: %s); connection %s names Airflow's REST API and a user who "
                    "may edit DAG runs", type(exc).__name__, exc, API_CONNECTION)


def _api_session() -> tuple[str, str]:
    """Airflow's REST API (connection ``airflow_api``: its host and a login; else ``[api] base_url``) and a
    token: a login's, or the one SimpleAuthManager gives anyone when every user is an admin (a local Airflow)."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(API_CONNECTION)
    except Exception:  # noqa: BLE001 - AirflowNotFoundException: no such connection
        conn = None
    if conn is not None and conn.host:
        scheme = conn.schema or "http"
        base = conn.host if "://" in conn.host else f"{scheme}://{conn.host}{f':{conn.port}' if conn.port else ''}"
    else:
        from airflow.configuration import conf

        base = conf.get("api", "base_url", fallback="http://localhost:8080")
    base = base.rstrip("/")
    if conn is not None and conn.login:
        _mask(conn.password)
        body = {"username": conn.login, "password": conn.password or ""}
        return base, _api_request("POST", f"{base}/auth/token", None, body)["access_token"]
    return base, _api_request("GET", f"{base}/auth/token", None, None)["access_token"]


def _api_request(method: str, url: str, token: str | None, body: Mapping[str, Any] | None) -> Any:
    import urllib.request

    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as resp:  # noqa: S310 - the deployment's own Airflow
        answer = resp.read()
    return json.loads(answer) if answer.strip() else None


def _run_context(settings: RunSettings):
    from jobs.stages import RunContext

    return RunContext.of(settings, progress=log.info)


def _mask(secret: str | None) -> None:
    """Keep a secret out of task logs (Airflow's masker); a no-op where Airflow is absent."""
    if not secret:
        return
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:
        return
    mask_secret(secret)


# connection types whose provider (and its hook) is not installed here: MySQL's needs mysqlclient, a C
# build; these get pure-Python drivers (requirements.txt)
_SQLALCHEMY_DRIVERS = {"mysql": "mysql+pymysql", "mariadb": "mariadb+pymysql", "mssql": "mssql+pymssql",
                       "oracle": "oracle+oracledb", "sqlite": "sqlite"}


def connection_sqlalchemy_url(conn: Any) -> str:
    """A SQLAlchemy URL from an Airflow connection: the one its provider's hook builds (common-sql's
    ``DbApiHook.sqlalchemy_url``: PostgreSQL, and any SQL provider installed); for a type without an
    installed SQL provider, built from the connection's fields (extra ``sqlalchemy_scheme`` picks a driver)."""
    from sqlalchemy.engine import URL

    extra = conn.extra_dejson or {}
    if not extra.get("sqlalchemy_scheme"):
        url = _hook_url(conn)
        if url is not None:
            return url
    driver = extra.get("sqlalchemy_scheme") or _SQLALCHEMY_DRIVERS.get(conn.conn_type, conn.conn_type)
    if driver.startswith("sqlite"):
        return f"sqlite:///{conn.host or conn.schema}"
    url = URL.create(driver, username=conn.login or None, password=conn.password or None,
                     host=conn.host or None, port=conn.port or None, database=conn.schema or None)
    return url.render_as_string(hide_password=False)


def _hook_url(conn: Any) -> str | None:
    try:
        from airflow.sdk.exceptions import AirflowException
    except ImportError:  # pragma: no cover - Airflow always ships it
        AirflowException = Exception  # noqa: N806
    try:
        hook = conn.get_hook()
    except (AirflowException, ImportError):  # no provider of this connection type is installed
        return None
    url = getattr(hook, "sqlalchemy_url", None)
    if url is None:  # a hook that is not a SQL hook
        return None
    return url.render_as_string(hide_password=False)


def source_counts_spec(value: str | None, get_connection: Callable[[str], Any] | None = None) -> str | None:
    """What ``jobs.reconcile.stage.source_checkpoints`` takes: ``conn:<id>`` becomes the connection's URL (its
    password masked in the task's log); a counts file's path stays as it is."""
    if not value:
        return None
    if value.startswith("conn:"):
        if get_connection is None:
            from airflow.sdk import BaseHook

            get_connection = BaseHook.get_connection
        conn = get_connection(value[len("conn:"):])
        _mask(conn.password)
        return connection_sqlalchemy_url(conn)
    return value


def reconcile(pipeline_file: str, start: str, end: str, **_context: Any) -> dict[str, Any]:
    """Airflow callable of the reconcile task: the source's checkpoints judged against the lake (no Spark);
    a checkpoint's wait is measured at the interval's end."""
    from jobs.reconcile.stage import BEHIND, MISMATCH
    from jobs.stages import run_reconcile

    settings = run_settings(pipeline_file, start, end)
    source = source_counts_spec(settings.reconcile.source_counts)  # read here, from the connection: never XCom
    rows = run_reconcile(_run_context(settings), source, settings.reconcile.options(settings.transform.fmt))
    mismatched = sorted(r.table for r in rows if r.status == MISMATCH)
    behind = sorted(r.table for r in rows if r.status == BEHIND)
    log.info("reconciled %d tables of run %s; mismatched: %s; behind: %s", len(rows), settings.run_id,
             ", ".join(mismatched) or "none", ", ".join(behind) or "none")
    return {"tables": len(rows), "mismatched": mismatched, "behind": behind}


def alert(pipeline_file: str, start: str, end: str, **_context: Any) -> dict[str, Any]:
    """Airflow callable of the alert task: one data-quality email when a check failed.

    Data-quality problems do not fail the task (they are the email's content); an email that
    should go out but cannot does, so that Airflow retries it and the failure is visible."""
    from jobs.alert.smtp import connection_settings
    from jobs.metrics import AirflowStats, send_safely
    from jobs.stages import run_alert, run_metrics_of

    settings = run_settings(pipeline_file, start, end)
    ctx = _run_context(settings)
    result = run_alert(ctx, list(settings.alert.to), settings.alert.quarantine_threshold,
                       smtp=lambda: connection_settings(settings.alert.smtp_connection, settings.alert.from_email))
    summary = {"sent": result.sent, "problems": len(result.reasons), "skipped": result.skipped, "error": result.error}
    log.info("alert of run %s: %s", settings.run_id, json.dumps(summary))
    if result.error:
        raise AlertNotSent(f"data-quality alert of run {settings.run_id} not sent: {result.error}")
    # the run's metrics through Airflow's own metrics path, every report of the run written; once (a
    # retry of an alert not sent would count its messages twice)
    send_safely(AirflowStats(), run_metrics_of(ctx))
    return summary


def expire(pipeline_file: str, start: str, end: str, **_context: Any) -> dict[str, Any]:
    """Airflow callable of the expire task: the tables' snapshots older than the retention before the
    interval's end go, with the files only they held (jobs.iceberg.expire; no Spark)."""
    from jobs.stages import run_expire

    settings = run_settings(pipeline_file, start, end)
    report = run_expire(_run_context(settings), settings.expire.as_of, *settings.expire.retention())
    summary = {"snapshots_expired": sum(t.snapshots_expired for t in report.tables),
               "bytes_deleted": sum(t.bytes_deleted for t in report.tables)}
    log.info("expired snapshots of run %s (committed before %s): %s", settings.run_id, report.older_than,
             json.dumps(summary))
    return summary


def published_tables(settings: RunSettings) -> list[dict[str, Any]]:
    """The tables the run committed a snapshot to, from its merge report: what its asset events name."""
    from jobs.model.reports import FoldReport

    report = _run_context(settings).read_report(FoldReport) or FoldReport()
    return [{"table": t, "iceberg_table": r.iceberg_table or t, "snapshot_id": r.snapshot_id, "rows": r.state_rows}
            for t, r in sorted(report.tables.items()) if r.snapshot_id is not None]


# ---- parse-time pieces of the DAG ----------------------------------------------------------------
ARCHIVE_MACRO = "cdc_jobs_archive"  # the DAG's macro of :func:`jobs_archive`


def spark_settings(cfg: PipelineConfig) -> dict[str, Any]:
    """SparkSubmitOperator's application, py_files, jars, conf, env_vars and packages for the pipeline
    (jobs.spark.submit): with ``spark.ship_package`` the driver and executors run the ``jobs`` archive, which
    ``py_files`` names through the DAG's macro :data:`ARCHIVE_MACRO`, rendered where the task runs (so a
    parse of the DAG builds none)."""
    from jobs.spark.submit import submit_settings

    settings = submit_settings(ship=cfg.spark.ship_package, executor_python=cfg.spark.executor_python,
                               conf=cfg.spark.conf, packages=cfg.spark.packages, build_archive=False)
    return {**settings, "py_files": f"{{{{ {ARCHIVE_MACRO}() }}}}" if cfg.spark.ship_package else None}


def jobs_archive() -> str:
    """The ``jobs`` archive for spark-submit's ``--py-files``, built on this machine once per code version
    (jobs.spark.submit.package_for_executors)."""
    from jobs.spark.submit import default_cache_dir, package_for_executors

    return package_for_executors(default_cache_dir())


def failure_notifiers(cfg: PipelineConfig) -> list[Any]:
    """An SmtpNotifier (the pipeline's SMTP connection) to its alert recipients when a task fails for good
    (on_failure_callback: once, not per try); none without recipients. Building it contacts no server."""
    if not (cfg.alert.to and cfg.alert.on_task_failure):
        return []
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    # no sender given: the notifier takes the connection's, as the data-quality email does
    return [SmtpNotifier(to=list(cfg.alert.to), from_email=cfg.alert.from_email or None,
                         smtp_conn_id=cfg.alert.smtp_connection)]
