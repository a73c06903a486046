"""The pipeline's stages, each writing its report to the lake.

``transform`` (decode -> fold + publish -> validate) is one Spark application: the decoded change
records go to the fold in memory, never through storage (docs/design/overview.md, "The flow"). ``python -m jobs
run`` adds reconcile and alert in the same process; the Airflow DAG runs ``transform`` as one task and
reconcile, alert and expire as tasks of their own, which read the reports. Reading and writing stay
here, at the edges; the transformations they call are pure.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from jobs import failpoints
from jobs.decode.stage import Decoded, decode_messages, release
from jobs.fold.transactions import marks_a_transaction
from jobs.formats import DecodeOptions
from jobs.iceberg.catalog import key_columns_of, load_table, open_catalog
from jobs.iceberg.read import read_state, state_keys
from jobs.lake.layout import Lake
from jobs.lake.lease import Attempt, Lease, new_attempt_id
from jobs.lake.raw import TaskSplit, raw_size, read_raw, task_split
from jobs.model.record import CHANGE_RECORD_SCHEMA
from jobs.model.reports import (
    AlertReport,
    DecodeReport,
    ExpireReport,
    FoldReport,
    LandingReach,
    ReconciliationReport,
    Report,
    RunReport,
    RunReports,
    TableReconciliation,
    ValidationReport,
)
from jobs.progress import stage_done, stage_report
from jobs.quality.validate import import_gx_in_background, profile_changes
from jobs.reconcile.stage import ReconcileOptions
from jobs.settings import RunSettings, TransformSettings
from jobs.spark.observed import observe_count
from jobs.spark.session import session_conf, without_dictionary

if TYPE_CHECKING:
    from jobs.alert.smtp import SmtpSource

R = TypeVar("R", bound=Report)


@dataclass
class RunContext:
    lake: Lake
    pipeline: str
    run_id: str
    timings: dict[str, float] = field(default_factory=dict)
    stage: str | None = None  # the stage running (or the last one run): what a failure names
    progress: Callable[[str], None] | None = None  # told when each stage starts and ends (jobs.progress)
    # this attempt of the run: the id its files are written under, and the pipeline's lease while held
    attempt: Attempt = field(default_factory=lambda: Attempt(new_attempt_id()))

    @classmethod
    def of(cls, settings: RunSettings, progress: Callable[[str], None] | None = None) -> RunContext:
        """The context of the run ``settings`` name: its lake (with its catalog), pipeline and run id."""
        return cls(settings.lake_at(), settings.pipeline, settings.run_id, progress=progress)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """The pipeline's lease held inside (jobs.lake.lease): taken here unless this attempt holds it already,
        then checked (an attempt whose lease was taken over stops at its next stage)."""
        if self.attempt.lease is not None:
            self.attempt.check()
            yield
            return
        lease = Lease(self.lake, self.pipeline, self.run_id, self.attempt.id)
        lease.acquire()
        self.attempt = replace(self.attempt, lease=lease)
        try:
            yield
        finally:
            self.attempt = replace(self.attempt, lease=None)
            lease.release()

    @property
    def report_dir(self) -> str:
        return Lake.report_dir(self.pipeline, self.run_id)

    def write_report(self, report: Report) -> str:
        return self.lake.write_json(f"{self.report_dir}/{report.FILE}", report.to_json())

    def read_report(self, kind: type[R]) -> R | None:
        """The run's report of this kind (jobs.model.reports); None when the stage has not written it."""
        rel = f"{self.report_dir}/{kind.FILE}"
        return kind.from_json(self.lake.read_json(rel)) if self.lake.exists(rel) else None

    @contextmanager
    def timed(self, stage: str):
        start = time.perf_counter()
        self.stage = stage
        if self.progress:
            self.progress(f"{stage} ...")
        try:
            yield
        finally:
            self.timings[stage] = round(time.perf_counter() - start, 3)
        if self.progress:  # only after a stage that ended well: its report is this run's
            kind = stage_report(stage)
            report = self.read_report(kind) if kind is not None else None
            self.progress(stage_done(stage, self.timings[stage], report))


