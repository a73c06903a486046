"""One Airflow DAG per pipeline file (jobs.config): the loader ``dags/cdc_pipelines.py`` calls
:func:`load_dags`, and nothing else.

Each DAG is ``land → transform → reconcile → alert → expire`` for the data interval ``[start, end)``
(jobs.airflow.tasks holds what the tasks run). A file that does not validate becomes an import error of
its own, named by the file, beside the other pipelines' DAGs, which load as usual. The transform task's
outlets are the pipeline's Iceberg namespace and an alias through which each run names the tables it
committed, so downstream DAGs can be scheduled on a pipeline, or on one of its tables.

No pyspark here: the DAG processor imports this module on every parse.
"""
from __future__ import annotations

import inspect
import logging
from datetime import date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Asset, AssetAlias
from airflow.timetables.interval import CronDataIntervalTimetable

from jobs.airflow import tasks as tasks
from jobs.config import PipelineConfig, PipelineConfigError, load_pipeline, parse_duration, pipeline_files
from jobs.errors import mask

log = logging.getLogger(__name__)
EMBEDDED_CATALOG = "cdc"  # jobs.iceberg.catalog.open_catalog's name for the SQLite catalog inside a lake
REPO = Path(__file__).resolve().parents[1]
PLUGIN_FILE = "cdc_timetables.py"  # registers jobs.airflow.timetable's timetable


# ---- assets ---------------------------------------------------------------------------------------
def _uri_part(text: str) -> str:
    return quote(text, safe="")  # a name from the source or the file is one path segment, whatever it holds


def namespace_asset(cfg: PipelineConfig) -> Asset:
    """The pipeline's published tables as one asset: its Iceberg namespace."""
    catalog = _uri_part(cfg.sink.catalog or EMBEDDED_CATALOG)
    return Asset(name=cfg.dag_id, uri=f"iceberg://{catalog}/{_uri_part(cfg.name)}", group="cdc")


def table_asset(cfg: PipelineConfig, table_id: str, iceberg_table: str) -> Asset:
    """One published table as an asset, named ``cdc_<pipeline>.<table id>``."""
    return Asset(name=f"{cfg.dag_id}.{table_id}", uri=f"{namespace_asset(cfg).uri}/{_uri_part(iceberg_table)}",
                 group="cdc")


def tables_alias(cfg: PipelineConfig) -> AssetAlias:
    """Through it, each run names the tables it committed (their names are known only once decoded)."""
    return AssetAlias(name=f"{cfg.dag_id}.tables", group="cdc")


