"""Maxwell's daemon JSON (MySQL binlog -> Kafka), one row per message.

``{database, table, type, ts, xid, xoffset, commit, position, data, old, primary_key_columns}``.
Decoded in Spark SQL: one ``from_json``, row images read as variants so that a DECIMAL, which
Maxwell sends as a JSON number, keeps its digits (common.exact_image_text); no UDF, nothing collected.

- type insert / update / delete are CDC; bootstrap-insert is the full load (phase FULL_LOAD, op
  SNAPSHOT); bootstrap-start / bootstrap-complete and heartbeat rows are ignored (and counted);
  table-* / database-* schema changes (output_ddl) are recorded as op DDL (statement in
  ``after['ddl']``).
- An update's before image is ``data`` overlaid with ``old`` (the changed columns' old values); a
  primary key changed by an update is a DELETE of the old key plus an INSERT of the new row.
- Key: --primary-keys, else the ``pk.*`` fields of the Kafka message key (hash form
  ``{"database":..,"table":..,"pk.id":1}`` or array form ``["db","table",[{"id":1}]]``), else
  ``primary_key_columns`` (output_primary_key_columns), else the whole row.
- Position (output_binlog_position): ``"binlog.000003:1234"`` -> binlog file number, offset, then
  xoffset (the commit row, which carries no xoffset, is last in its transaction), zero-padded so
  that string order is source order. Without a position the record's position is null and the
  Kafka offset orders events (Maxwell keeps a row's order inside its partition); the event id then
  uses ts/xid/xoffset so that equal-looking rows of different transactions stay distinct.
- Event time: ts_ms, else ts (seconds). A ts, ts_ms or position sent but unreadable (not a whole
  number in range, not ``file.number:offset``) is quarantined, never published with a null time.
- Maxwell declares no column types: column_types is null (columns stay strings in state).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.formats import DecodeOptions
from jobs.formats.base import (
    EXACT_IMAGE,
    KEY_SETTING,
    TOMBSTONE,
    BaseDecoder,
    RecordBuilder,
    configured_key,
    decided_outcome,
    epoch_number,
    has_configured_key,
    is_tombstone,
    key_of,
    literal_map,
    pad_unsigned,
    parse_with_exact_images,
    row_change_records,
)
from jobs.formats.maxwell import ENTRY
from jobs.model import record as C

_MAP = "map<string,string>"
_VALUE_SCHEMA = (
    "struct<database:string, table:string, type:string, ts:string, ts_ms:string, xid:string, xoffset:string, "
    f"commit:string, position:string, data:{EXACT_IMAGE}, old:{EXACT_IMAGE}, primary_key_columns:array<string>, "
    "sql:string, _corrupt:string>"
)
_ROW_TYPES = ("insert", "update", "delete", "bootstrap-insert")
_DDL_TYPES = ("table-create", "table-alter", "table-drop", "database-create", "database-alter", "database-drop")
_IGNORED_TYPES = {"bootstrap-start": "bootstrap marker", "bootstrap-complete": "bootstrap marker",
                  "heartbeat": "heartbeat"}
_LAST_IN_TX = "9999999999"  # xoffset of the commit row, which Maxwell writes without one


def _kafka_key_columns(key: Column) -> Column:
    """Primary-key column names from Maxwell's Kafka key (hash or array form), else null."""
    text = key.cast("string")
    as_hash = F.from_json(text, _MAP)
    pk_names = F.transform(F.filter(F.map_keys(as_hash), lambda k: k.startswith("pk.")),
                           lambda k: F.substring(k, 4, 1 << 20))
    as_array = F.from_json(text, "array<string>")
    array_pks = F.from_json(F.get(as_array, 2), f"array<{_MAP}>")
    array_names = F.flatten(F.transform(array_pks, lambda m: F.map_keys(m)))
    names = F.coalesce(F.when(F.size(pk_names) > 0, pk_names), F.when(F.size(array_names) > 0, array_names))
    return F.when(key.isNotNull(), names)


def _overlay(row: Column, old: Column) -> Column:
    replaced = F.transform_values(row, lambda k, v: F.when(F.map_contains_key(old, k), F.element_at(old, k))
                                  .otherwise(v))
    return F.map_concat(replaced, F.map_filter(old, lambda k, v: ~F.map_contains_key(row, k)))


def _binlog_part(group: int) -> Column:
    """Of ``position`` "binlog.000003:1234": 1 the file's number, 2 the offset ('' when it is no such text)."""
    return F.regexp_extract(F.col("j")["position"], r"(\d+):(\d+)$", group)


def _xoffset() -> Column:
    """The row's place in its transaction; the commit row, which Maxwell writes without one, is last."""
    j = F.col("j")
    return F.coalesce(j["xoffset"].try_cast("bigint").cast("string"),
                      F.when(F.lower(j["commit"]) == "true", F.lit(_LAST_IN_TX)), F.lit("0"))