# Parquet's dictionary encoding pays for the change records' repetitive columns (op, table, column
# names) and is wasted on those nearly unique per record (ids, positions, row values): off for these,
# the write is faster and the files no larger; zstd rather than Spark's default snappy: half the bytes,
# written as fast (bench/README.md, "Writing the change records").
_UNIQUE_COLUMNS = ("event_id", "position", "offset", "kafka_ts", "event_time",
                   "key.key_value.value", "before.key_value.value", "after.key_value.value")
CHANGE_RECORD_PARQUET_OPTIONS = {"compression": "zstd", **without_dictionary(_UNIQUE_COLUMNS)}


def write_change_records(changes: DataFrame, path: str) -> None:
    """Change records to ``path`` in the lake's changes/ layout, replacing what is there."""
    # partition column named `table` so the folders read table=<table_id> (Spark escapes the value); a
    # writer open per table at once rather than a sort of every record by table
    with session_conf(changes.sparkSession, "spark.sql.maxConcurrentOutputFileWriters", "64"):
        changes.withColumn("table", F.col("table_id")).write.mode("overwrite").options(
            **CHANGE_RECORD_PARQUET_OPTIONS).partitionBy("table").parquet(path)


def run_decode(spark: SparkSession, ctx: RunContext, fmt: str, raw_path: str | list[str],
               options: DecodeOptions, keep_changes: bool = False) -> DecodedRun:
    """raw -> change records (held in memory for the fold) + quarantine/ + decode.json.

    The change records are an intermediate of the run, not an output: they are cached in Spark's
    columnar store (a fold's query reads only the columns it needs, as from Parquet, without the
    write and the read back; bench/README.md, "The fold") and written to changes/ only when
    ``keep_changes`` asks for an audit copy. The caller releases them (DecodedRun.release)."""
    with ctx.exclusive(), ctx.timed("decode"):
        memory, shapes = load_memory(ctx)
        split = task_split(raw_size(raw_path))
        with input_tasks(spark, split):
            raw = read_raw(spark, raw_path, split)
            decoded = decode_messages(raw, fmt, replace(options, memory=memory, topic_shapes=shapes))
            changes = decoded.changes.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                report, transaction_marks = _decode_outputs(ctx, fmt, raw_path, decoded, changes, keep_changes)
            except BaseException:
                changes.unpersist()
                raise
    return DecodedRun(changes, report, split, transaction_marks)


def _decode_outputs(ctx: RunContext, fmt: str, raw_path: str | list[str], decoded: Decoded, changes: DataFrame,
                    keep_changes: bool) -> tuple[DecodeReport, int]:
    """The decode's counts, record profile, quarantine, decoder memory and report (and the changes/ copy
    when kept), and how many records mark a transaction; the decoded messages' checkpoint is dropped once
    the records' cache is filled."""
    try:
        counts = decoded.counts  # observed as the decoded messages were checkpointed
        # the change suite's figures, from the pass that fills the cache (jobs.quality.validate), which
        # also counts the records the fold's transaction split looks for
        filling, transaction_marks = observe_count(changes, marks_a_transaction())
        profile = profile_changes(filling)
        if keep_changes:
            write_change_records(changes, ctx.lake.spark_path(Lake.changes_dir(ctx.pipeline, ctx.run_id)))
        # nothing quarantined (the counts say so): an empty dataset, without a scan of every record
        quarantine = decoded.quarantine if counts.total.quarantined else decoded.quarantine.limit(0)
        quarantine.write.mode("overwrite").parquet(ctx.lake.spark_path(Lake.quarantine_dir(ctx.pipeline, ctx.run_id)))
    finally:
        release(decoded.materialized)
    if decoded.remembered or decoded.topic_shapes:
        # knowledge from immutable landed data, keyed by run: a re-run rewrites the same file
        ctx.lake.write_json(f"{Lake.memory_dir(ctx.pipeline)}/run={ctx.run_id}.json",
                            {"run_id": ctx.run_id, "documents": decoded.remembered,
                             "topic_shapes": decoded.topic_shapes})
    report = DecodeReport.of_counts(
        counts, pipeline=ctx.pipeline, run_id=ctx.run_id, format=fmt, raw=raw_path,
        remembered_documents=len(decoded.remembered), topic_shapes=decoded.topic_shapes,
        record_profile=tuple(profile),
        changes_kept=Lake.changes_dir(ctx.pipeline, ctx.run_id) if keep_changes else None)
    ctx.write_report(report)
    failpoints.reached("decode.reported")
    return report, transaction_marks.value()


