"""What a run brings for each table (TableChanges): columns, declared types, keys, phase positions,
truncates, load markers and key moves, gathered by a few small aggregates over the change records."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs import canonical as C
from jobs.fold.plan import TableChanges


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
    and the shape pass, with counts alone, aggregates by hashing (bench/README.md, "The fold")."""
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
    # not every record's map, which DTS carries in each record (bench/README.md, "The fold")
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


def partial_with_before() -> Column:
    """A partial-image insert or update that carries a before image: what may move a row to a new key."""
    return F.col("op").isin(C.INSERT, C.UPDATE) & F.col("present_columns").isNotNull() & F.col("before").isNotNull()


def _moves_its_key() -> Column:
    """A partial-image insert or update whose before image holds another value of one of its key columns
    (by the record's own key; the fold checks again with the table's typed key columns: key_moves)."""
    return partial_with_before() & F.exists(F.map_keys("key"), lambda k: F.element_at("before", k).isNotNull()
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
