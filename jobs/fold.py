"""Dedupe + merge: fold a run's change records over a table's previous state (format-agnostic).

Semantics (DESIGN.md "Phase semantics"):
- redelivered duplicates (same ``event_id``) count once; the earliest copy is kept so that the
  relative order of records from one message never depends on which copy survived;
- CDC events at or before the table's full-load position are already in that load;
- TRUNCATE empties the table as of its position;
- per key, events apply in (position, offset, op rank) order: delete removes, insert / update /
  snapshot upsert, a partial image (``present_columns``) merges column by column over the prior row;
- a partial-image insert or update whose ``before`` names other key values than its ``key`` moves a
  row to a new key (SharePlex sends the changed columns only, OGG, Qlik and DTS may leave columns
  out): the new key starts from the row its old key held just before the move, then the image merges
  over it;
- an event at or before the position a state row was last changed at is a replay and is skipped, and
  so is a full-load row without a position for a row that a positioned event has changed.

State rows carry ``_cdc_position`` / ``_cdc_op`` / ``_cdc_event_time`` / ``_cdc_run_id``: where each
row's current version comes from, and what makes replays across runs harmless.
"""
from __future__ import annotations

import logging
import operator
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import reduce
from typing import NamedTuple

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs import canonical as C
from jobs.sql import sql_str

log = logging.getLogger(__name__)

META_COLUMNS = {
    "_cdc_position": "string",
    "_cdc_op": "string",
    "_cdc_event_time": "timestamp",
    "_cdc_run_id": "string",
}
# the types a state column may have; narrower integer types widen (Iceberg has no int8/int16)
_WIDEN = {"tinyint": "int", "smallint": "int", "byte": "int", "short": "int", "integer": "int", "long": "bigint",
          "real": "float", "bool": "boolean", "timestamp_ntz": "timestamp"}
_SIMPLE = {"string", "int", "bigint", "float", "double", "boolean", "date", "timestamp", "binary"}
_TS_FMT = "yyyy-MM-dd HH:mm:ss.SSSSSS"
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")  # a state type's precision and scale


def state_type(declared: str | None) -> str:
    """A declared column type -> the state type (unknown or exotic types stay strings)."""
    if not declared:
        return "string"
    t = _WIDEN.get(declared.strip().lower(), declared.strip().lower())
    if t in _SIMPLE or (t.startswith("decimal(") and t.endswith(")")):
        return t
    return "string"


def promotable(published: str, declared: str) -> bool:
    """Whether Iceberg can widen a column from ``published`` to ``declared`` (int -> bigint, float ->
    double, a decimal to more precision at the same scale) without rewriting data."""
    if (published, declared) in (("int", "bigint"), ("float", "double")):
        return True
    p, d = _DECIMAL.fullmatch(published), _DECIMAL.fullmatch(declared)
    return bool(p and d and p.group(2) == d.group(2) and int(d.group(1)) > int(p.group(1)))


@dataclass
class TableChanges:
    """What one run brings for one table, gathered by one small aggregate per kind."""

    table_id: str
    columns: list[str] = field(default_factory=list)  # in source order of first appearance
    types: dict[str, str] = field(default_factory=dict)  # declared by the format, where it declares
    key_columns: list[str] = field(default_factory=list)
    truncate_position: str | None = None
    # where in the log the run's last TRUNCATE lies (partition, offset): changes that share its
    # position (a Canal batch) and follow it in the partition survive it
    truncate_lineage: tuple[int, int] | None = None
    has_truncate: bool = False
    full_load_position: str | None = None
    records: int = 0
    # columns named by full row images of this run; None when the run has no full image
    full_image_columns: list[str] | None = None
    cdc_max_position: str | None = None
    # the latest load of the run: its first position, and whether CDC events of the table precede it
    load_start_position: str | None = None
    cdc_before_position: str | None = None  # the last CDC position before it
    # the latest position at which the format marked a full load of the table as ended (LOAD_END)
    load_end_marker: str | None = None
    # the latest position at which the format marked every table's full load as ended (Debezium
    # snapshot=last), the same for every table of the run
    every_load_end: str | None = None
    # partial-image inserts / updates whose before image holds other key values: rows moved to a new key
    key_moves: int = 0


def _describe_loads(rows: DataFrame, out: dict[str, TableChanges]) -> None:
    """Where the latest full load of each table starts: a load is one contiguous run of the table's
    positioned full-load rows in position order (no CDC event of the table between them)."""
    ends = {t: i.full_load_position for t, i in out.items() if i.full_load_position}
    if not ends:
        return
    end = F.element_at(F.create_map(*[x for t, e in ends.items() for x in (F.lit(t), F.lit(e))]), F.col("table_id"))
    loaded = rows.where(F.col("table_id").isin(*ends))
    before = dict(
        (r["table_id"], r["c"]) for r in loaded.where((F.col("phase") == C.CDC) & (F.col("position") < end))
        .groupBy("table_id").agg(F.max("position").alias("c")).collect()
    )
    after_cdc = F.element_at(F.create_map(*[x for t, c in before.items() for x in (F.lit(t), F.lit(c))]),
                             F.col("table_id")) if before else F.lit(None).cast("string")
    for r in (
        loaded.where((F.col("phase") == C.FULL_LOAD) & F.col("position").isNotNull()
                     & (after_cdc.isNull() | (F.col("position") > after_cdc)))
        .groupBy("table_id").agg(F.min("position").alias("s")).collect()
    ):
        info = out[r["table_id"]]
        info.load_start_position, info.cdc_before_position = r["s"], before.get(r["table_id"])


def load_start_after(changes: DataFrame, info: TableChanges, loaded_through: str) -> str | None:
    """The first full-load position of the table past ``loaded_through`` (and past the CDC events that
    precede the run's latest load): full-load rows at or before a load already applied are replays."""
    floor = max(loaded_through, info.cdc_before_position or "")
    row = (changes.where((F.col("table_id") == info.table_id) & (F.col("phase") == C.FULL_LOAD)
                         & (F.col("position") > floor))
           .agg(F.min("position").alias("s")).first())
    return row["s"] if row else None


