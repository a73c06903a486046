"""Qlik (Attunity) Replicate messages for Kafka / Event Hubs targets (seed 000).

Two kinds of message, as JSON or as Avro:

- *metadata* (``type`` MD): ``schemaId``, ``lineage`` (schema, table, ``tableVersion``), the
  ``tableStructure`` (column ordinals, types, length / precision / scale, ``primaryKeyPosition``) and
  ``dataSchema`` (the Avro schema of the table's data messages). A new version is sent on every DDL.
  Metadata messages are *remembered* (``remember``): the decode stage keeps them in the lake beside the
  pipeline's state, so a data message can be decoded in a later run, or from another partition, than
  its metadata. Each metadata message is counted as ignored ("Qlik metadata message").
- *data* (``type`` DT, or a bare ``{"data", "beforeData", "headers"}`` object): decoded with the
  metadata of its own ``messageSchemaId`` (else ``headers.externalSchemaId``; a message naming
  neither uses the newest ``tableVersion`` of its table). ``headers.operation`` REFRESH is the full
  load (phase FULL_LOAD, op SNAPSHOT); INSERT / UPDATE / DELETE are CDC, ordered by
  ``changeSequence`` (fixed-width ``YYYYMMDDHHmmSShh`` + 19-digit change number, so its string order
  is its order). ``transactionId`` / ``transactionEventCounter`` / ``transactionLastEvent`` are kept
  as tx_id / tx_seq / tx_last.

Envelopes: JSON messages come bare or in Replicate's ``{"magic": "atMSG", "type", "messageSchemaId",
"messageSchema", "message"}`` envelope. Avro messages come in Replicate's Avro envelope (fixed
``magic`` "atMSG", ``type``, ``headers``, ``messageSchemaId``, ``messageSchema``, ``message`` bytes);
the metadata message's bytes are read with its ``messageSchema`` and a data message's bytes with the
``dataSchema`` of its metadata. Avro messages are decoded with fastavro in ``mapInArrow`` (one Python
call per Arrow batch) into the same JSON form, so everything after is Spark SQL shared by both.

- Key: --primary-keys, else the columns with ``primaryKeyPosition`` > 0 in that order. An UPDATE whose
  ``beforeData`` holds another key is a DELETE of the old key plus an INSERT of the new row (with the
  before image, so that a column the message did not replicate moves with the row).
- ``columnMask`` / ``changeMask`` are little-endian hex bitmaps over column ordinals: the first byte
  (first two hex digits) holds ordinals 1-8, its lowest bit ordinal 1 (Qlik: "Byte 0 is bit7..bit0").
  A column whose columnMask bit is clear was not replicated: it is left out of the image and of
  ``present_columns``, so the fold keeps the prior value (a replicated null is a null). ``changeMask``
  only says which columns changed: the data carries every replicated column, so it is not needed.
- A DELETE's ``data`` is the deleted row (its key columns at least).
- Types from the metadata (INT1..UINT8, NUMERIC(p,s), REAL4/8, DATE, DATETIME, BOOLEAN, BYTES/BLOB as
  hex digits -> binary, strings); a data message without metadata is quarantined unless
  --primary-keys names its table (it is then decoded untyped).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC
from typing import Any

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
    has_configured_key,
    is_tombstone,
    key_of,
    keys_differ,
    parse_value,
)
from jobs.formats.qlik import ENTRY, POSITION_CHARS
from jobs.model import record as C

_MAP = "map<string,string>"
_AVRO_MAGIC = b"atMSG"
# Replicate's Avro envelope (Qlik: "The Replicate envelope")
ENVELOPE_SCHEMA = {
    "type": "record", "name": "MessageEnvelope",
    "fields": [
        {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 5}},
        {"name": "type", "type": "string"},
        {"name": "headers", "type": ["null", {"type": "map", "values": "string"}]},
        {"name": "messageSchemaId", "type": ["null", "string"]},
        {"name": "messageSchema", "type": ["null", "string"]},
        {"name": "message", "type": "bytes"},
    ],
}
_HEADERS = ("struct<operation:string, changeSequence:string, timestamp:string, streamPosition:string, "
            "transactionId:string, changeMask:string, columnMask:string, externalSchemaId:string, "
            "transactionEventCounter:bigint, transactionLastEvent:string>")
_COLUMN = "struct<ordinal:int, type:string, length:int, precision:int, scale:int, primaryKeyPosition:int>"
METADATA_SCHEMA = (
    "struct<schemaId:string, lineage:struct<server:string, task:string, schema:string, table:string, "
    f"tableVersion:bigint, timestamp:string>, tableStructure:struct<tableColumns:map<string,{_COLUMN}>>, "
    "dataSchema:string>"
)
_DATA_FIELDS = f"data:{_MAP}, beforeData:{_MAP}, headers:{_HEADERS}, schema:string, table:string"
_VALUE_SCHEMA = (
    "struct<magic:string, type:string, messageSchemaId:string, "
    f"message:struct<{_DATA_FIELDS}, schemaId:string>, {_DATA_FIELDS}, _avro_error:string, _corrupt:string>"
)
_OPS = {"REFRESH": C.SNAPSHOT, "INSERT": C.INSERT, "UPDATE": C.UPDATE, "DELETE": C.DELETE}
_METADATA_REASON = "Qlik metadata message"
_TS_FMT = "yyyy-MM-dd HH:mm:ss.SSSSSS"


# ---- Avro: envelope -> the JSON form (Python, per Arrow batch) ----------------------------------
def _jsonable(value: Any) -> Any:
    """fastavro's Python values -> what Replicate's JSON messages carry."""
    from datetime import date, datetime, time
    from decimal import Decimal

    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.hex().upper()  # binary values and masks: hexadecimal digits, as in JSON
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds")  # strftime's %Y does not pad years < 1000
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return value


def avro_envelope_to_json(value: bytes, data_schemas: dict[str, Any]) -> str:
    """One Avro-enveloped message -> the JSON envelope form (``_avro_error`` when unreadable)."""
    import io

    import fastavro

    def fail(why: str) -> str:
        return json.dumps({"magic": "atMSG", "_avro_error": why})

    try:
        buf = io.BytesIO(value)
        env = fastavro.schemaless_reader(buf, fastavro.parse_schema(ENVELOPE_SCHEMA))
        if buf.tell() != len(value):
            return fail("not a Replicate Avro envelope (bytes after the envelope)")
    except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds on bad bytes
        return fail(f"not a Replicate Avro envelope ({type(exc).__name__})")
    kind, schema_id = env["type"], env.get("messageSchemaId")
    if kind == "MD":
        if not env.get("messageSchema"):
            return fail("Avro metadata message without messageSchema")
        schema: Any = env["messageSchema"]
    elif kind == "DT":
        schema = data_schemas.get(schema_id or "")
        if schema is None:
            return fail(f"no metadata message for schemaId {schema_id}")
    else:
        return fail(f"unknown envelope type {kind!r}")
    try:
        parsed = fastavro.parse_schema(json.loads(schema) if isinstance(schema, str) else schema)
        body = io.BytesIO(env["message"])
        message = fastavro.schemaless_reader(body, parsed)
    except Exception as exc:  # noqa: BLE001
        return fail(f"{kind} message does not match its Avro schema ({type(exc).__name__})")
    return json.dumps({"magic": "atMSG", "type": kind, "messageSchemaId": schema_id, "message": _jsonable(message)})


def _avro_to_json_batches(data_schemas: dict[str, Any]):
    def convert(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            texts = [avro_envelope_to_json(v, data_schemas) for v in batch.column("value").to_pylist()]
            yield pa.RecordBatch.from_arrays([*batch.columns, pa.array(texts, pa.string())],
                                             names=[*batch.schema.names, "_text"])
    return convert


def _is_avro(col: str = "value") -> Column:
    return F.substring(F.col(col), 1, 5) == F.lit(_AVRO_MAGIC)


def with_text(raw: DataFrame, data_schemas: dict[str, Any]) -> DataFrame:
    """raw + ``_text``: JSON messages as they are, Avro envelopes converted to the JSON form."""
    fields = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in raw.schema.fields)
    avro = raw.where(_is_avro()).mapInArrow(_avro_to_json_batches(data_schemas), f"{fields}, _text string")
    return raw.where(~F.coalesce(_is_avro(), F.lit(False))).withColumn("_text", F.col("value").cast("string")) \
        .unionByName(avro)


# ---- metadata ----------------------------------------------------------------------------------
def qlik_type(t: Column, precision: Column, scale: Column) -> Column:
    """A Replicate data type (metadata ``type``) -> the state's Spark SQL type name."""
    t = F.upper(F.trim(t))
    decimal = F.when((precision > 0) & (precision <= 38) & (scale >= 0) & (scale <= precision),
                     F.concat(F.lit("decimal("), precision.cast("string"), F.lit(","), scale.cast("string"),
                              F.lit(")"))).otherwise(F.lit("string"))
    return (
        F.when(t.isin("INT1", "INT2", "INT4", "UINT1", "UINT2"), F.lit("int"))
        .when(t.isin("INT8", "UINT4"), F.lit("bigint"))
        .when(t == "UINT8", F.lit("decimal(20,0)"))
        .when(t.isin("NUMERIC", "DECIMAL"), decimal)
        .when(t == "REAL4", F.lit("float"))
        .when(t == "REAL8", F.lit("double"))
        .when(t == "BOOLEAN", F.lit("boolean"))
        .when(t == "DATE", F.lit("date"))
        .when(t.isin("DATETIME", "TIMESTAMP"), F.lit("timestamp"))
        .when(t.isin("BYTES", "BLOB"), F.lit("binary"))
        .otherwise(F.lit("string"))  # STRING, WSTRING, CLOB, NCLOB, TIME, ...
    )


