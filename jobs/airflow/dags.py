"""One Airflow DAG per pipeline file (jobs.config), made by the file's DAG stub: a three-line Python file of
the same name beside it (``orders.py`` beside ``orders.yaml``: :data:`STUB`, which :func:`write_stub` writes)
that calls :func:`pipeline_dag` with its own path.

Airflow parses each stub on its own, so a pipeline file that does not validate is the import error of its
stub (the message names the file, the field and the fix) while the other stubs' DAGs load as usual, and a
worker running a task parses only that task's stub: no loader of many files, nothing of Airflow's internals.

Each DAG is ``land → transform → reconcile → alert → expire`` for the data interval ``[start, end)``
(jobs.airflow.tasks holds what the tasks run). The transform task's outlets are the pipeline's Iceberg
namespace and an alias through which each run names the tables it committed, so downstream DAGs can be
scheduled on a pipeline, or on one of its tables.

No pyspark here: the DAG processor imports this module on every parse.
"""
from __future__ import annotations

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
from jobs.config import (
    PIPELINE_SUFFIXES,
    PipelineConfig,
    PipelineConfigError,
    dag_stub,
    load_pipeline,
    parse_duration,
    read_document,
)
from jobs.errors import mask
from jobs.model.intervals import utc
from jobs.settings import RunSettings
from jobs.spark.class_archive import class_archive, with_driver_options

log = logging.getLogger(__name__)
EMBEDDED_CATALOG = "cdc"  # jobs.iceberg.catalog.open_catalog's name for the SQLite catalog inside a lake
PLUGIN_FILE = "cdc_timetables.py"  # registers jobs.airflow.timetable's timetable
STUB = '''"""The Airflow DAG of the pipeline file beside this stub, of the same name (docs/pipelines.md)."""
from jobs.airflow.dags import pipeline_dag

dag = pipeline_dag(__file__)
'''


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


class LineageMixin:
    """OpenLineage of a task, which Airflow's openlineage provider asks for once the task succeeded: the
    datasets the run's manifests and reports say it read and wrote (jobs.airflow.lineage.<kind>_lineage).

    Built at the end of ``execute``, in the task's own process: the provider asks for it in a forked process
    (``[openlineage] execute_in_thread`` off), where connections and XComs cannot be read. Never fails a task."""

    pipeline_file: str
    lineage: str
    _lineage: Any = None

    def note_lineage(self, start: str, end: str) -> None:
        try:
            from airflow.providers.openlineage.conf import is_disabled
        except ImportError:  # the provider is not installed: nobody asks
            return
        if is_disabled():  # no transport configured
            return
        from jobs.airflow import lineage

        try:
            cfg = load_pipeline(self.pipeline_file)
            settings = RunSettings.from_pipeline(cfg, (utc(start), utc(end)))
            self._lineage = getattr(lineage, f"{self.lineage}_lineage")(cfg, settings)
        except Exception as exc:  # noqa: BLE001 - lineage is a report of the task, never its failure
            log.warning("no OpenLineage datasets for task %s: %s: %s", self.lineage, type(exc).__name__, mask(str(exc)))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage

        return self._lineage or OperatorLineage()