def describe_changes(changes: DataFrame) -> dict[str, TableChanges]:
    """Per-table columns, types, keys and phase positions: small results, collected (three passes over
    the records, two more when the run has a full load, one more when it has load-end markers).

    The per-column answers come from the records grouped by shape (the names of their image and key
    columns: a handful per table), not from an explode of every record's columns. Positions are
    strings, whose maxima Spark aggregates by sorting: that pass sorts narrow rows of positions only,
    and the shape pass, with counts alone, aggregates by hashing (bench/README.md)."""
    is_row = F.col("op").isin(*C.ROW_OPS)
    # LOAD_END markers (no row op): ``after['scope']`` says whether they end their table's load or all
    load_end = (F.col("op") == C.LOAD_END) & F.col("position").isNotNull()
    positions = changes.select(
        "table_id", is_row.alias("is_row"),
        F.when(is_row & (F.col("op") == C.TRUNCATE), F.struct(
            F.coalesce("position", F.lit("")).alias("position"), "partition", "offset")).alias("trunc"),
        F.when(is_row & (F.col("phase") == C.FULL_LOAD), F.col("position")).alias("load"),
        F.when(is_row & (F.col("phase") == C.CDC), F.col("position")).alias("cdc_max"),
        F.when(load_end, F.col("position")).alias("end_own"),
    )
    out: dict[str, TableChanges] = {}
    own_end: dict[str, str] = {}
    for r in positions.groupBy("table_id").agg(
        F.count(F.when(F.col("is_row"), F.lit(1))).alias("n"),
        *[F.max(c).alias(c) for c in ("trunc", "load", "cdc_max", "end_own")],
    ).collect():
        if r["end_own"] is not None:
            own_end[r["table_id"]] = r["end_own"]
        if not r["n"]:
            continue
        out[r["table_id"]] = TableChanges(
            r["table_id"], records=r["n"], has_truncate=r["trunc"] is not None,
            truncate_position=r["trunc"] and r["trunc"]["position"] or None,
            truncate_lineage=r["trunc"] and (r["trunc"]["partition"], r["trunc"]["offset"]),
            full_load_position=r["load"], cdc_max_position=r["cdc_max"],
        )
    # the pass above reads no row image (Parquet reads a column whole, for every record, once a query
    # names it): a load end's scope is looked up in a pass of its own, only when the run has load ends
    every_end = changes.where(load_end & (F.element_at("after", "scope") == "all")).agg(
        F.max("position").alias("p")).first()["p"] if own_end else None
    for info in out.values():
        info.load_end_marker = max([p for p in (own_end.get(info.table_id), every_end) if p], default=None)
        info.every_load_end = every_end
    rows = changes.where(is_row)
    _describe_loads(rows, out)

    shapes = rows.groupBy(
        "table_id",
        F.map_keys(F.coalesce("after", "before")).alias("image_columns"),
        # a full image (no present_columns) names every column the table has at that point
        (F.col("after").isNotNull() & F.col("present_columns").isNull()).cast("int").alias("full"),
        F.map_keys("key").alias("key_columns"),
    ).agg(F.count(F.lit(1)).alias("n"), F.count(F.when(_moves_its_key(), F.lit(1))).alias("moves")).persist()
    try:
        _columns_of(shapes, out)
    finally:
        shapes.unpersist()

    # each column's type is the one the latest record naming it declares: the records' type maps are
    # few per table, so they are grouped first (the latest place of each) and only those are exploded,
    # not every record's map (DTS declares types in each record: 5.9 s of a 1M-message run's fold)
    declared = rows.where(F.col("column_types").isNotNull()).groupBy(
        "table_id", F.map_entries("column_types").alias("types")).agg(
        F.max(F.struct("position", "offset")).alias("at"))
    for r in (
        declared.select("table_id", "at", F.inline("types"))
        .groupBy("table_id", F.col("key").alias("col"))
        .agg(F.max_by("value", "at").alias("type"))
        .collect()
    ):
        out[r["table_id"]].types[r["col"]] = r["type"]
    return out


def _partial_with_before() -> Column:
    """A partial-image insert or update that carries a before image: what may move a row to a new key."""
    return F.col("op").isin(C.INSERT, C.UPDATE) & F.col("present_columns").isNotNull() & F.col("before").isNotNull()


def _moves_its_key() -> Column:
    """A partial-image insert or update whose before image holds another value of one of its key columns
    (by the record's own key; the fold checks again with the table's typed key columns: key_moves)."""
    return _partial_with_before() & F.exists(F.map_keys("key"), lambda k: F.element_at("before", k).isNotNull()
                                             & (F.element_at("before", k) != F.element_at("key", k)))


def _columns_of(shapes: DataFrame, out: dict[str, TableChanges]) -> None:
    """Each table's columns in order of first appearance, its key columns (those every keyed record
    names: the intersection of the key sets), and its key moves (counted per shape)."""
    for r in (
        shapes.select("table_id", "full", F.posexplode("image_columns").alias("pos", "col"))
        .groupBy("table_id", "col").agg(F.min("pos").alias("pos"), F.max("full").alias("full"))
        .orderBy("table_id", "pos", "col").collect()
    ):
        info = out[r["table_id"]]
        info.columns.append(r["col"])
        if r["full"]:
            info.full_image_columns = [*(info.full_image_columns or []), r["col"]]

    keyed = shapes.where(F.col("key_columns").isNotNull())
    with_key = {}
    for r in keyed.groupBy("table_id").agg(F.sum("n").alias("n"), F.sum("moves").alias("moves")).collect():
        with_key[r["table_id"]] = r["n"]
        out[r["table_id"]].key_moves = r["moves"]
    for r in (
        keyed.select("table_id", "n", F.explode("key_columns").alias("col"))
        .groupBy("table_id", "col").agg(F.sum("n").alias("n")).collect()
    ):
        if r["n"] == with_key[r["table_id"]]:
            out[r["table_id"]].key_columns.append(r["col"])
    for info in out.values():
        order = {c: i for i, c in enumerate(info.columns)}
        info.key_columns.sort(key=lambda c: (order.get(c, len(order)), c))


def to_canonical_string(col: Column, spark_type: str) -> Column:
    """Typed state value -> the canonical string a decoder would have produced."""
    if spark_type == "binary":
        return F.base64(col)
    if spark_type == "timestamp":
        return F.date_format(col, _TS_FMT)
    return col.cast("string")


# the dates Spark holds and readers do not: Python's (pyiceberg's statistics, GX) end in year 9999
_READABLE_DATES = ("0001-01-02", "9999-12-30")


