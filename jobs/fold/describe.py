"""What a run brings for each table (TableChanges): columns, declared types, keys, phase positions,
truncates, load markers and key moves, gathered by one small aggregate over the change records, which
also says how far the run reaches (RunChanges)."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.fold.plan import TableChanges
from jobs.model import record as C


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


def partial_with_before() -> Column:
    """A partial-image insert or update that carries a before image: what may move a row to a new key."""
    return F.col("op").isin(C.INSERT, C.UPDATE) & F.col("present_columns").isNotNull() & F.col("before").isNotNull()


def _moves_its_key() -> Column:
    """A partial-image insert or update whose before image holds another value of one of its key columns
    (by the record's own key; the fold checks again with the table's typed key columns: key_moves)."""
    return partial_with_before() & F.exists(F.map_keys("key"), lambda k: F.element_at("before", k).isNotNull()
                                             & (F.element_at("before", k) != F.element_at("key", k)))


@dataclass
class RunChanges:
    """What a run brings: per table (TableChanges, in table order), and how far its records reach (any
    op: a heartbeat moves it too), the highest position and source time (microseconds)."""

    tables: dict[str, TableChanges]
    reach_position: str | None = None
    reach_time: int | None = None


def describe_changes(changes: DataFrame) -> RunChanges:
    """Per-table columns, types, keys and phase positions, and the run's reach, from one small aggregate
    over the records (and two more when the run has a full load: _describe_loads).

    The records are grouped by table and shape (the names of their image and key columns, their
    declared types: a handful per table), never exploded per column, and every per-table answer is
    reduced from those groups here (bench/README.md, "The fold's fixed cost")."""
    is_row = F.col("op").isin(*C.ROW_OPS)
    # LOAD_END markers (no row op): ``after['scope']`` says whether they end their table's load or all
    load_end = (F.col("op") == C.LOAD_END) & F.col("position").isNotNull()
    groups = changes.groupBy(
        "table_id", is_row.alias("is_row"),
        F.when(load_end, F.element_at("after", "scope")).alias("end_scope"),
        F.when(is_row, F.map_keys(F.coalesce("after", "before"))).alias("image_columns"),
        # a full image (no present_columns) names every column the table has at that point
        F.when(is_row, F.col("after").isNotNull() & F.col("present_columns").isNull()).alias("full"),
        F.when(is_row, F.map_keys("key")).alias("key_columns"),
        F.when(is_row, F.map_entries("column_types")).alias("types"),
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.count(F.when(_moves_its_key(), F.lit(1))).alias("moves"),
        F.max(F.when(F.col("op") == C.TRUNCATE, F.struct(
            F.coalesce("position", F.lit("")).alias("position"), "partition", "offset"))).alias("trunc"),
        F.max(F.when(F.col("phase") == C.FULL_LOAD, F.col("position"))).alias("load"),
        F.max(F.when(F.col("phase") == C.CDC, F.col("position"))).alias("cdc_max"),
        F.max(F.when(load_end, F.col("position"))).alias("end_position"),
        F.max(F.when(F.col("column_types").isNotNull(), F.struct("position", "offset"))).alias("types_at"),
        F.max("position").alias("reach_position"), F.max(F.unix_micros("event_time")).alias("reach_time"),
    ).collect()
    rows = [g for g in groups if g["is_row"]]
    out = _tables_of(rows)
    _load_ends(groups, out)
    _columns_of(rows, out)
    _types_of(rows, out)
    _describe_loads(changes.where(is_row), out)
    return RunChanges(out, _latest([g["reach_position"] for g in groups]), _latest([g["reach_time"] for g in groups]))


def _ordered(value):
    """A sort key of a value Spark compares (nulls first, as Spark orders them), fields of a struct in turn."""
    if isinstance(value, tuple):
        return tuple(_ordered(v) for v in value)
    return (value is not None, value if value is not None else 0)


def _latest(values):
    present = [v for v in values if v is not None]
    return max(present, key=_ordered) if present else None


def _tables_of(rows: list) -> dict[str, TableChanges]:
    out: dict[str, TableChanges] = {}
    for table_id in sorted({g["table_id"] for g in rows}):
        mine = [g for g in rows if g["table_id"] == table_id]
        trunc = _latest([g["trunc"] for g in mine])
        out[table_id] = TableChanges(
            table_id, records=sum(g["n"] for g in mine), has_truncate=trunc is not None,
            truncate_position=trunc and trunc["position"] or None,
            truncate_lineage=trunc and (trunc["partition"], trunc["offset"]),
            full_load_position=_latest([g["load"] for g in mine]),
            cdc_max_position=_latest([g["cdc_max"] for g in mine]),
        )
    return out


def _load_ends(groups: list, out: dict[str, TableChanges]) -> None:
    """Each table's latest LOAD_END of its own and the latest one that ends every table's load."""
    ends = [g for g in groups if not g["is_row"]]
    every_end = _latest([g["end_position"] for g in ends if g["end_scope"] == "all"])
    for info in out.values():
        own = _latest([g["end_position"] for g in ends if g["table_id"] == info.table_id])
        info.load_end_marker = max([p for p in (own, every_end) if p], default=None)
        info.every_load_end = every_end


def _columns_of(rows: list, out: dict[str, TableChanges]) -> None:
    """Each table's columns in order of first appearance, its key columns (those every keyed record
    names: the intersection of the key sets), and its key moves (counted per shape)."""
    first: dict[tuple[str, str], int] = {}
    full: set[tuple[str, str]] = set()
    for g in rows:
        for pos, col in enumerate(g["image_columns"] or []):
            first[(g["table_id"], col)] = min(pos, first.get((g["table_id"], col), pos))
            if g["full"]:
                full.add((g["table_id"], col))
    for (table_id, col), _ in sorted(first.items(), key=lambda item: (item[0][0], item[1], item[0][1])):
        info = out[table_id]
        info.columns.append(col)
        if (table_id, col) in full:
            info.full_image_columns = [*(info.full_image_columns or []), col]
    keyed = [g for g in rows if g["key_columns"] is not None]
    with_key: dict[str, int] = {}
    naming: dict[tuple[str, str], int] = {}
    for g in keyed:
        with_key[g["table_id"]] = with_key.get(g["table_id"], 0) + g["n"]
        out[g["table_id"]].key_moves += g["moves"]
        for col in set(g["key_columns"]):
            naming[(g["table_id"], col)] = naming.get((g["table_id"], col), 0) + g["n"]
    for (table_id, col), n in naming.items():
        if n == with_key[table_id]:
            out[table_id].key_columns.append(col)
    for info in out.values():
        order = {c: i for i, c in enumerate(info.columns)}
        info.key_columns.sort(key=lambda c: (order.get(c, len(order)), c))


def _types_of(rows: list, out: dict[str, TableChanges]) -> None:
    """Each column's type: the one the latest record naming it declares (per group, the latest record
    declaring the group's types)."""
    latest: dict[tuple[str, str], tuple] = {}
    for g in rows:
        if g["types"] is None:
            continue
        at = _ordered(tuple(g["types_at"]))
        for entry in g["types"]:
            where = (g["table_id"], entry["key"])
            if where not in latest or (at, entry["value"]) > latest[where][:2]:
                latest[where] = (at, entry["value"])
    for (table_id, col), (_, declared) in latest.items():
        out[table_id].types[col] = declared
