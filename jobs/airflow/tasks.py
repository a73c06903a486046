"""Everything the pipelines' DAGs run, so that the DAG files only wire tasks (jobs.airflow.dags).

Light at import (standard library and jobs.config only; Airflow, pyarrow and pyspark are
imported inside the functions that need them): the DAG processor imports this module on every parse.

A task gets its pipeline's file (``pipeline_file``) and reads it when it runs (jobs.config), so a
fix to a file reaches the next try; ``land`` hands the later tasks the run's plan (:class:`RunPlan`, an
XCom that holds no secret). Secrets stay in Airflow connections: Kafka (apache-kafka provider), the
source database (common-sql hooks), SMTP (smtp provider), Spark (apache-spark provider).

The run id is the interval, ``20261101T000000Z_20261102T000000Z``: a re-run or a backfill of an
interval reuses it, and every stage is idempotent for a run id.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jobs.config import PipelineConfig, load_pipeline
from jobs.land.outside import combine, quiet_interval_warning
from jobs.model.intervals import IntervalError, checked, iso, run_id_for, utc

REPO = Path(__file__).resolve().parents[1]
LAND_TASK = "land"
TRANSFORM_TASK = "transform"  # decode -> fold + publish -> validate: the one Spark application of a run
CATALOG_ENV = "CDC_ICEBERG_CATALOG"  # jobs.iceberg.catalog.open_catalog
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


@contextmanager
def catalog_of(cfg: PipelineConfig) -> Iterator[None]:
    """The pipeline's Iceberg catalog for jobs.iceberg.catalog while a task runs (none named: the lake's own)."""
    before = os.environ.get(CATALOG_ENV)
    if cfg.sink.catalog:
        os.environ[CATALOG_ENV] = cfg.sink.catalog
    else:
        os.environ.pop(CATALOG_ENV, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CATALOG_ENV, None)
        else:
            os.environ[CATALOG_ENV] = before

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


# ---- the plan of a run: what land hands to the later tasks ---------------------------------------
@dataclass(frozen=True)
class RunPlan:
    """Everything the stages after land need; travels as XCom, so it holds no secret."""

    run_id: str
    start: str
    end: str
    lake: str
    pipeline: str
    fmt: str
    raw: tuple[str, ...]  # one landed interval folder per topic
    topics: tuple[str, ...]
    messages: int
    outside: dict[str, Any] | None = None  # what the source holds outside the interval (jobs.land.outside)

    def to_xcom(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_xcom(cls, value: Mapping[str, Any]) -> RunPlan:
        data = {k: v for k, v in dict(value).items() if k in cls.__dataclass_fields__}
        for name in ("raw", "topics"):
            data[name] = tuple(data.get(name) or ())
        return cls(**data)


def build_plan(cfg: PipelineConfig, start: datetime, end: datetime, manifests: list[Mapping[str, Any]],
               lake_join: Callable[[str], str]) -> RunPlan:
    """The plan from land's manifests; ``lake_join`` turns a lake-relative folder into a full path."""
    if not manifests:
        raise ValueError("nothing was landed: no topic found (check the source block's topics and location)")
    ordered = sorted(manifests, key=lambda m: m["topic"])
    return RunPlan(
        run_id=run_id_for(start, end),
        start=start.isoformat().replace("+00:00", "Z"),
        end=end.isoformat().replace("+00:00", "Z"),
        lake=cfg.sink.lake,
        pipeline=cfg.name,
        fmt=cfg.source.format,
        raw=tuple(lake_join(m["path"]) for m in ordered),
        topics=tuple(m["topic"] for m in ordered),
        messages=sum(int(m["totals"]["records"]) for m in ordered),
        outside=combine(m.get("outside") for m in ordered),
    )


def transform_args(plan: RunPlan, cfg: PipelineConfig) -> list[str]:
    """Arguments of ``jobs/cli.py transform``: one ``--raw`` per landed folder, so the run decodes exactly
    this interval and never another one landed beside it; then the pipeline's per-table settings."""
    args = [TRANSFORM_TASK, "--lake", plan.lake, "--pipeline", plan.pipeline, "--run-id", plan.run_id,
            "--format", plan.fmt, "--message-shape", cfg.source.message_shape]
    for folder in plan.raw:
        args += ["--raw", folder]
    for pattern, columns in cfg.per_table("primary_keys"):
        args += ["--primary-keys", f"{pattern}={','.join(columns)}"]
    for pattern, on in cfg.per_table("history"):
        args += ["--history-of" if on else "--no-history-of", pattern]
    if cfg.sink.state_buckets is not None:
        args += ["--state-buckets", str(cfg.sink.state_buckets)]
    return args + (["--keep-changes"] if cfg.sink.keep_changes else [])


