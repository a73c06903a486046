"""The pipeline's stages, each reading its inputs from the lake and writing its report there.

``python -m jobs run`` calls them in order in one SparkSession, the Airflow DAG each as its own task;
either way a stage reads what the one before it wrote (see run_decode for why). Reading and writing stay
here, at the edges; the transformations they call are pure.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from jobs import failpoints
from jobs.canonical import CHANGE_RECORD_SCHEMA
from jobs.decode import decode_counts, decode_messages, release
from jobs.decoders import QUARANTINED, DecodeOptions
from jobs.lake import Lake
from jobs.raw import read_raw
from jobs.spark import session_conf


@dataclass
class RunContext:
    lake: Lake
    pipeline: str
    run_id: str
    timings: dict[str, float] = field(default_factory=dict)
    stage: str | None = None  # the stage running (or the last one run): what a failure names

    @property
    def report_dir(self) -> str:
        return Lake.report_dir(self.pipeline, self.run_id)

    def write_report(self, name: str, report: dict) -> str:
        return self.lake.write_json(f"{self.report_dir}/{name}", report)

    def read_report(self, name: str) -> dict | None:
        rel = f"{self.report_dir}/{name}"
        return self.lake.read_json(rel) if self.lake.exists(rel) else None

    @contextmanager
    def timed(self, stage: str):
        start = time.perf_counter()
        self.stage = stage
        try:
            yield
        finally:
            self.timings[stage] = round(time.perf_counter() - start, 3)


# Parquet's dictionary encoding pays for the change records' repetitive columns (op, table, column
# names) and is wasted on those nearly unique per record (ids, positions, row values): off for these,
# the write of 1M records takes 4.8 s instead of 6.0 s and the files are no larger (bench/README.md).
# zstd rather than Spark's default snappy: the records of 4M messages take 174 MB instead of 321 MB,
# written as fast and read back no slower (bench/README.md); every later stage reads them, from S3 too.
_UNIQUE_COLUMNS = ("event_id", "position", "offset", "kafka_ts", "event_time",
                   "key.key_value.value", "before.key_value.value", "after.key_value.value")
CHANGE_RECORD_PARQUET_OPTIONS = {"compression": "zstd",
                                 **{f"parquet.enable.dictionary#{c}": "false" for c in _UNIQUE_COLUMNS}}


def write_change_records(changes: DataFrame, path: str) -> None:
    """Change records to ``path`` in the lake's changes/ layout, replacing what is there."""
    # partition column named `table` so the folders read table=<table_id> (Spark escapes the value); a
    # writer open per table at once rather than a sort of every record by table
    with session_conf(changes.sparkSession, "spark.sql.maxConcurrentOutputFileWriters", "64"):
        changes.withColumn("table", F.col("table_id")).write.mode("overwrite").options(
            **CHANGE_RECORD_PARQUET_OPTIONS).partitionBy("table").parquet(path)


def run_decode(spark: SparkSession, ctx: RunContext, fmt: str, raw_path: str | list[str],
               options: DecodeOptions) -> dict:
    """raw -> changes/ + quarantine/ + decode.json; returns the decode report.

    The decoded frame is dropped once written: the next stages read the change records back from
    changes/ (also in ``jobs run``), because a Parquet scan reads only the columns a query needs, where
    every pass over the held frame deserializes whole records (4M messages: fold + publish 61 -> 52 s,
    bench/README.md)."""
    with ctx.timed("decode"):
        memory, shapes = load_memory(ctx)
        decoded = decode_messages(read_raw(spark, raw_path), fmt, replace(options, memory=memory, topic_shapes=shapes))
        try:
            counts = decode_counts(decoded.outcomes)
            write_change_records(decoded.changes, ctx.lake.spark_path(Lake.changes_dir(ctx.pipeline, ctx.run_id)))
            failpoints.reached("decode.changes-written")
            # nothing quarantined (the counts say so): an empty dataset, without a scan of every record
            quarantine = decoded.quarantine if counts["total"][QUARANTINED] else decoded.quarantine.limit(0)
            quarantine.write.mode("overwrite").parquet(
                ctx.lake.spark_path(Lake.quarantine_dir(ctx.pipeline, ctx.run_id)))
        finally:
            release(decoded.materialized)
        if decoded.remembered or decoded.topic_shapes:
            # knowledge from immutable landed data, keyed by run: a re-run rewrites the same file
            ctx.lake.write_json(f"{Lake.memory_dir(ctx.pipeline)}/run={ctx.run_id}.json",
                                {"run_id": ctx.run_id, "documents": decoded.remembered,
                                 "topic_shapes": decoded.topic_shapes})
        report = {"pipeline": ctx.pipeline, "run_id": ctx.run_id, "format": fmt, "raw": raw_path, **counts,
                  "remembered_documents": len(decoded.remembered), "topic_shapes": decoded.topic_shapes}
        ctx.write_report("decode.json", report)
    return report