def from_canonical_string(col: Column, spark_type: str) -> Column:
    if spark_type == "binary":
        return F.try_to_binary(col, F.lit("base64"))
    if spark_type == "string":
        return col
    typed = col.try_cast(spark_type)
    if spark_type in ("date", "timestamp"):
        # a date past what readers hold does not convert: published null, and counted as unconverted
        earliest, latest = (F.lit(d).cast(spark_type) for d in _READABLE_DATES)
        return F.when(typed.between(earliest, latest), typed)
    return typed


_EXAMPLE_CHARS = 100


def unconverted_values(rows: Column, types: dict[str, str], frame: DataFrame) -> dict[str, dict]:
    """What the typed state cannot hold of the row images ``rows`` (a map column of ``frame``), per
    column: values published as null because they do not convert to the column's type (``nulled``),
    and decimals with more fraction digits than its scale, published rounded (``rounded``), with the
    least such value as an ``example``. One aggregate, only over typed columns (a table of strings
    converts nothing); columns with nothing lost are left out."""
    checks: list[Column] = []
    typed = [c for c, t in types.items() if t != "string"]
    for i, col in enumerate(typed):
        text = F.element_at(rows, col)
        converted = from_canonical_string(text, types[col])
        nulled = text.isNotNull() & converted.isNull()
        decimal = _DECIMAL.fullmatch(types[col])
        # a digit other than 0 past the scale's digits of the fraction: try_cast rounds it away
        rounded = (converted.isNotNull() & text.rlike(rf"^\s*[-+]?[0-9]*\.[0-9]{{{decimal.group(2)}}}[0-9]*[1-9]")
                   if decimal else F.lit(False))
        checks += [F.count(F.when(nulled, 1)).alias(f"n{i}"), F.count(F.when(rounded, 1)).alias(f"r{i}"),
                   F.min(F.when(nulled | rounded, text)).alias(f"x{i}")]
    if not checks:
        return {}
    found = frame.where(rows.isNotNull()).agg(*checks).first()
    return {col: {"type": types[col], "nulled": found[f"n{i}"], "rounded": found[f"r{i}"],
                  "example": found[f"x{i}"][:_EXAMPLE_CHARS]}
            for i, col in enumerate(typed) if found[f"n{i}"] or found[f"r{i}"]}


def key_bucket(typed_keys: dict[str, str], buckets: int) -> Column:
    """The state bucket of a row, from its typed key columns (name -> type). Hashed from their canonical
    strings, so a key column's promotion (int -> bigint) keeps every row in its bucket."""
    hashed = F.xxhash64(*[to_canonical_string(F.col(k), t) for k, t in typed_keys.items()])
    return F.pmod(hashed, F.lit(buckets)).cast("int")


def touched_buckets(changes: DataFrame, typed_keys: dict[str, str], buckets: int) -> frozenset[int]:
    """The buckets a table's change records touch (at most ``buckets`` small rows reach the driver)."""
    keys = changes.where(F.col("key").isNotNull()).select(
        *[from_canonical_string(F.element_at("key", k), t).alias(k) for k, t in typed_keys.items()])
    rows = keys.select(key_bucket(typed_keys, buckets).alias("b")).distinct().collect()
    return frozenset(int(r["b"]) for r in rows)


def _op_rank() -> Column:
    """Inside one position and offset a delete goes first: a delete + create pair ends created."""
    return F.when(F.col("op") == C.DELETE, F.lit(1)).otherwise(F.lit(2))


def _ended_by_later_changes(changes: DataFrame, open_ids: list[str]) -> set[str]:
    """The transactions without their end marker that a later change has passed: a record of another
    transaction (or of none) at a higher position, logged after the transaction's last record in the
    same partition. Sources log transactions whole in commit order, so the transaction has ended; its
    end marker is in a topic the pipeline does not land (Qlik's transactionLastEvent and SharePlex's
    idx n/size count every table's changes of the transaction, Maxwell's commit is on the
    transaction's last row, of whichever table). Without this it would be held for ever."""
    if not open_ids:
        return set()
    lasts = (changes.where(F.col("tx_id").isin(*open_ids) & F.col("position").isNotNull())
             .groupBy("tx_id", "topic", "partition")
             .agg(F.max("offset").alias("_last_offset"), F.max("position").alias("_last_position")).collect())
    if not lasts:
        return set()
    last = changes.sparkSession.createDataFrame(
        [(r["tx_id"], r["topic"], r["partition"], r["_last_offset"], r["_last_position"]) for r in lasts],
        "_open_tx string, topic string, partition int, _last_offset bigint, _last_position string")
    later = (changes.select("tx_id", "topic", "partition", "offset", "position")
             .join(F.broadcast(last), ["topic", "partition"])
             .where((F.col("offset") > F.col("_last_offset")) & (F.col("position") > F.col("_last_position"))
                    & ~F.col("tx_id").eqNullSafe(F.col("_open_tx")))
             .select("_open_tx").distinct().collect())
    return {r["_open_tx"] for r in later}


def _bracket_openings(changes: DataFrame) -> tuple[Column, Column]:
    """(held, name) for the records an open bracket encloses: TX_BEGIN / TX_END markers without an id
    (DataWorks, DTS without ``sourceTxid``) enclose the records that follow a BEGIN until an END.

    Markers with a position bracket by position across the format's topics and partitions: the
    position is the source's log order, and a key-partitioned topic puts a transaction's rows on other
    partitions than its markers. Markers without one bracket by offset in their own partition. The
    records from the last BEGIN on are open while no END follows it (a next BEGIN closes the one
    before: logs do not interleave transactions)."""
    markers = changes.where(F.col("op").isin(C.TX_BEGIN, C.TX_END) & F.col("tx_id").isNull())
    by_position = (
        markers.where(F.col("position").isNotNull()).groupBy("format").agg(
            F.max(F.when(F.col("op") == C.TX_BEGIN, F.col("position"))).alias("open_from"),
            F.max(F.when(F.col("op") == C.TX_END, F.col("position"))).alias("ended_at"))
        .where(F.col("open_from").isNotNull()
               & (F.col("ended_at").isNull() | (F.col("ended_at") < F.col("open_from"))))
        .collect())
    by_offset = (
        markers.where(F.col("position").isNull()).groupBy("topic", "partition").agg(
            F.max(F.when(F.col("op") == C.TX_BEGIN, F.col("offset"))).alias("open_from"),
            F.max(F.when(F.col("op") == C.TX_END, F.col("offset"))).alias("ended_at"))
        .where(F.col("open_from").isNotNull()
               & (F.col("ended_at").isNull() | (F.col("ended_at") < F.col("open_from"))))
        .collect())
    held, name = F.lit(False), F.lit(None).cast("string")
    for r in by_position:
        here = (F.col("format") == r["format"]) & F.coalesce(F.col("position") >= F.lit(r["open_from"]), F.lit(False))
        held, name = held | here, F.when(here, F.lit(f"bracket {r['format']}@{r['open_from']}")).otherwise(name)
    for r in by_offset:
        here = ((F.col("topic") == r["topic"]) & (F.col("partition") == r["partition"])
                & (F.col("offset") >= F.lit(r["open_from"])))
        label = f"bracket {r['topic']}/{r['partition']}@{r['open_from']}"
        held, name = held | F.coalesce(here, F.lit(False)), F.when(here, F.lit(label)).otherwise(name)
    return held, name