def metadata_frame(spark, documents: list[str]) -> DataFrame:
    """Remembered metadata documents -> one row per schemaId: table, version, ordered columns, key, types."""
    docs = spark.createDataFrame([(d,) for d in documents], "doc string").select(
        F.from_json("doc", METADATA_SCHEMA).alias("m"))
    m = F.col("m")
    cols = F.array_sort(F.transform(
        F.map_entries(m["tableStructure"]["tableColumns"]),
        lambda e: F.struct(e["value"]["ordinal"].alias("ordinal"), e["key"].alias("name"),
                           e["value"]["primaryKeyPosition"].alias("pk"),
                           qlik_type(e["value"]["type"], e["value"]["precision"], e["value"]["scale"]).alias("type")),
    ))
    pk_cols = F.array_sort(F.transform(F.filter(cols, lambda c: F.coalesce(c["pk"], F.lit(0)) > 0),
                                       lambda c: F.struct(c["pk"].alias("pk"), c["name"].alias("name"))))
    return (
        docs.where(F.col("m.schemaId").isNotNull())
        .select(
            F.col("m.schemaId").alias("schema_id"),
            F.col("m.lineage.schema").alias("md_schema"),
            F.col("m.lineage.table").alias("md_table"),
            F.col("m.lineage.tableVersion").alias("md_version"),
            cols.alias("md_columns"),
            F.when(F.size(pk_cols) > 0, F.transform(pk_cols, lambda c: c["name"])).alias("md_pk"),
            F.map_from_arrays(F.transform(cols, lambda c: c["name"]), F.transform(cols, lambda c: c["type"]))
            .alias("md_types"),
        )
        .dropDuplicates(["schema_id"])
    )


