"""The SharePlex JSON decoder against the DTS seed document's examples and a Flink-style product stream.

No captured SharePlex message is public (tests/resources/shareplex/SOURCE.md): the examples are those
of Alibaba DTS's documentation (tests/resources/seeds/004_a66593fb03e5fe66.txt, "Shareplex Json"), and the
product stream replays, as SharePlex would write it, the 26 row changes that Flink's
SharePlexJsonSerDerTest expects from its (unpublished) shareplex-data.txt.
"""
from __future__ import annotations

import re
from datetime import datetime

from jobs.formats import DecodeOptions
from tests.support.decoders import with_exact_numbers
from tests.support.shareplex import STEPS, decode, product_stream, seed_examples
from tests.support.shareplex import sp_message as _sp

MALFORMED = "malformed JSON, not a JSON object, or a field of the wrong JSON type"


def test_seed_examples(spark, shared_dir):
    ex = seed_examples(shared_dir)
    # as printed, the update elides meta fields ("….") and the delete has a trailing comma: not JSON
    repaired_update = ex["update"].replace("\u2026.\n", "")
    repaired_delete = re.sub(r'"del",\s*}', '"del"}', ex["delete"])
    delete_with_table = repaired_delete.replace('"op": "del"', '"op": "del", "table": "CL_BIZ1.MIO_LOG"')
    values = [ex["insert"], ex["update"], ex["delete"], repaired_update, repaired_delete, delete_with_table]
    records, quarantine, counts = decode(spark, values)

    assert [(q["offset"], q["reason"]) for q in quarantine] == [
        (1, MALFORMED), (2, MALFORMED), (4, "no source table ('meta.table')")]
    assert quarantine[0]["value"] == ex["update"].encode()
    assert counts["balanced"] and counts["total"]["landed"] == 6

    ins = records[0]
    assert (ins["op"], ins["phase"], ins["table_id"]) == ("INSERT", "CDC", "_.CL_BIZ1.MIO_LOG")
    assert ins["after"] == {"MIO_LOG_ID": "32539737"} and ins["key"] == ins["after"]  # whole row: no key known
    assert ins["position"] == "00000014589063118712.0000000001"
    assert (ins["tx_id"], ins["tx_seq"], ins["tx_last"]) == ("7.0.411499", 1, False)  # idx 1/11
    assert ins["event_time"] == datetime(2017, 6, 16, 14, 24, 34) and ins["column_types"] is None

    # without --primary-keys the key is every column of `key`; CNTR_NO changes, so the key changes
    old = {"MIO_LOG_ID": "32537893", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None,
           "CNTR_NO": "1171201606syui26"}
    new = {**old, "CNTR_NO": "1171201606"}
    upd = [r for r in records if r["offset"] == 3]
    assert [(r["op"], r["key"]) for r in upd] == [("DELETE", old), ("UPDATE", new)]
    assert upd[1]["after"] == new and upd[1]["before"] == old
    assert sorted(upd[1]["present_columns"]) == sorted(new)
    assert upd[0]["position"] is None and upd[0]["event_id"] != upd[1]["event_id"]

    row = {"MIO_LOG_ID": "32539739", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None,
           "CG_NO": None}
    dele = [r for r in records if r["offset"] == 5]
    assert [(r["op"], r["key"], r["before"], r["after"]) for r in dele] == [("DELETE", row, row, None)]

    # with the table's primary key configured, the update is a partial UPDATE of one key
    records, quarantine, _ = decode(spark, [repaired_update, delete_with_table, ex["insert"]],
                                    DecodeOptions(primary_keys={"MIO_LOG": ("MIO_LOG_ID",)}))
    assert quarantine == []
    assert [(r["op"], r["key"]) for r in records] == [
        ("UPDATE", {"MIO_LOG_ID": "32537893"}), ("DELETE", {"MIO_LOG_ID": "32539739"}),
        ("INSERT", {"MIO_LOG_ID": "32539737"})]
    assert records[0]["after"] == new and sorted(records[0]["present_columns"]) == sorted(new)