class TransactionSplit(NamedTuple):
    applied: DataFrame
    held: DataFrame  # with ``held_transaction``, naming the open transaction of each record
    # the highest position of a transaction marked by id that this split ends (None: none): a later
    # run's record of a transaction at or before it is a redelivery of one already ended
    ended_through: str | None


def split_open_transactions(changes: DataFrame, ended_before: str | None = None) -> TransactionSplit:
    """(applied, held, ended_through): the records of transactions still open at the end of the
    snapshot are held.

    Two ways a format marks transactions:
    - by id: records of one ``tx_id`` of which some say whether they end it (``tx_last``: Qlik
      transactionLastEvent, SharePlex idx n/size, Maxwell commit, DTS BEGIN / COMMIT with their
      ``sourceTxid``, a Debezium transaction topic's BEGIN / END markers); the transaction is open while
      none of them is the end and no later change of its partition has passed it
      (_ended_by_later_changes). The id ties a transaction together across partitions;
    - by bracket, where nothing names the transaction (_bracket_openings).
    Records without a transaction id or without markers are always applied. A transaction by id that
    lies wholly at or before ``ended_before`` (earlier runs' ``ended_through``) is not open: its records
    are redelivered copies of a transaction whose end an earlier run applied (the fold skips them as
    replays); held, they would wait for an end that never comes again.
    """
    # per transaction by id, one aggregate; only the unended ones (those the snapshot cut) reach the driver
    per_tx = (changes.where(F.col("tx_id").isNotNull() & F.col("tx_last").isNotNull())
              .groupBy("tx_id").agg(F.max(F.col("tx_last").cast("int")).alias("ended"),
                                    F.max("position").alias("last_position")))
    replayed = F.coalesce(F.col("last_position") <= F.lit(ended_before), F.lit(False)) if ended_before \
        else F.lit(False)
    found = per_tx.agg(
        F.max(F.when(F.col("ended") == 1, F.col("last_position"))).alias("ended_through"),
        F.collect_list(F.when((F.col("ended") == 0) & ~replayed, F.struct("tx_id", "last_position"))).alias("unended"),
    ).first()
    candidates = {r["tx_id"]: r["last_position"] for r in found["unended"]}
    open_ids = sorted(set(candidates) - _ended_by_later_changes(changes, list(candidates)))
    ended_through = max([p for p in (found["ended_through"], *(candidates[t] for t in candidates if t not in open_ids))
                         if p], default=None)
    by_id = F.col("tx_id").isin(*open_ids) if open_ids else F.lit(False)
    by_bracket, bracket_name = _bracket_openings(changes)
    held_tx = F.when(by_id, F.concat(F.lit("id "), F.col("tx_id"))).otherwise(bracket_name)
    is_held = F.coalesce(by_id, F.lit(False)) | by_bracket
    return TransactionSplit(changes.where(~is_held), changes.where(is_held).withColumn("held_transaction", held_tx),
                            ended_through)


@dataclass
class Removal:
    """Rows removed at ``position`` (at ``time``, where the run's records tell it): every prior row
    (``keys`` None) or the rows of ``keys``."""

    position: str
    time: datetime | None
    keys: DataFrame | None = None


@dataclass
class FoldResult:
    state: DataFrame  # the table's complete new state
    tombstones: DataFrame  # keys deleted so far, with the position of their delete
    folded: DataFrame  # cached: release() once both are written
    versions: DataFrame | None = None  # SCD2 rows of this run's applied events (with history)
    cached: list[DataFrame] = field(default_factory=list)  # more frames the fold cached
    # the state as a delta of the prior: the rows of the keys this run has events of (``changed``,
    # those left alive) replace the prior rows of the same keys (``replaced``); the rest is unchanged
    changed: DataFrame | None = None
    replaced: DataFrame | None = None
    # rows the run removed without an event of their key (with history): a TRUNCATE removes every
    # prior row, a complete newer load the rows it does not hold; their history versions end there
    removals: list[Removal] = field(default_factory=list)

    def release(self) -> None:
        for frame in [self.folded, *self.cached]:
            frame.unpersist()


TOMBSTONE_META = {"_cdc_position": "string", "_cdc_run_id": "string"}


def _key_join(left: DataFrame, right: DataFrame, keys: list[str], how: str) -> DataFrame:
    return left.alias("_l").join(right.select(*keys).alias("_r"), _aliased_keys_match("_l", "_r", keys), how)


def narrowed_tombstones(tombstones: DataFrame, state: DataFrame, key_columns: list[str]) -> DataFrame:
    """The tombstones of a table re-keyed to fewer columns, read in those columns: a key a live row of
    the state holds is not deleted (a row moved from it under the wider key), and deleted wider keys
    that share the narrower one leave their latest delete."""
    return _key_join(tombstones, state, key_columns, "left_anti").groupBy(*key_columns).agg(
        F.max_by("_cdc_run_id", "_cdc_position").alias("_cdc_run_id"), F.max("_cdc_position").alias("_cdc_position"),
    ).select(*key_columns, "_cdc_position", "_cdc_run_id")


# an event inside the fold (``o`` orders a key's events; ``copy`` tells redelivered copies apart)
def _event(o: Column, op: Column, after: Column, present: Column, position: Column, event_time: Column,
           copy: Column, stays: Column | None = None) -> Column:
    """``stays``: the event is the image half of a key change that moves nothing (_stays_under_key)."""
    return F.struct(o.alias("o"), op.alias("op"), after.alias("after"), present.alias("present"),
                    position.alias("position"), event_time.alias("event_time"), copy.alias("copy"),
                    (F.lit(False) if stays is None else stays).alias("stays"))