def mask_bit(mask: Column, ordinal: Column) -> Column:
    """Whether the little-endian hex bitmap ``mask`` has the bit of column ``ordinal`` (1-based) set."""
    i = ordinal - 1
    byte = F.conv(F.substring(mask, (F.floor(i / 8) * 2 + 1).cast("int"), F.lit(2)), 16, 10).cast("int")
    return F.coalesce(F.getbit(byte, i % 8) == 1, F.lit(False))


def _typed_image(image: Column, types: Column) -> Column:
    """Values as canonical strings of their state type (JSON carries them as text or numbers)."""
    def convert(k: Column, v: Column) -> Column:
        t = F.element_at(types, k)
        return (
            F.when(v.isNull() | t.isNull(), v)
            # a value the type cannot hold is kept as sent: the state counts it (unconverted_values)
            .when(t == "timestamp", F.coalesce(F.date_format(v.try_cast("timestamp"), _TS_FMT), v))
            .when(t == "date", F.coalesce(F.date_format(v.try_cast("date"), "yyyy-MM-dd"), v))
            .when(t == "boolean", F.when(F.lower(v).isin("true", "1"), F.lit("true"))
                  .when(F.lower(v).isin("false", "0"), F.lit("false")).otherwise(v))
            .when(t == "binary", F.base64(F.unhex(v)))  # JSON carries binary as hex digits
            .otherwise(v)
        )
    return F.when(image.isNotNull(), F.transform_values(image, convert))



