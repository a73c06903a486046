"""The Maxwell JSON decoder against the real messages in tests/resources/maxwell.

Expected values are those the tools' own test suites expect (tests/resources/maxwell/SOURCE.md).
"""
from __future__ import annotations

import json
from datetime import datetime

import pytest

from jobs.formats import DecodeOptions
from jobs.lake.raw import read_raw
from tests.support.decoders import (
    FLINK_PRODUCT_ROWS,
    assert_rows_equal,
    decoded_rows,
    flink_row_kinds,
    raw_frame,
    with_exact_numbers,
)
from tests.support.maxwell import maxwell_message as _mx

# Flink MaxwellJsonSerDerTest / SeaTunnel MaxWellJsonSerDeSchemaTest: the 26 rows both files decode to
FLINK_EXPECTED = [
    *FLINK_PRODUCT_ROWS,
    ("-U", 101, "scooter", "Small 2-wheel scooter", 3.14),
    ("+U", 101, "scooter", "Small 2-wheel scooter", 5.17),
    ("-U", 102, "car battery", "12V car battery", 8.1),
    ("+U", 102, "car battery", "12V car battery", 5.17),
    ("-D", 102, "car battery", "12V car battery", 5.17),
    ("-D", 103, "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", 0.8),
]


def decode(raw, options=DecodeOptions()):
    return decoded_rows(raw, "maxwell", options)[:3]


@pytest.mark.parametrize("path", ["maxwell/flink/maxwell-data.txt", "maxwell/seatunnel/maxwell-data-filter-table.txt"])
def test_flink_and_seatunnel_files_decode_to_their_rows(spark, shared_dir, path):
    records, quarantine, counts = decode(read_raw(spark, str(shared_dir / path)))
    assert quarantine == []
    assert counts["total"] == {"landed": 20, "decoded": 20, "quarantined": 0, "ignored": 0, "records": 20}
    assert_rows_equal(flink_row_kinds(records), FLINK_EXPECTED)
    first = records[0]
    # metadata test: database, table, primary-key-columns, ingestion timestamp 1596684883000 ms
    assert first["table_id"] == "test._.product" and first["key"] == {"id": "101"}
    assert first["event_time"] == datetime(2020, 8, 6, 3, 34, 43)
    assert (first["tx_id"], first["tx_seq"], first["tx_last"]) == ("7125", 0, False)
    assert (records[8]["tx_seq"], records[8]["tx_last"]) == (9999999999, True)  # the commit row is last
    assert all(r["position"] is None and r["phase"] == "CDC" for r in records), "no binlog position sent"
    assert len({r["event_id"] for r in records}) == 20


def test_seatunnel_real_maxwell_output(spark, shared_dir):
    raw = read_raw(spark, str(shared_dir / "maxwell/seatunnel/maxwell_data.txt"))
    # the sink table of SeaTunnel's test has primary key id; Maxwell's value does not say so
    records, quarantine, counts = decode(raw, DecodeOptions(primary_keys={"products": ("id",)}))
    assert quarantine == [] and counts["balanced"] and counts["total"]["records"] == 12
    got = [(kind, ident, weight) for kind, ident, _, _, weight in flink_row_kinds(records)]
    assert got == [("+I", i, w) for i, w in zip(range(101, 110), (3.14, 8.1, 0.8, 0.75, 0.875, 1.0, 5.3, 0.1, 22.2))] + [
        ("-U", 101, 3.14), ("+U", 101, 4.56), ("-U", 107, 5.3), ("+U", 107, 7.88), ("-D", 109, 22.2)]
    assert records[0]["key"] == {"id": "101"} and records[0]["after"]["weight"] == "3.14"
    # no key at all: the whole row is the key, so an update is a delete of the old row + an insert
    records, _, counts = decode(raw)
    assert counts["total"]["records"] == 14 and records[0]["key"] == records[0]["after"]
    assert [(r["op"], r["key"]["weight"]) for r in records[9:11]] == [("DELETE", "3.14"), ("INSERT", "4.56")]


def test_positions_keys_and_key_changes(spark):
    values = [
        _mx("update", {"id": 2, "v": "b"}, old={"id": 1}, position="mysql-bin.000010:120", xoffset=0),
        _mx("update", {"id": 5, "v": "x"}, old={"v": "y"}, position="mysql-bin.000010:120", commit=True),
        _mx("delete", {"id": 5, "v": "x"}, position="mysql-bin.000009:99999", commit=True),
        _mx("insert", {"id": 7, "v": "z"}, position="mysql-bin.000011:4", commit=True),
    ]
    hash_key = '{"database":"shop","table":"items","pk.id":%s}'
    keys = [hash_key % 2, hash_key % 5, '["shop","items",[{"id":5}]]', None]
    records, quarantine, _ = decode(raw_frame(spark, values, keys))
    assert quarantine == []
    assert [(r["op"], r["key"]) for r in records] == [
        ("DELETE", {"id": "1"}), ("INSERT", {"id": "2"}), ("UPDATE", {"id": "5"}), ("DELETE", {"id": "5"}),
        ("INSERT", {"id": "7", "v": "z"}),  # no key anywhere: the whole row
    ]
    assert records[2]["before"] == {"id": "5", "v": "y"}
    pos = [r["position"] for r in records]
    assert pos[0] == pos[1] == "00000000000000000010.00000000000000000120.0000000000"
    assert pos[3] < pos[0] < pos[2] < pos[4], "binlog file number, then offset, then xoffset (commit row last)"
    # --primary-keys wins over the Kafka key
    records, _, _ = decode(raw_frame(spark, values[:1], keys[:1]), DecodeOptions(primary_keys={"items": ("v",)}))
    assert [(r["op"], r["key"]) for r in records] == [("UPDATE", {"v": "b"})]


