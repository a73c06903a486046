"""Alibaba DTS Avro (seed 004): binary records of the DTS ``Record`` schema.

The schema is ``schemas/dts_record.avsc``, the official one of aliyun/aliyun-dts-subscribe-demo
(Apache-2.0; the leaf types first, ``Record`` last). Binary Avro cannot be read by Spark SQL's JSON
functions. Where its jar is on the class path the whole decoder runs on the JVM side
(jobs/jvm/src/cdc/DtsAvroUdf.java: Avro's own reader, which Spark ships, then the outcome of each
record). Otherwise each record is turned into plain columns (images as ``map<string,string>`` of
canonical text, the type of each value) by fastavro inside ``mapInArrow`` (one Python call per Arrow
batch, never one per row), and keys, records and reasons are Spark SQL, as in the other decoders.
Both give the same records (tests/unit/decoders/test_dts_avro_jvm.py).

- ``operation`` INSERT / UPDATE / DELETE are CDC, INIT is the full load (phase FULL_LOAD, op SNAPSHOT);
  DDL carries the statement as a string in ``afterImages`` (recorded as op DDL, a TRUNCATE statement
  empties the table); BEGIN is kept as a TX_BEGIN marker and COMMIT / ROLLBACK / ABORT as TX_END:
  they bracket the records between them in their partition (a transaction still open at the end of a
  run is held back, see jobs.fold.split_open_transactions; ``sourceTxid`` is kept on every record as
  lineage, but the brackets do not rely on it). HEARTBEAT / CHECKPOINT and DTS's control operations
  are ignored and counted.
- ``objectName`` is ``db.table`` (``db.schema.table`` for sources with schemas).
- Key: --primary-keys, else ``tags['pk_uk_info']`` (``{"PRIMARY":["id"]}``; the first unique key when
  there is no PRIMARY), else the whole row. An UPDATE that changes the key is a DELETE of the old key
  plus an INSERT (with the before image, so that a column DTS did not capture moves with the row).
- Values are typed by their union branch: Integer -> bigint (its ``precision`` is the byte width, as DTS's
  SDK reads it, and says nothing of the sign: a BIGINT UNSIGNED of 2^63 or more cannot be held, and is
  reported as unconverted by the merge), Character -> string decoded with its
  ``charset`` (MySQL names: latin1 is cp1252 with MySQL's mapping of its five undefined bytes;
  ``binary`` stays bytes), Decimal -> decimal(38,18) (see dts_value), Float -> double, Timestamp (epoch
  seconds + ``millis``, which holds microseconds) -> timestamp (a MySQL source's zero TIMESTAMP, stored
  as 0, is null like the zero DATETIME), DateTime -> date / timestamp / time text / year,
  TimestampWithTimeZone -> timestamp in UTC (a time of day with an offset, PostgreSQL's timetz: its UTC
  time text ending in ``Z``, as Debezium's ZonedTime), Binary* -> binary (base64), Text* -> string,
  EmptyObject NULL -> null and NONE -> not captured (the column keeps its prior value).
- Position: ``sourcePosition`` as MySQL writes it (``<offset>@<binlog file index>``) then ``id``, each
  zero-padded; sources whose position is not ``offset@file`` are ordered by ``id`` alone, DTS's serial
  number of the record in the stream (records without a binlog position, such as the full load's,
  therefore sort first).
"""
from __future__ import annotations

import base64
import codecs
import functools
import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs import canonical as C
from jobs import jvm
from jobs.decoders import BaseDecoder, DecodeOptions, register
from jobs.decoders.common import (
    TOMBSTONE,
    RecordBuilder,
    configured_key,
    decided_outcome,
    decoded_on_jvm,
    is_tombstone,
    is_truncate,
    key_of,
    keys_differ,
    literal_map,
    marker_record,
    pad_unsigned,
)

