"""A transaction still open at the end of a run's snapshot is held back: which decoded changes are applied
and which held. Formats mark transactions by id (Qlik transactionLastEvent, a Debezium transaction
topic's BEGIN / END) or by bracket markers in their log (DataWorks TRANSACTION_BEGIN / END, DTS BEGIN /
COMMIT without an id). The runs that hold a transaction and the run that completes it:
tests/integration/test_held_transactions_runs.py."""
from __future__ import annotations

import json

from pyspark.sql import functions as F

from jobs.decode.stage import decode_messages
from jobs.demo.qlik import change_sequence, json_metadata
from jobs.fold.transactions import split_open_transactions
from jobs.formats import DecodeOptions
from tests.support.decoders import raw_frame
from tests.support.qlik import ACCOUNTS
from tests.support.qlik import accounts_message as msg


def dataworks(op: str, seq: int, row: dict | None = None) -> str:
    return json.dumps({
        "schema": {"dataColumn": [{"name": "id", "type": "LONG"}, {"name": "balance", "type": "LONG"}],
                   "primaryKey": ["id"], "source": {"dbType": "MySQL", "dbName": "bank", "tableName": "accounts"}},
        "payload": {"before": None, "after": row and {"dataColumn": row}, "sequenceId": str(seq), "op": op,
                    "timestamp": {"eventTime": 1731662097000 + seq}}, "version": "1.0.0"})


def split(spark, fmt: str, frame, ended_before: str | None = None) -> tuple[list[tuple], list[tuple]]:
    """(applied, held) as (partition, offset, op, held transaction) in offset order."""
    applied, held, _ = split_open_transactions(decode_messages(frame, fmt, DecodeOptions()).changes, ended_before)
    return (sorted((r["partition"], r["offset"], r["op"]) for r in applied.collect()),
            sorted((r["partition"], r["offset"], r["op"], r["held_transaction"]) for r in held.collect()))


def test_positioned_bracket_markers_hold_across_partitions(spark):
    # a key-partitioned topic: the markers on partition 0, the rows on partitions 1 and 2. The first
    # transaction (10..13) has ended; the second (14..) has not: its rows are held wherever they landed
    markers = [dataworks("TRANSACTION_BEGIN", 10), dataworks("TRANSACTION_END", 13), dataworks("TRANSACTION_BEGIN", 14)]
    rows1 = [dataworks("INSERT", 11, {"id": 1, "balance": 5}), dataworks("INSERT", 15, {"id": 3, "balance": 7})]
    rows2 = [dataworks("INSERT", 12, {"id": 2, "balance": 6}), dataworks("INSERT", 16, {"id": 4, "balance": 8})]
    frame = raw_frame(spark, markers).unionByName(raw_frame(spark, rows1).withColumn("partition", F.lit(1))) \
        .unionByName(raw_frame(spark, rows2).withColumn("partition", F.lit(2)))
    applied, held = split(spark, "dataworks", frame)
    opened = "bracket dataworks@00000000000000000014.1"
    assert held == [(0, 2, "TX_BEGIN", opened), (1, 1, "INSERT", opened), (2, 1, "INSERT", opened)]
    assert applied == [(0, 0, "TX_BEGIN"), (0, 1, "TX_END"), (1, 0, "INSERT"), (2, 0, "INSERT")]
    # once the END is landed nothing is held
    ended = frame.unionByName(raw_frame(spark, [*markers, dataworks("TRANSACTION_END", 17)]).where("offset = 3"))
    applied, held = split(spark, "dataworks", ended)
    assert held == [] and len(applied) == 8


