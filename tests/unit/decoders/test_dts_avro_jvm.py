"""The JVM-side DTS Avro decoder (jobs/jvm/src/cdc/DtsAvroUdf.java) against its Python and Spark SQL
twin (fastavro in mapInArrow, then jobs/decoders/dts_avro.py's expressions): for every message the same
outcome and the same change records, event ids included. Reasons that name an exception are compared
by their kind only (Python's and Java's exception names differ). The corpus: every branch of the value
union, each charset, dates and zones at their edges, keys from tags and --primary-keys, key changes,
uncaptured columns, table names, truncates, positions, the benchmark's messages, and malformed bytes."""
from __future__ import annotations

import io
import random
import struct

import fastavro

from jobs import jvm
from jobs.decoders import DecodeOptions
from jobs.decoders.dts_avro import JVM_DECODER
from jobs.raw import read_raw
from tests.support.decoders import assert_same_both_ways, decoded_both_ways, raw_frame
from tests.support.dts_avro import NS, SCHEMA, chars, dts, integer


def _kind(reason: str | None) -> str | None:
    """A reason without the exception's name and text (Python's and Java's differ)."""
    for prefix in ("not a DTS Avro Record (", "unreadable DTS record ("):
        if reason and reason.startswith(prefix) and not reason.endswith("bytes after the record)"):
            return prefix
    return reason


def assert_same(raw, monkeypatch, options=DecodeOptions()) -> int:
    return assert_same_both_ways(raw, monkeypatch, "dts_avro", options, reason=_kind)


def test_the_jvm_decoder_is_on_the_class_path(spark):
    assert jvm.available(spark, JVM_DECODER)


def _dt(**parts):
    fields = ("year", "month", "day", "hour", "minute", "second", "millis")
    return {f: parts.get(f) for f in fields}


def _tz(zone, **parts):
    return (NS + "TimestampWithTimeZone", {"value": _dt(**parts), "timezone": zone})


DOUBLES = [0.0, -0.0, 0.1, 1.5, 12.345, 100.0, 1e15, 1e16, 1.5e16, 1e-4, 1e-5, 123456789.123, 2.82879384806159e17,
           1.7976931348623157e308, 5e-324, 2.2250738585072014e-308, 1 / 3, -2.5e-7, 4.35, 1e22, 1e23,
           float("inf"), float("-inf"), float("nan")]
CHARSET_TEXTS = [("utf8mb4", "héllo 世界", "utf-8"), ("utf8", "ok", "utf-8"), ("gbk", "中文", "gbk"),
                 ("gb18030", "中文𠀀", "gb18030"), ("big5", "繁體", "big5"), ("ucs2", "wide", "utf-16-be"),
                 ("utf16le", "le", "utf-16-le"), ("utf32", "x", "utf-32-be"), ("sjis", "日本", "shift_jis"),
                 ("ujis", "日本", "euc-jp"), ("euckr", "한국", "euc-kr"), ("koi8r", "привет", "koi8-r"),
                 ("cp1251", "привет", "cp1251"), ("cp1250", "łódź", "cp1250"), ("ascii", "plain", "ascii"),
                 ("UTF8MB4", "upper name", "utf-8"), ("", "no charset", "utf-8")]


def _values() -> list[tuple]:
    """(image items, fields) pairs covering every branch of the value union."""
    two = [{"name": "a", "dataTypeNumber": 3}, {"name": "b", "dataTypeNumber": 253}]
    out = [([integer(i), (NS + "Float", {"value": d, "precision": 0, "scale": 0})], two) for i, d in enumerate(DOUBLES)]
    out += [([integer(1), chars(text, charset, codec)], two) for charset, text, codec in CHARSET_TEXTS]
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


def test_every_branch_of_the_value_union(spark, monkeypatch):
    values = []
    for i, (items, fields) in enumerate(_values()):
        values.append(dts("INSERT", after=items, fields=fields, rid=i))
        values.append(dts("UPDATE", before=items, after=items, fields=fields, rid=i, pos=f"{i}@3"))
        values.append(dts("UPDATE", before=[integer(-i), items[1]], after=items, fields=fields, rid=i, pos=f"{i}@4"))
    raw = raw_frame(spark, values)
    assert assert_same(raw, monkeypatch) == len(values)
    assert assert_same(raw, monkeypatch, DecodeOptions(primary_keys={"t1": ("b",)})) == len(values)