def _in_order(events: Column) -> Column:
    return F.array_sort(events, lambda l, r: F.when(l["o"] < r["o"], -1).when(l["o"] > r["o"], 1).otherwise(0))


def _aliased_keys_match(left: str, right: str, keys: list[str]) -> Column:
    """The key columns of the frames aliased ``left`` and ``right`` equal, null-safe."""
    return reduce(operator.and_, [F.col(f"{left}.{k}").eqNullSafe(F.col(f"{right}.{k}")) for k in keys])


_PRIOR_META = ["_prior_row", "_prior_pos", "_prior_op", "_prior_ts", "_prior_run"]
# the internal op of a moved row's arrival at its new key (never published: its update follows it)
MOVE = "MOVE"
# which of a key's events apply over its prior state (SQL over ``e`` and ``_prior_pos``)
_APPLIES = """CASE
    -- a full-load row without a position (Qlik REFRESH) predates every positioned change:
    -- redelivered or landed late, it never overrides a row a CDC event has changed
    WHEN e.position IS NULL THEN NOT (e.op = 'SNAPSHOT' AND _prior_pos IS NOT NULL)
    ELSE _prior_pos IS NULL OR e.position > _prior_pos END"""
# the row after an event (SQL over ``acc.row`` and ``e``): a delete removes it, a partial image
# merges over the prior row
_ROW_AFTER = """CASE WHEN e.op = 'DELETE' THEN CAST(NULL AS MAP<STRING, STRING>)
                     WHEN e.present IS NULL THEN e.after
                     ELSE map_concat(coalesce(acc.row, CAST(map() AS MAP<STRING, STRING>)), e.after) END"""
# a row moved through a chain of keys in one run (A -> B -> C) needs one pass per link
MAX_MOVE_PASSES = 16


def _old_and_new_key(key_columns: list[str], types: dict[str, str]) -> tuple[dict[str, Column], dict[str, Column]]:
    """A record's old key (from its before image; a key column the image lacks did not change) and its
    new key (from its key), in the table's key columns, typed."""
    old = {k: from_canonical_string(F.coalesce(F.element_at("before", k), F.element_at("key", k)), types[k])
           for k in key_columns}
    new = {k: from_canonical_string(F.element_at("key", k), types[k]) for k in key_columns}
    return old, new


def _stays_under_key(key_columns: list[str], types: dict[str, str]) -> Column:
    """A partial-image insert / update with a before image that names the same values of the table's key
    columns as its key: the message changed a column its decoder took for a key column (SharePlex's
    ``key`` may carry a changed column's old value), but the row stays where it is."""
    old, new = _old_and_new_key(key_columns, types)
    return _partial_with_before() & reduce(operator.and_, [old[k].eqNullSafe(new[k]) for k in key_columns])


def _without_paired_deletes(events: Column) -> Column:
    """A key's events without the deletes that open a key change which, under the table's key, moves
    nothing: a decoder sends a key change as a delete of the old key and the new image in one message
    (same partition, offset and position), and when both name the same key the delete would drop the
    columns the partial image does not carry."""
    def paired(e: Column) -> Column:
        return (e["op"] == C.DELETE) & F.exists(events, lambda x: x["stays"] & (
            x["copy"]["partition"] == e["copy"]["partition"]) & (x["copy"]["offset"] == e["copy"]["offset"])
            & x["position"].eqNullSafe(e["position"]))
    return F.filter(events, lambda e: ~paired(e))


def key_moves(ev: DataFrame, key_columns: list[str], types: dict[str, str]) -> DataFrame:
    """The partial-image inserts / updates of a table that move a row from one key to another: its old key (the
    table's key columns, typed, from the before image; a key column it lacks did not change), ``_to``
    (the new key, typed), and the move's key map, order and identity."""
    old, new = _old_and_new_key(key_columns, types)
    changed = reduce(operator.or_, [~old[k].eqNullSafe(new[k]) for k in key_columns])
    moves = ev.where(_partial_with_before() & changed).select(
        *[old[k].alias(k) for k in key_columns],
        F.struct(*[new[k].alias(k) for k in key_columns]).alias("_to"),
        F.col("key").alias("_to_key"), F.col("position").alias("_move_pos"), F.col("offset").alias("_move_offset"),
        F.col("event_id").alias("_move_id"), F.col("partition").alias("_move_partition"),
        F.col("event_time").alias("_move_time"),
    )
    # a redelivered move counts once, as its first copy: a later copy would carry the row again, over
    # the image the first copy's update merged (the old key's delete at the move's position does not
    # remove the row a move carries, _moved_in)
    first = F.min_by(F.struct(*moves.columns), F.col("_move_offset"))
    return moves.groupBy("_move_id").agg(first.alias("_m")).select("_m.*")


def _moved_in(joined: DataFrame, moves: DataFrame, key_columns: list[str]) -> DataFrame:
    """Per new key, the rows moved to it: each as a full-image event just before the move's update,
    holding the row its old key had just before the move (before the move's delete of the old key)."""
    m, j = moves.alias("m"), joined.alias("j")
    pairs = m.join(j, _aliased_keys_match("m", "j", key_columns), "inner").select(
        "m._to", "m._to_key", "m._move_pos", "m._move_offset", "m._move_id", "m._move_partition",
        "m._move_time", "j._cdc_events", "j._prior_row", "j._prior_pos",
    )
    # the move's delete of the old key is in the same message (same offset, ranked first), or, where a
    # decoder sends a key change as two messages (Debezium's delete + create), in another message at the
    # same position: neither has removed the row the move carries
    before_move = F.expr(f"""
        aggregate(
          filter(_cdc_events, e -> e.o < named_struct('position', _move_pos, 'offset', _move_offset, 'rank', 1)
                              AND NOT (e.op = 'DELETE' AND coalesce(e.position = _move_pos, false))
                              AND ({_APPLIES})),
          named_struct('row', _prior_row),
          (acc, e) -> named_struct('row', {_ROW_AFTER})).row""")
    # a move at or before the old key's published position was applied by an earlier run
    arrivals = pairs.select("*", before_move.alias("_old_row")).where(
        F.col("_old_row").isNotNull() & (F.col("_prior_pos").isNull() | (F.col("_move_pos") > F.col("_prior_pos"))))
    # the moved row, with its key columns' new values
    image = F.map_concat(F.map_filter("_old_row", lambda k, v: ~F.map_contains_key("_to_key", k)), F.col("_to_key"))
    event = _event(
        F.struct(F.col("_move_pos").alias("position"), F.col("_move_offset").alias("offset"),
                 F.lit(0).alias("rank")),
        F.lit(MOVE), image, F.lit(None).cast("array<string>"), F.col("_move_pos"), F.col("_move_time"),
        F.struct(F.concat(F.lit("moved "), F.col("_move_id")).alias("event_id"),
                 F.col("_move_partition").alias("partition"), F.col("_move_offset").alias("offset")),
    )
    return arrivals.select(*[F.col("_to")[k].alias(k) for k in key_columns], event.alias("_cdc_e")) \
        .groupBy(*key_columns).agg(F.collect_list("_cdc_e").alias("_moved_in"))


