"""Change records built in memory, and runs of the fold over them without a lake or a catalog.

``FoldChain`` carries what a catalog would keep between runs -- the state rows, the tombstones and the
table properties the plan commits -- so that semantics across runs (redelivery, truncates, loads
completed later) are tested at the fold's own level: the same per-table fold as jobs.fold.stage calls
(jobs.fold.table.fold_one_table: describe -> plan -> fold), over this in-memory state.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.fold.core import Prior
from jobs.fold.describe import describe_changes
from jobs.fold.plan import PublishedTable
from jobs.fold.table import TableFold, fold_one_table
from jobs.fold.transactions import split_open_transactions
from jobs.model import record as C

TABLE = "db.t"
_EPOCH = datetime(2026, 1, 1)
_offsets = itertools.count()


def change(op: str, key: int | str | None = None, position: str | None = None, after: dict | None = None,
           *, phase: str = C.CDC, table_id: str = TABLE, before: dict | None = None,
           present: list[str] | None = None, key_map: dict | None = None, event_id: str | None = None,
           partition: int = 0, offset: int | None = None, tx_id: str | None = None, tx_last: bool | None = None,
           types: dict | None = None, seconds: int | None = None) -> dict:
    """One change record. ``key`` is the value of the table's key column ``id``; ``after`` and ``before``
    are row images (values rendered as strings, as decoders render them); ``event_id`` defaults to one
    of its own (give the same id to make a redelivered copy)."""
    offset = next(_offsets) if offset is None else offset
    text = {k: None if v is None else str(v) for k, v in (after or {}).items()} if after is not None else None
    if text is not None and key is not None and key_map is None:
        text = {"id": str(key), **text}
    old = {k: None if v is None else str(v) for k, v in before.items()} if before is not None else None
    key_map = key_map if key_map is not None else ({"id": str(key)} if key is not None else None)
    return {
        "format": "test", "table_id": table_id, "op": op, "phase": phase, "key": key_map, "before": old,
        "after": text, "present_columns": present, "position": position, "tx_id": tx_id, "tx_seq": None,
        "tx_last": tx_last, "event_time": _EPOCH + timedelta(seconds=seconds if seconds is not None else offset),
        "column_types": types, "topic": "t", "partition": partition, "offset": offset,
        "kafka_ts": _EPOCH + timedelta(seconds=offset), "event_id": event_id or f"e{offset}",
    }


def pos(n: int) -> str:
    """A position: fixed-width digits, so that string order is numeric order (as every decoder pads)."""
    return f"{n:08d}"


def frame(spark: SparkSession, records: list[dict]) -> DataFrame:
    return spark.createDataFrame(records, C.CHANGE_RECORD_SCHEMA)


def _materialized(rows: DataFrame) -> DataFrame:
    return rows.sparkSession.createDataFrame(rows.collect(), rows.schema)


@dataclass
class FoldChain:
    """Runs of the fold over one table's published state, kept in memory between runs: what a catalog
    (state rows, tombstones, the properties each plan commits) and the held log would keep."""

    spark: SparkSession
    history: bool = False
    state: DataFrame | None = None
    tombstones: DataFrame | None = None
    published: PublishedTable = field(default_factory=PublishedTable)
    history_rows: list = field(default_factory=list)
    last_report: dict = field(default_factory=dict)
    ended_through: str | None = None
    held: list[dict] = field(default_factory=list)
    runs: int = 0

    def run(self, records: list[dict], hold_transactions: bool = False) -> dict[tuple, dict]:
        """Fold one run's records (jobs.fold.table.fold_one_table); returns the state after it, by key tuple."""
        self.runs += 1
        changes = frame(self.spark, [*self.held, *records])
        if hold_transactions:
            split = split_open_transactions(changes, self.ended_through)
            self.held = [r.asDict(recursive=True) for r in split.held.drop("held_transaction").collect()]
            self.ended_through = split.ended_through
            changes = split.applied
        for info in describe_changes(changes).tables.values():
            fold = fold_one_table(changes.where(F.col("table_id") == info.table_id), info, self.published,
                                  lambda _plan: Prior(self.state, self.tombstones), run_id=f"run{self.runs}",
                                  default_buckets=0, history=self.history)
            self._publish(fold)
        return self.rows()

    def _publish(self, fold: TableFold) -> None:
        try:
            # kept as rows (test-sized), so that no run's plan grows on the runs before it
            self.state = _materialized(fold.result.state)
            self.tombstones = _materialized(fold.result.tombstones)
            if self.history:
                self.history_rows.extend(r.asDict() for r in fold.result.versions.collect())
        finally:
            fold.result.release()
        self.last_report = fold.plan.report()
        # a property committed empty is removed
        props = {k: v for k, v in {**self.published.properties, **fold.plan.properties}.items() if v != ""}
        self.published = PublishedTable(columns={**fold.plan.columns}, key_columns=fold.plan.key_columns,
                                        properties=props)

    def rows(self) -> dict[tuple, dict]:
        """The state: key tuple -> the row's data columns (typed values)."""
        if self.state is None:
            return {}
        keys = list(self.published.key_columns)
        out = {}
        for r in self.state.collect():
            row = {c: v for c, v in r.asDict().items() if not c.startswith("_cdc_")}
            out[tuple(row[k] for k in keys)] = row
        return out

    def deleted_keys(self) -> set[tuple]:
        if self.tombstones is None:
            return set()
        keys = list(self.published.key_columns)
        return {tuple(r[k] for k in keys) for r in self.tombstones.collect()}
