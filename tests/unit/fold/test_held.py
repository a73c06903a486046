"""A run's records split by the held log (jobs.fold.held): a run whose records mark no transaction runs no
split, unless records held by an earlier run join it. Which records a split holds:
tests/unit/fold/test_transactions.py; runs that hold and complete a transaction:
tests/integration/test_held_transactions_runs.py."""
from __future__ import annotations

from jobs.decode.stage import decode_messages
from jobs.demo.qlik import json_metadata
from jobs.fold.held import hold_open_transactions, record_held
from jobs.fold.transactions import marks_a_transaction
from jobs.formats import DecodeOptions
from jobs.lake.layout import Lake
from tests.support.decoders import raw_frame
from tests.support.qlik import ACCOUNTS
from tests.support.qlik import accounts_message as msg


def qlik_changes(spark, messages: list[str], first_offset: int = 0):
    frame = raw_frame(spark, [json_metadata(ACCOUNTS), *messages])
    return decode_messages(frame.withColumn("offset", frame["offset"] + first_offset), "qlik", DecodeOptions()).changes


def offsets(df) -> list[int]:
    return sorted(r["offset"] for r in df.collect())


def jobs_run_by(spark, action) -> tuple[object, int]:
    """``action()`` and the number of Spark jobs it ran."""
    tracker, group = spark.sparkContext.statusTracker(), "held-test"
    spark.sparkContext.setJobGroup(group, "what the split runs")
    try:
        return action(), len(tracker.getJobIdsForGroup(group))
    finally:
        spark.sparkContext.setJobGroup("", "")


def test_records_that_mark_no_transaction_are_applied_as_a_split_would_without_running_one(spark, tmp_path):
    # a transaction id whose records never say where it ends (no transactionLastEvent): nothing can hold it
    changes = qlik_changes(spark, [msg(1, "INSERT", {"id": 1, "balance": 10}, "T", 1, None),
                                   msg(2, "UPDATE", {"id": 1, "balance": 11}, "T", 2, None)])
    assert changes.where(marks_a_transaction()).count() == 0
    split = hold_open_transactions(spark, Lake.at(str(tmp_path / "a")), "p", "r1", changes, "a1")
    skipped, jobs = jobs_run_by(spark, lambda: hold_open_transactions(
        spark, Lake.at(str(tmp_path / "b")), "p", "r1", changes, "a1", marked=False))
    assert jobs == 0
    assert skipped.report == split.report and skipped.report["records"] == 0
    assert (skipped.consumed, skipped.ended_through) == (split.consumed, split.ended_through)
    assert offsets(skipped.applied) == offsets(split.applied) == [1, 2]


def test_records_an_earlier_run_held_are_split_though_this_runs_mark_none(spark, tmp_path):
    lake = Lake.at(str(tmp_path / "lake"))
    # r1 ends with transaction T open: its record is held
    first = hold_open_transactions(spark, lake, "p", "r1", qlik_changes(spark, [
        msg(1, "INSERT", {"id": 1, "balance": 10}, "T", 1, False)]), "a1")
    assert first.report["records"] == 1
    record_held(lake, "p", "r1", first)
    # r2's records mark no transaction, but a later change of the partition has passed T: it has ended
    later = qlik_changes(spark, [msg(5, "UPDATE", {"id": 2, "balance": 20}, None, None, None)], first_offset=1)
    assert later.where(marks_a_transaction()).count() == 0
    second = hold_open_transactions(spark, lake, "p", "r2", later, "a2", marked=False)
    assert second.consumed == first.report["path"]
    assert offsets(second.applied) == [1, 2] and second.report["records"] == 0
