"""The decode stage: raw snapshot -> change records + quarantine + balanced counts (format-agnostic)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.formats import (
    DECODED,
    ENVELOPE,
    IGNORED,
    MESSAGE_SHAPES,
    QUARANTINED,
    DecodeOptions,
)
from jobs.formats.base import LINEAGE, event_id
from jobs.formats.decoders import get_decoder
from jobs.model.record import CHANGE_RECORD_COLUMNS, QUARANTINE_SCHEMA
from jobs.model.reports import DecodeCounts, MessageCounts
from jobs.spark.observed import GroupRow, observe_groups
from jobs.spark.session import jvm_log_level

UNATTRIBUTED = "_unattributed"  # messages whose table could not be told (broken JSON, tombstones)
_EARLIEST, _LATEST = datetime(1, 1, 2), datetime(9999, 12, 30)
# what the decode counts its messages by (the table: UNATTRIBUTED where none could be told)
OUTCOME_GROUP = ("table", "topic", "status", "reason", "shape")


def materialize(df: DataFrame) -> DataFrame:
    """Compute ``df`` once and cut its lineage: the decoders' plans are large, and every later query
    over a merely persisted frame would analyse them again and compare them with the cache (seconds
    per query, whatever the data size). Its blocks go to local disk, not the heap: read a few times
    only (the counts, the change records' cache), they would otherwise share the heap with that cache
    and the fold, whose collections they slow down (bench/README.md, "Where the time goes").
    They go when the frame is dropped (release)."""
    return df.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)


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
    counts: DecodeCounts  # of the outcomes
    materialized: DataFrame  # what the three are projections of (see release)
    # documents of this snapshot that later runs may need (not yet in options.memory)
    remembered: list[str] = field(default_factory=list)
    # topic -> shape decided by this run, for later runs (not yet in options.topic_shapes)
    topic_shapes: dict[str, str] = field(default_factory=dict)


# a reason reaches command-line and pipeline-file users alike (the DAG passes the file's setting as the flag)
SHAPE_SETTING = "--message-shape, or source.message_shape in a pipeline file"


@dataclass(frozen=True)
class TopicShape:
    """The one shape a topic's messages have (a format with several, see jobs.formats), and why."""

    topic: str
    shape: str
    basis: str  # "set by --message-shape ...", "decided by an earlier run", or "N of M messages in this run"

    def misfit_reason(self) -> str:
        other = " or ".join(s for s in MESSAGE_SHAPES if s != self.shape)
        return (f"does not fit its topic's shape: topic {self.topic!r} carries {self.shape} messages "
                f"({self.basis}), this message is {other} (set {SHAPE_SETTING}, if the topic's shape changed)")


def decide_topic_shapes(counts: dict[tuple[str, str], int], configured: str | None,
                        remembered: dict[str, str]) -> dict[str, TopicShape]:
    """Each topic's shape from the shapes of its messages in this run (``counts``: (topic, shape) ->
    messages): the configured shape, else the one an earlier run decided, else the shape most of them
    have (envelopes on a tie). A topic carries one shape: a message of another one does not belong there
    (a stray object on a topic of envelopes must not become a row of a table named after the topic)."""
    by_topic: dict[str, dict[str, int]] = {}
    for (topic, shape), n in counts.items():
        by_topic.setdefault(topic, {})[shape] = n
    decided = {}
    for topic, shapes in sorted(by_topic.items()):
        if configured:
            decided[topic] = TopicShape(topic, configured, "set by --message-shape or source.message_shape")
        elif topic in remembered:
            decided[topic] = TopicShape(topic, remembered[topic], "decided by an earlier run")
        else:
            shape = max(sorted(shapes), key=lambda s: (shapes[s], s == ENVELOPE))
            decided[topic] = TopicShape(topic, shape, f"{shapes[shape]} of {sum(shapes.values())} messages in this run")
    return decided


def _misfit_reason(shapes: dict[str, TopicShape]) -> Column:
    """The reason a message does not fit its topic's shape (null where it fits or has no shape)."""
    reason = F.lit(None).cast("string")
    for topic, decided in shapes.items():
        reason = F.when((F.col("topic") == topic) & (F.col("shape") != decided.shape),
                        F.lit(decided.misfit_reason())).otherwise(reason)
    return reason


def decode_messages(raw: DataFrame, fmt: str, options: DecodeOptions) -> Decoded:
    """Decode with the format's decoder and split the outcomes.

    Computed once (see materialize), already exploded: a row per change record, or one row for a
    message without records (quarantined, ignored). Outcomes, change records and quarantine are
    projections of it, so the records are held in memory once, not as arrays and again as rows."""
    decoder = get_decoder(fmt)
    found = decoder.remember(raw)
    new = sorted(set(found) - set(options.memory))
    if new:
        options = replace(options, memory=tuple(sorted({*options.memory, *new})))
    exploded, groups = _checkpointed(decoder.decode(raw, options))
    first_rows = exploded.where(_first_row()).drop("_record_index", "_record")
    shapes, misfits = _topic_shapes(decoder, groups, options)
    misfit = F.lit(None).cast("string") if not misfits else _misfit_reason(shapes)
    outcomes = first_rows if not misfits else first_rows.withColumns({
        "status": F.when(misfit.isNotNull(), F.lit(QUARANTINED)).otherwise(F.col("status")),
        "reason": F.coalesce(misfit, F.col("reason")),
        # its table was named after the topic it does not belong to
        "table_id": F.when(misfit.isNull(), F.col("table_id")),
        "record_count": F.when(misfit.isNull(), F.col("record_count")).otherwise(F.lit(0)),
    })
    changes = _change_records(exploded, misfit)
    quarantine = outcomes.where((F.col("status") == QUARANTINED) & misfit.isNull()).select(
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
    if misfits:
        quarantine = quarantine.unionByName(_misfits_with_bytes(raw, first_rows, misfit, fmt))
    quarantine = quarantine.select(*[F.col(f.name).cast(f.dataType) for f in QUARANTINE_SCHEMA.fields])
    decided_here = {t: s.shape for t, s in shapes.items()
                    if t not in options.topic_shapes and not options.message_shape}
    # a message that misfits its topic is relabeled by the expression above: counted again after it
    try:
        counts = decode_counts(outcomes) if misfits else counts_of(_outcome_groups(groups))
    except BaseException:
        release(exploded)
        raise
    return Decoded(outcomes, changes, quarantine, counts, exploded, new, decided_here)


def exploded_outcomes(decoded: DataFrame) -> DataFrame:
    """The decoder's outcomes exploded: a row per change record, or one for a message without records."""
    return decoded.select(
        "status", "reason", "table_id", F.coalesce(F.size("records"), F.lit(0)).alias("record_count"), "shape",
        # a decoded message's bytes live on in its change records: only the quarantine needs them kept
        *[F.when(F.col("status") == QUARANTINED, F.col(c)).alias(c) if c in ("key", "value", "headers")
          else F.col(c) for c in LINEAGE],
        F.posexplode_outer("records").alias("_record_index", "_record"),
    )


def _checkpointed(decoded: DataFrame) -> tuple[DataFrame, list[GroupRow]]:
    """The decoder's outcomes exploded and computed once (materialize); and its messages and records per
    OUTCOME_GROUP, observed as that pass ran."""
    exploded, observed = observe_groups(
        exploded_outcomes(decoded),
        [F.coalesce("table_id", F.lit(UNATTRIBUTED)), *[F.col(c) for c in OUTCOME_GROUP[1:]]], F.col("record_count"),
        where=_first_row())
    exploded = materialize(exploded)
    return exploded, observed.rows()


def _first_row() -> Column:
    """The first row of each decoded message (a message without records has one row, its index null)."""
    return F.coalesce(F.col("_record_index") == 0, F.lit(True))


def _outcome_groups(groups: list[GroupRow]) -> list[dict]:
    """The observed groups summed over their messages' shapes, as decode_counts' aggregate gives them."""
    counted = [c for c in OUTCOME_GROUP if c != "shape"]
    summed: dict[tuple, list[int]] = {}
    for g in groups:
        group = dict(zip(OUTCOME_GROUP, g.group))
        total = summed.setdefault(tuple(group[c] for c in counted), [0, 0])
        total[0] += g.rows
        total[1] += g.total
    return [{**dict(zip(counted, group)), "messages": n, "records": records}
            for group, (n, records) in summed.items()]


def _change_records(exploded: DataFrame, misfit: Column) -> DataFrame:
    """The decoded messages' change records, one row each, with their id and a readable commit time."""
    changes = (
        exploded.where((F.col("status") == DECODED) & F.col("_record").isNotNull() & misfit.isNull())
        .select("_record.*")
        .select(*CHANGE_RECORD_COLUMNS)
    )
    # a decoder may leave a record's id to the stage (the JVM-side ones do): the same function of the
    # record's own fields, here in generated code over the exploded rows
    changes = changes.withColumns({
        "event_id": F.coalesce(F.col("event_id"), event_id(
            *[F.col(c) for c in ("table_id", "op", "position", "key", "before", "after")])),
        # a commit time past what readers hold (Python's datetime, and so pyiceberg and GX, ends in
        # year 9999) is a broken message's, not a time: unknown
        "event_time": F.when(F.col("event_time").between(F.lit(_EARLIEST), F.lit(_LATEST)), F.col("event_time")),
    })
    return changes


def _topic_shapes(decoder, groups: list[GroupRow], options: DecodeOptions) -> tuple[dict[str, TopicShape], int]:
    """Each topic's shape (decide_topic_shapes) and how many messages do not fit theirs; nothing for a
    format with one shape. From the observed groups: (topic, shape) -> messages."""
    if not decoder.shaped:
        return {}, 0
    counts: dict[tuple[str, str], int] = {}
    for g in groups:
        group = dict(zip(OUTCOME_GROUP, g.group))
        topic, shape = group["topic"], group["shape"]
        if shape is not None:
            counts[(topic, shape)] = counts.get((topic, shape), 0) + g.rows
    shapes = decide_topic_shapes(counts, options.message_shape, options.topic_shapes)
    return shapes, sum(n for (topic, shape), n in counts.items() if shapes[topic].shape != shape)


def _misfits_with_bytes(raw: DataFrame, first_rows: DataFrame, misfit: Column, fmt: str) -> DataFrame:
    """The quarantine rows of the messages that do not fit their topic's shape, with their raw bytes
    read again from the snapshot (the decoded frame keeps the bytes of quarantined messages only)."""
    lineage = ["topic", "partition", "offset"]
    which = first_rows.where(misfit.isNotNull()).select(*lineage, misfit.alias("reason"))
    return raw.join(which, lineage).select(
        F.lit(fmt).alias("format"), "reason", F.lit(None).cast("string").alias("table_id"), *lineage,
        F.col("timestamp").alias("kafka_ts"), "key", "value")


def decode_counts(outcomes: DataFrame) -> DecodeCounts:
    """landed = decoded + quarantined + ignored, per table and in total, and the topics each table's messages
    came from (one small aggregate)."""
    rows = (
        outcomes.groupBy(F.coalesce("table_id", F.lit(UNATTRIBUTED)).alias("table"), "topic", "status", "reason")
        .agg(F.count(F.lit(1)).alias("messages"), F.sum("record_count").alias("records"))
        .collect()
    )
    return counts_of([r.asDict() for r in rows])


def counts_of(rows: list[dict]) -> DecodeCounts:
    """The counts of the messages per (table, topic, status, reason): ``rows`` of those and "messages",
    "records" (the records of the decoded ones)."""
    empty = {"landed": 0, DECODED: 0, QUARANTINED: 0, IGNORED: 0, "records": 0}
    tables: dict[str, dict] = {}
    topics: dict[str, set[str]] = {}
    total = dict(empty)
    reasons: dict[str, dict[str, int]] = {QUARANTINED: {}, IGNORED: {}}
    for row in rows:
        bucket = tables.setdefault(row["table"], dict(empty))
        topics.setdefault(row["table"], set()).add(row["topic"])
        for counts in (bucket, total):
            counts["landed"] += row["messages"]
            counts[row["status"]] += row["messages"]
            if row["status"] == DECODED:
                counts["records"] += int(row["records"] or 0)
        if row["status"] in reasons:
            kind = reasons[row["status"]]
            kind[row["reason"]] = kind.get(row["reason"], 0) + row["messages"]
    return DecodeCounts(
        total=MessageCounts.of(**total),  # no topics: those are per table
        tables={table: MessageCounts(**counts, topics=tuple(sorted(topics[table])))
                for table, counts in sorted(tables.items())},
        quarantine_reasons=dict(sorted(reasons[QUARANTINED].items())),
        ignored_reasons=dict(sorted(reasons[IGNORED].items())),
        balanced=all(c["landed"] == c[DECODED] + c[QUARANTINED] + c[IGNORED] for c in [total, *tables.values()]),
    )
