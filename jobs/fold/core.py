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
from functools import partial

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.fold.events import (
    APPLIES_SQL,
    PRIOR_META,
    ROW_AFTER_SQL,
    Accumulated,
    aggregate_sql,
    aliased_keys_match,
    event_struct,
    full_image_steps_sql,
    in_order,
    key_join,
    op_rank,
    steps_sql,
    whole_image_sql,
)
from jobs.fold.fingerprints import HALF, key_bucket, map_hash_sql, row_hash, step_deltas_sql
from jobs.fold.history import Removal, full_image_versions_sql, history_versions, versions_sql
from jobs.fold.key_moves import stays_under_key, with_moved_rows, without_paired_deletes
from jobs.fold.plan import TableChanges, TablePlan
from jobs.fold.types import META_COLUMNS
from jobs.fold.values import from_canonical_string, to_canonical_string
from jobs.model import record as C
from jobs.spark.sql import sql_str


@dataclass(frozen=True)
class Prior:
    """What the table held before the run, as read for its fold (the default: nothing, a new table)."""

    rows: DataFrame | None = None  # its state rows: of the buckets the run touches (``touched``), or all
    tombstones: DataFrame | None = None  # its deleted keys, with the position of their delete
    # ``rows`` say where they are (_cdc_file, _cdc_row): the new state is wanted as a delta of the prior,
    # so the prior rows of the run's keys are read once and cached, not once for each
    positioned: bool = False
    touched: frozenset[int] | None = None  # the buckets ``rows`` are of (None: every bucket)


@dataclass
class FoldResult:
    state: DataFrame  # the table's complete new state
    tombstones: DataFrame  # keys deleted so far, with the position of their delete
    folded: DataFrame  # cached: release() once both are written
    # the applied events that changed the row count, for the lake's count at a checkpoint's moment
    # (count_steps; the rows in ``removals`` are steps too)
    steps: DataFrame
    versions: DataFrame | None = None  # SCD2 rows of this run's applied events (with history)
    # rows the run removed without an event of their key: a TRUNCATE removes every prior row, a
    # complete newer load the rows it does not hold (their history versions end there)
    removals: list[Removal] = field(default_factory=list)
    # with positioned prior rows, the state as a delta of the prior: the rows of the keys this run has
    # events of (``changed``, those left alive) replace the prior rows of the same keys (``replaced``);
    # the rest is unchanged
    changed: DataFrame | None = None
    replaced: DataFrame | None = None
    cached: list[DataFrame] = field(default_factory=list)  # more frames the fold cached

    @property
    def is_delta(self) -> bool:
        return self.replaced is not None

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


def fold_table(plan: TablePlan, changes: DataFrame, prior: Prior, run_id: str, history: bool = False) -> FoldResult:
    """New state of one table = fold(prior state, this run's changes of the table), as its ``plan`` says:
    the table's resulting columns and key, its full-load position (CDC events at or before it are in
    the load), its last TRUNCATE position from earlier runs, the start of a complete full load that
    replaces it (rows last changed before it are removed). ``prior.tombstones`` remembers deleted keys,
    so that a redelivered old insert in a later run does not bring a deleted row back. With
    ``history``, every applied event also leaves an SCD2 version."""
    key_columns, types, info = list(plan.key_columns), dict(plan.columns), plan.changes
    events = applicable_events(changes, plan)
    by_key = events_by_key(events, key_columns, types, moves=bool(info.key_moves))
    if info.has_truncate:
        prior = Prior()  # a TRUNCATE in this run: nothing before it survives, rows nor tombstones
    joined, replaced = with_prior(by_key, prior, key_columns, types)
    moved = None
    if info.key_moves:
        joined, moved = with_moved_rows(joined, events, key_columns, types)
    folded = fold_keys(joined, key_columns, run_id, history, types)
    changed = new_rows(folded, types)
    state = changed
    if prior.rows is not None:
        state = unchanged_rows(prior.rows, by_key, key_columns, types).unionByName(changed)
    deleted = deleted_keys(folded, prior.tombstones, by_key, key_columns)
    removed = None
    if plan.replace_before is not None:
        state, deleted, removed = without_stale_rows(state, deleted, plan.replace_before, run_id, key_columns,
                                                     types)
    delta = replaced if prior.positioned else None
    return FoldResult(
        state, deleted, folded, count_steps(folded, key_columns, types),
        versions=history_versions(folded, key_columns, types, run_id) if history else None,
        removals=removals(changes, info, plan.replace_before, removed),
        changed=changed if delta is not None else None, replaced=delta,
        cached=[f for f in (moved, delta) if f is not None])