def test_decimals_sent_as_json_numbers_keep_their_digits(spark):
    """Maxwell sends DECIMAL columns as JSON numbers; read into a string through a double they would lose
    digits (12345678901234567890.12 -> 1.2345678901234567E19)."""
    row = {"id": 1, "amount": "@BIG@", "rate": "@FINE@", "price": "@TWO@", "serial": "@INT@", "doc": "@NESTED@",
           "note": "12.50", "ok": True, "gone": None}
    values = [with_exact_numbers(_mx("insert", row, position="binlog.000001:4")),
              with_exact_numbers(_mx("update", {**row, "amount": 1}, old={"amount": "@BIG@"},
                                     position="binlog.000001:90"))]
    records, quarantine, _ = decode(raw_frame(spark, values), DecodeOptions(primary_keys={"items": ("id",)}))
    assert quarantine == []
    expected = {"id": "1", "amount": "12345678901234567890.12", "rate": "0.1234567890123456789", "price": "1.5",
                "serial": "123456789012345678901234567890", "doc": '{"x":98765432109876543.21}', "note": "12.50",
                "ok": "true", "gone": None}
    assert records[0]["after"] == expected
    assert records[1]["after"] == {**expected, "amount": "1"}
    assert records[1]["before"] == expected, "the old value, overlaid from 'old', keeps its digits too"


def test_bootstrap_ddl_heartbeat_and_malformed(spark):
    values = [
        _mx("bootstrap-start", None), _mx("bootstrap-insert", {"id": 1, "v": "a"}),
        _mx("bootstrap-complete", None), _mx("heartbeat", None),
        json.dumps({"type": "table-alter", "database": "shop", "table": "items", "sql": "ALTER TABLE items ADD c INT",
                    "position": "mysql-bin.000010:500", "ts": 1}),
        "{oops", '{"database":"shop","table":"items"}', _mx("replace", {"id": 1}), _mx("insert", None),
        json.dumps({"type": "insert", "data": {"id": 1}}), _mx("update", {"id": 1, "v": "b"}), None,
    ]
    records, quarantine, counts = decode(raw_frame(spark, values))
    assert [(r["op"], r["phase"]) for r in records] == [("SNAPSHOT", "FULL_LOAD"), ("DDL", "CDC")]
    assert records[1]["after"] == {"ddl": "ALTER TABLE items ADD c INT"}
    assert [q["reason"] for q in quarantine] == [
        "malformed JSON or not a JSON object",
        "not a Maxwell message: no 'type'",
        "unknown operation type 'replace'",
        "'data' is null for type insert",
        "no database/table",
        "update of a table without a known key has no 'old' image: give --primary-keys (tables[].primary_keys in a pipeline file)",
    ]
    assert quarantine[0]["value"] == b"{oops"
    assert counts["ignored_reasons"] == {"bootstrap marker": 2, "heartbeat": 1, "tombstone": 1}
    assert counts["total"]["landed"] == 12 and counts["balanced"]


def test_a_time_or_position_that_is_not_a_number_is_quarantined(spark):
    """``ts`` (seconds), ``ts_ms`` and ``position`` order and place a change: one that cannot be read would
    publish the change with a null event time, or order it by its Kafka offset alone."""
    values = [
        _mx("insert", {"id": 1}, position="binlog.000001:4", ts="yesterday"),
        _mx("insert", {"id": 2}, position="binlog.000001:5", ts=True),
        _mx("insert", {"id": 3}, position="binlog.000001:6", ts=1.5),
        _mx("insert", {"id": 4}, position="binlog.000001:7", ts=99999999999999),  # past Spark's last timestamp
        _mx("insert", {"id": 5}, position="binlog.000001:8", ts_ms="soon"),
        _mx("insert", {"id": 6}, position="nowhere"),
        _mx("insert", {"id": 7}, position="binlog.000001:9", ts_ms=1731661114123),
        _mx("insert", {"id": 8}, ts=None),  # no time sent: nothing to misread
    ]
    records, quarantine, counts = decode(raw_frame(spark, values), DecodeOptions(primary_keys={"items": ("id",)}))
    assert [(q["offset"], q["reason"]) for q in quarantine] == [
        (0, "'ts' is not a number of seconds since 1970 (epoch)"),
        (1, "'ts' is not a number of seconds since 1970 (epoch)"),
        (2, "'ts' is not a number of seconds since 1970 (epoch)"),
        (3, "'ts' is not a number of seconds since 1970 (epoch)"),
        (4, "'ts_ms' is not a number of milliseconds since 1970 (epoch)"),
        (5, "'position' is not a binlog position (file.number:offset)"),
    ]
    assert [(r["key"]["id"], r["event_time"]) for r in records] == [
        ("7", datetime(2024, 11, 15, 8, 58, 34, 123000)), ("8", None)]
    assert counts["balanced"]