class LineagePythonOperator(LineageMixin, PythonOperator):
    """A Python task of the DAG (jobs.airflow.tasks) with its OpenLineage (``lineage``: land or reconcile)."""

    def __init__(self, *, lineage: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline_file, self.lineage = kwargs["op_kwargs"]["pipeline_file"], lineage

    def execute(self, context: Any) -> Any:
        result = super().execute(context)
        window = self.op_kwargs if "start" in self.op_kwargs else result  # land returns the window it resolved
        self.note_lineage(window["start"], window["end"])
        return result


class TransformOperator(LineageMixin, SparkSubmitOperator):
    """spark-submit of the run's transform (``transform --pipeline-file FILE --start S --end E``: the driver
    makes the run's settings of the file), then one asset event per table it committed a snapshot to.

    Its arguments are the worker's own: Airflow 3 builds a task's operator where the task runs, from its DAG
    stub parsed there; with ``spark.ship_package``, the ``jobs`` archive is built when ``py_files`` is rendered
    there (tasks.ARCHIVE_MACRO), once per code version."""

    def __init__(self, *, pipeline_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline_file, self.lineage = pipeline_file, "transform"

    def execute(self, context: Any) -> None:
        # the first driver of the worker's JVM and Spark jars records the class archive the next ones map; the
        # hook returns once spark-submit's JVM (the driver) has exited, having written it
        archive = class_archive(record=True)
        self.conf = with_driver_options(self.conf or {}, archive)
        try:
            super().execute(context)
        finally:
            if archive is not None:
                archive.settle()
        start, end = (utc(context["ti"].xcom_pull(task_ids=tasks.LAND_TASK, key=k)) for k in ("start", "end"))
        self.note_lineage(start, end)
        cfg = load_pipeline(self.pipeline_file)  # read once by this process: when it parsed the stub
        settings = RunSettings.from_pipeline(cfg, (start, end))
        events = context["outlet_events"][tables_alias(cfg)]
        for table in tasks.published_tables(settings):
            events.add(table_asset(cfg, table["table"], table["iceberg_table"]),
                       extra={"run_id": settings.run_id, "snapshot_id": table["snapshot_id"], "rows": table["rows"]})


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
            f"did not load; fix: set [core] plugins_folder (AIRFLOW__CORE__PLUGINS_FOLDER) to the repository's "
            f"plugins/ folder (the one holding {PLUGIN_FILE}), or remove pipeline.end")
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
        user_defined_macros={tasks.ARCHIVE_MACRO: tasks.jobs_archive},
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
        land = LineagePythonOperator(task_id=tasks.LAND_TASK, python_callable=tasks.land, op_kwargs=file_arg,
                                     multiple_outputs=True, lineage="land")
        run = {**file_arg, "start": land.output["start"], "end": land.output["end"]}  # the interval land resolved
        transform = TransformOperator(
            task_id=tasks.TRANSFORM_TASK,
            pipeline_file=str(path),
            application_args=tasks.transform_args(**run),
            conn_id=cfg.spark.connection,
            name=f"cdc-transform-{cfg.name}",
            outlets=[namespace_asset(cfg), tables_alias(cfg)],
            **tasks.spark_settings(cfg),
        )
        reconcile = LineagePythonOperator(task_id="reconcile", python_callable=tasks.reconcile, op_kwargs=run,
                                          lineage="reconcile")
        alert = PythonOperator(task_id="alert", python_callable=tasks.alert, op_kwargs=run)
        expire = PythonOperator(task_id="expire", python_callable=tasks.expire, op_kwargs=run)
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
        lines += ["", "| tables | primary keys | history | count tolerance | key rows limit | sensitive columns "
                  "| value tolerances |", "|---|---|---|---|---|---|---|"]
        lines += [f"| `{e(t.match)}` | {e(', '.join(t.primary_keys or [])) or '-'} | "
                  f"{'-' if t.history is None else 'on' if t.history else 'off'} | {t.count_tolerance or '-'} | "
                  f"{'-' if t.key_rows_limit is None else t.key_rows_limit} | "
                  f"{e(', '.join(t.sensitive_columns or [])) or '-'} | "
                  f"{e(', '.join(f'{c} ±{v:g}' for c, v in (t.value_tolerances or {}).items())) or '-'} |"
                  for t in cfg.tables]
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


# ---- a pipeline file's DAG stub --------------------------------------------------------------------
def pipeline_dag(stub: str | Path) -> DAG:
    """The DAG of the pipeline file beside ``stub`` (a DAG file: :data:`STUB`) with its name. A file that
    cannot make one raises PipelineConfigError, which Airflow shows as the stub's import error."""
    try:
        return _dag_of(_pipeline_file(Path(stub)))
    except PipelineConfigError as exc:  # raised here: the import error's last frames are the stub and this line
        raise PipelineConfigError(str(exc)) from None


def _dag_of(path: Path) -> DAG:
    cfg = load_pipeline(path)
    taken = _name_taken(cfg, path)
    if taken:
        raise PipelineConfigError(f"{path}: pipeline.name: {cfg.name!r} is also the name in {taken}; "
                                  "fix: give each pipeline its own name")
    try:
        return build_dag(cfg, path)
    except PipelineConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever Airflow refuses, said as the file's mistake
        raise PipelineConfigError(f"{path}: Airflow refused the DAG: {type(exc).__name__}: {exc}") from None


def _pipeline_file(stub: Path) -> Path:
    for suffix in PIPELINE_SUFFIXES:
        if stub.with_suffix(suffix).is_file():
            return stub.with_suffix(suffix)
    raise PipelineConfigError(f"{stub}: a DAG stub without its pipeline file {stub.stem}.yaml beside it; fix: put "
                              "the pipeline file there, or remove the stub")


def _name_taken(cfg: PipelineConfig, path: Path) -> Path | None:
    """A pipeline file with a stub before ``path`` in its folder (name order) whose valid pipeline has the
    same name: that one keeps its DAG (Airflow parses each stub alone, and would take either)."""
    for other in sorted(p for p in path.parent.iterdir() if p.suffix in PIPELINE_SUFFIXES and p.name < path.name):
        if not dag_stub(other).is_file() or not _may_be_named(other, cfg.name):
            continue
        try:
            if load_pipeline(other).dag_id == cfg.dag_id:
                return other
        except PipelineConfigError:
            continue  # a broken file holds no name
    return None


def _may_be_named(path: Path, name: str) -> bool:
    """Whether the file's pipeline.name, as written, is ``name`` or reads a variable (cheap: no validation)."""
    try:
        written = str(((read_document(path) or {}).get("pipeline") or {}).get("name"))
    except (PipelineConfigError, AttributeError):
        return False
    return written == name or "${" in written


def write_stub(pipeline_file: str | Path) -> Path:
    """The DAG stub of a pipeline file, written beside it unless one is there: what makes its DAG."""
    stub = dag_stub(Path(pipeline_file))
    if not stub.exists():
        stub.write_text(STUB)
    return stub
