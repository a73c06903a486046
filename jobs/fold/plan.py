"""What one table needs from a run, decided before any Spark work: a pure, frozen TablePlan.

The plan reads what the run brings (``TableChanges``, from jobs.fold.describe) and what the catalog
holds of the table (``PublishedTable``); everything it decides -- columns and their types, keys and
re-keying, the position fences of full loads and truncates, the full load's state, whether every
bucket is rewritten -- is then followed by the Spark work (jobs.fold.stage).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from jobs.fold.types import META_COLUMNS, promotable, state_type
from jobs.model.buckets import BucketLayout
from jobs.model.keys import KEY_SETTING
from jobs.model.properties import (
    FULL_LOAD_POSITION_PROP,
    KEY_COLUMNS_PROP,
    PENDING_LOAD_PROP,
    TRUNCATE_POSITION_PROP,
)


@dataclass
class TableChanges:
    """What one run brings for one table, gathered by one small aggregate over its records (jobs.fold.describe)."""

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


WHOLE_ROW_KEY = "whole row (no key in the messages)"
MESSAGE_KEY = "message key or --primary-keys"


@dataclass(frozen=True)
class PublishedTable:
    """What the catalog holds of a table before the run (the default: no table yet)."""

    columns: Mapping[str, str] = field(default_factory=dict)  # column -> state type, in order
    key_columns: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    buckets: int | None = None  # the bucket count its layout was made for, when bucketed
    layout: BucketLayout | None = None  # its key buckets (Iceberg's bucket transform), when bucketed


@dataclass(frozen=True)
class TypeChange:
    column: str
    published: str
    declared: str
    promoted: bool  # Iceberg widens the column; else the published type is kept (values that do not fit are null)

    def as_dict(self) -> dict:
        return {"column": self.column, "published": self.published, "declared": self.declared,
                "action": "promoted" if self.promoted else "kept published type"}


@dataclass(frozen=True)
class FullLoad:
    """The table's latest full load: its first and last positions, and whether it is complete."""

    start: str
    end: str
    complete: bool

    def as_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "complete": self.complete}


@dataclass(frozen=True)
class TablePlan:
    table_id: str
    changes: TableChanges  # the run's changes of the table, with redelivered truncates set aside
    columns: Mapping[str, str]  # the table's data columns after the run -> state type, in order
    key_columns: tuple[str, ...]
    rekeyed_from: tuple[str, ...] | None  # the published key, when the run narrows it
    type_changes: tuple[TypeChange, ...]
    added_columns: tuple[str, ...]
    dropped_columns: tuple[str, ...]  # kept, null in new rows: no full image of the run names them
    skip_cdc_through: str | None  # the full-load position: CDC events at or before it are in the load
    skip_all_through: str | None  # the last TRUNCATE earlier runs applied: nothing at or before it survives
    full_load: FullLoad | None
    buckets: int | None  # the bucket count of the table after the run; None: unbucketed
    whole_table: bool  # every bucket is rewritten (new layout, truncate, complete load, re-key, key type change)
    properties: Mapping[str, str]  # the table properties this run commits
    # the table's key buckets, kept from its published layout; None where the run lays it out (or it is unbucketed)
    layout: BucketLayout | None = None

    @property
    def key_types(self) -> dict[str, str]:
        return {k: self.columns[k] for k in self.key_columns}

    @property
    def replace_before(self) -> str | None:
        """The start of a complete full load that replaces the table: rows last changed before it are gone."""
        return self.full_load.start if self.full_load and self.full_load.complete else None

    @property
    def key_source(self) -> str:
        return WHOLE_ROW_KEY if set(self.key_columns) == set(self.columns) else MESSAGE_KEY

    def report(self) -> dict:
        """What the table's report says of the plan (JSON-ready)."""
        return {
            "records": self.changes.records,
            "key_columns": list(self.key_columns),
            "key_source": self.key_source,
            **({"rekeyed_from": list(self.rekeyed_from)} if self.rekeyed_from else {}),
            "type_changes": [t.as_dict() for t in self.type_changes],
            "added_columns": list(self.added_columns),
            "dropped_columns": list(self.dropped_columns),
            "full_load_position": self.skip_cdc_through,
            "full_load": self.full_load.as_dict() if self.full_load else None,
            "key_moves": self.changes.key_moves,
        }


class PlanError(ValueError):
    """A table the run cannot fold (reported for the table; the other tables go on)."""


def replayed_load_floor(info: TableChanges, published: PublishedTable) -> str | None:
    """Where the run's full-load rows stop being replays: a load that starts at or before the position
    of a load already applied (and not pending) is redelivered, and a new one starts past it (None:
    the run's load is new). jobs.fold.describe.load_start_after finds that start."""
    loaded_through = published.properties.get(FULL_LOAD_POSITION_PROP)
    if (info.load_start_position and loaded_through and info.load_start_position <= loaded_through
            and not published.properties.get(PENDING_LOAD_PROP)):
        return loaded_through
    return None