def test_numbers_keep_their_digits(spark):
    """A number sent as a JSON number keeps its digits (read into a string through a double it would not:
    12345678901234567890.12 -> 1.2345678901234567E19); strings stay as sent."""
    text = _sp("upd", data={"AMOUNT": "@BIG@", "RATE": "@FINE@", "NOTE": "1.50"}, key={"ID": "@INT@"}, scn="100")
    records, quarantine, _ = decode(spark, [with_exact_numbers(text)])
    assert quarantine == []
    assert records[0]["key"] == {"ID": "123456789012345678901234567890"}
    assert records[0]["after"] == {"ID": "123456789012345678901234567890", "AMOUNT": "12345678901234567890.12",
                                   "RATE": "0.1234567890123456789", "NOTE": "1.50"}


def test_ops_positions_transactions_and_malformed(spark):
    values = [
        _sp("INSERT", data={"id": 1, "v": "a"}, scn="900", seq=2, size=2, trans="5.1.7"),
        _sp("UPD", data={"v": "b"}, key={"id": 1}, scn="1000", seq=1, size=3),
        _sp("truncate", table="test.other", scn="1000", seq=3, size=3),
        _sp("DELETE", data={"id": 1, "v": "b"}, key={"id": 1}, scn="1000", seq=2, size=3),
        _sp("drop column", data={"c": None}, scn="1001"),
        _sp("UPDATE BEFORE", data={"v": "a"}, key={"id": 1}),
        None, "[1, 2]", '{"data": {"id": 1}}', _sp(None, data={"id": 1}), _sp("merge", data={"id": 1}),
        _sp("ins", table="", data={"id": 1}), _sp("ins"), _sp("upd", data={"v": "x"}),
        _sp("del"), '{"meta": {"op": "ins", "table": "a.b"}, "data": "not an object"}',
    ]
    records, quarantine, counts = decode(spark, values)
    assert [(r["op"], r["table_id"], r["key"]) for r in records] == [
        ("INSERT", "_.test.product", {"id": "1", "v": "a"}),
        ("UPDATE", "_.test.product", {"id": "1"}),
        ("TRUNCATE", "_.test.other", None),
        ("DELETE", "_.test.product", {"id": "1"}),
        ("DDL", "_.test.product", None),
    ]
    ins, upd, trunc, dele, _ = records
    assert ins["tx_last"] is True and (ins["tx_id"], ins["tx_seq"]) == ("5.1.7", 2)
    assert (upd["tx_seq"], upd["tx_last"], trunc["tx_last"]) == (1, False, True)
    assert upd["after"] == {"id": "1", "v": "b"} and upd["before"] == {"id": "1"}
    assert ins["position"] < upd["position"] < dele["position"] < trunc["position"], "scn, then seq"
    assert records[4]["after"] == {"ddl": "drop column", "columns": '{"c":null}'}
    assert [q["reason"] for q in quarantine] == [
        MALFORMED,
        "not a SharePlex message: no 'meta'",
        "missing 'meta.op'",
        "unknown operation type 'merge'",
        "no source table ('meta.table')",
        "'data' is null for an insert",
        "update has no 'key' (the before image's key columns): give --primary-keys (tables[].primary_keys in a pipeline file)",
        "delete has neither 'data' nor 'key'",
        MALFORMED,
    ]
    assert quarantine[0]["value"] == b"[1, 2]"
    assert counts["ignored_reasons"] == {
        "tombstone": 1, "update before image (its UPDATE AFTER carries the change)": 1}
    assert counts["balanced"] and counts["total"]["landed"] == 16


def test_flink_product_stream_decodes_to_its_row_changes(spark):
    records, quarantine, counts = decode(spark, product_stream())
    assert quarantine == [] and counts["total"]["records"] == 20
    # Flink's metadata test: first line is row 101, op "ins", table "test.product"
    first = records[0]
    assert first["table_id"] == "_.test.product" and first["after"] == {
        "id": "101", "name": "scooter", "description": "Small 2-wheel scooter", "weight": "3.14"}
    assert first["event_time"] == datetime(2017, 6, 16, 14, 24, 34)
    kinds = [(r["op"], int(r["key"]["id"])) for r in records]
    assert kinds == [("INSERT" if s[0] == "ins" else "UPDATE" if s[0] == "upd" else "DELETE", s[1]) for s in STEPS]
    assert records[9]["after"] == {"id": "106", "description": "18oz carpenter hammer"}
    assert sorted(records[9]["present_columns"]) == ["description", "id"]
    assert len({r["event_id"] for r in records}) == 20