def test_bracket_markers_without_positions_hold_the_open_tail_of_each_partition(spark):
    # markers without a usable sequenceId bracket by offset in their partition: partition 0 has a
    # closed transaction, then one whose TRANSACTION_END is not landed yet; partition 1 a BEGIN left
    # open by a next BEGIN (logs do not interleave transactions), then closed
    def unpositioned(op: str, row: dict | None = None) -> str:
        return dataworks(op, 0, row).replace('"sequenceId": "0"', '"sequenceId": null')

    p0 = [unpositioned("TRANSACTION_BEGIN"), dataworks("INSERT", 11, {"id": 1, "balance": 5}),
          unpositioned("TRANSACTION_END"), unpositioned("TRANSACTION_BEGIN"),
          dataworks("INSERT", 14, {"id": 2, "balance": 6}), dataworks("INSERT", 15, {"id": 3, "balance": 7})]
    p1 = [unpositioned("TRANSACTION_BEGIN"), dataworks("INSERT", 21, {"id": 4, "balance": 8}),
          unpositioned("TRANSACTION_BEGIN"), dataworks("INSERT", 23, {"id": 5, "balance": 9}),
          unpositioned("TRANSACTION_END"), dataworks("INSERT", 25, {"id": 6, "balance": 1})]
    frame = raw_frame(spark, p0).unionByName(raw_frame(spark, p1).withColumn("partition", F.lit(1)))
    applied, held = split(spark, "dataworks", frame)
    assert held == [(0, 3, "TX_BEGIN", "bracket t/0@3"), (0, 4, "INSERT", "bracket t/0@3"),
                    (0, 5, "INSERT", "bracket t/0@3")]
    assert [(p, o) for p, o, _ in applied] == [(0, 0), (0, 1), (0, 2), *[(1, o) for o in range(6)]]


def test_dts_begin_without_commit_is_held(spark):
    from tests.support.dts_avro import chars, dts, integer

    values = [dts("BEGIN", rid=1, pk=None, txid="9"), dts("INSERT", after=[integer(1), chars("a")], rid=2, txid="9"),
              dts("COMMIT", rid=3, pk=None, txid="9"), dts("BEGIN", rid=4, pk=None, txid="10"),
              dts("UPDATE", before=[integer(1), chars("a")], after=[integer(1), chars("b")], rid=5, txid="10")]
    applied, held = split(spark, "dts_avro", raw_frame(spark, values))
    assert [op for _, _, op in applied] == ["TX_BEGIN", "INSERT", "TX_END"]
    assert [(o, op, tx) for _, o, op, tx in held] == [(3, "TX_BEGIN", "id 10"), (4, "UPDATE", "id 10")]


def test_dts_transactions_are_told_apart_by_id_across_partitions(spark):
    """BEGIN and COMMIT on partition 0, the rows on partitions 1 and 2 (a topic partitioned by key):
    the COMMIT ends its transaction on every partition. Without a sourceTxid (MySQL sends "0") the
    safeSourcePosition, the transaction's BEGIN position, names it."""
    from tests.support.dts_avro import chars, dts, integer

    def tx(n: int, begin: str, **ids):
        return ([dts("BEGIN", rid=n, pk=None, pos=begin, **ids)],
                [dts("INSERT", after=[integer(n), chars("a")], rid=n + 1, pos=f"{n}01@7", **ids)],
                [dts("INSERT", after=[integer(n + 1), chars("b")], rid=n + 2, pos=f"{n}02@7", **ids)],
                [dts("COMMIT", rid=n + 3, pk=None, pos=f"{n}03@7", **ids)])

    for first, second in ((dict(txid="41"), dict(txid="42")),
                          (dict(txid="0", safe="100@7"), dict(txid="0", safe="200@7"))):
        b1, r1, s1, c1 = tx(1, "100@7", **first)
        b2, r2, s2, _ = tx(2, "200@7", **second)  # its COMMIT is not landed yet
        frame = raw_frame(spark, [*b1, *c1, *b2]).unionByName(
            raw_frame(spark, [*r1, *r2]).withColumn("partition", F.lit(1))).unionByName(
            raw_frame(spark, [*s1, *s2]).withColumn("partition", F.lit(2)))
        applied, held = split(spark, "dts_avro", frame)
        assert applied == [(0, 0, "TX_BEGIN"), (0, 1, "TX_END"), (1, 0, "INSERT"), (2, 0, "INSERT")]
        assert [(p, o, op) for p, o, op, _ in held] == [(0, 2, "TX_BEGIN"), (1, 1, "INSERT"), (2, 1, "INSERT")]