def test_operations_tags_positions_and_shapes(spark, monkeypatch):
    row = [integer(1), chars("x")]
    values = [dts(op, after=row, before=row) for op in ("INSERT", "UPDATE", "DELETE", "INIT", "BEGIN", "COMMIT",
                                                        "ROLLBACK", "HEARTBEAT", "CHECKPOINT", "NOOP")]
    values += [dts("DDL", after="ALTER TABLE t ADD c int", fields="", pk=None),
               dts("DDL", table=None, after=None, fields=None, pk=None),
               dts("INSERT", after=row, pos="", ts=1696984408123), dts("INSERT", after=row, pos="abc", ts=-5),
               dts("INSERT", after=row, pos="1@2@3", txid=""), dts("INSERT", after=row, pos="007@08", ts=0),
               dts("INSERT", after=[integer(1)]), dts("INSERT", after=row, fields=[]),
               dts("INSERT", after=row, table="a.b.c.d"), dts("INSERT", after=row, pk=None)]
    values += [_with_tags(tags) for tags in ('{"UNIQUE_1":["b"]}', '{"primary":["a","b"]}', '{"PRIMARY":[]}',
                                             '{"PRIMARY":null,"u":["b"]}', '{}', "not json", '{"PRIMARY":[1]}',
                                             '["a"]', "")]
    values += [dts("INSERT", after=row, table=name) for name in ("mydb", "a.b.c", "", ".", "販売.t", "d." + "x" * 300)]
    values += [dts("DDL", table=name, after=sql, fields="", pk=None) for name, sql in (
        ("mydb", "-- note\n  truncate table t"), ("a.b", "/* x */TRUNCATE t"), ("a.b", "truncated_log insert"),
        (None, "# c\nTRUNCATE t"))]
    # a key change whose other column DTS did not capture: delete + insert with the before image
    values += [dts("UPDATE", before=[integer(1), chars("x")], after=[integer(2), "NONE"], pos="9@9"),
               dts("UPDATE", before=[integer(1), chars("x")], after=["NONE", chars("y")], pos="9@9"),
               dts("INSERT", after=["NONE", chars("y")], pos="9@9")]
    assert assert_same(raw_frame(spark, values), monkeypatch) == len(values)


def _with_tags(pk_uk_info: str) -> bytes:
    """A PostgreSQL-sourced record whose tags hold ``pk_uk_info`` beside another tag."""
    record = {"version": 0, "id": 1, "sourceTimestamp": 1, "sourcePosition": "1@1", "safeSourcePosition": "1@1",
              "sourceTxid": "0", "source": {"sourceType": "PostgreSQL", "version": "15"}, "operation": "INSERT",
              "objectName": "db.s.t", "processTimestamps": [1, 2], "tags": {"pk_uk_info": pk_uk_info, "x": "y"},
              "fields": [{"name": "a", "dataTypeNumber": 3}, {"name": "b", "dataTypeNumber": 253}],
              "beforeImages": None, "afterImages": [integer(1), chars("x")], "bornTimestamp": 0}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, SCHEMA, record)
    return buf.getvalue()


def test_malformed_bytes(spark, monkeypatch):
    rng = random.Random(5)
    good = dts("INSERT", after=[integer(1), chars("x")])
    values = [b"\x02\x00garbage", b'{"operation":"INSERT"}', good + b"\x00", good[:-3], good[:10],
              # a string claiming two gigabytes, and an array claiming a billion items: refused, not allocated
              b"\x00\x02\x02" + struct.pack("<B", 0xFE) + b"\xff\xff\xff\x0f" + b"x" * 20,
              b"\x00\x02\x02\x02\x02" + b"\xfe\xff\xff\xff\x0f" + b"y" * 30]
    values += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))) for _ in range(150)]
    values += [bytes(b ^ (1 << rng.randrange(8)) if rng.random() < 0.05 else b for b in good) for _ in range(150)]
    (jvm_outcomes, jvm_records), (sql_outcomes, sql_records) = decoded_both_ways(
        raw_frame(spark, values), monkeypatch, "dts_avro", reason=_kind)
    assert jvm_outcomes.keys() == sql_outcomes.keys()
    for message, expected in sorted(sql_outcomes.items()):
        got = jvm_outcomes[message]
        if got == expected:
            if got[0] == "decoded":
                assert jvm_records[message] == sql_records[message], message
            continue
        # two readings of malformed bytes differ: Avro's Java reader takes a string's bytes as they are
        # where fastavro checks their UTF-8; fastavro takes a negative union branch index as counted from
        # the union's end where the Java reader refuses it
        python_refused_utf8 = expected[0] == "quarantined" and _invalid_utf8_in(values[message[2]])
        java_refused = got[:2] == ("quarantined", "not a DTS Avro Record (") and expected[0] == "decoded"
        assert python_refused_utf8 or java_refused, message


def _invalid_utf8_in(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def test_benchmark_messages(spark, tmp_path, monkeypatch):
    from bench.generate import write_snapshot

    write_snapshot("dts_avro", 3000, tmp_path)
    assert assert_same(read_raw(spark, str(tmp_path)), monkeypatch) == 3000


