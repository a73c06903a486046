"""Canal JSON (Alibaba Canal's flat messages, and Alibaba DTS "Canal Json", seed 004).

One message carries one statement's rows: ``data`` (the row images) and, for an UPDATE, ``old``
(only the changed columns' previous values, one object per row). Decoded in Spark SQL: one
``from_json`` with row images as ``map<string,string>``, then per-row ``transform`` lambdas; no UDF,
nothing collected.

- One record per row of ``data``, in order. An UPDATE's before image is the ``data`` row overlaid
  with its ``old`` row. A primary key changed by an UPDATE (the old key differs from the new one)
  is a DELETE of the old key plus an INSERT of the new row.
- ``type`` INSERT / UPDATE / DELETE are CDC; INIT is DTS's full load (phase FULL_LOAD, op SNAPSHOT).
- ``isDdl`` (or a DDL ``type``: CREATE, ALTER, QUERY, ...) is recorded as op DDL with the statement
  in ``after['ddl']``; a DDL whose statement is a TRUNCATE (or type TRUNCATE) empties the table.
- DTS instances created before 2022-03-20 send a DELETE's row in ``old`` with ``data`` null: both
  shapes decode to the same DELETE.
- Key: --primary-keys, else ``pkNames``, else the whole row (keyless: an UPDATE is then a DELETE of
  the old row and an INSERT of the new one).
- Position: ``es`` (binlog time, ms), then ``id`` (Canal's batch id / DTS's serial number), each
  zero-padded so that string order is source order; every row of a message shares it. Canal gives
  the messages of a batch one ``id`` (and ``es`` has whole seconds), so a row's index in its message
  must not order it before a later message's rows: the fold's tie-break, the offset, does.
- Column types from ``mysqlType`` (``tinyint(1)`` is boolean, ``decimal(p,s)`` keeps its precision;
  DTS sends types without parameters, so a bare ``decimal`` becomes ``decimal(38,18)``), else from
  ``sqlType`` (java.sql.Types codes). Binary values, which Canal writes as ISO-8859-1 text, are
  re-encoded as base64.
The documentation's examples carry ``//`` comments: they are accepted (JSON parsed with comments).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.formats import DecodeOptions
from jobs.formats.base import (
    KEY_SETTING,
    TOMBSTONE,
    BaseDecoder,
    RecordBuilder,
    configured_key,
    decided_outcome,
    epoch_number,
    has_configured_key,
    is_tombstone,
    is_truncate,
    key_of,
    literal_map,
    pad_unsigned,
    parse_value,
    row_change_records,
)
from jobs.formats.canal import ENTRY
from jobs.model import record as C

_MAP = "map<string,string>"
_VALUE_SCHEMA = (
    f"struct<data:array<{_MAP}>, old:array<{_MAP}>, database:string, table:string, type:string, isDdl:string, "
    f"sql:string, pkNames:array<string>, mysqlType:{_MAP}, sqlType:{_MAP}, es:string, ts:string, id:string, "
    "gtid:string, _corrupt:string>"
)
_ROW_TYPES = ("INSERT", "UPDATE", "DELETE", "INIT")
# Canal's EventType names of DDL statements (plus DTS's plain "DDL")
_DDL_TYPES = ("DDL", "CREATE", "ALTER", "ERASE", "QUERY", "TRUNCATE", "RENAME", "CINDEX", "DINDEX")
_IGNORED_TYPES = {"HEARTBEAT": "heartbeat", "TRANSACTIONBEGIN": "transaction marker",
                  "TRANSACTIONEND": "transaction marker", "BEGIN": "transaction marker", "COMMIT": "transaction marker"}
_TS_FMT = "yyyy-MM-dd HH:mm:ss.SSSSSS"
# java.sql.Types codes (Canal's sqlType) -> state type, used where mysqlType is missing
_SQL_TYPES = {"-6": "int", "5": "int", "4": "int", "-5": "bigint", "7": "float", "6": "double", "8": "double",
              "2": "decimal(38,18)", "3": "decimal(38,18)", "16": "boolean", "91": "date", "93": "timestamp",
              "-2": "binary", "-3": "binary", "-4": "binary", "2004": "binary"}


def mysql_type(declared: Column) -> Column:
    """A MySQL column type as Canal/DTS write it ("int(11)", "DECIMAL(10,2)", "bigint unsigned") ->
    the state's Spark SQL type name."""
    t = F.lower(F.trim(declared))
    base = F.regexp_extract(t, r"^([a-z]+)", 1)
    unsigned = t.contains("unsigned")
    precision = F.regexp_extract(t, r"\(\s*(\d+)", 1)
    scale = F.regexp_extract(t, r"\(\s*\d+\s*,\s*(\d+)\s*\)", 1)
    decimal = (
        F.when(precision == "", F.lit("decimal(38,18)"))  # no parameters (DTS): room for any scale
        .when(precision.cast("int") > 38, F.lit("string"))  # wider than Spark's decimals: kept exact as text
        .otherwise(F.concat(F.lit("decimal("), precision, F.lit(","), F.when(scale == "", F.lit("0"))
                            .otherwise(scale), F.lit(")")))
    )
    return (
        F.when(declared.isNull(), F.lit(None).cast("string"))
        .when((base == "tinyint") & (precision == "1"), F.lit("boolean"))
        .when(base.isin("bool", "boolean"), F.lit("boolean"))
        .when(base.isin("tinyint", "smallint", "mediumint"), F.lit("int"))
        .when(base.isin("int", "integer"), F.when(unsigned, F.lit("bigint")).otherwise(F.lit("int")))
        .when(base == "bigint", F.when(unsigned, F.lit("decimal(20,0)")).otherwise(F.lit("bigint")))
        .when(base.isin("decimal", "numeric", "dec", "fixed"), decimal)
        .when(base == "float", F.lit("float"))
        .when(base.isin("double", "real"), F.lit("double"))
        .when(base.isin("datetime", "timestamp"), F.lit("timestamp"))
        .when(base == "date", F.lit("date"))
        .when(base == "year", F.lit("int"))
        .when(base.isin("binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob"), F.lit("binary"))
        .otherwise(F.lit("string"))  # char, varchar, text, enum, set, json, time, bit, geometry...
    )