def _with_arrivals(frame: DataFrame, arrivals: DataFrame, key_columns: list[str]) -> DataFrame:
    """Keys' events with the rows moved to them among them, in order."""
    f, a = frame.alias("f"), arrivals.alias("a")
    return f.join(a, _aliased_keys_match("f", "a", key_columns), "left").select(
        *[F.col(f"f.{k}").alias(k) for k in key_columns],
        F.when(F.col("a._moved_in").isNull(), F.col("f._cdc_events"))
        .otherwise(_in_order(F.concat("f._cdc_events", "a._moved_in"))).alias("_cdc_events"),
        *[F.col(f"f.{m}").alias(m) for m in _PRIOR_META],
    )


def _with_moved_rows(joined: DataFrame, ev: DataFrame, key_columns: list[str],
                     types: dict[str, str]) -> tuple[DataFrame, DataFrame]:
    """``joined`` with the rows moved to new keys among their events; and the cached frame to release
    once the fold is computed. A row moved again after an earlier move of the run (a chain of keys)
    needs the arrival of the earlier one: the arrivals are computed again, over the moves' old keys
    only, with the previous pass's arrivals until they no longer change (one pass per link of the
    longest chain)."""
    moves = key_moves(ev, key_columns, types).persist(StorageLevel.MEMORY_AND_DISK)
    base = joined.persist(StorageLevel.MEMORY_AND_DISK)
    # the keys rows move from: all a pass reads (few, against every key of the run)
    sources = _key_join(base, moves, key_columns, "left_semi").persist(StorageLevel.MEMORY_AND_DISK)
    # is there a chain at all: a move whose old key an earlier move of the run brought a row to
    first, then = moves.alias("a"), moves.alias("b")
    chained = first.join(then, reduce(operator.and_, [
        F.col("a._to")[k].eqNullSafe(F.col(f"b.{k}")) for k in key_columns
    ]) & (F.struct("a._move_pos", "a._move_offset") < F.struct("b._move_pos", "b._move_offset"))).limit(1).count()
    current_sources, arrivals, previous = sources, None, None
    for passes in range(1, MAX_MOVE_PASSES + 1):
        computed = _moved_in(current_sources, moves, key_columns).localCheckpoint(eager=True)
        # order-independent fingerprint of the arrivals (the small frame just computed)
        fingerprint = tuple(computed.select(F.count(F.lit(1)), F.bit_xor(F.xxhash64(*key_columns).bitwiseXOR(F.expr(
            "aggregate(transform(_moved_in, e -> xxhash64(to_json(e))), 0L, (acc, h) -> acc ^ h)")))).first())
        if fingerprint == previous:
            break  # the same arrivals as the pass before
        arrivals, previous = computed, fingerprint
        if not chained:
            break
        current_sources = _with_arrivals(sources, arrivals, key_columns)
    else:
        log.warning("key moves: the arrivals still changed after %d passes (a row moved through more keys in "
                    "one run): the last moves of such a row may lack the columns their messages do not carry",
                    MAX_MOVE_PASSES)
    log.info("key moves: arrivals of moved rows computed in %d pass(es)", passes)
    sources.unpersist()
    moves.unpersist()
    return _with_arrivals(base, arrivals, key_columns), base


