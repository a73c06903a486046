"""The lake's row counts through time, kept beside the state (``<lake>/counts/<pipeline>/``).

Per run, ``ledger.json`` records how far the run's applied changes reach (the highest position and
source time, and the first of a transaction it holds back) and, per table it published, its count
before the run, after it, and where its *steps* are: the applied changes that moved the count (a key's
row appearing +1, going -1), written by the fold under ``run=<run_id>/table=<table_id>/`` as Parquet
(``key``, ``position``, ``event_time_us``, ``delta``), with the value fingerprint steps (``bucket``, and the
change of the row's hash by halves ``dh_hi``, ``dh_lo``: jobs.fold.fingerprints; a step that changes values
only has ``delta`` 0).
jobs.reconcile.checkpoints computes the count at any moment from them; ``ArrowSteps`` reads them in batches
with pyarrow (no Spark), never whole.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from jobs.lake import storage
from jobs.lake.layout import Lake, check_name

LEDGER = "ledger.json"


@dataclass(frozen=True)
class RunCounts:
    """One run's entry of the ledger: how far its changes reach, and per table its counts and steps."""

    run_id: str
    reach_position: str | None = None
    reach_time: int | None = None  # epoch microseconds
    held_position: str | None = None  # the first position of a transaction the run holds back
    held_time: int | None = None
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the landing's evidence (jobs.reconcile.landed_reach): the lake holds every change of source time at or before
    # this, whether or not one came; set by reconcile for the run it reconciles
    landed_time: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunCounts:
        return cls(d["run_id"], d.get("reach_position"), d.get("reach_time"), d.get("held_position"),
                   d.get("held_time"), d.get("tables") or {}, d.get("landed_time"))
CHECKPOINTS = "checkpoints.json"


# a table id is made of parts made safe (jobs.model.record.safe_part) joined by dots: never '..' nor a '/'
_TABLE_ID = re.compile(r"[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*")


def steps_dir(pipeline: str, run_id: str, table_id: str) -> str:
    if not _TABLE_ID.fullmatch(table_id):
        raise ValueError(f"table id {table_id!r} is not made of safe parts")
    return f"{Lake.counts_dir(pipeline)}/run={check_name('run id', run_id)}/table={table_id}"


def read_ledger(lake: Lake, pipeline: str, through_run: str | None = None) -> list[RunCounts]:
    """The runs in the order they were first published; with ``through_run``, up to that run."""
    rel = f"{Lake.counts_dir(pipeline)}/{LEDGER}"
    runs = [RunCounts.from_dict(d) for d in (lake.read_json(rel)["runs"] if lake.exists(rel) else [])]
    if through_run is not None:
        index = next((i for i, r in enumerate(runs) if r.run_id == through_run), None)
        if index is not None:
            runs = runs[: index + 1]
    return runs


def record_run(lake: Lake, pipeline: str, entry: dict[str, Any]) -> None:
    """A new run goes last; a re-run rewrites its own entry (a backfill of an earlier run keeps its place)."""
    rel = f"{Lake.counts_dir(pipeline)}/{LEDGER}"
    runs = lake.read_json(rel)["runs"] if lake.exists(rel) else []
    index = next((i for i, r in enumerate(runs) if r["run_id"] == entry["run_id"]), None)
    if index is None:
        runs.append(entry)
    else:
        runs[index] = entry
    lake.write_json(rel, {"runs": runs})


def drop_steps(lake: Lake, pipeline: str, table_id: str, run_ids: list[str]) -> int:
    """A run's count steps of a table go with the table's snapshot of that run (jobs.iceberg.expire): the lake's
    count at a moment of an expired run is then unknown, never guessed. How many runs' steps went."""
    dropped = 0
    for run_id in run_ids:
        try:
            rel = steps_dir(pipeline, run_id, table_id)
        except ValueError:  # not a table id this pipeline writes steps for
            continue
        if lake.exists(rel):
            lake.delete_tree(rel)
            dropped += 1
    return dropped


class MissingValueSteps(ValueError):
    """A run's steps written before value fingerprints: the values at its moments are not known."""


