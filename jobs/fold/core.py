"""The fold itself: fold a run's change records over a table's previous state (format-agnostic).

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

from dataclasses import dataclass, field
from datetime import datetime

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.fold.events import (
    APPLIES_SQL,
    MOVE,
    PRIOR_META,
    ROW_AFTER_SQL,
    STEPS_INIT_SQL,
    STEPS_STEP_SQL,
    aliased_keys_match,
    event_struct,
    in_order,
    key_join,
    op_rank,
)
from jobs.fold.history import Removal, history_versions
from jobs.fold.key_moves import stays_under_key, with_moved_rows, without_paired_deletes
from jobs.fold.plan import TableChanges
from jobs.fold.types import META_COLUMNS
from jobs.fold.values import from_canonical_string, to_canonical_string
from jobs.model import record as C
from jobs.spark.sql import sql_str


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
    # the applied events that changed the row count (count_steps), and the keys of the rows a complete
    # newer load removed (replace_before), for the lake's count at a checkpoint's moment
    steps: DataFrame | None = None
    removed: DataFrame | None = None

    def release(self) -> None:
        for frame in [self.folded, *self.cached]:
            frame.unpersist()


TOMBSTONE_META = {"_cdc_position": "string", "_cdc_run_id": "string"}


def narrowed_tombstones(tombstones: DataFrame, state: DataFrame, key_columns: list[str]) -> DataFrame:
    """The tombstones of a table re-keyed to fewer columns, read in those columns: a key a live row of
    the state holds is not deleted (a row moved from it under the wider key), and deleted wider keys
    that share the narrower one leave their latest delete."""
    return key_join(tombstones, state, key_columns, "left_anti").groupBy(*key_columns).agg(
        F.max_by("_cdc_run_id", "_cdc_position").alias("_cdc_run_id"), F.max("_cdc_position").alias("_cdc_position"),
    ).select(*key_columns, "_cdc_position", "_cdc_run_id")


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
        event_struct(F.struct(F.col("position"), F.col("offset"), op_rank().alias("rank")), F.col("op"), F.col("after"),
               F.col("present_columns"), F.col("position"), F.col("event_time"),
               F.struct("event_id", "partition", "offset"),
               stays_under_key(key_columns, types) if info.key_moves else None).alias("_cdc_e"),
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
        grouped = grouped.select(*key_columns, without_paired_deletes(F.col("_cdc_events")).alias("_cdc_events"))
    grouped = grouped.select(*key_columns, in_order(F.col("_cdc_events")).alias("_cdc_events"))

    # TRUNCATE in this run: nothing before it survives, rows nor tombstones
    if info.has_truncate:
        prior, tombstones = None, None
    priors = []
    replaced = None
    if prior is not None:
        prior_cols = [c for c in columns if c in prior.columns]
        replaced = key_join(prior, grouped, key_columns, "left_semi")
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
        priors.append(key_join(tombstones, grouped, key_columns, "left_semi").select(
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
        joined = g.join(p, aliased_keys_match("g", "p", key_columns), "left").select(
            *[F.col(f"g.{k}").alias(k) for k in key_columns], "g._cdc_events",
            *[F.col(f"p.{m}").alias(m) for m in PRIOR_META]
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
        joined, moved = with_moved_rows(joined, ev, key_columns, types)

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
                           'run', _prior_run, 'steps', STEPS_INIT VERSIONS_INIT),
              (acc, e) -> named_struct(
                'row', ROW_AFTER,
                'pos', e.position, 'op', e.op, 'ts', e.event_time, 'run', RUN_ID, 'steps', STEPS_STEP
                VERSIONS_STEP))
            """.replace("VERSIONS_INIT", versions_init).replace("VERSIONS_STEP", versions_step)
            .replace("STEPS_INIT", STEPS_INIT_SQL).replace("STEPS_STEP", STEPS_STEP_SQL)
            .replace("APPLIES", APPLIES_SQL).replace("ROW_AFTER", ROW_AFTER_SQL).replace("RUN_ID", sql_str(run_id))
        ).alias("_cdc_a"),
    ).select(
        # the count steps as a column of their own: reading them from the cache leaves the row images be
        *key_columns, F.col("_cdc_a").dropFields("steps").alias("_cdc_s"), F.col("_cdc_a.steps").alias("_cdc_steps"),
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
        unchanged = key_join(prior, grouped, key_columns, "left_anti")
        state = unchanged.select(
            *[(F.col(c) if c in unchanged.columns else F.lit(None)).cast(types[c]).alias(c) for c in columns],
            *[F.col(m).cast(t).alias(m) for m, t in META_COLUMNS.items()],
        ).unionByName(new_rows)

    deleted = folded.where(F.col("_cdc_s.row").isNull() & F.col("_cdc_s.pos").isNotNull()).select(
        *key_columns, F.col("_cdc_s.pos").alias("_cdc_position"), F.col("_cdc_s.run").alias("_cdc_run_id")
    )
    if tombstones is not None:
        deleted = key_join(tombstones, grouped, key_columns, "left_anti").select(
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
    steps = count_steps(folded, key_columns)
    versions, removals = None, []
    if history:
        versions = history_versions(folded, key_columns, types, run_id)
        if info.has_truncate and info.truncate_position:
            removals.append(Removal(info.truncate_position, time_at(changes, info.truncate_position, C.TRUNCATE)))
        if replace_before is not None:
            removals.append(Removal(replace_before, time_at(changes, replace_before),
                                    removed.select(*[F.col(k) for k in key_columns])))
    cached = [f for f in (moved, replaced if as_delta else None) if f is not None]
    return FoldResult(state, deleted, folded, versions, cached, changed=new_rows, replaced=replaced,
                      removals=removals, steps=steps,
                      removed=removed.select(*key_columns) if replace_before is not None else None)


def key_json(key_columns: list[str]):
    """A key as JSON text of its values as strings: how count steps and key diffs name a key."""
    return F.to_json(F.struct(*[F.col(k).cast("string").alias(k) for k in key_columns]))


def removal_steps(keys: DataFrame, key: Column, position: str, time: datetime | None, delta: int = -1) -> DataFrame:
    """A count step of ``delta`` per row of ``keys`` at ``position`` (a TRUNCATE, a complete newer load's
    start), at source time ``time``."""
    return keys.select(key.alias("key"), F.lit(position).alias("position"),
                       F.unix_micros(F.lit(time).cast("timestamp")).alias("event_time_us"),
                       F.lit(delta).alias("delta"))


def count_steps(folded: DataFrame, key_columns: list[str]) -> DataFrame:
    """Every applied event that changed the table's row count (a key's row appearing: +1, going: -1),
    with the key as JSON text, its position and source time: the lake's row count at any moment of the
    run is the prior count plus the steps up to it (jobs.reconcile.checkpoints)."""
    return folded.select(*key_columns, F.explode("_cdc_steps").alias("_s")).select(
        key_json(key_columns).alias("key"), F.col("_s.pos").alias("position"),
        F.unix_micros("_s.ts").alias("event_time_us"), F.col("_s.d").alias("delta"))


def time_at(changes: DataFrame, position: str, op: str | None = None) -> datetime | None:
    """The source time of the run's records at ``position`` (of ``op``): one small aggregate."""
    at = changes.where(F.col("position") == position)
    if op is not None:
        at = at.where(F.col("op") == op)
    return at.agg(F.min("event_time")).first()[0]
