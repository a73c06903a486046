"""Everything the Airflow DAG needs, so that ``dags/cdc_demo_pipeline.py`` only wires tasks.

Light at import (standard library only; Airflow, pyarrow and pyspark are imported inside the
functions that need them): the DAG processor imports this module on every parse.

Settings, resolved when a run starts, first match wins:
    1. the DAG run's param of the same name (non-empty; not for ``source_counts``, which may
       hold a password and params are stored and shown in clear),
    2. the Airflow Variable ``cdc_<name>``,
    3. the environment variable,
    4. the default.

    name                   env                       default
    lake                   CDC_LAKE                  <repo>/demo/out/airflow-lake
    pipeline               CDC_PIPELINE              demo
    topics_dir             CDC_DEMO_TOPICS           <repo>/demo/topics   (Parquet topic dumps)
    kafka_bootstrap        CDC_KAFKA_BOOTSTRAP       empty: land from topics_dir, else from Kafka
    topics                 CDC_TOPICS                empty: every topic of the dumps (required for Kafka)
    format                 CDC_FORMAT                debezium
    source_counts          CDC_SOURCE_COUNTS         <repo>/demo/source_counts.json
                           (a JSON counts file, a SQLAlchemy URL, ``conn:<connection id>`` for an
                           Airflow connection, or empty for no source counts)
    max_lag                CDC_MAX_LAG               6h (alert when a source checkpoint older than this
                                                     at the interval's end is still not reached)
    count_tolerance        CDC_COUNT_TOLERANCE       0 (rows[,percent%] for counts without a moment)
    alert_to               CDC_ALERT_TO              empty (comma-separated recipients)
    quarantine_threshold   CDC_QUARANTINE_THRESHOLD  0 (alert when quarantined/landed exceeds it)
    snapshot_retain_days   CDC_SNAPSHOT_RETAIN_DAYS  7 (the expire task keeps the tables' snapshots of the
                                                     7 days before the interval's end ...)
    snapshot_retain_last   CDC_SNAPSHOT_RETAIN_LAST  10 (... and each table's 10 newest)
    keep_changes           CDC_KEEP_CHANGES          false (true: transform also writes the decoded
                                                     change records to changes/, an audit copy)

Read when the DAG file is parsed (they shape the tasks, not one run): ``CDC_ALERT_TO`` also adds
an SmtpNotifier failure callback; ``CDC_SPARK_PACKAGES`` and ``CDC_SPARK_CONF`` (a JSON object)
go to spark-submit, e.g. hadoop-aws and the ``fs.s3a.*`` settings of an S3 lake; ``CDC_JIT=c1``
gives the stages' JVMs the JIT's quick compiler only (faster for small intervals: jobs.spark).

The run id is the interval, ``20261101T000000Z_20261102T000000Z``: a re-run or a backfill of an
interval reuses it, and every stage is idempotent for a run id.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from jobs.intervals import IntervalError, checked, run_id_for, utc

REPO = Path(__file__).resolve().parents[1]
APPLICATION = str(REPO / "jobs" / "cli.py")  # spark-submit'ed: `spark-submit jobs/cli.py transform ...`
LAND_TASK = "land"
TRANSFORM_TASK = "transform"  # decode -> fold + publish -> validate: the one Spark application of a run
VARIABLE_PREFIX = "cdc_"

log = logging.getLogger(__name__)


class AlertNotSent(RuntimeError):
    """Problems were found and recipients are set, but the email could not be sent."""


# ---- settings ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    default: str
    description: str
    as_param: bool = True  # False for values that may hold secrets


SETTINGS: tuple[Setting, ...] = (
    Setting("lake", "CDC_LAKE", str(REPO / "demo" / "out" / "airflow-lake"),
            "lake root: a local folder, file://, s3:// or s3a:// URI"),
    Setting("pipeline", "CDC_PIPELINE", "demo", "pipeline name: Iceberg namespace and lake sub-folder"),
    Setting("topics_dir", "CDC_DEMO_TOPICS", str(REPO / "demo" / "topics"),
            "folder (or s3:// prefix) of Parquet topic dumps to land from when no Kafka bootstrap is set"),
    Setting("kafka_bootstrap", "CDC_KAFKA_BOOTSTRAP", "",
            "Kafka bootstrap servers; when set, topics are landed from Kafka (settings in $CDC_KAFKA_CONFIG)"),
    Setting("topics", "CDC_TOPICS", "", "comma-separated topics (required with Kafka; default: all dumped topics)"),
    Setting("format", "CDC_FORMAT", "debezium", "message format of the topics"),
    Setting("source_counts", "CDC_SOURCE_COUNTS", str(REPO / "demo" / "source_counts.json"),
            "source row counts: JSON file, SQLAlchemy URL or conn:<Airflow connection id>", as_param=False),
    Setting("max_lag", "CDC_MAX_LAG", "6h",
            "alert when a source count older than this at the interval's end is still not reached (6h, 90m, 1d)"),
    Setting("count_tolerance", "CDC_COUNT_TOLERANCE", "0",
            "how far a source count without a moment may be from the lake's (rows, percent or 10,0.5%)"),
    Setting("alert_to", "CDC_ALERT_TO", "", "comma-separated data-quality alert recipients"),
    Setting("quarantine_threshold", "CDC_QUARANTINE_THRESHOLD", "0",
            "alert when quarantined/landed exceeds this fraction"),
    Setting("snapshot_retain_days", "CDC_SNAPSHOT_RETAIN_DAYS", "7",
            "days of the tables' snapshots kept before the interval's end (older ones and their files go)"),
    Setting("snapshot_retain_last", "CDC_SNAPSHOT_RETAIN_LAST", "10",
            "each table's newest snapshots kept whatever their age (at least 1)"),
    Setting("keep_changes", "CDC_KEEP_CHANGES", "false",
            "true: transform also writes the run's decoded change records to changes/ (an audit copy)"),
)


@dataclass(frozen=True)
class PipelineSettings:
    lake: str
    pipeline: str
    topics_dir: str
    kafka_bootstrap: str
    topics: tuple[str, ...]
    fmt: str
    source_counts: str | None
    alert_to: tuple[str, ...]
    quarantine_threshold: float
    snapshot_retain_days: int = 7
    snapshot_retain_last: int = 10
    keep_changes: bool = False
    max_lag_s: float | None = 6 * 3600
    count_tolerance: str = "0"


def _whole(values: Mapping[str, str], name: str, least: int) -> int:
    try:
        value = int(values[name] or 0)
    except ValueError:
        raise ValueError(f"{name} {values[name]!r} is not a whole number") from None
    if value < least:
        raise ValueError(f"{name} {value} is below {least}")
    return value


def _flag(values: Mapping[str, str], name: str) -> bool:
    value = (values[name] or "false").lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(f"{name} {values[name]!r} is neither true nor false")
    return value in ("true", "1", "yes")


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def resolve_settings(
    params: Mapping[str, Any] | None = None,
    variable: Callable[[str], str | None] | None = None,
    env: Mapping[str, str] | None = None,
) -> PipelineSettings:
    """The settings of a run: params, then Variables ``cdc_<name>``, then env, then defaults.

    A Variable or environment variable that is set but empty counts (e.g. ``CDC_SOURCE_COUNTS=""``
    turns source counts off); an empty param means "not given" (the trigger form's default)."""
    params = params or {}
    env = os.environ if env is None else env
    values: dict[str, str] = {}
    for setting in SETTINGS:
        param = params.get(setting.name) if setting.as_param else None
        if param not in (None, ""):
            values[setting.name] = str(param).strip()
            continue
        from_variable = variable(VARIABLE_PREFIX + setting.name) if variable else None
        if from_variable is not None:
            values[setting.name] = str(from_variable).strip()
        elif env.get(setting.env) is not None:
            values[setting.name] = env[setting.env].strip()
        else:
            values[setting.name] = setting.default
    try:
        threshold = float(values["quarantine_threshold"] or 0)
    except ValueError:
        raise ValueError(f"quarantine_threshold {values['quarantine_threshold']!r} is not a number") from None
    if not 0 <= threshold <= 1:
        raise ValueError(f"quarantine_threshold {threshold} is not a fraction between 0 and 1")
    for required in ("lake", "pipeline", "format"):
        if not values[required]:
            raise ValueError(f"setting {required} is empty")
    return PipelineSettings(
        lake=values["lake"],
        pipeline=values["pipeline"],
        topics_dir=values["topics_dir"],
        kafka_bootstrap=values["kafka_bootstrap"],
        topics=_split(values["topics"]),
        fmt=values["format"],
        source_counts=values["source_counts"] or None,
        alert_to=_split(values["alert_to"]),
        quarantine_threshold=threshold,
        snapshot_retain_days=_whole(values, "snapshot_retain_days", 0),
        snapshot_retain_last=_whole(values, "snapshot_retain_last", 1),
        keep_changes=_flag(values, "keep_changes"),
        max_lag_s=_duration(values, "max_lag"),
        count_tolerance=_checked_tolerance(values, "count_tolerance"),
    )


def _duration(values: Mapping[str, str], name: str) -> float | None:
    from jobs.checkpoints import CheckpointError, parse_duration

    if not values[name]:
        return None
    try:
        return parse_duration(values[name])
    except CheckpointError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _checked_tolerance(values: Mapping[str, str], name: str) -> str:
    from jobs.checkpoints import CheckpointError, parse_tolerance

    try:
        parse_tolerance(values[name])
    except CheckpointError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return values[name]


def _airflow_variable(name: str) -> str | None:
    from airflow.sdk import Variable

    return Variable.get(name, default=None)


def dag_params() -> dict[str, Any]:
    """The DAG's params: the window of a manual run, and per-run overrides of the settings."""
    from airflow.sdk import Param

    params: dict[str, Any] = {
        "start": Param("", type="string", title="Interval start",
                       description="ISO-8601, e.g. 2026-11-01T00:00:00Z; empty: the run's data interval. "
                       "Manual runs have an empty data interval: give start and end."),
        "end": Param("", type="string", title="Interval end",
                     description="ISO-8601, exclusive; empty: the run's data interval"),
    }
    for setting in SETTINGS:
        if setting.as_param:
            params[setting.name] = Param(
                "", type="string",
                description=f"{setting.description}. Empty: Variable {VARIABLE_PREFIX}{setting.name}, "
                f"env {setting.env}, else {setting.default or 'none'}",
            )
    return params


# ---- interval and run id (jobs.intervals) -------------------------------------------------------
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
        raise IntervalError("the run has no data interval: a manual run needs params start and end")
    else:
        start, end = utc(data_interval_start, "start"), utc(data_interval_end, "end")
    if end <= start:
        raise IntervalError(
            f"empty interval {start.isoformat()} .. {end.isoformat()}: a manual run needs params start and end"
        )
    return checked(start, end)


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
    alert_to: tuple[str, ...]
    quarantine_threshold: float
    keep_changes: bool = False

    def to_xcom(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_xcom(cls, value: Mapping[str, Any]) -> RunPlan:
        data = dict(value)
        for name in ("raw", "topics", "alert_to"):
            data[name] = tuple(data.get(name) or ())
        return cls(**data)


def build_plan(cfg: PipelineSettings, start: datetime, end: datetime, manifests: list[Mapping[str, Any]],
               lake_join: Callable[[str], str]) -> RunPlan:
    """The plan from land's manifests; ``lake_join`` turns a lake-relative folder into a full path."""
    if not manifests:
        raise ValueError("nothing was landed: no topic found (check topics, topics_dir or kafka_bootstrap)")
    ordered = sorted(manifests, key=lambda m: m["topic"])
    return RunPlan(
        run_id=run_id_for(start, end),
        start=start.isoformat().replace("+00:00", "Z"),
        end=end.isoformat().replace("+00:00", "Z"),
        lake=cfg.lake,
        pipeline=cfg.pipeline,
        fmt=cfg.fmt,
        raw=tuple(lake_join(m["path"]) for m in ordered),
        topics=tuple(m["topic"] for m in ordered),
        messages=sum(int(m["totals"]["records"]) for m in ordered),
        alert_to=cfg.alert_to,
        quarantine_threshold=cfg.quarantine_threshold,
        keep_changes=cfg.keep_changes,
    )


def transform_args(plan: RunPlan) -> list[str]:
    """Arguments of ``jobs/cli.py transform``: one ``--raw`` per landed folder, so the run decodes
    exactly this interval and never another one landed beside it."""
    args = [TRANSFORM_TASK, "--lake", plan.lake, "--pipeline", plan.pipeline, "--run-id", plan.run_id,
            "--format", plan.fmt]
    for folder in plan.raw:
        args += ["--raw", folder]
    return args + (["--keep-changes"] if plan.keep_changes else [])


def land_outputs(plan: RunPlan) -> dict[str, Any]:
    """land's XComs (``multiple_outputs``): ``plan`` for the Python tasks, ``transform_args`` for spark-submit."""
    return {"plan": plan.to_xcom(), "transform_args": transform_args(plan)}


# ---- task callables ------------------------------------------------------------------------------
def land_interval(cfg: PipelineSettings, start: datetime, end: datetime) -> RunPlan:
    """Land [start, end) of every topic (from Kafka, or from the Parquet topic dumps)."""
    from jobs.lake import Lake, check_name
    from jobs.land import land_files, land_kafka

    check_name("pipeline", cfg.pipeline)
    lake = Lake.at(cfg.lake)
    lake.check_usable()
    if cfg.kafka_bootstrap:
        if not cfg.topics:
            raise ValueError("landing from Kafka needs topics (param topics, Variable cdc_topics or CDC_TOPICS)")
        manifests = [land_kafka(cfg.kafka_bootstrap, topic, lake, cfg.pipeline, start, end) for topic in cfg.topics]
    else:
        manifests = land_files(cfg.topics_dir, list(cfg.topics) or None, lake, cfg.pipeline, start, end)
    return build_plan(cfg, start, end, manifests, lake.join)


def land(params: Mapping[str, Any] | None = None, data_interval_start: Any = None, data_interval_end: Any = None,
         **_context: Any) -> dict[str, Any]:
    """Airflow callable of the land task; returns its XComs (see :func:`land_outputs`)."""
    cfg = resolve_settings(params, _airflow_variable)
    start, end = resolve_interval(params, data_interval_start, data_interval_end)
    plan = land_interval(cfg, start, end)
    log.info("landed %d messages of %d topics for run %s", plan.messages, len(plan.topics), plan.run_id)
    return land_outputs(plan)


def _run_context(plan: RunPlan):
    from jobs.lake import Lake
    from jobs.stages import RunContext

    return RunContext(Lake.at(plan.lake), plan.pipeline, plan.run_id)


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
    """What ``jobs.reconcile.load_source_counts`` takes: ``conn:<id>`` becomes the connection's URL."""
    if not value:
        return None
    if value.startswith("conn:"):
        if get_connection is None:
            from airflow.sdk import BaseHook

            get_connection = BaseHook.get_connection
        conn = get_connection(value[len("conn:"):])
        _mask(conn.password)
        return connection_sqlalchemy_url(conn)
    if "://" in value:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            _mask(make_url(value).password)
        except ArgumentError:
            pass  # not a SQLAlchemy URL; reconcile reports what it is
    return value


def reconcile(plan: Mapping[str, Any], params: Mapping[str, Any] | None = None, **_context: Any) -> dict[str, Any]:
    """Airflow callable of the reconcile task: the source's checkpoints judged against the lake (no Spark);
    a checkpoint's wait is measured at the interval's end."""
    from jobs.checkpoints import parse_time, parse_tolerance
    from jobs.reconcile import BEHIND, MISMATCH, ReconcileOptions
    from jobs.stages import run_reconcile

    run = RunPlan.from_xcom(plan)
    cfg = resolve_settings(params, _airflow_variable)  # source counts are read here, never via XCom
    options = ReconcileOptions(fmt=run.fmt, tolerance=parse_tolerance(cfg.count_tolerance), max_lag_s=cfg.max_lag_s,
                               as_of=parse_time(run.end))
    rows = run_reconcile(_run_context(run), source_counts_spec(cfg.source_counts), options)
    mismatched = sorted(r["table"] for r in rows if r["status"] == MISMATCH)
    behind = sorted(r["table"] for r in rows if r["status"] == BEHIND)
    log.info("reconciled %d tables of run %s; mismatched: %s; behind: %s", len(rows), run.run_id,
             ", ".join(mismatched) or "none", ", ".join(behind) or "none")
    return {"tables": len(rows), "mismatched": mismatched, "behind": behind}


def _smtp_settings_from_airflow():
    """The ``smtp_default`` connection wherever Airflow keeps it (metadata db, secrets backend, env);
    None when there is none, so that ``SMTP_*`` environment settings apply."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    from jobs.alert import settings_from_connection

    try:
        conn = BaseHook.get_connection("smtp_default")
    except AirflowNotFoundException:
        return None
    return settings_from_connection(conn)


def alert(plan: Mapping[str, Any], **_context: Any) -> dict[str, Any]:
    """Airflow callable of the alert task: one data-quality email when a check failed.

    Data-quality problems do not fail the task (they are the email's content); an email that
    should go out but cannot does, so that Airflow retries it and the failure is visible."""
    from jobs.stages import run_alert

    run = RunPlan.from_xcom(plan)
    smtp = _smtp_settings_from_airflow() if run.alert_to else None
    result = run_alert(_run_context(run), list(run.alert_to), run.quarantine_threshold, settings=smtp)
    summary = {"sent": result["sent"], "problems": len(result["reasons"]), "skipped": result["skipped"],
               "error": result["error"]}
    log.info("alert of run %s: %s", run.run_id, json.dumps(summary))
    if result["error"]:
        raise AlertNotSent(f"data-quality alert of run {run.run_id} not sent: {result['error']}")
    return summary


# ---- parse-time pieces of the DAG ----------------------------------------------------------------
def expire(plan: Mapping[str, Any], params: Mapping[str, Any] | None = None, **_context: Any) -> dict[str, Any]:
    """Airflow callable of the expire task: the tables' snapshots older than the retention before the
    interval's end go, with the files only they held (jobs.expire; no Spark)."""
    from jobs.stages import run_expire

    run = RunPlan.from_xcom(plan)
    cfg = resolve_settings(params, _airflow_variable)
    report = run_expire(_run_context(run), utc(run.end, "interval end"), cfg.snapshot_retain_days,
                        cfg.snapshot_retain_last)
    summary = {"snapshots_expired": sum(t["snapshots_expired"] for t in report["tables"]),
               "bytes_deleted": sum(t["bytes_deleted"] for t in report["tables"])}
    log.info("expired snapshots of run %s (committed before %s): %s", run.run_id, report["older_than"],
             json.dumps(summary))
    return summary


def spark_env() -> dict[str, str]:
    """Environment of the spark-submit'ed driver: this repo importable, this interpreter for Python."""
    return {
        "PYTHONPATH": str(REPO),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_SUBMIT_ACTIVE": "1",  # jobs.spark.build_spark then takes the master from spark-submit
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def spark_conf(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``--conf`` of spark-submit: the JVM options of jobs.spark (with ``CDC_JIT``'s) and the jar of the
    JVM-side decoders (set before the driver starts, so not from inside the job), then ``CDC_SPARK_CONF``
    (a JSON object, which wins; no secrets: use env credentials such as AWS_ACCESS_KEY_ID, which S3A
    reads itself)."""
    from jobs.jvm import with_jar
    from jobs.spark import jvm_options

    env = os.environ if env is None else env
    options = jvm_options(env)
    defaults = {"spark.driver.extraJavaOptions": options, "spark.executor.extraJavaOptions": options}
    text = (env.get("CDC_SPARK_CONF") or "").strip()
    conf: dict = {}
    if text:
        try:
            conf = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError("CDC_SPARK_CONF is not a JSON object") from None
        if not isinstance(conf, dict):
            raise ValueError("CDC_SPARK_CONF is not a JSON object")
    merged = {**defaults, **{str(k): str(v) for k, v in conf.items()}}
    jars = with_jar(merged.get("spark.jars"))  # the JVM-side decoders' jar beside the user's (jobs.jvm)
    if jars:
        merged["spark.jars"] = jars
    return merged


def spark_packages(env: Mapping[str, str] | None = None) -> str | None:
    """``--packages`` of spark-submit from ``CDC_SPARK_PACKAGES`` (Maven coordinates, comma-separated)."""
    env = os.environ if env is None else env
    return (env.get("CDC_SPARK_PACKAGES") or "").strip() or None


def failure_notifiers(env: Mapping[str, str] | None = None) -> list[Any]:
    """An SmtpNotifier (connection ``smtp_default``) to ``CDC_ALERT_TO`` for failed tasks; none
    without recipients. Building it contacts no server."""
    env = os.environ if env is None else env
    recipients = list(_split(env.get("CDC_ALERT_TO") or ""))
    if not recipients:
        return []
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    from_email = (env.get("AIRFLOW__EMAIL__FROM_EMAIL") or "").strip() or None
    return [SmtpNotifier(to=recipients, from_email=from_email, smtp_conn_id="smtp_default")]