@dataclass
class DecodedRun:
    """What the decode hands the fold in the same application: the cached change records and its report."""

    changes: DataFrame
    report: DecodeReport
    split: TaskSplit = TaskSplit()  # how the input was cut into tasks: the fold's shuffles keep as many
    transaction_marks: int | None = None  # of the records, counted as they were cached (None: not known)

    def release(self) -> None:
        self.changes.unpersist()


def load_memory(ctx: RunContext) -> tuple[tuple[str, ...], dict[str, str]]:
    """Every document remembered by earlier runs of the pipeline, and the topic shapes they decided
    (the first decision of a topic stands; see jobs.formats.DecodeOptions)."""
    docs: set[str] = set()
    shapes: dict[str, str] = {}
    for rel in sorted(ctx.lake.list_files(Lake.memory_dir(ctx.pipeline))):
        if rel.endswith(f"/run={ctx.run_id}.json"):
            continue  # this run's own findings are found again
        memory = ctx.lake.read_json(rel)
        docs.update(memory.get("documents", []))
        for topic, shape in memory.get("topic_shapes", {}).items():
            shapes.setdefault(topic, shape)
    return tuple(sorted(docs)), shapes


@contextmanager
def input_tasks(spark: SparkSession, split: TaskSplit) -> Iterator[None]:
    """The decode's queries cut the raw Parquet into splits of ``split.max_split_bytes`` (jobs.lake.raw.task_split:
    a bounded number of messages per task), and shuffle into at least as many partitions as the input
    makes tasks."""
    with ExitStack() as stack:
        if split.max_split_bytes:
            stack.enter_context(session_conf(spark, "spark.sql.files.maxPartitionBytes", str(split.max_split_bytes)))
        shuffle = int(spark.conf.get("spark.sql.shuffle.partitions"))
        if split.tasks > shuffle:
            stack.enter_context(session_conf(spark, "spark.sql.shuffle.partitions", str(split.tasks)))
        yield


@contextmanager
def lake_scans(spark: SparkSession) -> Iterator[None]:
    """File scans inside (the state, kept change records) split into ~4 pieces per core. Spark packs files
    into splits of up to 128 MB: a few hundred MB make a handful of splits, one of them left running alone
    on one of the cores (bench/README.md, "The fold")."""
    pieces = 4 * spark.sparkContext.defaultParallelism
    with session_conf(spark, "spark.sql.files.minPartitionNum", str(pieces)):
        yield


def read_changes(spark: SparkSession, ctx: RunContext) -> DataFrame:
    """The change records a ``decode`` command kept under changes/ (the stage-by-stage split for debugging;
    ``transform`` and ``run`` hand them over in memory and never read them back)."""
    rel = Lake.changes_dir(ctx.pipeline, ctx.run_id)
    if not ctx.lake.exists(rel):
        raise FileNotFoundError(f"no change records of run {ctx.run_id} at {ctx.lake.join(rel)}: `python -m jobs "
                                "decode` writes them for `merge`; `transform` and `run` decode and fold in one job")
    schema = StructType([*CHANGE_RECORD_SCHEMA.fields, StructField("table", StringType())])
    return spark.read.schema(schema).parquet(ctx.lake.spark_path(rel)).drop("table")