def applicable_events(changes: DataFrame, plan: TablePlan) -> DataFrame:
    """The table's row events that may apply: none at or before a truncate (but those logged after it at
    its own position), no CDC event at or before the table's full load (it is in the load)."""
    events = changes.where(F.col("op").isin(C.SNAPSHOT, C.INSERT, C.UPDATE, C.DELETE))
    truncated_through = max([p for p in (plan.skip_all_through, plan.changes.truncate_position) if p], default=None)
    if truncated_through:
        events = events.where(_survives_truncate(plan.changes, truncated_through))
    if plan.skip_cdc_through:
        # a CDC event without a position cannot be placed before the load: it is kept
        in_load = (F.col("phase") == C.CDC) & (F.col("position") <= plan.skip_cdc_through)
        events = events.where(~F.coalesce(in_load, F.lit(False)))
    return events


def _survives_truncate(info: TableChanges, truncated_through: str) -> Column:
    survives = F.col("position").isNull() | (F.col("position") > truncated_through)
    if info.truncate_lineage and info.truncate_position == truncated_through:
        # a change of the truncate's own position logged after it (one Canal batch id) survives it
        partition, offset = info.truncate_lineage
        survives |= ((F.col("position") == truncated_through) & (F.col("partition") == partition)
                     & (F.col("offset") > offset))
    return survives


def events_by_key(events: DataFrame, key_columns: list[str], types: dict[str, str], moves: bool) -> DataFrame:
    """One row per key: its typed key columns and ``_cdc_events``, its events in order, each once.

    One shuffle, by key. Redelivered duplicates (copies of an event share its key) are dropped inside
    the key's events: sorted by (event id, partition, offset), the earliest copy of each event is the
    first of its run. Then the events are sorted by their order key alone (images are maps, which do
    not order). With key ``moves`` in the run, the deletes that open a key change moving nothing go."""
    keyed = events.select(
        *[from_canonical_string(F.element_at("key", k), types[k]).alias(k) for k in key_columns],
        event_struct(F.struct(F.col("position"), F.col("offset"), op_rank().alias("rank")), F.col("op"), F.col("after"),
                     F.col("present_columns"), F.col("position"), F.col("event_time"),
                     F.struct("event_id", "partition", "offset"),
                     tuple(F.expr(sql) for sql in whole_image_sql(partial(map_hash_sql, types=types))),
                     stays_under_key(key_columns, types) if moves else None).alias("_cdc_e"),
    )
    by_copy = F.array_sort(F.collect_list("_cdc_e"), lambda l, r: F.when(l["copy"] < r["copy"], -1)
                           .when(l["copy"] > r["copy"], 1).otherwise(0))
    unique = F.filter("_cdc_by_copy", lambda e, i: (i == 0) | ~F.col("_cdc_by_copy")[i - 1]["copy"]["event_id"]
                      .eqNullSafe(e["copy"]["event_id"]))
    grouped = keyed.groupBy(*key_columns).agg(by_copy.alias("_cdc_by_copy")).select(
        *key_columns, unique.alias("_cdc_events"))
    if moves:
        grouped = grouped.select(*key_columns, without_paired_deletes(F.col("_cdc_events")).alias("_cdc_events"))
    return grouped.select(*key_columns, in_order(F.col("_cdc_events")).alias("_cdc_events"))


_NO_PRIOR = {"_prior_row": "map<string,string>", "_prior_pos": "string", "_prior_op": "string",
             "_prior_ts": "timestamp", "_prior_run": "string"}