def _with_message(df: DataFrame) -> DataFrame:
    """The data message's fields whether it came in Replicate's envelope or bare, as named columns."""
    j = F.col("j")
    enveloped = j["magic"] == "atMSG"
    msg = F.when(enveloped, j["message"])

    def field(name: str) -> Column:
        return F.when(enveloped, msg[name]).otherwise(j[name])

    headers = field("headers")
    return df.withColumns({
        "_kind": F.when(enveloped, j["type"]).when(j["headers"].isNotNull() | j["data"].isNotNull(), "DT"),
        "_data": field("data"), "_before_data": field("beforeData"), "_headers": headers,
        "_schema_id": F.coalesce(F.when(enveloped, j["messageSchemaId"]), headers["externalSchemaId"]),
        "_schema": field("schema"), "_table": field("table"),
    })


def _with_metadata(df: DataFrame, meta: DataFrame) -> DataFrame:
    """Each data message with its metadata (``md_*``): by its schema id, else the newest version of its table."""
    by_id = meta.select("schema_id", *[F.col(c).alias(f"i_{c}") for c in meta.columns if c != "schema_id"])
    newest = (meta.groupBy("md_schema", "md_table").agg(F.max_by(F.struct(*meta.columns), "md_version").alias("n"))
              .select(F.col("md_schema").alias("n_schema"), F.col("md_table").alias("n_table"), "n"))
    df = df.join(F.broadcast(by_id), df["_schema_id"] == by_id["schema_id"], "left")
    df = df.join(F.broadcast(newest), F.col("_schema_id").isNull() & F.col("_schema").eqNullSafe(F.col("n_schema"))
                 & (F.col("_table") == F.col("n_table")), "left")
    pick = F.col("_schema_id").isNotNull()
    for c in ("md_schema", "md_table", "md_version", "md_columns", "md_pk", "md_types"):
        df = df.withColumn(c, F.when(pick, F.col(f"i_{c}")).otherwise(F.col("n")[c]))
    return df


def _whole_row() -> Column:
    """Whether the table has metadata without primaryKeyPosition: keyed by its whole row (without
    --primary-keys), as the other formats' keyless tables, so an UPDATE is a DELETE of the before row + an
    INSERT."""
    return F.col("md_columns").isNotNull() & F.col("md_pk").isNull()