SCHEMA_FILE = Path(__file__).with_name("schemas") / "dts_record.avsc"
# the columns the Python side adds to each raw row
_DECODED_COLUMNS = (
    "error string, operation string, object_name string, record_id bigint, binlog_file bigint, "
    "binlog_offset bigint, event_ms bigint, txid string, source_txid string, pk array<string>, columns array<string>, "
    "before map<string,string>, after map<string,string>, before_absent array<string>, "
    "after_absent array<string>, types map<string,string>, ddl string"
)
_ROW_OPS = {"INSERT": C.INSERT, "UPDATE": C.UPDATE, "DELETE": C.DELETE, "INIT": C.SNAPSHOT}
_TX_OPS = {"BEGIN": C.TX_BEGIN, "COMMIT": C.TX_END, "ROLLBACK": C.TX_END, "ABORT": C.TX_END}
_IGNORED_OPS = {
    "HEARTBEAT": "heartbeat", "CHECKPOINT": "DTS control record",
    "COMMAND": "DTS control record", "FILL": "DTS control record", "FINISH": "DTS control record",
    "CONTROL": "DTS control record", "RDB": "DTS control record", "NOOP": "DTS control record",
}
_TS = "%Y-%m-%d %H:%M:%S.%f"
DECIMAL_TYPE = "decimal(38,18)"
_EPOCH = datetime(1970, 1, 1)
# MySQL charset names -> Python codecs (MySQL's latin1: see _MYSQL_LATIN1)
_CHARSETS = {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "latin1": "latin-1", "ucs2": "utf-16-be",
             "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be", "gb2312": "gb2312",
             "gbk": "gbk", "gb18030": "gb18030", "big5": "big5", "ascii": "ascii", "ujis": "euc-jp",
             "sjis": "shift_jis", "euckr": "euc-kr", "koi8r": "koi8-r", "cp1251": "cp1251", "cp1250": "cp1250"}
_NOT_CAPTURED = object()
_MYSQL_SOURCES = frozenset({"MySQL", "DRDS"})  # DRDS: PolarDB-X, MySQL's types
# MySQL's latin1 is cp1252 but for the five bytes cp1252 leaves undefined, which MySQL reads as the C1
# controls of the same number (0x81 -> U+0081), as ISO-8859-1 does: read as ISO-8859-1, then the
# other 27 bytes of 0x80-0x9F mapped to their cp1252 characters
_CP1252_HIGH = {b: bytes([b]).decode("cp1252", "ignore") for b in range(0x80, 0xA0)}
_MYSQL_LATIN1 = str.maketrans({chr(b): c for b, c in _CP1252_HIGH.items() if c})


class DtsValueError(ValueError):
    """A value that cannot be read (unknown charset, impossible date); the message is quarantined."""


# ---- Python side: one Avro record -> plain columns ---------------------------------------------
def _fraction_us(millis: int | None) -> int:
    # named ``millis``, the field carries microseconds: the DTS SDK multiplies it by 1000 into its
    # nanosecond field, and MySQL datetime(6) / timestamp(6) values need them
    return millis or 0


def _timestamp_text(ts: datetime) -> str:
    # isoformat, not strftime: glibc's %Y does not pad a year before 1000 to four digits
    return ts.isoformat(sep=" ", timespec="microseconds")


def _datetime_value(v: dict[str, Any]) -> tuple[str | None, str]:
    y, mo, d, h, mi, s = (v.get(k) for k in ("year", "month", "day", "hour", "minute", "second"))
    try:
        if y is not None and mo is not None and d is not None and h is None:
            return date(y, mo, d).isoformat(), "date"
        if y is not None and mo is not None and d is not None:
            ts = datetime(y, mo, d, h, mi or 0, s or 0) + timedelta(microseconds=_fraction_us(v.get("millis")))
            return _timestamp_text(ts), "timestamp"
    except ValueError:  # MySQL zero dates (0000-00-00) are no dates
        return None, "date" if h is None else "timestamp"
    if y is None and h is not None:  # TIME
        # a negative MySQL TIME (-01:30:00) comes with every component negated, as the DTS SDK reads it
        parts = (h, mi or 0, s or 0, _fraction_us(v.get("millis")))
        sign = "-" if any(p < 0 for p in parts) else ""
        h, mi, s, us = (abs(p) for p in parts)
        text = f"{sign}{h:02d}:{mi:02d}:{s:02d}"
        return (f"{text}.{us:06d}" if us else text), "string"
    if y is not None:  # YEAR
        return str(y), "int"
    return None, "string"


