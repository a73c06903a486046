"""The DTS Avro decoder on records encoded with fastavro against the official DTS ``Record`` schema.

No repository ships a real serialized DTS record with asserted results
(tests/resources/dts_avro/SOURCE.md), so the fixtures are encoded here from the schema files of
aliyun/aliyun-dts-subscribe-demo, with the shapes the public Alibaba examples print (objectName
``mydb.t1``, sourcePosition ``72469@78``, tags ``pk_uk_info = {"PRIMARY":["a"]}``).
"""
from __future__ import annotations

import pytest

from jobs.decode import decode_counts, decode_messages
from jobs.decoders import DecodeOptions
from jobs.decoders.dts_avro import DtsValueError, dts_value
from tests.support.decoders import raw_frame
from tests.support.dts_avro import NS, chars, dts, integer


def decode(spark, values, options=DecodeOptions()):
    decoded = decode_messages(raw_frame(spark, values), "dts_avro", options)
    records = sorted((r.asDict(recursive=True) for r in decoded.changes.collect()),
                     key=lambda r: (r["offset"], r["op"] != "DELETE"))
    quarantine = [r.asDict() for r in decoded.quarantine.orderBy("offset").collect()]
    return records, quarantine, decode_counts(decoded.outcomes)


def test_insert_update_delete_with_the_key_from_pk_uk_info(spark):
    values = [
        dts("INSERT", after=[integer(1), chars("hello")], rid=10, pos="100@78"),
        dts("UPDATE", before=[integer(1), chars("hello")], after=[integer(1), chars("héllo 🎉")], rid=11,
            pos="200@78"),
        dts("DELETE", before=[integer(1), chars("héllo 🎉")], rid=12, pos="300@78"),
    ]
    records, quarantine, counts = decode(spark, values)
    assert quarantine == []
    assert [(r["op"], r["phase"], r["key"], r["after"]) for r in records] == [
        ("INSERT", "CDC", {"a": "1"}, {"a": "1", "b": "hello"}),
        ("UPDATE", "CDC", {"a": "1"}, {"a": "1", "b": "héllo 🎉"}),
        ("DELETE", "CDC", {"a": "1"}, None),
    ]
    assert records[1]["before"] == {"a": "1", "b": "hello"}
    assert records[0]["table_id"] == "mydb._.t1"
    assert records[0]["column_types"] == {"a": "bigint", "b": "string"}
    positions = [r["position"] for r in records]
    assert positions == sorted(positions) and len(set(positions)) == 3
    assert counts["total"] == {"landed": 3, "decoded": 3, "quarantined": 0, "ignored": 0, "records": 3}


def test_binlog_position_orders_before_the_record_id(spark):
    # a later binlog file sorts after an earlier one whatever the offsets and ids say
    records, _, _ = decode(spark, [dts("INSERT", after=[integer(1), chars("x")], rid=5, pos="900@7"),
                                   dts("INSERT", after=[integer(2), chars("y")], rid=4, pos="100@8")])
    by_key = {r["key"]["a"]: r["position"] for r in records}
    assert by_key["1"] < by_key["2"]


def test_init_is_full_load_transaction_markers_kept_and_control_records_ignored(spark):
    values = [
        dts("BEGIN", rid=1, fields=None, pk=None, txid="77"),
        dts("INIT", after=[integer(7), chars("seven")], rid=2, pos=""),
        dts("COMMIT", rid=3, pk=None, txid="77"),
        dts("HEARTBEAT", table=None, rid=4, pk=None),
        None,
    ]
    records, quarantine, counts = decode(spark, values)
    assert [(r["op"], r["phase"], r["after"]) for r in records] == [
        ("TX_BEGIN", "CDC", {"marker": "BEGIN", "sourceTxid": "77"}),
        ("SNAPSHOT", "FULL_LOAD", {"a": "7", "b": "seven"}),
        ("TX_END", "CDC", {"marker": "COMMIT", "sourceTxid": "77"}),
    ]
    # the markers name their transaction (sourceTxid), with an end flag on the end
    assert [(r["tx_id"], r["tx_last"]) for r in records if r["op"] != "SNAPSHOT"] == [("77", False), ("77", True)]
    assert quarantine == []
    assert counts["total"]["ignored"] == 2 and counts["balanced"]
    assert counts["ignored_reasons"] == {"heartbeat": 1, "tombstone": 1}


