"""Held transactions: the records of transactions still open at the end of a run's snapshot wait for the
run that completes them."""
from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.model import record as C


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


def _marked_by_id() -> Column:
    """A record of a transaction by id that says whether it ends it (split_open_transactions)."""
    return F.col("tx_id").isNotNull() & F.col("tx_last").isNotNull()


def _bracket_marker() -> Column:
    """A TX_BEGIN / TX_END marker without an id: it brackets the records that follow it (_bracket_openings)."""
    return F.col("op").isin(C.TX_BEGIN, C.TX_END) & F.col("tx_id").isNull()


def marks_a_transaction() -> Column:
    """A record by which the split tells a transaction open: records without any hold nothing back, so a run
    whose records hold none (counted as its records' cache fills) needs none of the split's aggregates."""
    return _marked_by_id() | _bracket_marker()


def _bracket_openings(changes: DataFrame) -> tuple[Column, Column]:
    """(held, name) for the records an open bracket encloses: TX_BEGIN / TX_END markers without an id
    (DataWorks, DTS without ``sourceTxid``) enclose the records that follow a BEGIN until an END.

    Markers with a position bracket by position across the format's topics and partitions: the
    position is the source's log order, and a key-partitioned topic puts a transaction's rows on other
    partitions than its markers. Markers without one bracket by offset in their own partition. The
    records from the last BEGIN on are open while no END follows it (a next BEGIN closes the one
    before: logs do not interleave transactions)."""
    markers = changes.where(_bracket_marker())
    # one aggregate for both: the last BEGIN and END per format, topic and partition, by position and by
    # offset; the positioned ones are then reduced per format here
    begin, end = F.col("op") == C.TX_BEGIN, F.col("op") == C.TX_END
    parts = markers.groupBy("format", "topic", "partition", F.col("position").isNotNull().alias("positioned")).agg(
        F.max(F.when(begin, F.col("position"))).alias("begin_position"),
        F.max(F.when(end, F.col("position"))).alias("end_position"),
        F.max(F.when(begin, F.col("offset"))).alias("begin_offset"),
        F.max(F.when(end, F.col("offset"))).alias("end_offset")).collect()
    by_position = _open_brackets(parts, lambda r: r["format"], "position", positioned=True)
    by_offset = _open_brackets(parts, lambda r: (r["topic"], r["partition"]), "offset", positioned=False)
    held, name = F.lit(False), F.lit(None).cast("string")
    for fmt, open_from in by_position.items():
        here = (F.col("format") == fmt) & F.coalesce(F.col("position") >= F.lit(open_from), F.lit(False))
        held, name = held | here, F.when(here, F.lit(f"bracket {fmt}@{open_from}")).otherwise(name)
    for (topic, partition), open_from in by_offset.items():
        here = (F.col("topic") == topic) & (F.col("partition") == partition) & (F.col("offset") >= F.lit(open_from))
        label = f"bracket {topic}/{partition}@{open_from}"
        held, name = held | F.coalesce(here, F.lit(False)), F.when(here, F.lit(label)).otherwise(name)
    return held, name


def _open_brackets(parts: list, place_of, by: str, positioned: bool) -> dict:
    """Where the open bracket of each place (``place_of`` a part) starts, by ``by`` (position or offset):
    its last BEGIN, when no END follows it."""
    last: dict = {}
    for r in parts:
        if r["positioned"] == positioned:
            begin, end = last.get(place_of(r), (None, None))
            last[place_of(r)] = (_highest(begin, r[f"begin_{by}"]), _highest(end, r[f"end_{by}"]))
    return {place: begin for place, (begin, end) in last.items()
            if begin is not None and (end is None or end < begin)}


def _highest(*values):
    return max([v for v in values if v is not None], default=None)


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
    per_tx = (changes.where(_marked_by_id())
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
