"""The DTS Avro decoder (the JVM-side jvm/src/cdc/DtsAvroUdf.java) on records encoded with
fastavro against the official DTS ``Record`` schema.

No repository ships a real serialized DTS record with asserted results
(tests/resources/dts_avro/SOURCE.md), so the fixtures are encoded here from the schema files of
aliyun/aliyun-dts-subscribe-demo, with the shapes the public Alibaba examples print (objectName
``mydb.t1``, sourcePosition ``72469@78``, tags ``pk_uk_info = {"PRIMARY":["a"]}``). Values at the edges
of every branch of the value union, and malformed bytes, are checked for what holds whatever the
input (tests/support/fuzz.py check_batch).
"""
from __future__ import annotations

import random
import struct

import pytest

from jobs.formats import DecodeOptions
from tests.support.decoders import decoded_rows, raw_frame
from tests.support.dts_avro import NS, chars, dts, integer
from tests.support.fuzz import check_batch


def decode(spark, values, options=DecodeOptions()):
    return decoded_rows(raw_frame(spark, values), "dts_avro", options)[:3]


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


def test_zero_timestamp_is_null_only_for_mysql_and_a_named_zone_time_is_refused(spark):
    zero = (NS + "Timestamp", {"timestamp": 0, "millis": 0})
    fields = [{"name": "a", "dataTypeNumber": 3}, {"name": "ts", "dataTypeNumber": 7}]

    def after(value, source="MySQL"):
        return dts("INSERT", after=[integer(1), value], fields=fields, source=source)

    named = (NS + "TimestampWithTimeZone", {"value": {"year": None, "month": None, "day": None, "hour": 2,
                                                      "minute": 0, "second": 0, "millis": None},
                                            "timezone": "Europe/Paris"})
    values = [after(zero), after(zero, source="PostgreSQL"), after((NS + "Timestamp", {"timestamp": 0, "millis": 5})),
              after((NS + "TimestampWithTimeZone", {**named[1], "timezone": "UTC-3"})), after(named)]
    records, quarantine, _ = decode(spark, values)
    assert [r["after"]["ts"] for r in records] == [
        None,
        # other sources have no zero date: the epoch is the epoch
        "1970-01-01 00:00:00.000000",
        "1970-01-01 00:00:00.000005",
        "05:00:00Z",
    ]
    # a time of day in a named zone has no fixed offset (daylight saving): quarantined, not guessed
    assert [q["offset"] for q in quarantine] == [4]
    assert "named zone 'Europe/Paris'" in quarantine[0]["reason"]


CHARSET_TEXTS = [("utf8mb4", "héllo 世界", "utf-8"), ("utf8", "ok", "utf-8"), ("gbk", "中文", "gbk"),
                 ("gb18030", "中文𠀀", "gb18030"), ("big5", "繁體", "big5"), ("ucs2", "wide", "utf-16-be"),
                 ("utf16le", "le", "utf-16-le"), ("utf32", "x", "utf-32-be"), ("sjis", "日本", "shift_jis"),
                 ("ujis", "日本", "euc-jp"), ("euckr", "한국", "euc-kr"), ("koi8r", "привет", "koi8-r"),
                 ("cp1251", "привет", "cp1251"), ("cp1250", "łódź", "cp1250"), ("ascii", "plain", "ascii"),
                 ("UTF8MB4", "upper name", "utf-8"), ("", "no charset", "utf-8")]


def test_each_charset_decodes_to_its_text(spark):
    values = [dts("INSERT", after=[integer(i), chars(text, charset, codec)], rid=i)
              for i, (charset, text, codec) in enumerate(CHARSET_TEXTS)]
    records, quarantine, _ = decode(spark, values)
    assert quarantine == []
    assert [r["after"]["b"] for r in records] == [text for _, text, _ in CHARSET_TEXTS]
    assert {r["column_types"]["b"] for r in records} == {"string"}


@pytest.mark.parametrize("pk_uk_info, key", [
    ('{"UNIQUE_1":["b"]}', {"b": "x"}),  # no PRIMARY: the first unique key
    ('{"PRIMARY":["a","b"]}', {"a": "1", "b": "x"}),
    ('{"primary":["a"],"u":["b"]}', {"a": "1"}),
    # no usable key: the whole row
    ('{"PRIMARY":[]}', {"a": "1", "b": "x"}), ("{}", {"a": "1", "b": "x"}), ("not json", {"a": "1", "b": "x"}),
    ('{"PRIMARY":[1]}', {"a": "1", "b": "x"}), ('["a"]', {"a": "1", "b": "x"}), ("", {"a": "1", "b": "x"}),
])
def test_the_key_from_pk_uk_info(spark, pk_uk_info, key):
    value = dts("INSERT", after=[integer(1), chars("x")], tags={"pk_uk_info": pk_uk_info, "x": "y"})
    records, quarantine, _ = decode(spark, [value])
    assert quarantine == [] and [r["key"] for r in records] == [key]