def run_merge(spark: SparkSession, ctx: RunContext, changes: DataFrame, history: tuple[tuple[str, bool], ...] = (),
              buckets: int | None = None, transaction_marks: int | None = None) -> FoldReport:
    from jobs.fold.stage import merge_changes

    with ctx.exclusive(), ctx.timed("fold_publish"), lake_scans(spark):
        report = merge_changes(spark, ctx.lake, ctx.pipeline, ctx.run_id, changes, history=history, buckets=buckets,
                               attempt=ctx.attempt, transaction_marks=transaction_marks)
        ctx.write_report(report)
    return report


def run_validate(spark: SparkSession, ctx: RunContext, decode: DecodeReport | None = None) -> ValidationReport:
    """The change suite from the decode's record profile (no pass over the records), GX's state suite on
    every table the run published."""
    from jobs.quality.validate import check_changes, render_data_docs, validate_state, validation_report

    with ctx.exclusive(), ctx.timed("validate"), lake_scans(spark):
        decode = decode or ctx.read_report(DecodeReport)
        if decode is None or decode.record_profile is None:
            raise FileNotFoundError(f"no record profile of run {ctx.run_id} in its decode.json (not decoded yet, or by "
                                    "an older version): run the run again, or `python -m jobs decode` first")
        results = [check_changes(list(decode.record_profile))]
        fold = ctx.read_report(FoldReport) or FoldReport()
        catalog = open_catalog(ctx.lake)
        for table_id in sorted(fold.tables):
            table = load_table(catalog, ctx.pipeline, table_id)
            state = read_state(spark, table)
            keys = key_columns_of(table)
            if state is not None and keys:
                results.append(validate_state(state, table_id, keys))
        report = validation_report(results)
        ctx.write_report(report)
        failpoints.reached("validate.report-written")
        # the data docs kept with the run: one escaped HTML page
        ctx.lake.write_text(f"{ctx.report_dir}/validation.html", render_data_docs(results))
    return report


def run_transform(spark: SparkSession, ctx: RunContext, settings: TransformSettings) -> None:
    """decode -> fold + publish -> validate in this one Spark application: the change records go from the
    decode to the fold in memory. Idempotent for a run id, as each stage is: a retry redoes all of it.
    Under the pipeline's lease from start to end (jobs.lake.lease): the decode's quarantine and reports are
    the run's, not the attempt's, and a second attempt is refused before it spends a decode. ``settings.raw``
    names the input (jobs.cli fills it with the interval's landed folders where the settings named none)."""
    import_gx_in_background()
    with ctx.exclusive():
        decoded = run_decode(spark, ctx, settings.fmt, list(settings.raw), settings.decode_options(),
                             settings.keep_changes)
        try:
            with input_tasks(spark, replace(decoded.split, max_split_bytes=None)):
                run_merge(spark, ctx, decoded.changes, history=settings.history, buckets=settings.state_buckets,
                          transaction_marks=decoded.transaction_marks)
        finally:
            decoded.release()
        run_validate(spark, ctx, decoded.report)


def run_reconcile(ctx: RunContext, source_counts: str | None,
                  options: ReconcileOptions | None = None) -> tuple[TableReconciliation, ...]:
    """This run's source checkpoints (a counts file or a SQL source) and the pending ones, judged against
    the lake's counts through time (jobs.reconcile.stage); reconciliation.json says what each table got."""
    from jobs.iceberg.catalog import state_summary
    from jobs.reconcile.landed_reach import run_landing_reach
    from jobs.reconcile.stage import JudgedRows, drill_buckets, reconcile_run, source_checkpoints

    with ctx.timed("reconcile"):
        options = options or ReconcileOptions()
        if options.fmt is None:
            decode = ctx.read_report(DecodeReport)
            options = replace(options, fmt=decode.format if decode else None)
        state = state_summary(ctx.lake, ctx.pipeline)
        options = replace(options, drill_buckets=drill_buckets(ctx.lake, ctx.pipeline))
        new, how = source_checkpoints(source_counts, state, ctx.run_id, options) if source_counts else ([], None)
        landing = run_landing_reach(ctx.lake, ctx.pipeline, ctx.run_id, options.capture_delay_s)
        lake_rows = LakeRowsNow(ctx.lake, ctx.pipeline, state, options.key_rows_limit_of)
        rows = reconcile_run(ctx.lake, ctx.pipeline, ctx.run_id, new, state, options,
                             keys_now=lake_keys(ctx.lake, ctx.pipeline, state, options.key_rows_limit_of),
                             landing=landing, hashes_now=lake_rows.hashes,
                             rows_now=JudgedRows(source_counts, state, lake_rows.texts, options))
        ctx.write_report(ReconciliationReport(
            pipeline=ctx.pipeline, run_id=ctx.run_id, source=how, max_lag_s=options.max_lag_s,
            landing=LandingReach.from_json(landing.as_dict()), tables=rows))
    return rows