def _with_images_and_keys(df: DataFrame, options: DecodeOptions) -> DataFrame:
    """The table, the columns replicated, the typed images and the keys, as named columns."""
    has_meta = F.col("md_columns").isNotNull()
    h = F.col("_headers")
    column_mask = F.when(F.trim(h["columnMask"]) != "", F.trim(h["columnMask"]))
    df = df.withColumns({
        "table_id": F.when(
            F.coalesce(F.col("_table"), F.col("md_table")).isNotNull(),
            C.table_id_col(F.lit(None), F.coalesce(F.col("_schema"), F.col("md_schema")),
                           F.coalesce(F.col("_table"), F.col("md_table")))),
        "_op_name": F.upper(h["operation"]),
        # columns replicated in this message (columnMask); null = all
        "_present": F.when(has_meta & column_mask.isNotNull(), F.transform(
            F.filter(F.col("md_columns"), lambda c: mask_bit(column_mask, c["ordinal"])), lambda c: c["name"])),
    })
    present = F.col("_present")

    def image(m: Column) -> Column:
        kept = F.when(present.isNull(), m).otherwise(F.map_filter(m, lambda k, v: F.array_contains(present, k)))
        return _typed_image(kept, F.col("md_types"))

    df = df.withColumns({"_after": image(F.col("_data")), "_before": image(F.col("_before_data"))})
    tid, after, before, pk = F.col("table_id"), F.col("_after"), F.col("_before"), F.col("md_pk")
    return df.withColumns({
        "_new_key": F.coalesce(configured_key(tid, after, options), key_of(after, pk), F.when(_whole_row(), after)),
        "_old_key": F.coalesce(configured_key(tid, before, options), key_of(before, pk),
                               F.when(_whole_row(), before)),
    })


def _reason(options: DecodeOptions) -> Column:
    """Why a message is not decoded (null: it is)."""
    j, kind, op_name, tid, present = F.col("j"), F.col("_kind"), F.col("_op_name"), F.col("table_id"), F.col("_present")
    has_meta = F.col("md_columns").isNotNull()
    has_configured = has_configured_key(tid, options)
    keyless = _whole_row() & ~has_configured  # keyed by the whole row
    return (
        F.when(is_tombstone(), F.lit(TOMBSTONE))
        .when(j["_avro_error"].isNotNull(), j["_avro_error"])
        .when(j["_corrupt"].isNotNull() | j.isNull(), F.lit("malformed JSON or not a JSON object"))
        .when(kind == "MD", F.lit(_METADATA_REASON))
        .when(kind.isNull(), F.lit("not a Qlik Replicate message: no envelope, 'data' or 'headers'"))
        .when(kind != "DT", F.concat(F.lit("unknown envelope type '"), kind, F.lit("'")))
        .when(op_name.isNull(), F.lit("no headers.operation"))
        .when(~op_name.isin(*_OPS), F.concat(F.lit("unknown operation '"), F.col("_headers")["operation"], F.lit("'")))
        .when(F.col("_schema_id").isNotNull() & ~has_meta & ~has_configured,
              F.concat(F.lit("no metadata message for schemaId "), F.col("_schema_id")))
        .when(tid.isNull(), F.lit("data message names no table and no known schemaId"))
        .when(~has_meta & ~has_configured,
              F.concat(F.lit("no metadata for table "), tid,
                       F.lit(f" (its key comes from Qlik's metadata message; or give {KEY_SETTING})")))
        .when(F.col("_data").isNull(), F.lit("data message without 'data'"))
        .when(keyless & present.isNotNull() & (F.size(present) < F.size("md_columns")),
              F.lit("no key (no primaryKeyPosition) and a row image without every column (columnMask): the "
                    f"whole row cannot key it; give {KEY_SETTING}"))
        .when(keyless & (op_name == "UPDATE") & F.col("_before_data").isNull(),
              F.lit("no key (no primaryKeyPosition): an UPDATE without beforeData cannot say which row it "
                    f"changes; give {KEY_SETTING}"))
        .when(F.col("_new_key").isNull(), F.lit(f"no key: the metadata has no primaryKeyPosition; give {KEY_SETTING}"))
    )