def land_outputs(plan: RunPlan, cfg: PipelineConfig) -> dict[str, Any]:
    """land's XComs (``multiple_outputs``): ``plan`` for the Python tasks, ``transform_args`` for spark-submit."""
    return {"plan": plan.to_xcom(), "transform_args": transform_args(plan, cfg)}


# ---- task callables ------------------------------------------------------------------------------
def land_interval(cfg: PipelineConfig, start: datetime, end: datetime) -> RunPlan:
    """Land [start, end) of every topic of the pipeline's source."""
    from jobs.lake.layout import Lake, check_name
    from jobs.land import command as landing

    check_name("pipeline", cfg.name)
    lake = Lake.at(cfg.sink.lake)
    lake.check_usable()
    source = cfg.source
    topics = list(source.topics) or None
    if source.kafka is not None:
        kafka = source.kafka
        consumer = landing.kafka_consumer_config(kafka.connection) if kafka.connection else {}
        bootstrap = kafka.bootstrap or consumer.pop("bootstrap.servers", "")
        consumer.pop("bootstrap.servers", None)
        manifests = [landing.land_kafka(bootstrap, topic, lake, cfg.name, start, end, consumer_config=consumer)
                     for topic in source.kafka.topics]
    elif source.files is not None:
        manifests = landing.land_files(source.files, topics, lake, cfg.name, start, end)
    elif source.connect_s3 is not None:
        manifests = landing.land_connect_s3(source.connect_s3, topics, lake, cfg.name, start, end)
    else:
        manifests = landing.land_eventhubs_capture(source.eventhubs_capture, topics, lake, cfg.name, start, end)
    return build_plan(cfg, start, end, manifests, lake.join)


def land(pipeline_file: str, params: Mapping[str, Any] | None = None, data_interval_start: Any = None,
         data_interval_end: Any = None, logical_date: Any = None, dag_run: Any = None,
         **_context: Any) -> dict[str, Any]:
    """Airflow callable of the land task; returns its XComs (see :func:`land_outputs`). Its first log line
    says which interval the run covers and why; the run's note says it too, with what landed."""
    start, end = resolve_interval(params, data_interval_start, data_interval_end)
    origin = interval_origin(params, getattr(dag_run, "run_type", None), logical_date, data_interval_end)
    covers = covers_text(start, end, origin)
    log.info(covers)
    cfg = load_pipeline(pipeline_file)
    plan = land_interval(cfg, start, end)
    landed = f"landed {plan.messages} messages of {len(plan.topics)} topics"
    log.info("%s for run %s", landed, plan.run_id)
    warning = quiet_interval_warning(plan.start, plan.end, plan.messages, plan.outside)
    if warning:
        warning += f" {AIRFLOW_INTERVAL_HINT}"
        log.warning(warning)
    if dag_run is not None:
        note_dag_run(dag_run, "\n\n".join(filter(None, [f"{covers}; {landed}.", warning and f"**{warning}**"])))
    return land_outputs(plan, cfg)


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


def _run_context(plan: RunPlan):
    from jobs.lake.layout import Lake
    from jobs.stages import RunContext

    return RunContext(Lake.at(plan.lake), plan.pipeline, plan.run_id, progress=log.info)


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


def reconcile_options(cfg: PipelineConfig, plan: RunPlan):
    """The reconcile settings of a pipeline: its lag, tolerance and key-diff size, and the tables' own."""
    from jobs.reconcile.checkpoints import parse_duration, parse_time, parse_tolerance
    from jobs.reconcile.stage import ReconcileOptions

    settings = cfg.reconcile
    return ReconcileOptions(
        fmt=plan.fmt, tolerance=parse_tolerance(settings.count_tolerance),
        max_lag_s=parse_duration(settings.max_lag) if settings.max_lag else None,
        as_of=parse_time(plan.end), key_rows_limit=settings.key_rows_limit,
        capture_delay_s=parse_duration(settings.capture_delay),
        table_tolerances=tuple((p, parse_tolerance(t)) for p, t in cfg.per_table("count_tolerance")),
        table_key_rows_limits=cfg.per_table("key_rows_limit"),
    )