def load_memory(ctx: RunContext) -> tuple[tuple[str, ...], dict[str, str]]:
    """Every document remembered by earlier runs of the pipeline, and the topic shapes they decided
    (the first decision of a topic stands; see jobs.decoders.DecodeOptions)."""
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
def lake_scans(spark: SparkSession) -> Iterator[None]:
    """File scans inside (the change records, the state) split into ~4 pieces per core. Spark packs files
    into splits of up to 128 MB: the 300 MB of 4M records made 3 splits, one of them left running alone
    on one of 2 cores (4M messages: fold + publish 47.7 -> 44.5 s, bench/README.md)."""
    pieces = 4 * spark.sparkContext.defaultParallelism
    with session_conf(spark, "spark.sql.files.minPartitionNum", str(pieces)):
        yield


def read_changes(spark: SparkSession, ctx: RunContext) -> DataFrame:
    path = ctx.lake.spark_path(Lake.changes_dir(ctx.pipeline, ctx.run_id))
    schema = StructType([*CHANGE_RECORD_SCHEMA.fields, StructField("table", StringType())])
    df = spark.read.schema(schema).parquet(path)
    return df.drop("table")


def run_merge(spark: SparkSession, ctx: RunContext, history: bool = False, buckets: int | None = None) -> dict:
    from jobs.merge import merge_changes

    with ctx.timed("fold_publish"), lake_scans(spark):
        report = merge_changes(spark, ctx.lake, ctx.pipeline, ctx.run_id, read_changes(spark, ctx),
                               history=history, buckets=buckets)
        ctx.write_report("merge.json", report)
    return report


def run_validate(spark: SparkSession, ctx: RunContext) -> dict:
    from jobs import publish
    from jobs.validate import render_data_docs, validate_changes, validate_state, validation_report

    with ctx.timed("validate"), lake_scans(spark):
        results = [validate_changes(read_changes(spark, ctx))]
        merge_report = ctx.read_report("merge.json") or {"tables": {}}
        catalog = publish.open_catalog(ctx.lake)
        for table_id in sorted(merge_report["tables"]):
            table = publish.load_table(catalog, ctx.pipeline, table_id)
            state = publish.read_state(spark, table)
            keys = publish.key_columns_of(table)
            if state is not None and keys:
                results.append(validate_state(state, table_id, keys))
        report = validation_report(results)
        ctx.write_report("validation.json", report)
        failpoints.reached("validate.report-written")
        # the data docs kept with the run: one escaped HTML page
        ctx.lake.write_text(f"{ctx.report_dir}/validation.html", render_data_docs(results))
    return report


def run_reconcile(ctx: RunContext, source_counts: str | None) -> list[dict]:
    from jobs.merge import state_summary
    from jobs.reconcile import load_source_counts, reconcile_counts

    with ctx.timed("reconcile"):
        state = state_summary(ctx.lake, ctx.pipeline)
        counts = load_source_counts(source_counts, sorted(state)) if source_counts else {}
        rows = reconcile_counts(state, counts)
        ctx.write_report("reconciliation.json", {"pipeline": ctx.pipeline, "run_id": ctx.run_id, "tables": rows})
    return rows


def run_alert(ctx: RunContext, alert_to: list[str], quarantine_threshold: float) -> dict:
    from jobs.alert import run_alert as send

    with ctx.timed("alert"):
        validation = ctx.read_report("validation.json") or {"success": True, "suites": []}
        reconciliation = (ctx.read_report("reconciliation.json") or {"tables": []})["tables"]
        decode = ctx.read_report("decode.json") or {}
        result = send(
            ctx.pipeline, ctx.run_id, validation, reconciliation, decode, alert_to,
            ctx.lake.join(ctx.report_dir), quarantine_threshold, merge=ctx.read_report("merge.json"),
        )
        ctx.write_report("alert.json", result)
    return result


def run_expire(ctx: RunContext, as_of: datetime, retain_days: int, retain_last: int, dry_run: bool = False) -> dict:
    """Snapshot expiry of the pipeline's tables (jobs.expire); expire.json says what went."""
    from jobs.expire import expire_pipeline
    from jobs.publish import open_catalog

    with ctx.timed("expire"):
        report = expire_pipeline(open_catalog(ctx.lake), ctx.pipeline, as_of, retain_days, retain_last, dry_run)
        ctx.write_report("expire.json", {"run_id": ctx.run_id, **report})
    return report