def _tz_value(v: dict[str, Any]) -> tuple[str | None, str]:
    local, kind = _datetime_value(v["value"])
    if local is None:
        return None, "timestamp"
    tz = (v.get("timezone") or "").strip()
    offset = _zone(tz)
    if kind == "string":
        # a time of day with a zone (PostgreSQL timetz): the UTC time, written as Debezium's ZonedTime
        if not isinstance(offset, timezone):
            raise DtsValueError(f"time of day with the named zone {tz!r}, which has no fixed offset")
        naive = datetime.combine(date(2000, 1, 1), time.fromisoformat(local))
        utc = naive - offset.utcoffset(None)
        return utc.strftime("%H:%M:%S.%f" if utc.microsecond else "%H:%M:%S") + "Z", "string"
    naive = datetime.strptime(local, _TS) if " " in local else datetime.fromisoformat(local)
    utc = naive.replace(tzinfo=offset).astimezone(UTC).replace(tzinfo=None)
    return _timestamp_text(utc), "timestamp"


@functools.lru_cache(maxsize=256)
def _zone(tz: str) -> Any:
    """A DTS time zone text (``+08:00``, ``UTC-5``, ``Asia/Shanghai``) -> a tzinfo, looked up once per text."""
    match = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?", tz)
    if match:
        sign = 1 if match.group(1) == "+" else -1
        return timezone(sign * timedelta(hours=int(match.group(2)), minutes=int(match.group(3) or 0)))
    if tz in ("", "UTC", "GMT", "Z"):
        return UTC
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(tz)
    except Exception:  # noqa: BLE001 - any lookup failure means an unusable zone name
        raise DtsValueError(f"unknown time zone {tz!r}") from None


@functools.lru_cache(maxsize=256)
def _codec(charset: str) -> str | None:
    """A MySQL charset name (lower case) -> the Python codec of its text, None for ``binary`` (looked up
    once per name, not once per value)."""
    if charset == "binary":
        return None
    name = _CHARSETS.get(charset, charset)
    try:
        codecs.lookup(name)
    except LookupError:
        raise DtsValueError(f"unknown charset {charset!r}") from None
    return name


def _character_value(v: dict[str, Any]) -> tuple[str | None, str]:
    charset = (v.get("charset") or "utf8mb4").lower()
    raw = v.get("value")
    name = _codec(charset)
    if name is None:
        return base64.b64encode(raw).decode("ascii"), "binary"
    try:
        text = raw.decode(name)
    except UnicodeDecodeError:
        raise DtsValueError(f"value is not valid {charset}") from None
    return (text.translate(_MYSQL_LATIN1) if charset == "latin1" else text), "string"


@functools.lru_cache(maxsize=64)
def _kind(record_name: str) -> str:
    """``com.alibaba.dts.formats.avro.Integer`` -> ``Integer`` (names come from the schema: a few)."""
    return record_name.rsplit(".", 1)[-1]


def dts_value(item: Any, mysql: bool = False) -> tuple[Any, str | None]:
    """One image value (fastavro with record names) -> (canonical text | None | _NOT_CAPTURED, type);
    ``mysql``: the record's source is MySQL (or MySQL-compatible), whose zero TIMESTAMP is no date."""
    if item is None:
        return None, None
    name, v = item if isinstance(item, tuple) else ("EmptyObject", item)
    kind = _kind(name)
    if kind == "EmptyObject":  # NULL: a null value; NONE: a value DTS did not capture
        return (_NOT_CAPTURED if v == "NONE" else None), None
    if kind == "Integer":
        return v["value"], "bigint"
    if kind == "Character":
        return _character_value(v)
    if kind == "Decimal":
        # precision and scale are the value's (1.11 comes as 3, 2; 11 of the same column as 2, 0), not
        # the column's, which no message tells: room for any scale, as a bare decimal of Canal JSON
        return v["value"], DECIMAL_TYPE
    if kind == "Float":
        return repr(float(v["value"])), "double"
    if kind == "Timestamp":
        if mysql and not v["timestamp"] and not v.get("millis"):
            # MySQL's zero TIMESTAMP (0000-00-00 00:00:00) is stored as 0, which no real TIMESTAMP can
            # be (its range starts one second after the epoch): no date, as the zero DATETIME
            return None, "timestamp"
        ts = _EPOCH + timedelta(seconds=v["timestamp"], microseconds=_fraction_us(v.get("millis")))
        return _timestamp_text(ts), "timestamp"
    if kind == "DateTime":
        return _datetime_value(v)
    if kind == "TimestampWithTimeZone":
        return _tz_value(v)
    if kind in ("BinaryGeometry", "BinaryObject"):
        return base64.b64encode(v["value"]).decode("ascii"), "binary"
    if kind in ("TextGeometry", "TextObject"):
        return v["value"], "string"
    raise DtsValueError(f"unknown value type {name!r}")


