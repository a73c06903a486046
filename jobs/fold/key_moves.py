"""Rows moved to a new key: a partial-image insert or update whose before image names other key values
than its key carries the row its old key held just before the move (SharePlex, OGG, Qlik, DTS)."""
from __future__ import annotations

import logging
import operator
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.fold.describe import partial_with_before
from jobs.fold.events import (
    APPLIES_SQL,
    MOVE,
    PRIOR_META,
    ROW_AFTER_SQL,
    aggregate_sql,
    aliased_keys_match,
    event_struct,
    in_order,
    key_join,
)
from jobs.fold.fingerprints import map_hash_sql
from jobs.fold.values import from_canonical_string
from jobs.model import record as C

log = logging.getLogger(__name__)

# a row moved through a chain of keys in one run (A -> B -> C) needs one pass per link
MAX_MOVE_PASSES = 16


def _old_and_new_key(key_columns: list[str], types: dict[str, str]) -> tuple[dict[str, Column], dict[str, Column]]:
    """A record's old key (from its before image; a key column the image lacks did not change) and its
    new key (from its key), in the table's key columns, typed."""
    old = {k: from_canonical_string(F.coalesce(F.element_at("before", k), F.element_at("key", k)), types[k])
           for k in key_columns}
    new = {k: from_canonical_string(F.element_at("key", k), types[k]) for k in key_columns}
    return old, new


def stays_under_key(key_columns: list[str], types: dict[str, str]) -> Column:
    """A partial-image insert / update with a before image that names the same values of the table's key
    columns as its key: the message changed a column its decoder took for a key column (SharePlex's
    ``key`` may carry a changed column's old value), but the row stays where it is."""
    old, new = _old_and_new_key(key_columns, types)
    return partial_with_before() & reduce(operator.and_, [old[k].eqNullSafe(new[k]) for k in key_columns])


def without_paired_deletes(events: Column) -> Column:
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
    moves = ev.where(partial_with_before() & changed).select(
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


def _moved_in(joined: DataFrame, moves: DataFrame, key_columns: list[str], types: dict[str, str]) -> DataFrame:
    """Per new key, the rows moved to it: each as a full-image event just before the move's update,
    holding the row its old key had just before the move (before the move's delete of the old key)."""
    m, j = moves.alias("m"), joined.alias("j")
    pairs = m.join(j, aliased_keys_match("m", "j", key_columns), "inner").select(
        "m._to", "m._to_key", "m._move_pos", "m._move_offset", "m._move_id", "m._move_partition",
        "m._move_time", "j._cdc_events", "j._prior_row", "j._prior_pos",
    )
    # the move's delete of the old key is in the same message (same offset, ranked first), or, where a
    # decoder sends a key change as two messages (Debezium's delete + create), in another message at the
    # same position: neither has removed the row the move carries
    before_move = F.expr(aggregate_sql(
        "_cdc_events",
        "e.o < named_struct('position', _move_pos, 'offset', _move_offset, 'rank', 1)"
        f" AND NOT (e.op = 'DELETE' AND coalesce(e.position = _move_pos, false)) AND ({APPLIES_SQL})",
        init={"row": "_prior_row"}, step={"row": ROW_AFTER_SQL}) + ".row")
    # a move at or before the old key's published position was applied by an earlier run
    arrivals = pairs.select("*", before_move.alias("_old_row")).where(
        F.col("_old_row").isNotNull() & (F.col("_prior_pos").isNull() | (F.col("_move_pos") > F.col("_prior_pos"))))
    # the moved row, with its key columns' new values
    image = F.map_concat(F.map_filter("_old_row", lambda k, v: ~F.map_contains_key("_to_key", k)), F.col("_to_key"))
    event = event_struct(
        F.struct(F.col("_move_pos").alias("position"), F.col("_move_offset").alias("offset"),
                 F.lit(0).alias("rank")),
        F.lit(MOVE), F.col("_cdc_moved"), F.lit(None).cast("array<string>"), F.col("_move_pos"), F.col("_move_time"),
        F.struct(F.concat(F.lit("moved "), F.col("_move_id")).alias("event_id"),
                 F.col("_move_partition").alias("partition"), F.col("_move_offset").alias("offset")),
        (F.col("_cdc_moved").isNotNull(), F.expr(map_hash_sql("_cdc_moved", types))),
    )
    return arrivals.withColumn("_cdc_moved", image).select(*[F.col("_to")[k].alias(k) for k in key_columns],
                                                           event.alias("_cdc_e")) \
        .groupBy(*key_columns).agg(F.collect_list("_cdc_e").alias("_moved_in"))


def _with_arrivals(frame: DataFrame, arrivals: DataFrame, key_columns: list[str]) -> DataFrame:
    """Keys' events with the rows moved to them among them, in order."""
    f, a = frame.alias("f"), arrivals.alias("a")
    return f.join(a, aliased_keys_match("f", "a", key_columns), "left").select(
        *[F.col(f"f.{k}").alias(k) for k in key_columns],
        F.when(F.col("a._moved_in").isNull(), F.col("f._cdc_events"))
        .otherwise(in_order(F.concat("f._cdc_events", "a._moved_in"))).alias("_cdc_events"),
        *[F.col(f"f.{m}").alias(m) for m in PRIOR_META],
    )


def with_moved_rows(joined: DataFrame, ev: DataFrame, key_columns: list[str],
                     types: dict[str, str]) -> tuple[DataFrame, DataFrame]:
    """``joined`` with the rows moved to new keys among their events; and the cached frame to release
    once the fold is computed. A row moved again after an earlier move of the run (a chain of keys)
    needs the arrival of the earlier one: the arrivals are computed again, over the moves' old keys
    only, with the previous pass's arrivals until they no longer change (one pass per link of the
    longest chain)."""
    moves = key_moves(ev, key_columns, types).persist(StorageLevel.MEMORY_AND_DISK)
    base = joined.persist(StorageLevel.MEMORY_AND_DISK)
    # the keys rows move from: all a pass reads (few, against every key of the run)
    sources = key_join(base, moves, key_columns, "left_semi").persist(StorageLevel.MEMORY_AND_DISK)
    # is there a chain at all: a move whose old key an earlier move of the run brought a row to
    first, then = moves.alias("a"), moves.alias("b")
    chained = first.join(then, reduce(operator.and_, [
        F.col("a._to")[k].eqNullSafe(F.col(f"b.{k}")) for k in key_columns
    ]) & (F.struct("a._move_pos", "a._move_offset") < F.struct("b._move_pos", "b._move_offset"))).limit(1).count()
    current_sources, arrivals, previous = sources, None, None
    for passes in range(1, MAX_MOVE_PASSES + 1):  # noqa: B007 (reported after the loop)
        computed = _moved_in(current_sources, moves, key_columns, types).localCheckpoint(eager=True)
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