def test_key_change_is_delete_plus_insert_and_configured_keys_win(spark):
    update = dts("UPDATE", before=[integer(1), chars("x")], after=[integer(2), chars("x")])
    records, _, _ = decode(spark, [update])
    assert [(r["op"], r["key"]) for r in records] == [("DELETE", {"a": "1"}), ("INSERT", {"a": "2"})]
    # --primary-keys names b: the same message is then an update of b='x'
    records, _, _ = decode(spark, [update], DecodeOptions(primary_keys={"t1": ("b",)}))
    assert [(r["op"], r["key"]) for r in records] == [("UPDATE", {"b": "x"})]
    # a glob over whole table ids does the same on the JVM side (jobs.model.table_rules), below a rule naming the table
    records, _, _ = decode(spark, [update], DecodeOptions(primary_keys={"*.t?": ("b",)}))
    assert [(r["op"], r["key"]) for r in records] == [("UPDATE", {"b": "x"})]
    records, _, _ = decode(spark, [update], DecodeOptions(primary_keys={"*": ("b",), "t1": ("a",)}))
    assert [(r["op"], r["key"]) for r in records] == [("DELETE", {"a": "1"}), ("INSERT", {"a": "2"})]
    records, _, _ = decode(spark, [update], DecodeOptions(primary_keys={"*.t?": ("a",), "*": ("b",)}))
    assert [(r["op"], r["key"]) for r in records] == [("DELETE", {"a": "1"}), ("INSERT", {"a": "2"})]
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
    # a string claiming two gigabytes, and an array claiming a billion items: refused, not allocated
    (b"\x00\x02\x02" + struct.pack("<B", 0xFE) + b"\xff\xff\xff\x0f" + b"x" * 20, "not a DTS Avro Record"),
    (b"\x00\x02\x02\x02\x02" + b"\xfe\xff\xff\xff\x0f" + b"y" * 30, "not a DTS Avro Record"),
])
def test_malformed_records_are_quarantined_with_a_reason_and_their_bytes(spark, value, reason):
    records, quarantine, counts = decode(spark, [value])
    assert records == []
    assert len(quarantine) == 1 and reason in quarantine[0]["reason"]
    assert bytes(quarantine[0]["value"]) == value
    assert counts["balanced"] and counts["total"]["quarantined"] == 1


# ---- edge cases: what holds whatever the input ---------------------------------------------------
def _dt(**parts):
    fields = ("year", "month", "day", "hour", "minute", "second", "millis")
    return {f: parts.get(f) for f in fields}


def _tz(zone, **parts):
    return (NS + "TimestampWithTimeZone", {"value": _dt(**parts), "timezone": zone})


DOUBLES = [0.0, -0.0, 0.1, 1.5, 12.345, 100.0, 1e15, 1e16, 1.5e16, 1e-4, 1e-5, 123456789.123, 2.82879384806159e17,
           1.7976931348623157e308, 5e-324, 2.2250738585072014e-308, 1 / 3, -2.5e-7, 4.35, 1e22, 1e23,
           float("inf"), float("-inf"), float("nan")]


def _union_values() -> list[tuple]:
    """(image items, fields) pairs covering every branch of the value union, at its edges."""
    two = [{"name": "a", "dataTypeNumber": 3}, {"name": "b", "dataTypeNumber": 253}]
    out = [([integer(i), (NS + "Float", {"value": d, "precision": 0, "scale": 0})], two) for i, d in enumerate(DOUBLES)]
    out += [([integer(2), (NS + "Character", {"charset": "latin1", "value": bytes(range(0x7E, 0xA2))})], two),
            ([integer(3), (NS + "Character", {"charset": "binary", "value": b"\x00\xff"})], two),
            ([integer(4), (NS + "Character", {"charset": "utf8mb4", "value": b"\xff\xfe"})], two),
            ([integer(5), (NS + "Character", {"charset": "ascii", "value": b"\x80"})], two),
            ([integer(6), (NS + "Character", {"charset": "ucs2", "value": b"\x00"})], two),
            ([integer(7), chars("x", charset="klingon")], two),
            ([(NS + "Decimal", {"value": "-123.4500", "precision": 7, "scale": 4}), "NULL"], two),
            ([integer(-9223372036854775808), "NONE"], two), ([None, None], two),
            ([(NS + "BinaryObject", {"type": "BLOB", "value": b"\x01\x02"}),
              (NS + "TextObject", {"type": "JSON", "value": '{"k": 1}'})], two),
            ([(NS + "BinaryGeometry", {"type": "POINT", "value": b"\x00"}),
              (NS + "TextGeometry", {"type": "POINT", "value": "POINT(1 2)"})], two)]
    stamps = [(0, 0), (0, 5), (1696984408, 123456), (-1, 999999), (253402300799, 999999), (253402300800, 0),
              (-62135596800, 0), (-62135596801, 0), (86400, -1)]
    out += [([(NS + "Timestamp", {"timestamp": s, "millis": m}), integer(i)], two) for i, (s, m) in enumerate(stamps)]
    dates = [_dt(year=2024, month=2, day=29), _dt(year=2023, month=2, day=29), _dt(year=0, month=0, day=0),
             _dt(year=999, month=1, day=2), _dt(year=2024, month=1, day=2, hour=3, minute=4, second=5, millis=6),
             _dt(year=2024, month=1, day=2, hour=24), _dt(year=9999, month=12, day=31, hour=23, minute=59, second=59,
                                                          millis=999999),
             _dt(year=9999, month=12, day=31, hour=23, minute=59, second=59, millis=1000000),
             _dt(year=0, month=0, day=0, hour=0, minute=0, second=0), _dt(hour=-1, minute=-30, second=0),
             _dt(hour=838, minute=59, second=59, millis=5), _dt(hour=1), _dt(year=2024), _dt(year=2024, month=5),
             _dt(), _dt(month=1, day=2)]
    out += [([(NS + "DateTime", d), integer(i)], two) for i, d in enumerate(dates)]
    zoned = [_tz("+08:00", year=2024, month=1, day=2, hour=3, minute=4, second=5, millis=6),
             _tz("UTC-5", year=2024, month=1, day=2), _tz("GMT+0530", year=2024, month=1, day=2, hour=0),
             _tz("Asia/Shanghai", year=2024, month=7, day=1, hour=8), _tz("America/New_York", year=2024, month=3,
                                                                          day=10, hour=2, minute=30),
             _tz("America/New_York", year=2024, month=11, day=3, hour=1, minute=30), _tz("", year=2024, month=1, day=1,
                                                                                         hour=0),
             _tz(" Z ", year=2024, month=1, day=1, hour=0), _tz("Bogus/Zone", year=2024, month=1, day=1, hour=0),
             _tz("+02:00", hour=1, minute=30, second=0), _tz("-03:30", hour=23, minute=0, second=0, millis=7),
             _tz("Europe/Paris", hour=1), _tz("+25:00", year=2024, month=1, day=1, hour=0),
             _tz("+08:00", year=2024), _tz("+08:00", year=0, month=0, day=0, hour=0), _tz("+08:00", hour=-1),
             _tz("-01:00", year=9999, month=12, day=31, hour=23)]
    out += [([z, integer(i)], two) for i, z in enumerate(zoned)]
    return out