def _with_message(df: DataFrame, options: DecodeOptions) -> DataFrame:
    """The message's type, table, position, time, images and keys as named columns (each non-trivial
    expression evaluated once)."""
    j, data, old = F.col("j"), F.col("_data"), F.col("_old")
    msg_type = F.lower(j["type"])
    has_table = F.coalesce(j["table"], F.lit("")) != ""
    has_db = F.coalesce(j["database"], F.lit("")) != ""
    binlog, xoffset = _binlog_part(1), _xoffset()
    df = df.withColumns({
        "_type": msg_type,
        "table_id": F.when(has_table, C.table_id_col(j["database"], F.lit(None), j["table"]))
                     .when(msg_type.isin(*_DDL_TYPES) & has_db,
                           C.table_id_col(j["database"], F.lit(None), F.lit(None))),
        "_position": F.when(binlog != "", F.concat_ws(
            ".", pad_unsigned(binlog), pad_unsigned(_binlog_part(2)), F.lpad(xoffset, 10, "0"))),
        # what tells events apart when there is no binlog position (never used for ordering)
        "_identity": F.concat_ws("|", F.lit("ts"), j["ts"], j["ts_ms"], j["xid"], xoffset),
        "_event_time": F.coalesce(F.timestamp_millis(epoch_number(j["ts_ms"], 1000)),
                                  F.timestamp_seconds(epoch_number(j["ts"]))),
        "_key_cols": F.coalesce(_kafka_key_columns(F.col("key")),
                                F.when(F.size(j["primary_key_columns"]) > 0, j["primary_key_columns"])),
        "_after": F.when(msg_type != "delete", data),
        "_before": F.when(msg_type == "delete", data)
                    .when((msg_type == "update") & old.isNotNull(), _overlay(data, old)),
    })
    table_id, before, after, key_cols = (F.col(c) for c in ("table_id", "_before", "_after", "_key_cols"))
    return df.withColumns({
        "_new_key": F.coalesce(configured_key(table_id, after, options), key_of(after, key_cols)),
        "_old_key": F.coalesce(configured_key(table_id, before, options), key_of(before, key_cols)),
    })


def _reason(options: DecodeOptions) -> Column:
    """Why a message is not decoded (null: it is)."""
    j, msg_type, table_id = F.col("j"), F.col("_type"), F.col("table_id")
    keyless = F.col("_key_cols").isNull() & ~has_configured_key(table_id, options)
    ignored = literal_map(_IGNORED_TYPES)
    return (
        F.when(is_tombstone(), F.lit(TOMBSTONE))
        .when(j["_corrupt"].isNotNull() | j.isNull(), F.lit("malformed JSON or not a JSON object"))
        .when(msg_type.isNull(), F.lit("not a Maxwell message: no 'type'"))
        .when(F.element_at(ignored, msg_type).isNotNull(), F.element_at(ignored, msg_type))
        .when(~msg_type.isin(*_ROW_TYPES, *_DDL_TYPES),
              F.concat(F.lit("unknown operation type '"), j["type"], F.lit("'")))
        .when(table_id.isNull(), F.lit("no database/table"))
        .when(msg_type.isin(*_ROW_TYPES) & F.col("_data").isNull(),
              F.concat(F.lit("'data' is null for type "), msg_type))
        .when(j["ts"].isNotNull() & epoch_number(j["ts"]).isNull(),
              F.lit("'ts' is not a number of seconds since 1970 (epoch)"))
        .when(j["ts_ms"].isNotNull() & epoch_number(j["ts_ms"], 1000).isNull(),
              F.lit("'ts_ms' is not a number of milliseconds since 1970 (epoch)"))
        .when(j["position"].isNotNull() & (_binlog_part(1) == ""),
              F.lit("'position' is not a binlog position (file.number:offset)"))
        .when((msg_type == "update") & keyless & F.col("_old").isNull(),
              F.lit(f"update of a table without a known key has no 'old' image: give {KEY_SETTING}"))
    )


def _records(rec) -> Column:
    """The change records of a message, made by ``rec`` (RecordBuilder.record)."""
    msg_type = F.col("_type")
    by_kind = row_change_records(rec, F.col("_before"), F.col("_after"), F.col("_new_key"), F.col("_old_key"))
    return (
        F.when(msg_type == "bootstrap-insert", by_kind["load"])
        .when(msg_type == "insert", by_kind["insert"])
        .when(msg_type == "update", by_kind["update"])
        .when(msg_type == "delete", by_kind["delete"])
        .otherwise(F.array(rec(C.DDL, C.CDC, None, None, F.create_map(F.lit("ddl"), F.col("j")["sql"]))))
    )


class MaxwellDecoder(BaseDecoder):
    entry = ENTRY

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        images = {"_data": "data", "_old": "old"}  # new column: field of the value
        df = _with_message(parse_with_exact_images(raw, _VALUE_SCHEMA, images), options)
        df = df.withColumn("reason", _reason(options))
        j, position = F.col("j"), F.col("_position")
        has_tx = j["xid"].isNotNull()
        rec = RecordBuilder(
            self.name, F.col("table_id"), position,
            event_time=F.col("_event_time"),
            tx_id=j["xid"], tx_seq=F.when(has_tx, _xoffset().cast("bigint")),
            tx_last=F.when(has_tx, F.coalesce(F.lower(j["commit"]) == "true", F.lit(False))),
            identity=F.coalesce(position, F.col("_identity")),
        ).record
        return df.select(*decided_outcome(F.col("reason"), _IGNORED_TYPES.values(), F.col("table_id"), _records(rec)))