def fold_table(
    prior: DataFrame | None,
    tombstones: DataFrame | None,
    changes: DataFrame,
    info: TableChanges,
    types: dict[str, str],
    key_columns: list[str],
    run_id: str,
    skip_cdc_through: str | None,
    skip_all_through: str | None,
    history: bool = False,
    replace_before: str | None = None,
    as_delta: bool = False,
) -> FoldResult:
    """New state of one table = fold(prior state, this run's changes of the table).

    ``types`` is the table's resulting schema (column -> type, in order); ``skip_cdc_through`` the
    table's full-load position (CDC events at or before it are in the load); ``skip_all_through``
    its last TRUNCATE position from earlier runs. ``tombstones`` remembers deleted keys, so that a
    redelivered old insert in a later run does not bring a deleted row back. ``replace_before`` is the
    start of a complete full load that replaces the table: rows last changed before it are removed.
    ``as_delta``: the state is wanted as a delta of the prior (``FoldResult.changed`` and ``replaced``),
    so the prior rows of the run's keys are read once and cached, not once for each.
    """
    columns = list(types)
    ev = changes.where(F.col("op").isin(C.SNAPSHOT, C.INSERT, C.UPDATE, C.DELETE))
    truncated_through = max([p for p in (skip_all_through, info.truncate_position) if p], default=None)
    if truncated_through:
        survives = F.col("position").isNull() | (F.col("position") > truncated_through)
        if info.truncate_lineage and info.truncate_position == truncated_through:
            # a change of the truncate's own position logged after it (one Canal batch id) survives it
            partition, offset = info.truncate_lineage
            survives |= ((F.col("position") == truncated_through) & (F.col("partition") == partition)
                         & (F.col("offset") > offset))
        ev = ev.where(survives)
    if skip_cdc_through:
        # a CDC event without a position cannot be placed before the load: it is kept
        ev = ev.where(~F.coalesce((F.col("phase") == C.CDC) & (F.col("position") <= skip_cdc_through), F.lit(False)))

    keyed = ev.select(
        *[from_canonical_string(F.element_at("key", k), types[k]).alias(k) for k in key_columns],
        _event(F.struct(F.col("position"), F.col("offset"), _op_rank().alias("rank")), F.col("op"), F.col("after"),
               F.col("present_columns"), F.col("position"), F.col("event_time"),
               F.struct("event_id", "partition", "offset"),
               _stays_under_key(key_columns, types) if info.key_moves else None).alias("_cdc_e"),
    )
    # One shuffle, by key. Redelivered duplicates (copies of an event share its key) are dropped
    # inside the key's events: sorted by (event id, partition, offset), the earliest copy of each
    # event is the first of its run. Then the events are sorted by their order key alone (images are
    # maps, which do not order).
    by_copy = F.array_sort(F.collect_list("_cdc_e"), lambda l, r: F.when(l["copy"] < r["copy"], -1)
                           .when(l["copy"] > r["copy"], 1).otherwise(0))
    unique = F.filter("_cdc_by_copy", lambda e, i: (i == 0) | ~F.col("_cdc_by_copy")[i - 1]["copy"]["event_id"]
                      .eqNullSafe(e["copy"]["event_id"]))
    grouped = keyed.groupBy(*key_columns).agg(by_copy.alias("_cdc_by_copy")).select(
        *key_columns, unique.alias("_cdc_events"))
    if info.key_moves:
        grouped = grouped.select(*key_columns, _without_paired_deletes(F.col("_cdc_events")).alias("_cdc_events"))
    grouped = grouped.select(*key_columns, _in_order(F.col("_cdc_events")).alias("_cdc_events"))

    # TRUNCATE in this run: nothing before it survives, rows nor tombstones
    if info.has_truncate:
        prior, tombstones = None, None
    priors = []
    replaced = None
    if prior is not None:
        prior_cols = [c for c in columns if c in prior.columns]
        replaced = _key_join(prior, grouped, key_columns, "left_semi")
        if as_delta:
            replaced = replaced.persist(StorageLevel.MEMORY_AND_DISK)
        priors.append(replaced.select(
            *key_columns,
            F.map_from_arrays(
                F.array(*[F.lit(c) for c in prior_cols]),
                F.array(*[to_canonical_string(F.col(c), types[c]) for c in prior_cols]),
            ).alias("_prior_row"),
            F.col("_cdc_position").alias("_prior_pos"),
            F.col("_cdc_op").alias("_prior_op"),
            F.col("_cdc_event_time").alias("_prior_ts"),
            F.col("_cdc_run_id").alias("_prior_run"),
        ))
    if tombstones is not None:
        priors.append(_key_join(tombstones, grouped, key_columns, "left_semi").select(
            *key_columns,
            F.lit(None).cast("map<string,string>").alias("_prior_row"),
            F.col("_cdc_position").alias("_prior_pos"),
            F.lit(C.DELETE).alias("_prior_op"),
            F.lit(None).cast("timestamp").alias("_prior_ts"),
            F.col("_cdc_run_id").alias("_prior_run"),
        ))
    if priors:
        prior_rows = priors[0] if len(priors) == 1 else priors[0].unionByName(priors[1])
        g, p = grouped.alias("g"), prior_rows.alias("p")
        joined = g.join(p, _aliased_keys_match("g", "p", key_columns), "left").select(
            *[F.col(f"g.{k}").alias(k) for k in key_columns], "g._cdc_events",
            *[F.col(f"p.{m}").alias(m) for m in _PRIOR_META]
        )
    else:
        joined = grouped.withColumns({
            "_prior_row": F.lit(None).cast("map<string,string>"),
            "_prior_pos": F.lit(None).cast("string"),
            "_prior_op": F.lit(None).cast("string"),
            "_prior_ts": F.lit(None).cast("timestamp"),
            "_prior_run": F.lit(None).cast("string"),
        })
    moved = None
    if info.key_moves:
        joined, moved = _with_moved_rows(joined, ev, key_columns, types)

    # with history, every applied event also leaves a version (the row after it); a moved-in row is
    # no version of its own: the move's update, at the same position, follows it
    versions_init = ", 'versions', CAST(array() AS ARRAY<STRUCT<row: MAP<STRING, STRING>, op: STRING, " \
                    "pos: STRING, ts: TIMESTAMP>>)" if history else ""
    versions_step = (f", 'versions', CASE WHEN e.op = '{MOVE}' THEN acc.versions ELSE concat(acc.versions, "
                     "array(named_struct('row', ROW_AFTER, 'op', e.op, 'pos', e.position, 'ts', e.event_time))) "
                     "END") if history else ""
    folded = joined.select(
        *key_columns,
        F.expr(
            """
            aggregate(
              filter(_cdc_events, e -> APPLIES),
              named_struct('row', _prior_row, 'pos', _prior_pos, 'op', _prior_op, 'ts', _prior_ts,
                           'run', _prior_run VERSIONS_INIT),
              (acc, e) -> named_struct(
                'row', ROW_AFTER,
                'pos', e.position, 'op', e.op, 'ts', e.event_time, 'run', RUN_ID VERSIONS_STEP))
            """.replace("VERSIONS_INIT", versions_init).replace("VERSIONS_STEP", versions_step)
            .replace("APPLIES", _APPLIES).replace("ROW_AFTER", _ROW_AFTER).replace("RUN_ID", sql_str(run_id))
        ).alias("_cdc_s"),
    ).persist(StorageLevel.MEMORY_AND_DISK)

    new_rows = folded.where(F.col("_cdc_s.row").isNotNull()).select(
        *[from_canonical_string(F.element_at("_cdc_s.row", c), types[c]).alias(c) for c in columns],
        F.col("_cdc_s.pos").alias("_cdc_position"),
        F.col("_cdc_s.op").alias("_cdc_op"),
        F.col("_cdc_s.ts").alias("_cdc_event_time"),
        F.col("_cdc_s.run").alias("_cdc_run_id"),
    )
    state = new_rows
    if prior is not None:
        unchanged = _key_join(prior, grouped, key_columns, "left_anti")
        state = unchanged.select(
            *[(F.col(c) if c in unchanged.columns else F.lit(None)).cast(types[c]).alias(c) for c in columns],
            *[F.col(m).cast(t).alias(m) for m, t in META_COLUMNS.items()],
        ).unionByName(new_rows)

    deleted = folded.where(F.col("_cdc_s.row").isNull() & F.col("_cdc_s.pos").isNotNull()).select(
        *key_columns, F.col("_cdc_s.pos").alias("_cdc_position"), F.col("_cdc_s.run").alias("_cdc_run_id")
    )
    if tombstones is not None:
        deleted = _key_join(tombstones, grouped, key_columns, "left_anti").select(
            *key_columns, *TOMBSTONE_META
        ).unionByName(deleted)
    if replace_before is not None:
        # a complete newer load replaced the table as of its start: a row whose last change is older
        # was not in it (its delete may never have arrived) and is gone
        stale = F.coalesce(F.col("_cdc_position"), F.lit("")) < F.lit(replace_before)
        removed = state.where(stale)
        deleted = deleted.unionByName(removed.select(
            *key_columns, F.lit(replace_before).alias("_cdc_position"), F.lit(run_id).alias("_cdc_run_id")))
        state = state.where(~stale)
    versions, removals = None, []
    if history:
        versions = history_versions(folded, key_columns, types, run_id)
        if info.has_truncate and info.truncate_position:
            removals.append(Removal(info.truncate_position, _time_at(changes, info.truncate_position, C.TRUNCATE)))
        if replace_before is not None:
            removals.append(Removal(replace_before, _time_at(changes, replace_before),
                                    removed.select(*[F.col(k) for k in key_columns])))
    cached = [f for f in (moved, replaced if as_delta else None) if f is not None]
    return FoldResult(state, deleted, folded, versions, cached, changed=new_rows, replaced=replaced,
                      removals=removals)