def _operations_and_shapes() -> list[bytes]:
    row = [integer(1), chars("x")]
    values = [dts(op, after=row, before=row) for op in ("INSERT", "UPDATE", "DELETE", "INIT", "BEGIN", "COMMIT",
                                                        "ROLLBACK", "HEARTBEAT", "CHECKPOINT", "NOOP")]
    values += [dts("DDL", after="ALTER TABLE t ADD c int", fields="", pk=None),
               dts("DDL", table=None, after=None, fields=None, pk=None),
               dts("INSERT", after=row, pos="", ts=1696984408123), dts("INSERT", after=row, pos="abc", ts=-5),
               dts("INSERT", after=row, pos="1@2@3", txid=""), dts("INSERT", after=row, pos="007@08", ts=0),
               dts("INSERT", after=[integer(1)]), dts("INSERT", after=row, fields=[]),
               dts("INSERT", after=row, table="a.b.c.d"), dts("INSERT", after=row, pk=None)]
    values += [dts("INSERT", after=row, table=name) for name in ("mydb", "a.b.c", "", ".", "販売.t", "d." + "x" * 300)]
    values += [dts("DDL", table=name, after=sql, fields="", pk=None) for name, sql in (
        ("mydb", "-- note\n  truncate table t"), ("a.b", "/* x */TRUNCATE t"), ("a.b", "truncated_log insert"),
        (None, "# c\nTRUNCATE t"))]
    values += [dts("UPDATE", before=[integer(1), chars("x")], after=[integer(2), "NONE"], pos="9@9"),
               dts("UPDATE", before=[integer(1), chars("x")], after=["NONE", chars("y")], pos="9@9"),
               dts("INSERT", after=["NONE", chars("y")], pos="9@9")]
    return values


def test_edge_values_operations_and_malformed_bytes_keep_the_fuzz_properties(spark):
    """Every branch of the value union at its edges (each as an insert, an update and a key change),
    every operation, odd positions, table names and tags, and random or bit-flipped bytes: each message
    has one outcome, a quarantined one keeps its bytes, the counts balance, records are well formed."""
    values = []
    for i, (items, fields) in enumerate(_union_values()):
        values.append(dts("INSERT", after=items, fields=fields, rid=i))
        values.append(dts("UPDATE", before=items, after=items, fields=fields, rid=i, pos=f"{i}@3"))
        values.append(dts("UPDATE", before=[integer(-i), items[1]], after=items, fields=fields, rid=i, pos=f"{i}@4"))
    values += _operations_and_shapes()
    rng = random.Random(5)
    good = dts("INSERT", after=[integer(1), chars("x")])
    values += [good + b"\x00", good[:-3], good[:10]]
    values += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))) for _ in range(100)]
    values += [bytes(b ^ (1 << rng.randrange(8)) if rng.random() < 0.05 else b for b in good) for _ in range(100)]
    check_batch(spark, "dts_avro", values)
    check_batch(spark, "dts_avro", values, options=DecodeOptions(primary_keys={"t1": ("b",)}))