class ArrowSteps:
    """jobs.reconcile.checkpoints.StepSource over the steps' Parquet files in the lake."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._totals: dict[str, int] = {}
        self._datasets: dict[str, Any] = {}  # one listing of a run's files per reconcile, not one per query

    def _dataset(self, rel: str):
        if rel not in self._datasets:
            self._datasets[rel] = storage.parquet_dataset(self._lake.join(rel))
        return self._datasets[rel]

    def _batches(self, rel: str, columns: list[str], condition=None):
        return self._dataset(rel).to_batches(columns=columns, filter=condition)

    @staticmethod
    def _column(kind: str) -> str:
        return "position" if kind == "position" else "event_time_us"

    def _below(self, kind: str, cut):
        import pyarrow.dataset as ds

        column = ds.field(self._column(kind))
        # a step without a coordinate (a full-load row without a position) precedes every cut
        return column.is_null() | (column < cut)

    def total(self, rel: str) -> int:
        if rel not in self._totals:
            self._totals[rel] = self._sum(rel, None)
        return self._totals[rel]

    def _sum(self, rel: str, condition) -> int:
        import pyarrow.compute as pc

        return sum(int(pc.sum(b.column("delta")).as_py() or 0) for b in self._batches(rel, ["delta"], condition))

    def sum_below(self, rel: str, kind: str, cut) -> int:
        return self._sum(rel, self._below(kind, cut))

    def within(self, rel: str, kind: str, low, high) -> list[tuple[Any, int]]:
        """The count's change at each coordinate in ``[low, high)``, in order (steps at one coordinate
        add up: no cut falls between them)."""
        import pyarrow.dataset as ds

        name = self._column(kind)
        by_coordinate: dict[Any, int] = {}
        for batch in self._batches(rel, [name, "delta"], ~self._below(kind, low) & (ds.field(name) < high)):
            for coordinate, delta in zip(batch.column(name).to_pylist(), batch.column("delta").to_pylist()):
                by_coordinate[coordinate] = by_coordinate.get(coordinate, 0) + delta
        return sorted(by_coordinate.items())

    def group_below(self, rel: str, cut: str) -> str | None:
        """The start of the last transaction group below the cut (the positions' first component)."""
        import pyarrow.compute as pc

        batches = self._batches(rel, ["position"], self._below("position", cut))
        tops = [pc.max(b.column("position")).as_py() for b in batches]
        best = max((t for t in tops if t is not None), default=None)
        return best.split(".", 1)[0] if best else None

    def keys_from(self, rel: str, kind: str, cut) -> list[tuple[str | None, int]]:
        name = self._column(kind)
        found = []
        for batch in self._batches(rel, ["key", name, "delta"], ~self._below(kind, cut)):
            found += zip(*(batch.column(c).to_pylist() for c in (name, "key", "delta")))
        # a value-only step (delta 0) moves no key in or out
        return [(key, delta) for _coordinate, key, delta in sorted(found, key=lambda f: f[0]) if delta]

    def _value_batches(self, rel: str, columns: list[str], condition):
        if "dh_hi" not in self._dataset(rel).schema.names:
            raise MissingValueSteps(f"the steps at {rel} were written without value steps")
        return self._batches(rel, columns, condition)

    def value_sums_below(self, rel: str, kind: str, cut) -> dict[int, int]:
        """Each bucket's value fingerprint step below the cut (summed; modulo 2^64 by the caller)."""
        import pyarrow.dataset as ds

        sums: dict[int, int] = {}
        condition = self._below(kind, cut) & ds.field("bucket").is_valid()
        for batch in self._value_batches(rel, ["bucket", "dh_hi", "dh_lo"], condition):
            for bucket, dh in zip(batch.column("bucket").to_pylist(), _hashes(batch)):
                sums[bucket] = sums.get(bucket, 0) + dh
        return sums

    def value_points(self, rel: str, kind: str, low, high) -> list[tuple[Any, int, int | None, int]]:
        """The steps in ``[low, high)`` in order of their coordinate: (coordinate, count delta, bucket, value
        delta)."""
        import pyarrow.dataset as ds

        name = self._column(kind)
        found = []
        for batch in self._value_batches(rel, [name, "delta", "bucket", "dh_hi", "dh_lo"],
                                         ~self._below(kind, low) & (ds.field(name) < high)):
            found += zip(*(batch.column(c).to_pylist() for c in (name, "delta", "bucket")), _hashes(batch))
        return [(c, d, b, dh) for c, d, b, dh in sorted(found, key=lambda f: f[0])]

    def value_keys_from(self, rel: str, kind: str, cut) -> list[tuple[str | None, int, int | None]]:
        """Each value step at or after the cut: (key, value delta, its bucket); a key of None is a TRUNCATE's."""
        found = []
        for batch in self._value_batches(rel, ["key", "dh_hi", "dh_lo", "bucket"], ~self._below(kind, cut)):
            found += zip(batch.column("key").to_pylist(), _hashes(batch), batch.column("bucket").to_pylist())
        return [(key, dh, bucket) for key, dh, bucket in found if key is None or dh]


def _hashes(batch) -> list[int]:
    """A batch's value steps, each its two halves made one (0 where a TRUNCATE's has none)."""
    return [(hi or 0) * 2 ** 32 + (lo or 0)
            for hi, lo in zip(batch.column("dh_hi").to_pylist(), batch.column("dh_lo").to_pylist())]