def plan_table(info: TableChanges, published: PublishedTable, default_buckets: int) -> TablePlan:
    """The plan of one table (``default_buckets``: the layout of a new table; 0 leaves it unbucketed)."""
    columns, type_changes = _columns_and_types(info, published)
    key_columns, rekeyed_from = _keys(info, published)
    if not key_columns:
        raise PlanError("no key columns could be determined")
    unknown = [k for k in key_columns if k not in columns]
    if unknown:
        # a configured key naming a column the table's rows do not have: every row would share one null key
        raise PlanError(f"key column(s) {', '.join(unknown)} in none of the table's rows (its columns: "
                        f"{', '.join(columns) or 'none'}); a key given by {KEY_SETTING} must name columns of the table")
    props = published.properties
    truncated_through = props.get(TRUNCATE_POSITION_PROP)
    if info.truncate_position and truncated_through and info.truncate_position <= truncated_through:
        # a TRUNCATE an earlier run applied, redelivered: it must not empty what came after it
        info = replace(info, has_truncate=False, truncate_position=None, truncate_lineage=None)
    load_position = _latest(props.get(FULL_LOAD_POSITION_PROP), info.full_load_position)
    full_load = complete_load(props.get(PENDING_LOAD_PROP), info)
    whole_table = (info.has_truncate or bool(full_load and full_load.complete) or rekeyed_from is not None
                   or any(t.column in key_columns for t in type_changes))
    # an existing layout is kept while its columns stay key columns hashing alike; a table without one (or
    # re-keyed) gets a new one of its bucket count or the default: every bucket written
    buckets = published.buckets or default_buckets or None
    key_types = {k: columns[k] for k in key_columns}
    layout = (published.layout.with_types(key_types) if buckets and published.layout is not None
              and published.layout.fits(key_types) and rekeyed_from is None else None)
    return TablePlan(
        table_id=info.table_id, changes=info, columns=columns, key_columns=key_columns,
        rekeyed_from=rekeyed_from, type_changes=type_changes,
        added_columns=tuple(c for c in info.columns if published.columns and c not in published.columns),
        dropped_columns=tuple(sorted(
            c for c in published.columns if c not in META_COLUMNS and info.full_image_columns is not None
            and c not in info.full_image_columns)),
        skip_cdc_through=load_position, skip_all_through=truncated_through, full_load=full_load,
        buckets=buckets, whole_table=whole_table or layout is None, layout=layout,
        properties=_properties(key_columns, load_position, _latest(truncated_through, info.truncate_position),
                               full_load, props),
    )


def _latest(*positions: str | None) -> str | None:
    return max([p for p in positions if p], default=None)


def _columns_and_types(info: TableChanges, published: PublishedTable) -> tuple[dict[str, str], tuple]:
    """The published columns, then the run's new ones; a column whose declared type changed is widened
    where Iceberg can promote it, else keeps its published type -- never silently cast away, either way
    reported."""
    columns = {c: t for c, t in published.columns.items() if c not in META_COLUMNS}
    changes = []
    for col in info.columns:
        declared = state_type(info.types.get(col))
        if col not in columns:
            columns[col] = declared
        elif info.types.get(col) and declared != columns[col]:
            change = TypeChange(col, columns[col], declared, promotable(columns[col], declared))
            changes.append(change)
            if change.promoted:
                columns[col] = declared
    return columns, tuple(changes)


def _keys(info: TableChanges, published: PublishedTable) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """The table's key columns, and the published key when the run narrows it.

    A table keyed by columns this run's records do not all name: it was keyed by its whole row while
    its messages carried no key (inserts only, in text dumps), or by a key block that also held a
    changed column's old value (SharePlex), and the run's deletes and updates name the key the source
    finds rows by. The columns both name are the table's key from now on (its rows re-keyed)."""
    if not published.key_columns:
        return tuple(info.key_columns), None
    common = tuple(c for c in published.key_columns if c in info.key_columns)
    if common and len(common) < len(published.key_columns):
        return common, tuple(published.key_columns)
    return tuple(published.key_columns), None


def complete_load(pending: str | None, info: TableChanges) -> FullLoad | None:
    """The table's latest full load: where it starts and ends, and whether it is complete -- a CDC event
    of the table after its end closes it (in this run, or in a later one for a load still pending), and
    so does the format's end-of-load marker at or after its end (Debezium snapshot=last).
    A load continues a pending one when no CDC event of the table came between them."""
    previous = json.loads(pending) if pending else None
    if info.load_start_position:
        start = info.load_start_position
        # no CDC event between the pending load's end and this run's rows (a redelivered older one
        # does not count): the same load goes on
        if previous and (info.cdc_before_position is None or info.cdc_before_position <= previous["end"]):
            start = previous["start"]
        end = info.full_load_position
    elif previous:
        start, end = previous["start"], previous["end"]
    else:
        return None
    complete = ((info.cdc_max_position is not None and info.cdc_max_position > end)
                or (info.load_end_marker is not None and info.load_end_marker >= end))
    return FullLoad(start, end, complete)


def _properties(key_columns: tuple[str, ...], load_position: str | None, truncate_position: str | None,
                full_load: FullLoad | None, published: Mapping[str, str]) -> dict[str, str]:
    properties = {KEY_COLUMNS_PROP: json.dumps(list(key_columns))}
    if load_position:
        properties[FULL_LOAD_POSITION_PROP] = load_position
    if truncate_position:
        properties[TRUNCATE_POSITION_PROP] = truncate_position
    pending = full_load is not None and not full_load.complete
    if pending or published.get(PENDING_LOAD_PROP):
        # a load no longer pending clears the property
        properties[PENDING_LOAD_PROP] = json.dumps({"start": full_load.start, "end": full_load.end}) if pending else ""
    return properties
