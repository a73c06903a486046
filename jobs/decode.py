"""The decode stage: raw snapshot -> change records + quarantine + balanced counts (format-agnostic)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.canonical import CHANGE_RECORD_COLUMNS, QUARANTINE_SCHEMA
from jobs.decoders import DECODED, IGNORED, QUARANTINED, DecodeOptions, get_decoder, remembered_documents
from jobs.decoders.common import LINEAGE, event_id
from jobs.spark import jvm_log_level

UNATTRIBUTED = "_unattributed"  # messages whose table could not be told (broken JSON, tombstones)


def materialize(df: DataFrame) -> DataFrame:
    """Compute ``df`` once and cut its lineage: the decoders' plans are large, and every later query
    over a merely persisted frame would analyse them again and compare them with the cache (seconds
    per query, whatever the data size). Blocks spill to disk; they go when the frame is dropped."""
    return df.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)


def release(df: DataFrame) -> None:
    """Drop the blocks of a frame made by ``materialize`` at once. A local checkpoint is not in Spark's
    cache manager, so ``DataFrame.unpersist`` does not reach it; left alone, its blocks (spilled to
    disk past the heap) stay until the JVM happens to collect the frame's RDD. Spark warns that such an
    RDD cannot be recomputed once dropped: expected (nothing reads it again), so kept out of the log."""
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        rdd = plan.rdd()
        with jvm_log_level(df.sparkSession, rdd.getClass().getName(), "ERROR"):
            rdd.unpersist(False)


@dataclass
class Decoded:
    outcomes: DataFrame  # one row per message: status, reason, table_id, record_count + lineage
    changes: DataFrame  # canonical change records
    quarantine: DataFrame  # QUARANTINE_SCHEMA
    materialized: DataFrame  # what the three are projections of (see release)
    # documents of this snapshot that later runs may need (not yet in options.memory)
    remembered: list[str] = field(default_factory=list)


def decode_messages(raw: DataFrame, fmt: str, options: DecodeOptions) -> Decoded:
    """Decode with the format's decoder and split the outcomes.

    Computed once (see materialize), already exploded: a row per change record, or one row for a
    message without records (quarantined, ignored). Outcomes, change records and quarantine are
    projections of it, so the records are held in memory once, not as arrays and again as rows."""
    decoder = get_decoder(fmt)
    found = remembered_documents(decoder, raw)
    new = sorted(set(found) - set(options.memory))
    if new:
        options = replace(options, memory=tuple(sorted({*options.memory, *new})))
    decoded = decoder.decode(raw, options)
    exploded = materialize(decoded.select(
        "status", "reason", "table_id", F.coalesce(F.size("records"), F.lit(0)).alias("record_count"),
        # a decoded message's bytes live on in its change records: only the quarantine needs them kept
        *[F.when(F.col("status") == QUARANTINED, F.col(c)).alias(c) if c in ("key", "value", "headers")
          else F.col(c) for c in LINEAGE],
        F.posexplode_outer("records").alias("_record_index", "_record"),
    ))
    # the first row of each message (a message without records has one row, its index null)
    outcomes = exploded.where(F.coalesce(F.col("_record_index") == 0, F.lit(True))).drop(
        "_record_index", "_record")
    changes = (
        exploded.where((F.col("status") == DECODED) & F.col("_record").isNotNull())
        .select("_record.*")
        .select(*CHANGE_RECORD_COLUMNS)
    )
    # a decoder may leave a record's id to the stage (the JVM-side ones do): the same function of the
    # record's own fields, here in generated code over the exploded rows
    changes = changes.withColumn("event_id", F.coalesce(F.col("event_id"), event_id(
        *[F.col(c) for c in ("table_id", "op", "position", "key", "before", "after")])))
    quarantine = outcomes.where(F.col("status") == QUARANTINED).select(
        F.lit(fmt).alias("format"),
        "reason",
        "table_id",
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_ts"),
        "key",
        "value",
    )
    quarantine = quarantine.select(*[F.col(f.name).cast(f.dataType) for f in QUARANTINE_SCHEMA.fields])
    return Decoded(outcomes, changes, quarantine, exploded, new)


def decode_counts(outcomes: DataFrame) -> dict:
    """landed = decoded + quarantined + ignored, per table and in total (one small aggregate)."""
    rows = (
        outcomes.groupBy(F.coalesce("table_id", F.lit(UNATTRIBUTED)).alias("table"), "status", "reason")
        .agg(F.count(F.lit(1)).alias("messages"), F.sum("record_count").alias("records"))
        .collect()
    )
    empty = {"landed": 0, DECODED: 0, QUARANTINED: 0, IGNORED: 0, "records": 0}
    tables: dict[str, dict] = {}
    total = dict(empty)
    reasons: dict[str, dict[str, int]] = {QUARANTINED: {}, IGNORED: {}}
    for row in rows:
        bucket = tables.setdefault(row["table"], dict(empty))
        for counts in (bucket, total):
            counts["landed"] += row["messages"]
            counts[row["status"]] += row["messages"]
            if row["status"] == DECODED:
                counts["records"] += int(row["records"] or 0)
        if row["status"] in reasons:
            kind = reasons[row["status"]]
            kind[row["reason"]] = kind.get(row["reason"], 0) + row["messages"]
    return {
        "total": total,
        "tables": dict(sorted(tables.items())),
        "quarantine_reasons": dict(sorted(reasons[QUARANTINED].items())),
        "ignored_reasons": dict(sorted(reasons[IGNORED].items())),
        "balanced": all(c["landed"] == c[DECODED] + c[QUARANTINED] + c[IGNORED] for c in [total, *tables.values()]),
    }