def with_prior(by_key: DataFrame, prior: Prior, key_columns: list[str],
               types: dict[str, str]) -> tuple[DataFrame, DataFrame | None]:
    """The run's keys with what each held before the run (``PRIOR_META``: its row as canonical strings
    and where that comes from, or its tombstone); and the prior rows of those keys (cached when they
    are positioned: the delta's ``replaced``)."""
    parts, replaced = [], None
    if prior.rows is not None:
        replaced = key_join(prior.rows, by_key, key_columns, "left_semi")
        if prior.positioned:
            replaced = replaced.persist(StorageLevel.MEMORY_AND_DISK)
        parts.append(_prior_meta(replaced, key_columns, types))
    if prior.tombstones is not None:
        parts.append(key_join(prior.tombstones, by_key, key_columns, "left_semi").select(
            *key_columns,
            F.lit(None).cast("map<string,string>").alias("_prior_row"),
            F.col("_cdc_position").alias("_prior_pos"),
            F.lit(C.DELETE).alias("_prior_op"),
            F.lit(None).cast("timestamp").alias("_prior_ts"),
            F.col("_cdc_run_id").alias("_prior_run"),
        ))
    if not parts:
        return by_key.withColumns({m: F.lit(None).cast(t) for m, t in _NO_PRIOR.items()}), replaced
    prior_rows = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    g, p = by_key.alias("g"), prior_rows.alias("p")
    joined = g.join(p, aliased_keys_match("g", "p", key_columns), "left").select(
        *[F.col(f"g.{k}").alias(k) for k in key_columns], "g._cdc_events",
        *[F.col(f"p.{m}").alias(m) for m in PRIOR_META]
    )
    return joined, replaced


def _prior_meta(rows: DataFrame, key_columns: list[str], types: dict[str, str]) -> DataFrame:
    """State rows as the fold starts from them: the row as a map of canonical strings, and its meta."""
    columns = [c for c in types if c in rows.columns]
    return rows.select(
        *key_columns,
        F.map_from_arrays(
            F.array(*[F.lit(c) for c in columns]),
            F.array(*[to_canonical_string(F.col(c), types[c]) for c in columns]),
        ).alias("_prior_row"),
        F.col("_cdc_position").alias("_prior_pos"),
        F.col("_cdc_op").alias("_prior_op"),
        F.col("_cdc_event_time").alias("_prior_ts"),
        F.col("_cdc_run_id").alias("_prior_run"),
    )


def fold_aggregate_sql(*, applies: str, row_after: str, run_id: str, steps: Accumulated,
                       versions: Accumulated | None = None) -> str:
    """The SQL of a key's fold: from its prior row and where that comes from (``PRIOR_META``), each of its
    events that ``applies`` makes the row ``row_after`` it, coming from the event (its position, op and
    time) in run ``run_id`` (SQL); it also accumulates the count ``steps`` and, with history, the
    ``versions``."""
    init = {"row": "_prior_row", "pos": "_prior_pos", "op": "_prior_op", "ts": "_prior_ts", "run": "_prior_run",
            "steps": steps.init}
    step = {"row": row_after, "pos": "e.position", "op": "e.op", "ts": "e.event_time", "run": run_id,
            "steps": steps.step}
    if versions is not None:
        init["versions"], step["versions"] = versions
    return aggregate_sql("_cdc_events", applies, init, step)