def _records(rec) -> Column:
    """The change records of a data message, made by ``rec`` (RecordBuilder.record)."""
    op_name, present, cdc = F.col("_op_name"), F.col("_present"), C.CDC
    after, before, new_key, old_key = F.col("_after"), F.col("_before"), F.col("_new_key"), F.col("_old_key")
    key_changed = before.isNotNull() & old_key.isNotNull() & keys_differ(old_key, new_key)
    return (
        F.when(op_name == "REFRESH", F.array(rec(C.SNAPSHOT, C.FULL_LOAD, new_key, None, after, present)))
        .when(op_name == "INSERT", F.array(rec(C.INSERT, cdc, new_key, None, after, present)))
        .when((op_name == "UPDATE") & key_changed,
              F.array(rec(C.DELETE, cdc, old_key, before, None),
                      # with the before image: the fold moves the old key's row (columns not replicated)
                      rec(C.INSERT, cdc, new_key, before, after, present)))
        .when(op_name == "UPDATE", F.array(rec(C.UPDATE, cdc, new_key, before, after, present)))
        .otherwise(F.array(rec(C.DELETE, cdc, new_key, after, None)))
    )


class QlikDecoder(BaseDecoder):
    entry = ENTRY

    # ---- metadata found in a raw snapshot ------------------------------------------------------
    def remember(self, raw: DataFrame) -> list[str]:
        """The distinct metadata messages of ``raw`` as normalised JSON documents (few, collected)."""
        maybe_md = raw.where(
            (_is_avro() & (F.substring("value", 6, 3) == F.lit(b"\x04MD")))
            | (~_is_avro() & F.col("value").cast("string").contains('"MD"'))
        )
        texts = with_text(maybe_md, {})
        j = F.from_json("_text", f"struct<type:string, message:{METADATA_SCHEMA}>")
        docs = (texts.select(j.alias("j")).where((F.col("j.type") == "MD") & F.col("j.message.schemaId").isNotNull())
                .select(F.to_json("j.message").alias("doc")).distinct().collect())
        return sorted(r["doc"] for r in docs)

    # ---- data ----------------------------------------------------------------------------------
    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        spark = raw.sparkSession
        # decode_messages has added this snapshot's metadata (``remember``) to the memory
        documents = sorted(set(options.memory))
        meta = metadata_frame(spark, documents)
        data_schemas = {r["schemaId"]: r["dataSchema"] for r in (
            json.loads(d) for d in documents) if r.get("schemaId") and r.get("dataSchema")}
        df = with_text(raw, data_schemas).withColumn("j", parse_value(_VALUE_SCHEMA, text=F.col("_text")))
        df = _with_images_and_keys(_with_metadata(_with_message(df), meta), options)
        df = df.withColumn("reason", _reason(options))
        h, tid = F.col("_headers"), F.col("table_id")
        seq = F.trim(h["changeSequence"])
        last = F.lower(h["transactionLastEvent"])
        rec = RecordBuilder(
            self.name, tid, position=F.when(seq != "", F.lpad(seq, POSITION_CHARS, "0")),
            event_time=F.when(F.trim(h["timestamp"]) != "", h["timestamp"].try_cast("timestamp")),
            tx_id=F.when(F.trim(h["transactionId"]) != "", h["transactionId"]),
            tx_seq=h["transactionEventCounter"], tx_last=F.when(last.isin("true", "false"), last == "true"),
            column_types=F.col("md_types"),
        ).record
        # a metadata message counts under the table it describes
        md_table = F.when(F.col("_kind") == "MD", C.table_id_col(
            F.lit(None), F.get_json_object("_text", "$.message.lineage.schema"),
            F.get_json_object("_text", "$.message.lineage.table")))
        return df.select(*decided_outcome(F.col("reason"), (_METADATA_REASON,), F.coalesce(tid, md_table),
                                          _records(rec)))