def lake_keys(lake: Lake, pipeline: str, state: dict[str, dict], limit: Callable[[str], int]):
    """The keys a state table holds now, for the keys of a mismatch (None past the table's ``limit`` of rows;
    none for a table the lake never published)."""
    def keys_now(table_id: str) -> list[str] | None:
        info = state.get(table_id)
        if not info or not info.get("key_columns") or info["state_rows"] > limit(table_id):
            return None if info else []
        return state_keys(open_catalog(lake), pipeline, table_id, info["key_columns"])
    return keys_now


class LakeRowsNow:
    """Each key's row in a state table now, as the rule's canonical texts (jobs.fold.fingerprints): the row
    hashes a value mismatch's keys are found by, and the columns its rows are shown with. Of every key of a
    table within its ``limit`` of rows; of a larger one, only of the keys in the buckets asked for (one
    streamed scan); None otherwise, and none for a table the lake never published. Read once per table."""

    def __init__(self, lake: Lake, pipeline: str, state: dict[str, dict], limit: Callable[[str], int]) -> None:
        self._lake, self._pipeline, self._state, self._limit = lake, pipeline, state, limit
        self._read: dict[tuple[str, frozenset[int] | None], dict[str, dict[str, str | None]] | None] = {}

    def hashes(self, table_id: str, buckets: frozenset[int] | None = None) -> dict[str, int] | None:
        from jobs.fold import fingerprints as rule

        rows = self._rows(table_id, buckets)
        return None if rows is None else {k: rule.text_hash(rule.joined_text(t)) for k, t in rows.items()}

    def texts(self, table_id: str, keys: Sequence[str]) -> dict[str, dict[str, str | None]] | None:
        """Some keys' rows: from what ``hashes`` read of the table, else (a small table) read now."""
        read = [rows for (table, _b), rows in self._read.items() if table == table_id and rows is not None]
        rows = next((r for r in read if all(k in r for k in keys)), None) or self._rows(table_id, None)
        return None if rows is None else {k: rows[k] for k in keys if k in rows}

    def _rows(self, table_id: str, buckets: frozenset[int] | None) -> dict[str, dict[str, str | None]] | None:
        info = self._state.get(table_id)
        if not info or not info.get("key_columns") or not info.get("columns"):
            return None if info else {}
        small = info["state_rows"] <= self._limit(table_id)
        if not small and buckets is None:
            return None
        wanted = None if small else buckets
        if (table_id, wanted) not in self._read:
            self._read[table_id, wanted] = self._scan(table_id, tuple(info["key_columns"]), info["columns"], wanted)
        rows = self._read[table_id, wanted]
        return rows if buckets is None or wanted is not None else _in_buckets(rows, info, buckets)

    def _scan(self, table_id: str, keys: tuple[str, ...], columns: dict[str, str],
              buckets: frozenset[int] | None) -> dict[str, dict[str, str | None]]:
        from jobs.fold import fingerprints as rule
        from jobs.iceberg.read import state_batches
        from jobs.model.keys import key_text

        out = {}
        for batch in state_batches(open_catalog(self._lake), self._pipeline, table_id, list(columns)):
            if buckets is not None:  # the keys' buckets first: the rows' texts only of those kept
                key_rows = batch.select(list(keys)).to_pylist()
                batch = batch.filter([rule.bucket_of(rule.value_texts(r, {k: columns[k] for k in keys}), keys)
                                      in buckets for r in key_rows])
            for row in batch.to_pylist():
                out[key_text(keys, [row[k] for k in keys])] = rule.value_texts(row, columns)
        return out