def _primary_key(tags: dict[str, str]) -> tuple[str, ...] | None:
    return _key_columns(tags.get("pk_uk_info"))


@functools.lru_cache(maxsize=1024)
def _key_columns(info: str | None) -> tuple[str, ...] | None:
    """``pk_uk_info`` -> key columns, parsed once per distinct text (it repeats in every record of a table)."""
    if not info:
        return None
    try:
        keys = json.loads(info)
    except ValueError:
        return None
    if isinstance(keys, dict) and keys:
        primary = next((v for k, v in keys.items() if k.upper() == "PRIMARY"), None)
        cols = primary if primary else next(iter(keys.values()))
        if isinstance(cols, list) and cols and all(isinstance(c, str) for c in cols):
            return tuple(cols)
    return None


def _image(columns: list[str], values: Any, types: dict[str, str], mysql: bool) -> tuple[dict | None, list[str]]:
    if not isinstance(values, list):
        return None, []
    if len(values) != len(columns):
        raise DtsValueError(f"image has {len(values)} values for {len(columns)} fields")
    image, absent = {}, []
    for name, item in zip(columns, values):
        value, kind = dts_value(item, mysql)
        if value is _NOT_CAPTURED:
            absent.append(name)
            continue
        image[name] = value
        if kind:
            types[name] = kind
    return image, absent


def _binlog(position: str | None) -> tuple[int | None, int | None]:
    match = re.fullmatch(r"(\d+)@(\d+)", position or "")
    return (int(match.group(2)), int(match.group(1))) if match else (None, None)


def record_schema() -> dict[str, Any]:
    """The parsed ``Record`` schema (the file lists the named leaf types first)."""
    import fastavro

    named: dict[str, Any] = {}
    parsed = None
    for schema in json.loads(SCHEMA_FILE.read_text()):
        parsed = fastavro.parse_schema(schema, named_schemas=named)
    return parsed


def decode_record(value: bytes | None, schema: Any) -> dict[str, Any]:
    """One message value -> the columns of ``_DECODED_COLUMNS`` (``error`` set when unreadable)."""
    if not value:
        return {}
    try:
        return _decode_record(value, schema)
    except DtsValueError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a record the schema reads but that makes no sense
        return {"error": f"unreadable DTS record ({type(exc).__name__}: {exc})"[:300]}


def _decode_record(value: bytes, schema: Any) -> dict[str, Any]:
    import fastavro

    out: dict[str, Any] = {}
    buf = io.BytesIO(value)
    try:
        rec = fastavro.schemaless_reader(buf, schema, return_record_name=True)
    except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds on bad bytes
        return {"error": f"not a DTS Avro Record ({type(exc).__name__})"}
    if buf.tell() != len(value):
        return {"error": f"not a DTS Avro Record ({len(value) - buf.tell()} bytes after the record)"}
    fields = rec.get("fields")
    columns = [f["name"] for f in fields] if isinstance(fields, list) else []
    types: dict[str, str] = {}
    mysql = (rec.get("source") or {}).get("sourceType") in _MYSQL_SOURCES
    before, before_absent = _image(columns, rec.get("beforeImages"), types, mysql)
    after, after_absent = _image(columns, rec.get("afterImages"), types, mysql)
    file_index, offset = _binlog(rec.get("sourcePosition"))
    ts = rec.get("sourceTimestamp")
    after_images = rec.get("afterImages")
    out.update(
        operation=rec["operation"], object_name=rec.get("objectName"), record_id=rec.get("id"),
        binlog_file=file_index, binlog_offset=offset,
        # DTS writes seconds; a 13-digit value is milliseconds
        event_ms=None if ts is None else (ts if abs(ts) >= 10**11 else ts * 1000),
        txid=transaction_id(rec.get("sourceTxid"), rec.get("safeSourcePosition")),
        source_txid=rec.get("sourceTxid") or None, pk=_primary_key(rec.get("tags") or {}), columns=columns,
        before=before, after=after, before_absent=before_absent, after_absent=after_absent, types=types,
        ddl=after_images if isinstance(after_images, str) else None,
    )
    return out