def fold_keys(joined: DataFrame, key_columns: list[str], run_id: str, history: bool,
              types: dict[str, str]) -> DataFrame:
    """Each key's fold (``_cdc_s``: its row after the run and where that comes from, with history its
    versions) and its steps (``_cdc_steps``: each applied event, whether a row stays after it and its hash;
    the prior row's, ``_cdc_prior_x``/``_cdc_prior_h``), cached: the publish and the reports read it.

    A key whose every event carries its whole row (``_cdc_full``) has the steps and versions of each of its
    applied events (``_cdc_applied``), each hashed before the fold (whole_image_sql), not in its lambda."""
    row_hash = partial(map_hash_sql, types=types)
    sql = fold_aggregate_sql(applies=APPLIES_SQL, row_after=ROW_AFTER_SQL, run_id=sql_str(run_id),
                             steps=steps_sql(ROW_AFTER_SQL, partial(row_hash, bound=True)),
                             versions=versions_sql(ROW_AFTER_SQL) if history else None)
    full = joined.withColumn("_cdc_full", F.expr("forall(_cdc_events, e -> e.present IS NULL)")).withColumn(
        "_cdc_applied", F.when(F.col("_cdc_full"), F.expr(f"filter(_cdc_events, e -> {APPLIES_SQL})")))
    state = F.col("_cdc_a").dropFields("steps")
    full_versions = []
    if history:
        full_versions = [F.when(F.col("_cdc_full"), F.expr(full_image_versions_sql("_cdc_applied")))
                         .alias("_cdc_full_versions")]
        state = state.withField("versions", F.coalesce("_cdc_full_versions", "_cdc_a.versions"))
    return full.select(
        *key_columns, F.expr(sql).alias("_cdc_a"), "_cdc_full",
        F.when(F.col("_cdc_full"), F.expr(full_image_steps_sql("_cdc_applied"))).alias("_cdc_full_steps"),
        *full_versions,
        F.col("_prior_row").isNotNull().alias("_cdc_prior_x"), F.expr(row_hash("_prior_row")).alias("_cdc_prior_h"),
    ).select(
        # the steps as a column of their own: reading them from the cache leaves the row images be
        *key_columns, state.alias("_cdc_s"),
        F.when(F.col("_cdc_full"), F.col("_cdc_full_steps")).otherwise(F.col("_cdc_a.steps")).alias("_cdc_steps"),
        "_cdc_prior_x", "_cdc_prior_h",
    ).persist(StorageLevel.MEMORY_AND_DISK)


def new_rows(folded: DataFrame, types: dict[str, str]) -> DataFrame:
    """The state rows of the keys the run has events of and that hold a row after it, typed."""
    return folded.where(F.col("_cdc_s.row").isNotNull()).select(
        *[from_canonical_string(F.element_at("_cdc_s.row", c), t).alias(c) for c, t in types.items()],
        F.col("_cdc_s.pos").alias("_cdc_position"),
        F.col("_cdc_s.op").alias("_cdc_op"),
        F.col("_cdc_s.ts").alias("_cdc_event_time"),
        F.col("_cdc_s.run").alias("_cdc_run_id"),
    )


def unchanged_rows(prior_rows: DataFrame, by_key: DataFrame, key_columns: list[str],
                   types: dict[str, str]) -> DataFrame:
    """The prior rows of the keys the run has no event of, in the state's columns (a new column null)."""
    unchanged = key_join(prior_rows, by_key, key_columns, "left_anti")
    return unchanged.select(
        *[(F.col(c) if c in unchanged.columns else F.lit(None)).cast(t).alias(c) for c, t in types.items()],
        *[F.col(m).cast(t).alias(m) for m, t in META_COLUMNS.items()],
    )


def deleted_keys(folded: DataFrame, tombstones: DataFrame | None, by_key: DataFrame,
                 key_columns: list[str]) -> DataFrame:
    """The table's tombstones after the run: the keys the run deleted, and the earlier ones it left deleted."""
    deleted = folded.where(F.col("_cdc_s.row").isNull() & F.col("_cdc_s.pos").isNotNull()).select(
        *key_columns, F.col("_cdc_s.pos").alias("_cdc_position"), F.col("_cdc_s.run").alias("_cdc_run_id")
    )
    if tombstones is None:
        return deleted
    return key_join(tombstones, by_key, key_columns, "left_anti").select(
        *key_columns, *TOMBSTONE_META).unionByName(deleted)


def without_stale_rows(state: DataFrame, deleted: DataFrame, replace_before: str, run_id: str,
                       key_columns: list[str], types: dict[str, str]) -> tuple[DataFrame, DataFrame, DataFrame]:
    """A complete newer load replaced the table as of its start (``replace_before``): a row whose last
    change is older was not in it (its delete may never have arrived) and is gone. (state, tombstones,
    the keys of the rows removed)."""
    stale = F.coalesce(F.col("_cdc_position"), F.lit("")) < F.lit(replace_before)
    # with each removed row's hash: its value fingerprint step
    removed = state.where(stale).select(*key_columns, row_hash(types).alias("_cdc_h"))
    deleted = deleted.unionByName(removed.select(
        *key_columns, F.lit(replace_before).alias("_cdc_position"), F.lit(run_id).alias("_cdc_run_id")))
    return state.where(~stale), deleted, removed