def test_typed_values_of_every_branch(spark):
    fields = [{"name": n, "dataTypeNumber": 0} for n in
              ("id", "price", "ratio", "ts", "dt", "day", "t", "yr", "tz", "bin", "geo", "js", "gone", "nul",
               "latin", "raw", "tztime", "zero_ts", "latin_c1", "early", "neg_t", "neg_m")]
    after = [
        integer(5),
        (NS + "Decimal", {"value": "-12.30", "precision": 10, "scale": 2}),
        (NS + "Float", {"value": 0.25, "precision": 0, "scale": 0}),
        (NS + "Timestamp", {"timestamp": 1700000000, "millis": 123}),
        (NS + "DateTime", {"year": 2026, "month": 11, "day": 22, "hour": 8, "minute": 5, "second": 9,
                           "millis": 654321}),
        (NS + "DateTime", {"year": 2026, "month": 2, "day": 28, "hour": None, "minute": None, "second": None,
                           "millis": None}),
        (NS + "DateTime", {"year": None, "month": None, "day": None, "hour": 23, "minute": 59, "second": 1,
                           "millis": None}),
        (NS + "DateTime", {"year": 1999, "month": None, "day": None, "hour": None, "minute": None, "second": None,
                           "millis": None}),
        (NS + "TimestampWithTimeZone", {"value": {"year": 2026, "month": 1, "day": 1, "hour": 8, "minute": 0,
                                                  "second": 0, "millis": None}, "timezone": "+08:00"}),
        (NS + "BinaryObject", {"type": "BLOB", "value": b"\x00\xff"}),
        (NS + "TextGeometry", {"type": "POINT", "value": "POINT(1 2)"}),
        (NS + "TextObject", {"type": "JSON", "value": '{"k": 1}'}),
        "NONE",
        "NULL",
        chars("café €", charset="latin1", codec="cp1252"),
        chars("\x01\x02", charset="binary"),
        # PostgreSQL timetz: the UTC time of day
        (NS + "TimestampWithTimeZone", {"value": {"year": None, "month": None, "day": None, "hour": 2, "minute": 30,
                                                  "second": 0, "millis": 250000}, "timezone": "+05:00"}),
        # MySQL's zero TIMESTAMP (0000-00-00 00:00:00) is stored as 0
        (NS + "Timestamp", {"timestamp": 0, "millis": 0}),
        # the bytes cp1252 leaves undefined are C1 controls in MySQL's latin1
        (NS + "Character", {"charset": "latin1", "value": b"a\x81\x8d\x8f\x90\x9d\x80"}),
        # a year before 1000 keeps its four digits
        (NS + "DateTime", {"year": 1, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0, "millis": 123000}),
        # negative MySQL TIMEs: every component negated (-01:30:00, -00:30:05.5)
        (NS + "DateTime", {"year": None, "month": None, "day": None, "hour": -1, "minute": -30, "second": 0,
                           "millis": None}),
        (NS + "DateTime", {"year": None, "month": None, "day": None, "hour": 0, "minute": -30, "second": -5,
                           "millis": -500000}),
    ]
    records, quarantine, _ = decode(spark, [dts("INSERT", after=after, fields=fields, pk=("id",))])
    assert quarantine == []
    (r,) = records
    assert r["after"] == {
        "id": "5", "price": "-12.30", "ratio": "0.25", "ts": "2023-11-14 22:13:20.000123",
        "dt": "2026-11-22 08:05:09.654321", "day": "2026-02-28", "t": "23:59:01", "yr": "1999",
        "tz": "2026-01-01 00:00:00.000000", "bin": "AP8=", "geo": "POINT(1 2)", "js": '{"k": 1}', "nul": None,
        "latin": "café €", "raw": "AQI=", "tztime": "21:30:00.250000Z", "zero_ts": None,
        "latin_c1": "a\x81\x8d\x8f\x90\x9d€", "early": "0001-01-01 00:00:00.123000", "neg_t": "-01:30:00",
        "neg_m": "-00:30:05.500000",
    }
    assert r["present_columns"] is not None and "gone" not in r["present_columns"]
    assert r["column_types"] == {
        "id": "bigint", "price": "decimal(38,18)", "ratio": "double", "ts": "timestamp", "dt": "timestamp",
        "day": "date", "t": "string", "yr": "int", "tz": "timestamp", "bin": "binary", "geo": "string",
        "js": "string", "latin": "string", "raw": "binary", "tztime": "string", "zero_ts": "timestamp",
        "latin_c1": "string", "early": "timestamp", "neg_t": "string", "neg_m": "string",
    }