def _in_buckets(rows: dict[str, dict[str, str | None]], info: dict, buckets: frozenset[int]) -> dict:
    from jobs.fold import fingerprints as rule

    return {k: t for k, t in rows.items() if rule.bucket_of(t, info["key_columns"]) in buckets}


def run_alert(ctx: RunContext, alert_to: list[str], quarantine_threshold: float,
              smtp: SmtpSource | None = None) -> AlertReport:
    """report.html from the run's reports, then at most one email, which links to it (``smtp``: where the
    SMTP server's settings come from, asked only when an email is due; default jobs.alert.smtp.smtp_settings)."""
    from jobs.alert.stage import run_alert as send

    with ctx.timed("alert"):
        reports = run_reports(ctx)
        page = write_report_page(ctx, reports)
        result = send(ctx.pipeline, ctx.run_id, reports, alert_to, page, quarantine_threshold, smtp=smtp,
                      previous=ctx.read_report(AlertReport))
        ctx.write_report(result)
    return result


def run_reports(ctx: RunContext) -> RunReports:
    """The reports the run's stages wrote (an empty validation and reconciliation where none was)."""
    return RunReports(
        decode=ctx.read_report(DecodeReport), fold=ctx.read_report(FoldReport),
        validation=ctx.read_report(ValidationReport) or ValidationReport(),
        reconciliation=ctx.read_report(ReconciliationReport) or ReconciliationReport())


def run_metrics_of(ctx: RunContext) -> list:
    """The run's metrics (jobs.metrics) from the reports it wrote; the stages' seconds of its run.json and of
    this process (in a DAG, the transform task wrote run.json; the later tasks time themselves)."""
    from jobs.metrics import run_metrics

    run = ctx.read_report(RunReport)
    return run_metrics(ctx.pipeline, run_reports(ctx), {**(run.timings_s if run else {}), **ctx.timings})


def write_report_page(ctx: RunContext, reports: RunReports) -> str:
    """The run's report.html (jobs.alert.page); its URI."""
    from jobs.alert.page import quarantine_examples, render_report
    from jobs.lake import storage
    from jobs.land.outside import landing_summary

    examples: dict[str, list[dict]] = {}
    quarantine = Lake.quarantine_dir(ctx.pipeline, ctx.run_id)
    if reports.decode and reports.decode.total.quarantined and ctx.lake.exists(quarantine):
        examples = quarantine_examples(storage.parquet_dataset(ctx.lake.join(quarantine)))
    rel = f"{ctx.report_dir}/report.html"
    # an interval that landed nothing says so
    landing = landing_summary(reports.decode.raw if reports.decode else None)
    ctx.lake.write_text(rel, render_report(ctx.pipeline, ctx.run_id, reports, examples, landing))
    return ctx.lake.uri(rel)


def run_expire(ctx: RunContext, as_of: datetime, retain_days: int, retain_last: int,
               dry_run: bool = False) -> ExpireReport:
    """Snapshot expiry of the pipeline's tables (jobs.iceberg.expire); expire.json says what went (and the
    run id, which the report returned does not name). A dry run writes nothing at all (a read-only lake
    allows it): its report is only returned."""
    from jobs.iceberg.catalog import open_catalog
    from jobs.iceberg.expire import expire_pipeline
    from jobs.lake.ledger import drop_steps

    with ctx.timed("expire"):
        catalog = open_catalog(ctx.lake, read_only=dry_run)
        report = ExpireReport.from_json(expire_pipeline(catalog, ctx.pipeline, as_of, retain_days, retain_last,
                                                        dry_run))
        report = report.updated(tables=tuple(
            table.updated(count_steps_deleted=0 if dry_run else drop_steps(
                ctx.lake, ctx.pipeline, table.table, list(table.runs_expired)))
            for table in report.tables))
        if not dry_run:
            ctx.write_report(report.updated(run_id=ctx.run_id))
    return report