def removals(changes: DataFrame, info: TableChanges, replace_before: str | None,
             removed: DataFrame | None) -> list[Removal]:
    """The rows the run removes without an event of their key: every prior row at its TRUNCATE, the
    ``removed`` keys at a complete newer load's start."""
    out = []
    if info.has_truncate and info.truncate_position:
        at = changes.where((F.col("position") == info.truncate_position) & (F.col("op") == C.TRUNCATE))
        out.append(Removal(info.truncate_position, at))
    if replace_before is not None:
        out.append(Removal(replace_before, changes.where(F.col("position") == replace_before), removed))
    return out


def key_json(key_columns: list[str]):
    """A key as JSON text of its values as strings: how count steps and key diffs name a key."""
    return F.to_json(F.struct(*[F.col(k).cast("string").alias(k) for k in key_columns]))


def removal_steps(removal: Removal, key_columns: list[str], rows_before: int, types: dict[str, str]) -> DataFrame:
    """The steps of a removal, at its position and source time: -1 per removed key and less its row's hash
    (``_cdc_h`` beside the keys), or, for a TRUNCATE (every prior row), -``rows_before`` in one step without
    a key, bucket nor value step (no value before it is known within the run: jobs.reconcile.checkpoints)."""
    if removal.keys is None:
        keys, key, delta = removal.records.sparkSession.range(1), F.lit(None).cast("string"), -rows_before
        bucket, hi, lo = F.lit(None).cast("int"), F.lit(None).cast("bigint"), F.lit(None).cast("bigint")
    else:
        keys, key, delta = removal.keys, key_json(key_columns), -1
        bucket = key_bucket({k: types[k] for k in key_columns})
        hi, lo = (-F.floor(F.col("_cdc_h") / HALF)).cast("bigint"), (-(F.col("_cdc_h") % HALF)).cast("bigint")
    return keys.select(key.alias("key"), F.lit(removal.position).alias("position"),
                       F.unix_micros(F.lit(removal.time).cast("timestamp")).alias("event_time_us"),
                       F.lit(delta).alias("delta"), bucket.alias("bucket"), hi.alias("dh_hi"), lo.alias("dh_lo"))


def count_steps(folded: DataFrame, key_columns: list[str], types: dict[str, str]) -> DataFrame:
    """Every applied event that changed the table's row count (a key's row appearing: +1, going: -1) or its
    row's values (its value fingerprint step ``dh_hi``/``dh_lo``: the hash of the row after less the one
    before, by halves), with the key as JSON text and its ``bucket`` (jobs.fold.fingerprints), its position
    and source time: the lake's row count and fingerprints at any moment of the run are the prior ones plus
    the steps up to it (jobs.reconcile.checkpoints)."""
    # the key's text and bucket once per key, not once per step
    keyed = folded.select(key_json(key_columns).alias("_cdc_k"), key_bucket({k: types[k] for k in key_columns})
                          .alias("_cdc_b"), "_cdc_steps", "_cdc_prior_x", "_cdc_prior_h")
    deltas = step_deltas_sql("_cdc_steps", "_st", "_si", "_cdc_prior_x", "_cdc_prior_h")
    return keyed.select("*", F.posexplode("_cdc_steps").alias("_si", "_st")).select(
        F.col("_cdc_k").alias("key"), F.col("_st.pos").alias("position"),
        F.unix_micros("_st.ts").alias("event_time_us"), F.expr(deltas["d"]).alias("delta"),
        F.col("_cdc_b").alias("bucket"), F.expr(deltas["dh_hi"]).alias("dh_hi"), F.expr(deltas["dh_lo"]).alias("dh_lo"),
    ).where((F.col("delta") != 0) | (F.col("dh_hi") != 0) | (F.col("dh_lo") != 0))