def reconcile(pipeline_file: str, plan: Mapping[str, Any], **_context: Any) -> dict[str, Any]:
    """Airflow callable of the reconcile task: the source's checkpoints judged against the lake (no Spark);
    a checkpoint's wait is measured at the interval's end."""
    from jobs.reconcile.stage import BEHIND, MISMATCH
    from jobs.stages import run_reconcile

    cfg, run = load_pipeline(pipeline_file), RunPlan.from_xcom(plan)
    source = f"conn:{cfg.reconcile.connection}" if cfg.reconcile.connection else cfg.reconcile.counts
    with catalog_of(cfg):  # the source is read here, from the connection: never through XCom
        rows = run_reconcile(_run_context(run), source_counts_spec(source), reconcile_options(cfg, run))
    mismatched = sorted(r.table for r in rows if r.status == MISMATCH)
    behind = sorted(r.table for r in rows if r.status == BEHIND)
    log.info("reconciled %d tables of run %s; mismatched: %s; behind: %s", len(rows), run.run_id,
             ", ".join(mismatched) or "none", ", ".join(behind) or "none")
    return {"tables": len(rows), "mismatched": mismatched, "behind": behind}


def alert(pipeline_file: str, plan: Mapping[str, Any], **_context: Any) -> dict[str, Any]:
    """Airflow callable of the alert task: one data-quality email when a check failed.

    Data-quality problems do not fail the task (they are the email's content); an email that
    should go out but cannot does, so that Airflow retries it and the failure is visible."""
    from jobs.alert.smtp import connection_settings
    from jobs.stages import run_alert

    cfg, run = load_pipeline(pipeline_file), RunPlan.from_xcom(plan)
    result = run_alert(_run_context(run), list(cfg.alert.to), cfg.alert.quarantine_threshold,
                       smtp=lambda: connection_settings(cfg.alert.smtp_connection, cfg.alert.from_email))
    summary = {"sent": result.sent, "problems": len(result.reasons), "skipped": result.skipped, "error": result.error}
    log.info("alert of run %s: %s", run.run_id, json.dumps(summary))
    if result.error:
        raise AlertNotSent(f"data-quality alert of run {run.run_id} not sent: {result.error}")
    return summary


def expire(pipeline_file: str, plan: Mapping[str, Any], **_context: Any) -> dict[str, Any]:
    """Airflow callable of the expire task: the tables' snapshots older than the retention before the
    interval's end go, with the files only they held (jobs.iceberg.expire; no Spark)."""
    from jobs.stages import run_expire

    cfg, run = load_pipeline(pipeline_file), RunPlan.from_xcom(plan)
    with catalog_of(cfg):
        report = run_expire(_run_context(run), utc(run.end, "interval end"), cfg.sink.retain_days,
                            cfg.sink.retain_last)
    summary = {"snapshots_expired": sum(t.snapshots_expired for t in report.tables),
               "bytes_deleted": sum(t.bytes_deleted for t in report.tables)}
    log.info("expired snapshots of run %s (committed before %s): %s", run.run_id, report.older_than,
             json.dumps(summary))
    return summary


def published_tables(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tables the run committed a snapshot to, from its merge report: what its asset events name."""
    from jobs.model.reports import FoldReport

    report = _run_context(RunPlan.from_xcom(plan)).read_report(FoldReport) or FoldReport()
    return [{"table": t, "iceberg_table": r.iceberg_table or t, "snapshot_id": r.snapshot_id, "rows": r.state_rows}
            for t, r in sorted(report.tables.items()) if r.snapshot_id is not None]


# ---- parse-time pieces of the DAG ----------------------------------------------------------------
def spark_settings(cfg: PipelineConfig, ship_archive: bool = False) -> dict[str, Any]:
    """SparkSubmitOperator's application, py_files, jars, conf, env_vars and packages for the pipeline
    (jobs.spark.submit): with ``spark.ship_package`` the driver and executors run the ``jobs`` archive,
    built on the submitting machine when ``ship_archive`` (at run time, not when the DAG is parsed)."""
    from jobs.spark.submit import submit_settings

    return submit_settings(ship=cfg.spark.ship_package, executor_python=cfg.spark.executor_python,
                           conf=cfg.spark.conf, packages=cfg.spark.packages,
                           extra_env={CATALOG_ENV: cfg.sink.catalog} if cfg.sink.catalog else None,
                           build_archive=ship_archive)


def failure_notifiers(cfg: PipelineConfig) -> list[Any]:
    """An SmtpNotifier (the pipeline's SMTP connection) to its alert recipients when a task fails for good
    (on_failure_callback: once, not per try); none without recipients. Building it contacts no server."""
    if not (cfg.alert.to and cfg.alert.on_task_failure):
        return []
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    # no sender given: the notifier takes the connection's, as the data-quality email does
    return [SmtpNotifier(to=list(cfg.alert.to), from_email=cfg.alert.from_email or None,
                         smtp_conn_id=cfg.alert.smtp_connection)]