def _column_types(mysql_types: Column, sql_types: Column) -> Column:
    sql_map = literal_map(_SQL_TYPES)
    from_sql = F.transform_values(sql_types, lambda k, v: F.coalesce(F.element_at(sql_map, v), F.lit("string")))
    return F.coalesce(F.transform_values(mysql_types, lambda k, v: mysql_type(v)), from_sql)


def _typed_image(image: Column, types: Column) -> Column:
    """Values as canonical strings of their state type (Canal sends every value as text)."""
    # A value the type cannot hold (a zero date, 2020-02-30, a tinyint(1) holding 2) is kept as sent:
    # the change records keep it, and the state, which cannot, counts it (merge.json unconverted_values)
    def convert(k: Column, v: Column) -> Column:
        t = F.element_at(types, k)
        number = v.try_cast("decimal(38,0)")
        return (
            F.when(v.isNull() | t.isNull(), v)
            .when(t == "timestamp", F.coalesce(F.date_format(v.try_cast("timestamp"), _TS_FMT), v))
            .when(t == "date", F.coalesce(F.date_format(v.try_cast("date"), "yyyy-MM-dd"), v))
            .when(t == "boolean", F.when(F.lower(v).isin("true", "false"), F.lower(v))
                  .when(number == 0, F.lit("false")).when(number == 1, F.lit("true")).otherwise(v))
            .when(t == "binary", F.base64(F.encode(v, "ISO-8859-1")))
            .otherwise(v)
        )
    return F.when(image.isNotNull(), F.transform_values(image, convert))


def _overlay(row: Column, old: Column) -> Column:
    """The before image of an UPDATE row: the new row with the changed columns' old values."""
    replaced = F.transform_values(row, lambda k, v: F.when(F.map_contains_key(old, k), F.element_at(old, k))
                                  .otherwise(v))
    extra = F.map_filter(old, lambda k, v: ~F.map_contains_key(row, k))
    return F.map_concat(replaced, extra)


def _with_message(df: DataFrame) -> DataFrame:
    """The message's type, rows, column types, key columns, table and position as named columns (each
    non-trivial expression evaluated once)."""
    j = F.col("j")
    msg_type = F.upper(j["type"])
    is_ddl = (F.lower(j["isDdl"]) == "true") | msg_type.isin(*_DDL_TYPES)
    has_table = F.coalesce(j["table"], F.lit("")) != ""
    has_db = F.coalesce(j["database"], F.lit("")) != ""
    return df.withColumns({
        "_type": msg_type,
        "_is_ddl": F.coalesce(is_ddl, F.lit(False)),
        # DTS before 2022-03-20: a DELETE's row is in `old` and `data` is null
        "_rows": F.when((msg_type == "DELETE") & (F.coalesce(F.size(j["data"]), F.lit(0)) <= 0), j["old"])
                  .otherwise(j["data"]),
        "_has_table": has_table,
        "_types": _column_types(j["mysqlType"], j["sqlType"]),
        "_pk": F.when(F.size(j["pkNames"]) > 0, j["pkNames"]),
        "table_id": F.when(has_table, C.table_id_col(j["database"], F.lit(None), j["table"]))
                     .when(is_ddl & has_db, C.table_id_col(j["database"], F.lit(None), F.lit(None))),
        # every row of a message shares its position
        "_base": F.when(j["es"].rlike(r"^[0-9]+$"), F.concat_ws(
            ".", pad_unsigned(j["es"]), pad_unsigned(F.coalesce(j["id"].try_cast("bigint"), F.lit(0))))),
    })