def transaction_id(source_txid: str | None, safe_source_position: str | None) -> str | None:
    """The transaction a record belongs to: its ``sourceTxid``, else (MySQL sources send "0" or
    nothing) its ``safeSourcePosition``, the position of its transaction's BEGIN, which every record
    of the transaction carries; None where neither is given (DtsAvroUdf.transactionId)."""
    if source_txid and source_txid != "0":
        return source_txid
    return f"begin@{safe_source_position}" if safe_source_position else None


def decode_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow function: raw Kafka rows -> the same rows plus the decoded columns."""
    import pyarrow as pa

    schema = record_schema()
    spark_cols = [c.strip().split(" ", 1)[0] for c in _split_ddl(_DECODED_COLUMNS)]
    arrow_types = _arrow_types()
    for batch in batches:
        decoded = [decode_record(v, schema) for v in batch.column("value").to_pylist()]
        arrays = [pa.array([d.get(c) for d in decoded], type=arrow_types[c]) for c in spark_cols]
        yield pa.RecordBatch.from_arrays([*batch.columns, *arrays], names=[*batch.schema.names, *spark_cols])


def _split_ddl(ddl: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in ddl:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [*parts, cur]


def _arrow_types() -> dict[str, Any]:
    import pyarrow as pa

    simple = {"string": pa.string(), "bigint": pa.int64(), "array<string>": pa.list_(pa.string()),
              "map<string,string>": pa.map_(pa.string(), pa.string())}
    columns = (c.strip().split(" ", 1) for c in _split_ddl(_DECODED_COLUMNS))
    return {name: simple[kind.strip()] for name, kind in columns}


# ---- Spark side ----------------------------------------------------------------------------------

JVM_DECODER = "cdc.DtsAvroUdf"  # jobs/jvm/src/cdc/DtsAvroUdf.java


class DtsAvroDecoder(BaseDecoder):
    name = "dts_avro"

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        if jvm.available(raw.sparkSession, JVM_DECODER):
            return self.decode_on_jvm(raw, options)
        schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in raw.schema.fields)
        return self._outcomes(raw.mapInArrow(decode_batches, f"{schema}, {_DECODED_COLUMNS}"), options)

    def decode_on_jvm(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """The same outcomes from the JVM-side decoder (jobs.jvm): each record read by Avro's own reader and
        turned into its outcome there, no Python worker and none of the expressions below; records
        leave with their ids to the decode stage."""
        return decoded_on_jvm(
            raw, JVM_DECODER, self.name, options,
            [F.col(c) for c in ("value", "topic", "partition", "offset")] + [F.unix_micros("timestamp")],
            schema=SCHEMA_FILE.read_text())

    def _outcomes(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        name = F.col("object_name")
        parts = F.split(name, r"\.")
        n = F.size(parts)
        op_name = F.col("operation")
        none = F.lit(None).cast("string")
        df = df.withColumns({
            # a DDL names its database alone (CREATE DATABASE) or nothing: it is kept under <db>._._
            "table_id": F.when((op_name == "DDL") & (name.isNull() | (n == 1)), C.table_id_col(parts[0], none, none))
                         .when(n == 2, C.table_id_col(parts[0], F.lit(None), parts[1]))
                         .when(n >= 3, C.table_id_col(parts[0], parts[1], F.concat_ws(".", F.slice(parts, 3, 99))))
                         .when(n == 1, C.table_id_col(F.lit(None), F.lit(None), parts[0])),
            "_position": F.concat_ws(".", pad_unsigned(F.coalesce("binlog_file", F.lit(0)), 10),
                                     pad_unsigned(F.coalesce("binlog_offset", F.lit(0))),
                                     pad_unsigned(F.coalesce("record_id", F.lit(0)))),
        })
        table_id, position = F.col("table_id"), F.col("_position")
        before, after, pk = F.col("before"), F.col("after"), F.col("pk")
        # a column DTS did not capture (EmptyObject NONE) is left out of the after image; a key column so
        # left out did not change (DTS captures a changed key), so the new key takes the before value
        absent = F.col("after_absent")
        key_image = F.when(before.isNotNull() & (F.size(absent) > 0), F.map_concat(
            F.map_filter(before, lambda k, v: F.array_contains(absent, k)), after)).otherwise(after)
        df = df.withColumns({
            "_new_key": F.coalesce(configured_key(table_id, key_image, options), key_of(key_image, pk), key_image),
            "_old_key": F.coalesce(configured_key(table_id, before, options), key_of(before, pk), before),
        })
        new_key, old_key = F.col("_new_key"), F.col("_old_key")

        ignored = literal_map(_IGNORED_OPS)
        is_ddl = op_name == "DDL"
        reason = (
            F.when(is_tombstone(), F.lit(TOMBSTONE))
            .when(F.col("error").isNotNull(), F.col("error"))
            .when(F.element_at(ignored, op_name).isNotNull(), F.element_at(ignored, op_name))
            .when(op_name.isin(*_TX_OPS), F.lit(None))
            .when(~is_ddl & ~op_name.isin(*_ROW_OPS), F.concat(F.lit("unknown operation '"), op_name, F.lit("'")))
            .when(table_id.isNull() & is_ddl & F.col("ddl").isNull(), F.lit("DDL without a statement"))
            .when(table_id.isNull() & ~is_ddl, F.lit("no objectName"))
            .when(op_name.isin("INSERT", "INIT") & after.isNull(), F.concat(op_name, F.lit(" without afterImages")))
            .when((op_name == "UPDATE") & after.isNull(), F.lit("UPDATE without afterImages"))
            .when((op_name == "DELETE") & before.isNull(), F.lit("DELETE without beforeImages"))
        )
        df = df.withColumn("reason", reason)

        event_time = F.timestamp_millis(F.col("event_ms"))
        rec = RecordBuilder(self.name, table_id, position, event_time, tx_id=F.col("txid"),
                            column_types=F.col("types")).record
        cdc = C.CDC
        # columns DTS could not capture (EmptyObject NONE) keep their prior value
        partial = F.when(F.size("after_absent") > 0, F.map_keys(after))
        key_changed = before.isNotNull() & keys_differ(old_key, new_key)
        ddl = F.col("ddl")

        def marker(op: str) -> Column:
            # a marker names its transaction (sourceTxid): BEGIN, rows and COMMIT of a key-partitioned
            # topic land on different partitions, and only the id ties them together
            return F.array(marker_record(self.name, table_id, op, C.CDC, position, F.col("txid"), F.lit(None),
                                         F.lit(op == C.TX_END), event_time,
                                         F.create_map(F.lit("marker"), op_name,
                                                      F.lit("sourceTxid"), F.col("source_txid"))))

        records = (
            F.when(op_name == "BEGIN", marker(C.TX_BEGIN))
            .when(op_name.isin(*[k for k, v in _TX_OPS.items() if v == C.TX_END]), marker(C.TX_END))
            .when(is_ddl & F.coalesce(is_truncate(ddl), F.lit(False)), F.array(rec(C.TRUNCATE, cdc, None, None, None)))
            .when(is_ddl, F.array(rec(C.DDL, cdc, None, None, F.create_map(F.lit("ddl"), ddl))))
            .when(op_name == "INIT", F.array(rec(C.SNAPSHOT, C.FULL_LOAD, new_key, None, after, partial)))
            .when(op_name == "INSERT", F.array(rec(C.INSERT, cdc, new_key, None, after, partial)))
            .when((op_name == "UPDATE") & key_changed,
                  F.array(rec(C.DELETE, cdc, old_key, before, None),
                          # with the before image: the fold moves the old key's row (columns not captured)
                          rec(C.INSERT, cdc, new_key, before, after, partial)))
            .when(op_name == "UPDATE", F.array(rec(C.UPDATE, cdc, new_key, before, after, partial)))
            .otherwise(F.array(rec(C.DELETE, cdc, old_key, before, None)))
        )
        return df.select(*decided_outcome(F.col("reason"), _IGNORED_OPS.values(), table_id, records))


@register("dts_avro")
def _factory() -> DtsAvroDecoder:
    return DtsAvroDecoder()