def test_debezium_transaction_topic_holds_transactions_without_their_end(spark):
    src = {"connector": "postgresql", "db": "bank", "schema": "public", "table": "accounts", "txId": 571}

    def change(tx: str, i: int, lsn: int) -> str:
        return json.dumps({"op": "c", "after": {"id": i, "balance": i}, "source": {**src, "lsn": lsn},
                           "transaction": {"id": tx, "total_order": 1, "data_collection_order": 1}})

    def status(s: str, tx: str) -> str:
        return json.dumps({"status": s, "id": tx, "ts_ms": 1, "event_count": 1 if s == "END" else None})

    data = raw_frame(spark, [change("571:100", 1, 100), change("572:200", 2, 200), change("573:300", 3, 300)],
                     keys=['{"id": 1}', '{"id": 2}', '{"id": 3}'], topic="bank.public.accounts")
    # the transaction topic, landed with the data topic: 571 and 572 ended, 573 still open
    meta = raw_frame(spark, [status("BEGIN", "571:100"), status("END", "571:100"), status("BEGIN", "572:200"),
                             status("END", "572:200"), status("BEGIN", "573:300")], topic="bank.transaction")
    applied, held = split(spark, "debezium", data.unionByName(meta))
    assert len(applied) == 6
    assert [(op, tx) for _, _, op, tx in held] == [("INSERT", "id 573:300"), ("TX_BEGIN", "id 573:300")]
    # without the transaction topic nothing marks transaction ends: every event is applied
    applied, held = split(spark, "debezium", data)
    assert len(applied) == 3 and held == []


def test_a_dataworks_split_update_cut_by_the_snapshot_waits_for_its_after_half(spark):
    # an UPDATE_BEFOR whose UPDATE_AFTER is not landed yet; a complete pair; a merged update
    before_only = json.loads(dataworks("UPDATE_BEFOR", 30))
    before_only["payload"]["before"] = {"dataColumn": {"id": 3, "balance": 7}}
    pair_before = json.loads(dataworks("UPDATE_BEFOR", 20))
    pair_before["payload"]["before"] = {"dataColumn": {"id": 2, "balance": 6}}
    values = [json.dumps(pair_before), dataworks("UPDATE_AFTER", 20, {"id": 2, "balance": 60}),
              dataworks("UPDATE_AFTER", 25, {"id": 1, "balance": 5}), json.dumps(before_only)]
    applied, held = split(spark, "dataworks", raw_frame(spark, values))
    assert held == [(0, 3, "DELETE", "id update 30")]
    assert applied == [(0, 0, "DELETE"), (0, 1, "UPDATE"), (0, 2, "UPDATE")]


def test_a_transaction_whose_end_is_in_a_topic_not_landed_ends_when_a_later_one_passes_it(spark):
    # T's last event is a change of a table whose topic this pipeline does not land; U commits after it.
    # V, cut by the snapshot, stays held: nothing follows it.
    t = [msg(1, "INSERT", {"id": 1, "balance": 10}, "T", 1, False)]
    u = [msg(3, "UPDATE", {"id": 1, "balance": 11}, "U", 1, True)]
    v = [msg(4, "UPDATE", {"id": 1, "balance": 12}, "V", 1, False)]
    applied, held = split(spark, "qlik", raw_frame(spark, [json_metadata(ACCOUNTS), *t, *u, *v]))
    assert held == [(0, 3, "UPDATE", "id V")]
    assert applied == [(0, 1, "INSERT"), (0, 2, "UPDATE")]
    # without U, T is held: its end may still come
    applied, held = split(spark, "qlik", raw_frame(spark, [json_metadata(ACCOUNTS), *t]))
    assert held == [(0, 1, "INSERT", "id T")] and applied == []


def test_a_redelivered_part_of_a_transaction_an_earlier_run_ended_is_not_held(spark):
    # T ended in an earlier run; this run holds a redelivered copy of its first change alone
    t1 = msg(1, "INSERT", {"id": 1, "balance": 10}, "T", 1, False)
    t2 = msg(2, "INSERT", {"id": 2, "balance": 20}, "T", 2, True)
    split_once = split_open_transactions(
        decode_messages(raw_frame(spark, [json_metadata(ACCOUNTS), t1, t2]), "qlik", DecodeOptions()).changes)
    assert split_once.ended_through == change_sequence("2026110112000000", 2)
    copy = raw_frame(spark, [json_metadata(ACCOUNTS), t1])
    applied, held = split(spark, "qlik", copy, ended_before=split_once.ended_through)
    assert held == [] and applied == [(0, 1, "INSERT")]
    # without what earlier runs ended, the copy waits for an end
    assert split(spark, "qlik", copy)[1] == [(0, 1, "INSERT", "id T")]