def _with_rows(df: DataFrame, options: DecodeOptions) -> DataFrame:
    """Per row of the message: its typed images, then its keys."""
    table_id, types, pk, msg_type = F.col("table_id"), F.col("_types"), F.col("_pk"), F.col("_type")
    old = F.when(msg_type == "UPDATE", F.col("j")["old"])

    def images(row: Column, i: Column) -> Column:
        old_row = F.get(old, i)
        before = (
            F.when(msg_type == "DELETE", row)
            .when((msg_type == "UPDATE") & old_row.isNotNull(), _overlay(row, old_row))
        )
        return F.struct(_typed_image(F.when(msg_type != "DELETE", row), types).alias("after"),
                        _typed_image(before, types).alias("before"))

    def keyed(x: Column) -> Column:
        return F.struct(
            x["after"].alias("after"), x["before"].alias("before"),
            F.coalesce(configured_key(table_id, x["after"], options), key_of(x["after"], pk)).alias("new_key"),
            F.coalesce(configured_key(table_id, x["before"], options), key_of(x["before"], pk)).alias("old_key"),
        )

    df = df.withColumn("_images", F.transform(F.col("_rows"), images))
    return df.withColumn("_keyed", F.transform(F.col("_images"), keyed))


def _is_truncate() -> Column:
    """Whether a DDL message empties its table: type TRUNCATE, or a TRUNCATE statement."""
    return (F.col("_type") == "TRUNCATE") | F.coalesce(is_truncate(F.col("j")["sql"]), F.lit(False))


def _reason(options: DecodeOptions) -> Column:
    """Why a message is not decoded (null: it is)."""
    j, msg_type, is_ddl = F.col("j"), F.col("_type"), F.col("_is_ddl")
    table_id, rows, pk = F.col("table_id"), F.col("_rows"), F.col("_pk")
    has_configured = has_configured_key(table_id, options)
    keyless = pk.isNull() & ~has_configured
    ignored = literal_map(_IGNORED_TYPES)
    return (
        F.when(is_tombstone(), F.lit(TOMBSTONE))
        .when(j["_corrupt"].isNotNull() | j.isNull(), F.lit("malformed JSON or not a JSON object"))
        .when(msg_type.isNull() & ~is_ddl, F.lit("not a Canal message: no 'type'"))
        .when(F.element_at(ignored, msg_type).isNotNull(), F.element_at(ignored, msg_type))
        .when(~is_ddl & ~msg_type.isin(*_ROW_TYPES), F.concat(F.lit("unknown operation type '"), msg_type, F.lit("'")))
        .when(is_ddl & _is_truncate() & ~F.col("_has_table"), F.lit("TRUNCATE names no table"))
        .when(table_id.isNull() & is_ddl, F.lit("DDL names no database or table"))
        .when(table_id.isNull(), F.lit("no database/table"))
        .when(~is_ddl & (F.coalesce(F.size(rows), F.lit(0)) <= 0),
              F.concat(F.lit("'data' is empty for type "), msg_type))
        .when(~is_ddl & F.exists(rows, lambda r: r.isNull()), F.lit("null row in 'data'"))
        .when(j["es"].isNotNull() & epoch_number(j["es"], 1000).isNull(),
              F.lit("'es' is not a number of milliseconds since 1970 (epoch)"))
        .when(~is_ddl & ~has_configured & pk.isNotNull()
              & F.exists(rows, lambda r: F.exists(pk, lambda c: ~F.map_contains_key(r, c))),
              F.lit("a row lacks a key column named in pkNames"))
        .when(~is_ddl & (msg_type == "UPDATE") & keyless & (F.coalesce(F.size(j["old"]), F.lit(0)) <= 0),
              F.lit(f"update of a table without pkNames has no 'old' image: give {KEY_SETTING}"))
    )


def _records(rec) -> Column:
    """The change records of a message, made by ``rec`` (RecordBuilder.record): one per row, or its DDL."""
    msg_type, is_ddl, cdc = F.col("_type"), F.col("_is_ddl"), C.CDC

    def row_records(x: Column) -> Column:
        by_kind = row_change_records(rec, x["before"], x["after"], x["new_key"], x["old_key"])
        return (F.when(msg_type == "INIT", by_kind["load"]).when(msg_type == "INSERT", by_kind["insert"])
                .when(msg_type == "UPDATE", by_kind["update"]).otherwise(by_kind["delete"]))

    return (
        F.when(is_ddl & _is_truncate(), F.array(rec(C.TRUNCATE, cdc, None, None, None)))
        .when(is_ddl, F.array(rec(C.DDL, cdc, None, None, F.create_map(F.lit("ddl"), F.col("j")["sql"]))))
        .otherwise(F.flatten(F.transform(F.col("_keyed"), row_records)))
    )


class CanalDecoder(BaseDecoder):
    entry = ENTRY

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        df = raw.select("*", parse_value(_VALUE_SCHEMA, allow_comments=True).alias("j"))
        df = _with_rows(_with_message(df), options).withColumn("reason", _reason(options))
        j, table_id = F.col("j"), F.col("table_id")
        rec = RecordBuilder(self.name, table_id, F.col("_base"),
                            event_time=F.timestamp_millis(epoch_number(j["es"], 1000)), tx_id=j["gtid"],
                            column_types=F.col("_types")).record
        return df.select(*decided_outcome(F.col("reason"), _IGNORED_TYPES.values(), table_id, _records(rec)))