def _time_at(changes: DataFrame, position: str, op: str | None = None) -> datetime | None:
    """The source time of the run's records at ``position`` (of ``op``): one small aggregate."""
    at = changes.where(F.col("position") == position)
    if op is not None:
        at = at.where(F.col("op") == op)
    return at.agg(F.min("event_time")).first()[0]


HISTORY_META = {
    "_valid_from_position": "string", "_valid_from": "timestamp", "_valid_to_position": "string",
    "_valid_to": "timestamp", "_is_current": "boolean", "_op": "string", "_run_id": "string",
}


def history_versions(folded: DataFrame, key_columns: list[str], types: dict[str, str], run_id: str) -> DataFrame:
    """One SCD2 row per applied event: the row after it, valid until the key's next event of the run."""
    paired = folded.select(*key_columns, F.explode(F.expr(
        "transform(_cdc_s.versions, (v, i) -> named_struct('v', v, 'next', try_element_at(_cdc_s.versions, i + 2)))"
    )).alias("_cdc_x"))
    v, nxt = F.col("_cdc_x.v"), F.col("_cdc_x.next")
    return paired.select(
        *[F.col(k).cast(types[k]).alias(k) for k in key_columns],
        *[from_canonical_string(F.element_at(v["row"], c), types[c]).alias(c) for c in types if c not in key_columns],
        v["pos"].alias("_valid_from_position"), v["ts"].alias("_valid_from"),
        nxt["pos"].alias("_valid_to_position"), nxt["ts"].alias("_valid_to"),
        (nxt.isNull() & (v["op"] != C.DELETE)).alias("_is_current"),
        v["op"].alias("_op"), F.lit(run_id).alias("_run_id"),
    )


def close_history(prior: DataFrame | None, versions: DataFrame, key_columns: list[str],
                  columns: dict[str, str], removals: list[Removal] | None = None) -> DataFrame:
    """The history table after a run: the open-ended versions of keys this run changed end where the
    key's first new version begins; everything else of the prior history is kept as it was. Then the
    current versions of rows the run removed without an event of their key (``removals``) end there."""
    shape = [*[(F.col(c) if c in versions.columns else F.lit(None)).cast(t).alias(c) for c, t in columns.items()],
             *[F.col(m).cast(t).alias(m) for m, t in HISTORY_META.items()]]
    new = versions.select(*shape)
    removals = removals or []
    if prior is not None:
        # a TRUNCATE of this run emptied the prior state: every prior current version ends there (the
        # run's own versions all follow it; those before it were dropped with the rows)
        for removal in (r for r in removals if r.keys is None):
            prior = _closed_by_removal(prior, removal, key_columns)
    rows = new if prior is None else _closed_by_new_versions(prior, versions, new, key_columns, columns)
    for removal in (r for r in removals if r.keys is not None):
        rows = _closed_by_removal(rows, removal, key_columns)
    return rows


def _closed_by_removal(rows: DataFrame, removal: Removal, key_columns: list[str]) -> DataFrame:
    """``rows``' current versions (of ``removal.keys`` only, where given) end at the removal."""
    removed = F.col("_is_current")
    if removal.keys is not None:
        marked = removal.keys.select(*key_columns, F.lit(True).alias("_cdc_removed"))
        r, m = rows.alias("r"), marked.alias("m")
        rows = r.join(m, _aliased_keys_match("r", "m", key_columns), "left").select(
            "r.*", F.coalesce(F.col("m._cdc_removed"), F.lit(False)).alias("_cdc_removed"))
        removed = removed & F.col("_cdc_removed")
    closed = rows.withColumns({
        "_valid_to_position": F.when(removed, F.lit(removal.position)).otherwise(F.col("_valid_to_position")),
        "_valid_to": F.when(removed, F.lit(removal.time).cast("timestamp")).otherwise(F.col("_valid_to")),
        "_is_current": F.col("_is_current") & ~removed,
    })
    return closed.drop("_cdc_removed") if removal.keys is not None else closed


def _closed_by_new_versions(prior: DataFrame, versions: DataFrame, new: DataFrame, key_columns: list[str],
                            columns: dict[str, str]) -> DataFrame:
    first = versions.groupBy(*key_columns).agg(F.min_by(F.struct(
        F.col("_valid_from_position").alias("pos"), F.col("_valid_from").alias("ts")),
        F.struct(F.col("_valid_from_position"), F.col("_valid_from"))).alias("first"))
    prior = prior.select(*[(F.col(c) if c in prior.columns else F.lit(None)).cast(t).alias(c)
                           for c, t in {**columns, **HISTORY_META}.items()])
    p, f = prior.alias("p"), first.alias("f")
    joined = p.join(f, _aliased_keys_match("p", "f", key_columns), "left")
    open_ended = F.col("p._is_current") | ((F.col("p._op") == C.DELETE) & F.col("p._valid_to_position").isNull()
                                           & F.col("p._valid_to").isNull())
    closing = F.col("f.first").isNotNull() & open_ended
    kept = joined.select(
        *[F.col(f"p.{c}").alias(c) for c in columns],
        *[F.col(f"p.{m}").alias(m) for m in ("_valid_from_position", "_valid_from")],
        F.when(closing, F.col("f.first.pos")).otherwise(F.col("p._valid_to_position")).alias("_valid_to_position"),
        F.when(closing, F.col("f.first.ts")).otherwise(F.col("p._valid_to")).alias("_valid_to"),
        (F.col("p._is_current") & ~closing).alias("_is_current"),
        F.col("p._op").alias("_op"), F.col("p._run_id").alias("_run_id"),
    )
    return kept.unionByName(new)