class TransformOperator(SparkSubmitOperator):
    """spark-submit of the run's transform, then one asset event per table it committed a snapshot to.

    The submit's settings are made again where the task runs, from the file as it is then (the DAG may be
    parsed on another machine: its interpreter, paths and jar are not the worker's); with
    ``spark.ship_package``, the ``jobs`` archive is built there too (once per code version)."""

    def __init__(self, *, pipeline_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline_file = pipeline_file

    def execute(self, context: Any) -> None:
        cfg = load_pipeline(self.pipeline_file)
        for name, value in tasks.spark_settings(cfg, ship_archive=cfg.spark.ship_package).items():
            setattr(self, name, value)
        super().execute(context)
        plan = context["ti"].xcom_pull(task_ids=tasks.LAND_TASK, key="plan")
        events = context["outlet_events"][tables_alias(cfg)]
        for table in tasks.published_tables(plan):
            events.add(table_asset(cfg, table["table"], table["iceberg_table"]),
                       extra={"run_id": plan["run_id"], "snapshot_id": table["snapshot_id"], "rows": table["rows"]})


# ---- one DAG ----------------------------------------------------------------------------------------
def _utc(value: date | datetime) -> pendulum.DateTime:
    if isinstance(value, datetime):
        return pendulum.instance(value, tz="UTC")
    return pendulum.datetime(value.year, value.month, value.day, tz="UTC")


def schedule_of(cfg: PipelineConfig, path: Path) -> CronDataIntervalTimetable:
    """The file's cron as data intervals (UTC); with ``pipeline.end``, the last one ends at or before it."""
    p = cfg.pipeline
    if p.end is None:
        return CronDataIntervalTimetable(p.schedule, timezone="UTC")
    from airflow import plugins_manager

    from jobs.airflow.timetable import EndingCronDataIntervalTimetable

    name = f"{EndingCronDataIntervalTimetable.__module__}.{EndingCronDataIntervalTimetable.__name__}"
    if name not in plugins_manager.get_timetables_plugins():  # the DAG could not be serialized nor scheduled
        raise PipelineConfigError(
            f"{path}: pipeline.end: its timetable is registered by plugins/{PLUGIN_FILE}, which this Airflow "
            f"did not load; fix: set [core] plugins_folder (AIRFLOW__CORE__PLUGINS_FOLDER) to "
            f"{REPO / 'plugins'}, or remove pipeline.end")
    return EndingCronDataIntervalTimetable(p.schedule, "UTC", _utc(p.end))


def build_dag(cfg: PipelineConfig, path: Path) -> DAG:
    """The DAG of one pipeline file: wiring only."""
    p, shown = cfg.pipeline, cfg.shown().pipeline  # what the UI shows reads no secret (jobs.config)
    file_arg = {"pipeline_file": str(path)}
    with DAG(
        dag_id=cfg.dag_id,
        description=mask(shown.description) or f"{cfg.source.format} topics into Iceberg tables ({path.name})",
        doc_md=doc_md(cfg, path),
        schedule=schedule_of(cfg, path),
        start_date=_utc(p.start),  # no end_date: it would be every task's (see jobs.airflow.timetable)
        catchup=p.catchup,
        is_paused_upon_creation=p.paused,
        max_active_runs=1,
        tags=sorted({"cdc", cfg.source.format, *map(mask, shown.tags)}),
        params=tasks.dag_params(),
        default_args={
            "owner": mask(shown.owner),
            "depends_on_past": True,
            "retries": p.retries,
            "retry_delay": parse_duration(p.retry_delay),
            "execution_timeout": parse_duration(p.execution_timeout),
            # once, when a task fails for good: not on a retry
            "on_failure_callback": tasks.failure_notifiers(cfg),
        },
    ) as dag:
        land = PythonOperator(task_id=tasks.LAND_TASK, python_callable=tasks.land, op_kwargs=file_arg,
                              multiple_outputs=True)
        transform = TransformOperator(
            task_id=tasks.TRANSFORM_TASK,
            pipeline_file=str(path),
            application_args=land.output["transform_args"],
            conn_id=cfg.spark.connection,
            name=f"cdc-transform-{cfg.name}",
            outlets=[namespace_asset(cfg), tables_alias(cfg)],
            **tasks.spark_settings(cfg),
        )
        plan = {**file_arg, "plan": land.output["plan"]}
        reconcile = PythonOperator(task_id="reconcile", python_callable=tasks.reconcile, op_kwargs=plan)
        alert = PythonOperator(task_id="alert", python_callable=tasks.alert, op_kwargs=plan)
        expire = PythonOperator(task_id="expire", python_callable=tasks.expire, op_kwargs=plan)
        land >> transform >> reconcile >> alert >> expire
    return dag


def doc_md(cfg: PipelineConfig, path: Path) -> str:
    """The DAG's documentation in the UI, from its file: what it reads, where it writes, how it checks;
    values read from variables outside SHOWN_ENV as their references, secrets masked."""
    cfg = cfg.shown()
    s = cfg.source
    e = _md
    where = {"kafka": lambda: f"Kafka ({_kafka_where(s)}), topics {e(', '.join(s.kafka.topics))}",
             "files": lambda: f"Parquet topic dumps in `{e(s.files)}`",
             "connect_s3": lambda: f"Kafka Connect S3 sink output in `{e(s.connect_s3)}`",
             "eventhubs_capture": lambda: f"Event Hubs Capture files in `{e(s.eventhubs_capture)}`"}[s.location]()
    r = cfg.reconcile
    counts = (f"connection `{e(r.connection)}`" if r.connection else f"counts file `{e(r.counts)}`" if r.counts
              else "none")
    lines = [
        f"### Pipeline `{cfg.name}`", "", e(cfg.pipeline.description), "",
        f"Defined by `{e(path)}`. Runs `land → transform → reconcile → alert → expire` for each data interval "
        f"`[start, end)` of `{cfg.pipeline.schedule}` (UTC), in order. A run covers its data interval (a manual "
        "run at logical date D: the interval that ends at D, also with `airflow dags test <dag> D`) unless params "
        "`start` and `end` (ISO-8601) give another; its first log line and its note say which. The run id is "
        "the interval: clearing or re-running one changes nothing published.",
        "",
        "| | |", "|---|---|",
        f"| source | `{s.format}` messages from {where} |",
        f"| lake | `{e(cfg.sink.lake)}`, Iceberg catalog `{e(cfg.sink.catalog or 'embedded (SQLite in the lake)')}`, "
        f"namespace `{cfg.name}` |",
        f"| reconcile | source counts from {counts}; alert when a count waits past {r.max_lag or 'never'}; "
        f"tolerance `{r.count_tolerance}` |",
        f"| alert | {e(', '.join(cfg.alert.to)) or 'no recipients'} through `{e(cfg.alert.smtp_connection)}`; "
        f"quarantine threshold {cfg.alert.quarantine_threshold} |",
        f"| spark | connection `{e(cfg.spark.connection)}` |",
        f"| snapshots | kept {cfg.sink.retain_days} days, each table's {cfg.sink.retain_last} newest at least |",
        f"| assets | `{namespace_asset(cfg).uri}`; per table through alias `{tables_alias(cfg).name}` |",
    ]
    if cfg.tables:
        lines += ["", "| tables | primary keys | history | count tolerance | key rows limit |", "|---|---|---|---|---|"]
        lines += [f"| `{e(t.match)}` | {e(', '.join(t.primary_keys or [])) or '-'} | "
                  f"{'-' if t.history is None else 'on' if t.history else 'off'} | {t.count_tolerance or '-'} | "
                  f"{'-' if t.key_rows_limit is None else t.key_rows_limit} |" for t in cfg.tables]
    return mask("\n".join(lines))


def _md(value: object) -> str:
    """A value from the file as text in the doc's Markdown: no table cell, code span or HTML breaks."""
    text = str(value).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _kafka_where(source: Any) -> str:
    kafka = source.kafka
    parts = [f"connection `{_md(kafka.connection)}`" if kafka.connection else "",
             f"bootstrap `{_md(kafka.bootstrap)}`" if kafka.bootstrap else ""]
    return ", ".join(p for p in parts if p)


# ---- every file of the folder --------------------------------------------------------------------
def load_dags(folder: str | Path | None = None) -> dict[str, DAG]:
    """The DAGs of every pipeline file; a broken file is reported as its own import error."""
    dags: dict[str, DAG] = {}
    owners: dict[str, Path] = {}
    for path in pipeline_files(folder):
        try:
            cfg = load_pipeline(path)
            if cfg.dag_id in owners:
                raise PipelineConfigError(f"{path}: pipeline.name: {cfg.name!r} is also the name in "
                                          f"{owners[cfg.dag_id]}; "
                                          "fix: give each pipeline its own name")
            dags[cfg.dag_id] = build_dag(cfg, path)
            owners[cfg.dag_id] = path
        except PipelineConfigError as exc:
            report_import_error(path, str(exc))
        except Exception as exc:  # noqa: BLE001 - whatever Airflow refuses in one file leaves the others' DAGs
            report_import_error(path, f"{path}: Airflow refused the DAG: {type(exc).__name__}: {exc}")
    return dags


def report_import_error(path: Path, message: str) -> None:
    """Shows a pipeline file's error in Airflow as an import error of that file, leaving the others' DAGs.

    Airflow records import errors per file parsed; the loader parses many files in one, so it adds the
    file's entry to the DagBag that is importing it (the DAG processor's, or a test's)."""
    log.error("pipeline file not loaded: %s", message)
    bag = _importing_dagbag()
    if bag is None:
        return
    relative = bag._get_relative_fileloc(str(path)) if hasattr(bag, "_get_relative_fileloc") else str(path)
    bag.import_errors[relative] = message


def _importing_dagbag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    for frame_info in inspect.stack(context=0):
        candidate = frame_info.frame.f_locals.get("self")
        if isinstance(candidate, DagBag):
            return candidate
    return None

