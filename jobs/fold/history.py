"""SCD2 history: one version per applied event, closed where the key's next version begins or where a
run removed the row without an event of its key."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.fold.events import FULL_ROW_AFTER_SQL, MOVE, Accumulated, aliased_keys_match
from jobs.fold.values import from_canonical_string
from jobs.model import record as C


@dataclass
class Removal:
    """Rows the run removes at ``position`` without an event of their key: every prior row (``keys``
    None: a TRUNCATE) or the rows of ``keys`` (a complete newer load's start). ``records``: the run's
    records there, which tell its source time."""

    position: str
    records: DataFrame
    keys: DataFrame | None = None

    @cached_property
    def time(self) -> datetime | None:
        """The source time of the removal: one small aggregate, the first time it is asked (the count
        steps and the history both ask)."""
        return self.records.agg(F.min("event_time")).first()[0]


HISTORY_META = {
    "_valid_from_position": "string", "_valid_from": "timestamp", "_valid_to_position": "string",
    "_valid_to": "timestamp", "_is_current": "boolean", "_op": "string", "_run_id": "string",
}


def versions_sql(row_after: str) -> Accumulated:
    """The versions of a key's fold that merges partial images (``_cdc_full`` false): every applied event
    leaves one (the row after it, ``row_after``); a moved-in row is no version of its own (the move's
    update, at the same position, follows it). A key of whole images needs no fold for them
    (full_image_versions_sql): its accumulator stays empty, and a key with many events is not copied once
    per event."""
    return Accumulated(
        "CAST(array() AS ARRAY<STRUCT<row: MAP<STRING, STRING>, op: STRING, pos: STRING, ts: TIMESTAMP>>)",
        f"CASE WHEN e.op = '{MOVE}' OR _cdc_full THEN acc.versions "
        f"ELSE concat(acc.versions, array({_version_sql(row_after)})) END")


def full_image_versions_sql(applied: str) -> str:
    """The versions of a key whose every event carries its whole row, from its ``applied`` events (SQL of
    their array): each one's own."""
    return f"transform(filter({applied}, e -> e.op != '{MOVE}'), e -> {_version_sql(FULL_ROW_AFTER_SQL)})"


def _version_sql(row_after: str) -> str:
    return f"named_struct('row', {row_after}, 'op', e.op, 'pos', e.position, 'ts', e.event_time)"


def history_versions(folded: DataFrame, key_columns: list[str], types: dict[str, str], run_id: str) -> DataFrame:
    """One SCD2 row per applied event (the fold's ``versions``, versions_sql): the row after it, valid until
    the key's next event of the run."""
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
        rows = r.join(m, aliased_keys_match("r", "m", key_columns), "left").select(
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
    joined = p.join(f, aliased_keys_match("p", "f", key_columns), "left")
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