def test_zero_timestamp_is_null_only_for_mysql_and_a_named_zone_time_is_refused():
    zero = (NS + "Timestamp", {"timestamp": 0, "millis": 0})
    assert dts_value(zero, mysql=True) == (None, "timestamp")
    # other sources have no zero date: the epoch is the epoch
    assert dts_value(zero, mysql=False) == ("1970-01-01 00:00:00.000000", "timestamp")
    assert dts_value((NS + "Timestamp", {"timestamp": 0, "millis": 5}), mysql=True)[0] == "1970-01-01 00:00:00.000005"
    # a time of day in a named zone has no fixed offset (daylight saving): quarantined, not guessed
    named = (NS + "TimestampWithTimeZone", {"value": {"year": None, "month": None, "day": None, "hour": 2,
                                                      "minute": 0, "second": 0, "millis": None},
                                            "timezone": "Europe/Paris"})
    with pytest.raises(DtsValueError, match="named zone 'Europe/Paris'"):
        dts_value(named)
    assert dts_value((NS + "TimestampWithTimeZone", {**named[1], "timezone": "UTC-3"}))[0] == "05:00:00Z"


def test_key_change_is_delete_plus_insert_and_configured_keys_win(spark):
    update = dts("UPDATE", before=[integer(1), chars("x")], after=[integer(2), chars("x")])
    records, _, _ = decode(spark, [update])
    assert [(r["op"], r["key"]) for r in records] == [("DELETE", {"a": "1"}), ("INSERT", {"a": "2"})]
    # --primary-keys names b: the same message is then an update of b='x'
    records, _, _ = decode(spark, [update], DecodeOptions(primary_keys={"t1": ("b",)}))
    assert [(r["op"], r["key"]) for r in records] == [("UPDATE", {"b": "x"})]
    # the key column not captured (EmptyObject NONE) did not change: an update of key 1, not a move
    uncaptured = dts("UPDATE", before=[integer(1), chars("old")], after=["NONE", chars("new")])
    records, quarantine, _ = decode(spark, [uncaptured])
    assert quarantine == []
    assert [(r["op"], r["key"], r["after"]) for r in records] == [("UPDATE", {"a": "1"}, {"b": "new"})]
    # no pk_uk_info and no --primary-keys: the whole row is the identity
    records, _, _ = decode(spark, [dts("INSERT", after=[integer(3), chars("z")], pk=None)])
    assert records[0]["key"] == {"a": "3", "b": "z"}


def test_ddl_is_recorded_and_truncate_empties(spark):
    values = [dts("DDL", after="ALTER TABLE t1 ADD COLUMN c int", fields="", pk=None, rid=1),
              dts("DDL", after="/* hint */ TRUNCATE TABLE t1", fields="", pk=None, rid=2),
              # a database's DDL names the database alone, or nothing
              dts("DDL", table="mydb", after="CREATE DATABASE mydb", fields="", pk=None, rid=3),
              dts("DDL", table=None, after="CREATE DATABASE d2", fields="", pk=None, rid=4)]
    records, quarantine, _ = decode(spark, values)
    assert quarantine == []
    assert [(r["op"], r["table_id"], r["after"]) for r in records] == [
        ("DDL", "mydb._.t1", {"ddl": "ALTER TABLE t1 ADD COLUMN c int"}), ("TRUNCATE", "mydb._.t1", None),
        ("DDL", "mydb._._", {"ddl": "CREATE DATABASE mydb"}), ("DDL", "_._._", {"ddl": "CREATE DATABASE d2"})]


@pytest.mark.parametrize("value, reason", [
    (b"\x02\x00garbage", "not a DTS Avro Record"),
    (b'{"operation":"INSERT"}', "not a DTS Avro Record"),
    (dts("INSERT", after=[integer(1)]), "image has 1 values for 2 fields"),
    (dts("INSERT", after=[integer(1), chars("x", charset="klingon")]), "unknown charset 'klingon'"),
    (dts("INSERT", after=None), "INSERT without afterImages"),
    (dts("DELETE", before=None), "DELETE without beforeImages"),
    (dts("INSERT", table=None, after=[integer(1), chars("x")]), "no objectName"),
    (dts("INSERT", after=[integer(1), chars("x")]) + b"\x00", "bytes after the record"),
])
def test_malformed_records_are_quarantined_with_a_reason_and_their_bytes(spark, value, reason):
    records, quarantine, counts = decode(spark, [value])
    assert records == []
    assert len(quarantine) == 1 and reason in quarantine[0]["reason"]
    assert bytes(quarantine[0]["value"]) == value
    assert counts["balanced"] and counts["total"]["quarantined"] == 1
