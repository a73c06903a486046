"""Debezium JSON (PostgreSQL, SQL Server, MySQL, Oracle connectors), with or without the schema section.

Decoded on the JVM side where its jar is on the class path (jobs/jvm/src/cdc/DebeziumUdf.java, one
streaming pass per message), else in Spark SQL: one ``from_json`` into the envelope with row images as
``map<string,string>``; positions, keys and ids are column expressions. The only thing the Spark SQL
path brings to the driver is the set of distinct schema documents (a few per table), turned into
per-column conversions of Debezium's logical types (Decimal bytes, io.debezium.time.*) and into the
state's column types. Both give the same records (tests/unit/decoders/test_debezium_jvm.py); the JVM side's
are about twice as fast to decode (bench/README.md, "JVM-side decoding").

Also read: key messages (with or without schema), tombstones (ignored), heartbeat messages (ignored,
counted), records flattened by ExtractNewRecordState (``__op`` / ``__deleted`` / ``__table`` fields),
and the transaction-metadata topic when it is landed with the data topics: its BEGIN / END messages
become TX_BEGIN / TX_END markers of the transaction id the data events carry in ``transaction.id``, so
that a transaction still open at the end of a run is held back (jobs.fold.split_open_transactions).
Schema change events (the connector's schema change topic, landed with the data topics: a source
block, ``ddl`` and ``tableChanges``, no op) are DDL records of their table, keeping both.
A snapshot's end (``snapshot`` = ``last``: the whole snapshot; ``last_in_data_collection``: the
table's) is kept as a LOAD_END marker beside the row, so that the load is complete in the same run.
A primary-key change is a delete and a create; a create that lacks an unchanged TOAST value carries its
old key (the ``__debezium.oldkey`` header) as its before image, so that the fold moves the old key's row.
"""
from __future__ import annotations

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs import canonical as C
from jobs import jvm
from jobs.decoders import ENVELOPE, UNWRAPPED, BaseDecoder, DecodeOptions, register
from jobs.decoders.common import (
    JSON_LIMITS,
    TOMBSTONE,
    RecordBuilder,
    configured_key,
    decided_outcome,
    decoded_on_jvm,
    is_tombstone,
    literal_map,
    marker_record,
    pad_unsigned,
    parse_value,
)
from jobs.sql import sql_str

_MAP = "map<string,string>"
# the source block's fields the decoder reads, each as its JSON text (numbers included): a struct, so
# that the parser skips the rest and each is a field access, not a scan of a map's keys
_SOURCE_FIELDS = ("connector", "db", "schema", "table", "snapshot", "ts_ms", "txId", "lsn", "sequence",
                  "commit_lsn", "change_lsn", "event_serial_no", "file", "pos", "row", "scn", "commit_scn")
_SOURCE = f"struct<{', '.join(f'{name}:string' for name in _SOURCE_FIELDS)}>"
_ENVELOPE = (("before", _MAP), ("after", _MAP), ("source", _SOURCE), ("op", "string"), ("ts_ms", "bigint"),
             ("transaction", "struct<id:string,total_order:bigint,data_collection_order:bigint>"),
             # a logical-decoding message's (op m): content is bytes, as binary.handling.mode renders them
             ("message", "struct<prefix:string,content:string>"),
             # the transaction-metadata topic's fields
             ("status", "string"), ("id", "string"), ("event_count", "bigint"))
_ENVELOPE_FIELDS = ", ".join(f"{name}:{kind}" for name, kind in _ENVELOPE)
# the fields of a row event, carried on as columns _env_<name>
_ROW_EVENT_FIELDS = ("before", "after", "source", "op", "ts_ms", "transaction", "message")
# both shapes at once: {"schema":..., "payload": {envelope}} and the bare envelope; plus the
# transaction-metadata shape ({"status": "BEGIN"|"END", "id": ...}) and the parse-error column
_VALUE_SCHEMA = (
    f"struct<schema:string, payload:struct<{_ENVELOPE_FIELDS}>, {_ENVELOPE_FIELDS}, _corrupt:string>"
)
_CHANGE_FIELDS = "ddl:string, tableChanges:string"
# a schema change event, bare or beside the converter's schema section
_SCHEMA_CHANGE = f"struct<payload:struct<{_CHANGE_FIELDS}>, {_CHANGE_FIELDS}>"
_SNAPSHOT_MARKERS = ("true", "first", "last", "first_in_data_collection", "last_in_data_collection")
_OPS = {"r": C.SNAPSHOT, "c": C.INSERT, "u": C.UPDATE, "d": C.DELETE, "t": C.TRUNCATE, "m": C.MESSAGE}
_UNAVAILABLE = "__debezium_unavailable_value"


def _unavailable_forms(placeholder: str) -> tuple[str, ...]:
    """Every text an unchanged TOAST value arrives as in a row image, by column type, as the
    PostgreSQL connector renders its placeholder (UnchangedToastedPlaceholder): the text itself (text,
    json, xml ...); its bytes as base64 or hex (bytea, per binary.handling.mode); a one-element array
    of the text, of its base64 or of the name-based UUID of its bytes (text[], bytea[], uuid[]); its
    bytes as an array of numbers (int[], bigint[]); and a map of the text to itself (hstore)."""
    raw = placeholder.encode("utf-8")
    md5 = bytearray(hashlib.md5(raw).digest())  # Java's UUID.nameUUIDFromBytes: MD5, version 3
    md5[6], md5[8] = (md5[6] & 0x0F) | 0x30, (md5[8] & 0x3F) | 0x80
    b64 = base64.b64encode(raw).decode("ascii")
    compact = {"separators": (",", ":")}  # as from_json renders a nested value: compact JSON
    return (placeholder, b64, raw.hex(), json.dumps([placeholder], **compact), json.dumps([b64], **compact),
            json.dumps([str(uuid.UUID(bytes=bytes(md5)))], **compact), json.dumps(list(raw), **compact),
            json.dumps({placeholder: placeholder}, **compact))


_UNAVAILABLE_FORMS = _unavailable_forms(_UNAVAILABLE)


# ---- the schema section: types and conversions per column --------------------------------------
@dataclass(frozen=True)
class ColumnSpec:
    spark_type: str
    conversion: str | None  # SQL text over the lambda variable `v`, or None to keep the value as sent


_CONNECT_TYPES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float": "float",
    "float64": "double",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",  # JSON carries bytes as base64, which is also the canonical string for binary
}
_TS_FMT = "'yyyy-MM-dd HH:mm:ss.SSSSSS'"
_TIME_FMT = "'HH:mm:ss.SSSSSS'"


def _decimal_sql(b64: str, scale: str) -> str:
    """Base64 big-endian two's-complement unscaled integer -> exact decimal string (up to 38 digits)."""
    h = f"hex(unbase64({b64}))"
    neg = f"(substr({h}, 1, 1) >= '8')"
    mag_hex = f"(CASE WHEN {neg} THEN translate({h}, '0123456789ABCDEF', 'FEDCBA9876543210') ELSE {h} END)"
    low = f"regexp_extract({mag_hex}, '(.{{0,16}})$', 1)"
    high = f"regexp_extract({mag_hex}, '^(.*?).{{0,16}}$', 1)"
    mag = (
        f"try_add(CAST(conv({low}, 16, 10) AS DECIMAL(38,0)), "
        f"coalesce(try_multiply(CAST(conv(nullif({high}, ''), 16, 10) AS DECIMAL(38,0)), "
        "CAST(18446744073709551616 AS DECIMAL(38,0))), CAST(0 AS DECIMAL(38,0))))"
    )
    digits = f"CAST(CASE WHEN {neg} THEN {mag} + 1 ELSE {mag} END AS STRING)"
    padded = f"lpad({digits}, greatest(length({digits}), ({scale}) + 1), '0')"  # lpad truncates: never shorter
    # Some producers send a Decimal column as a plain JSON number (the JSON converter's
    # decimal.format=NUMERIC): text that is a number and cannot be base64 (length not a multiple of 4,
    # or a sign or point) is kept as the number it is. An exponent is no sign of a number: base64 holds
    # E and e ("0E00" is -31259.64 at scale 2), and a JSON number read as text carries a point with it.
    plain_number = (
        f"({b64} RLIKE '^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$' "
        f"AND (length({b64}) % 4 != 0 OR {b64} RLIKE '[-.]'))"
    )
    return (
        f"CASE WHEN {b64} IS NULL THEN NULL WHEN {plain_number} THEN {b64} WHEN {digits} IS NULL THEN NULL ELSE concat("
        f"CASE WHEN {neg} THEN '-' ELSE '' END, substr({padded}, 1, length({padded}) - ({scale})), "
        f"CASE WHEN ({scale}) > 0 THEN concat('.', substr({padded}, length({padded}) - ({scale}) + 1)) ELSE '' END) END"
    )


def _epoch(unit_sql: str, fmt: str) -> str:
    # try_cast: a malformed value becomes null in its column, it never fails the run
    return f"date_format({unit_sql.format(v='try_cast(v AS BIGINT)')}, {fmt})"


def _time_of_day(unit_sql: str, per_day: int) -> str:
    # PostgreSQL's time '24:00:00' is sent as a whole day's units, which no time of day renders
    return f"CASE WHEN try_cast(v AS BIGINT) = {per_day} THEN '24:00:00.000000' ELSE {_epoch(unit_sql, _TIME_FMT)} END"


_MILLIS, _MICROS, _NANOS = "timestamp_millis({v})", "timestamp_micros({v})", "timestamp_micros({v} DIV 1000)"
# Debezium / Kafka Connect logical types with a fixed state type and conversion. Times of day stay
# strings in state: there is no TIME type every Parquet reader agrees on.
_LOGICAL: dict[str, ColumnSpec] = {
    **dict.fromkeys(("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"), ColumnSpec(
        "date", "CAST(date_add(DATE'1970-01-01', try_cast(v AS INT)) AS STRING)")),
    **dict.fromkeys(("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"),
                    ColumnSpec("timestamp", _epoch(_MILLIS, _TS_FMT))),
    "io.debezium.time.MicroTimestamp": ColumnSpec("timestamp", _epoch(_MICROS, _TS_FMT)),
    "io.debezium.time.NanoTimestamp": ColumnSpec("timestamp", _epoch(_NANOS, _TS_FMT)),
    "io.debezium.time.ZonedTimestamp": ColumnSpec("timestamp", f"date_format(try_cast(v AS TIMESTAMP), {_TS_FMT})"),
    **dict.fromkeys(("io.debezium.time.Time", "org.apache.kafka.connect.data.Time"),
                    ColumnSpec("string", _time_of_day(_MILLIS, 86_400_000))),
    "io.debezium.time.MicroTime": ColumnSpec("string", _time_of_day(_MICROS, 86_400_000_000)),
    "io.debezium.time.NanoTime": ColumnSpec("string", _time_of_day(_NANOS, 86_400_000_000_000)),
    "io.debezium.time.Year": ColumnSpec("int", None),
    **dict.fromkeys(("io.debezium.data.Json", "io.debezium.data.Enum", "io.debezium.data.EnumSet",
                     "io.debezium.data.Uuid", "io.debezium.data.Xml", "io.debezium.time.ZonedTime"),
                    ColumnSpec("string", None)),
    "io.debezium.data.Bits": ColumnSpec("binary", None),
}


def _int_param(params: dict, name: str, default: int) -> int:
    try:
        return int(params.get(name, default))
    except (TypeError, ValueError):
        return default


def _text_or(value, default: str) -> str:
    """A schema field's text as Jackson's asText reads it (DebeziumTypes.textOr): a container has none."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else "" if isinstance(value, (list, dict)) else str(value)


def _named(field) -> bool:
    """A schema field with a name (a non-empty string; a broken schema may hold anything there)."""
    return isinstance(field, dict) and isinstance(field.get("field"), str) and field["field"] != ""


def column_spec(field: dict) -> ColumnSpec:
    """Kafka Connect field schema (with Debezium's logical names) -> state type + value conversion."""
    name = _text_or(field.get("name"), "")
    ftype = _text_or(field.get("type"), "string").lower()
    params = field.get("parameters") if isinstance(field.get("parameters"), dict) else {}
    if name == "org.apache.kafka.connect.data.Decimal":
        scale = _int_param(params, "scale", 0)
        precision = min(_int_param(params, "connect.decimal.precision", 38), 38)
        return ColumnSpec(f"decimal({precision},{min(scale, precision)})", _decimal_sql("v", str(scale)))
    if name == "io.debezium.data.VariableScaleDecimal":
        value, scale = "get_json_object(v, '$.value')", "try_cast(get_json_object(v, '$.scale') AS INT)"
        return ColumnSpec("decimal(38,18)", _decimal_sql(value, scale))
    if name in _LOGICAL:
        return _LOGICAL[name]
    if ftype in ("array", "map", "struct"):
        return ColumnSpec("string", None)  # kept as its JSON text
    return ColumnSpec(_CONNECT_TYPES.get(ftype, "string"), None)


def row_specs(schema_doc: str) -> dict[str, ColumnSpec]:
    """Column specs of the row image described by an envelope's schema section ({} if none)."""
    try:
        doc = json.loads(schema_doc)
    except (TypeError, ValueError):
        return {}
    fields = doc.get("fields") if isinstance(doc, dict) else None
    fields = [f for f in (fields if isinstance(fields, list) else []) if _named(f)]
    for wanted in ("after", "before"):
        for field in fields:
            if field["field"] == wanted and isinstance(field.get("fields"), list):
                return {f["field"]: column_spec(f) for f in field["fields"] if _named(f)}
    if not {"op", "source", "before", "after"} & {f["field"] for f in fields}:
        # no envelope: the schema of an ExtractNewRecordState row, whose fields are the row's columns
        return {f["field"]: column_spec(f) for f in fields if not f["field"].startswith("__")}
    return {}


def schema_hash(schema_doc: str) -> str:
    return hashlib.sha256(schema_doc.encode("utf-8")).hexdigest()


# ---- the decoder -------------------------------------------------------------------------------
def _source_position(src: Column) -> Column:
    """Each connector's own log position, encoded so that string order is source order."""
    connector = F.lower(src["connector"])
    # sequence = '["<last commit lsn>","<lsn>"]' (either may be null): the first number, without a JSON parse
    pg_commit = F.nullif(F.regexp_extract(src["sequence"], r'^\s*\[\s*"?([0-9]+)', 1), F.lit(""))
    postgres = F.concat_ws(
        ".", pad_unsigned(F.coalesce(pg_commit, src["lsn"])), pad_unsigned(src["lsn"])
    )
    sqlserver = F.concat_ws(
        ".",
        F.upper(src["commit_lsn"]),
        F.upper(F.coalesce(src["change_lsn"], F.lit(""))),
        pad_unsigned(F.coalesce(src["event_serial_no"], F.lit("0"))),
    )
    mysql = F.concat_ws(
        ".",
        pad_unsigned(F.regexp_extract(src["file"], r"(\d+)$", 1)),
        pad_unsigned(src["pos"]),
        pad_unsigned(F.coalesce(src["row"], F.lit("0")), 10),
    )
    oracle = F.concat_ws(".", pad_unsigned(F.coalesce(src["commit_scn"], src["scn"])), pad_unsigned(src["scn"]))
    return (
        F.when((connector == "postgresql") & src["lsn"].isNotNull(), postgres)
        .when((connector == "sqlserver") & src["commit_lsn"].isNotNull(), sqlserver)
        .when((connector == "mysql") & src["file"].isNotNull() & src["pos"].isNotNull(), mysql)
        .when((connector == "oracle") & src["scn"].isNotNull(), oracle)
    )


def parse_message_key(key: Column) -> Column:
    """The Kafka message key's JSON object as a map (a column of its own: it is used thrice below)."""
    return F.from_json(key.cast("string"), _MAP)


def _key_from_message_key(key: Column, parsed: Column) -> Column:
    """Kafka message key: {"id": 1} or {"schema": ..., "payload": {"id": 1}} -> map; else null.
    ``parsed`` is parse_message_key(key)."""
    inner = F.from_json(F.element_at(parsed, "payload"), _MAP)
    enveloped = F.map_contains_key(parsed, "payload") & F.map_contains_key(parsed, "schema")
    return F.when(key.isNull(), F.lit(None).cast(_MAP)).when(enveloped, inner).otherwise(parsed)


def _old_key_header() -> Column:
    """The ``__debezium.oldkey`` header of a key change's create (the row's previous key, as the message
    key is written: bare or beside its schema), as a map; else null."""
    header = F.get(F.filter("headers", lambda h: h["key"] == "__debezium.oldkey"), 0)["value"]
    return _key_from_message_key(header, parse_message_key(header))


def _convert_image(image_column: str, specs_by_hash: dict[str, dict[str, ColumnSpec]]) -> Column:
    """Apply each schema's per-column conversions to a row image (values stay canonical strings).

    Written as SQL text because the conversions refer to the lambda's value variable."""
    branches = []
    for digest, specs in specs_by_hash.items():
        cases = " ".join(
            f"WHEN {sql_str(col)} THEN {spec.conversion}" for col, spec in specs.items() if spec.conversion
        )
        if cases:
            branches.append(f"WHEN _schema_hash = {sql_str(digest)} "
                            f"THEN transform_values({image_column}, (k, v) -> CASE k {cases} ELSE v END)")
    if not branches:
        return F.col(image_column)
    return F.expr(f"CASE {' '.join(branches)} ELSE {image_column} END")


def _types_map(hash_col: Column, specs_by_hash: dict[str, dict[str, ColumnSpec]]) -> Column:
    out = None
    for digest, specs in specs_by_hash.items():
        literal = F.create_map(*[x for col, spec in specs.items() for x in (F.lit(col), F.lit(spec.spark_type))])
        out = (F.when(hash_col == digest, literal) if out is None else out.when(hash_col == digest, literal))
    return out if out is not None else F.lit(None).cast(_MAP)


JVM_DECODER = "cdc.DebeziumUdf"  # jobs/jvm/src/cdc/DebeziumUdf.java


class DebeziumDecoder(BaseDecoder):
    name = "debezium"
    # a topic carries full envelopes or ExtractNewRecordState rows, never both (jobs.decode)
    shaped = True

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        if jvm.available(raw.sparkSession, JVM_DECODER):
            return self.decode_on_jvm(raw, options)
        return self.decode_in_sql(raw, options)

    def decode_on_jvm(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """The same outcomes from the JVM-side decoder (jobs.jvm): one pass of a streaming parser per
        message instead of this module's expressions, which it mirrors value for value (its schema
        section's types and conversions included); records leave with their ids to the decode stage."""
        return decoded_on_jvm(
            raw, JVM_DECODER, self.name, options,
            [F.col(c) for c in ("key", "value", "topic", "partition", "offset")]
            + [F.unix_micros("timestamp"), F.col("headers")],
            unavailable=list(_UNAVAILABLE_FORMS))

    def decode_in_sql(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """Decoded in Spark SQL expressions (where the JVM-side decoder is not on the class path)."""
        parsed = raw.select(
            "*",
            parse_value(_VALUE_SCHEMA).alias("j"),
        )
        j = F.col("j")
        # the envelope's fields from either shape, each on its own: one struct chosen by a CASE would
        # be a copy of both row images per message
        has_payload = j["payload"].isNotNull()
        envelope = {name: F.when(has_payload, j["payload"][name]).otherwise(j[name]) for name, _ in _ENVELOPE}
        staged = parsed.select(
            *raw.columns,
            *[envelope[name].alias(f"_env_{name}") for name in _ROW_EVENT_FIELDS],
            envelope["status"].alias("_tx_status"),
            envelope["id"].alias("_tx_meta_id"),
            envelope["event_count"].alias("_tx_event_count"),
            j["_corrupt"].alias("_corrupt"),
            F.when(j["schema"].isNotNull(), F.sha2(j["schema"], 256)).alias("_schema_hash"),
        )
        specs_by_hash = self._collect_schema_specs(raw)
        return self._outcomes(staged, specs_by_hash, options)

    @staticmethod
    def _collect_schema_specs(raw: DataFrame) -> dict[str, dict[str, ColumnSpec]]:
        """The distinct schema documents (a few per table): the only thing brought to the driver.

        A pass of its own before the decode, made light: only a message that has a payload can carry
        a schema section, and from_json into the one field skips the rest of the value (the document's
        text, and so its hash, is the same as the full parse's)."""
        text = F.col("value").cast("string")
        doc = F.from_json(text, "struct<schema:string>", JSON_LIMITS)["schema"]
        docs = (
            raw.where(text.contains('"payload"'))
            .select(doc.alias("doc"))
            .where(F.col("doc").isNotNull())
            .groupBy(F.sha2("doc", 256).alias("digest"))
            .agg(F.first("doc").alias("doc"))
            .collect()
        )
        return {row["digest"]: row_specs(row["doc"]) for row in docs}

    def _outcomes(self, staged: DataFrame, specs_by_hash: dict[str, dict[str, ColumnSpec]],
                  options: DecodeOptions) -> DataFrame:
        # Built in steps of named columns so that each non-trivial expression is evaluated once.
        env = {name: F.col(f"_env_{name}") for name in _ROW_EVENT_FIELDS}
        src = env["source"]

        # 1. ExtractNewRecordState output is a flat row without envelope: parse it as a map, only then.
        # A row event always has a `source` block and an op code; a flat row may have columns named like
        # the envelope's fields (a logs table's `message`, a `source` or `op` of its own), which the
        # envelope parse reads as malformed or as an unknown op: such a JSON object is a flat row too.
        flat_candidate = (
            (env["op"].isNull() | ~env["op"].isin(*_OPS)) & src.isNull()
            & env["before"].isNull() & env["after"].isNull() & F.col("_tx_status").isNull()
            & F.col("value").isNotNull() & (F.length("value") > 0)
        )
        df = staged.withColumns({
            "_flat": F.when(flat_candidate, F.from_json(F.col("value").cast("string"), _MAP, JSON_LIMITS)),
            # in a step of its own: within one expression a CASE evaluates it once per branch
            "_key_parsed": parse_message_key(F.col("key")),
        })
        df = df.withColumn("_is_flat", F.col("_flat").isNotNull())  # a JSON object, not broken text
        # a schema change event (the connector's schema change topic): no op, a source block, the DDL
        # statement and the changed tables; parsed on its own, only for those messages
        change_candidate = (env["op"].isNull() & src.isNotNull() & F.col("_corrupt").isNull()
                            & F.col("value").cast("string").contains('"tableChanges"'))
        change = F.from_json(F.col("value").cast("string"), _SCHEMA_CHANGE, JSON_LIMITS)
        bare = F.struct(change["ddl"].alias("ddl"), change["tableChanges"].alias("tableChanges"))
        df = df.withColumn("_schema_change", F.when(change_candidate, F.when(
            change["payload"].isNotNull(), change["payload"]).otherwise(bare)))
        is_change = F.col("_schema_change").isNotNull()
        flat = F.col("_flat")
        # with the converter's schemas on, the flat row is the payload beside its schema section
        df = df.withColumn("_flat", F.when(
            (F.size(flat) == 2) & F.map_contains_key(flat, "schema") & F.map_contains_key(flat, "payload"),
            F.from_json(F.element_at(flat, "payload"), _MAP, JSON_LIMITS)).otherwise(flat))
        is_flat = F.col("_is_flat")
        flat_deleted = F.coalesce(F.lower(F.element_at(flat, "__deleted")) == "true", F.lit(False))
        flat_row = F.map_filter(flat, lambda k, v: ~k.startswith("__"))
        topic_parts = F.split(F.col("topic"), r"\.")
        df = df.withColumns({
            "_op_code": F.when(is_flat, F.when(flat_deleted, F.lit("d")).otherwise(
                F.coalesce(F.element_at(flat, "__op"), F.lit("c")))).otherwise(env["op"]),
            "_before": F.when(is_flat, F.when(flat_deleted, flat_row)).otherwise(env["before"]),
            "_after": F.when(is_flat, F.when(~flat_deleted, flat_row)).otherwise(env["after"]),
            "_flat_size": F.size(flat_row),
            "_is_heartbeat": is_flat & (
                F.col("topic").startswith("__debezium-heartbeat")
                | ((F.size(F.map_keys(flat)) == 1) & F.map_contains_key(flat, "ts_ms"))
            ),
            "table_id": F.when(
                is_flat,
                C.table_id_col(
                    F.element_at(flat, "__db"),
                    F.coalesce(F.element_at(flat, "__schema"),
                               F.when(F.size(topic_parts) >= 3, F.element_at(topic_parts, -2))),
                    F.coalesce(F.element_at(flat, "__table"), F.element_at(topic_parts, -1)),
                ),
            ).when(
                # a logical-decoding message (op m) belongs to no table: it is kept under <db>._._, as is
                # a schema change of no one table (CREATE DATABASE)
                (F.coalesce(src["table"], F.lit("")) != "") | ((env["op"] == "m") & src.isNotNull()) | is_change,
                C.table_id_col(src["db"], src["schema"], src["table"]),
            ),
            "_position": F.when(~is_flat, _source_position(src)),
            "_kafka_key": _key_from_message_key(F.col("key"), F.col("_key_parsed")),
            "_old_key_header": F.when((env["op"] == "c") & F.col("headers").isNotNull(), _old_key_header()),
        })

        # 2. typed values (Debezium logical types) and the canonical op / phase
        snapshot = F.lower(src["snapshot"])
        op_code = F.col("_op_code")
        op_map = literal_map(_OPS)
        df = df.withColumns({
            "_old_key_c": _convert_image("_old_key_header", specs_by_hash),
            "_before_c": _convert_image("_before", specs_by_hash),
            "_after_c": _convert_image("_after", specs_by_hash),
            "_op": F.when(is_change, F.lit(C.DDL))
                    .when(snapshot.isin(*_SNAPSHOT_MARKERS) & op_code.isin("r", "c"), F.lit(C.SNAPSHOT))
                    .otherwise(F.element_at(op_map, op_code)),
        })
        op = F.col("_op")
        before, after = F.col("_before_c"), F.col("_after_c")
        # unavailable (unchanged, not sent) TOAST values leave the image; present_columns says so
        after_clean = F.map_filter(after, lambda k, v: v.isNull() | ~v.isin(*_UNAVAILABLE_FORMS))
        row_image = F.coalesce(after, before)
        df = df.withColumns({
            "_after_clean": after_clean,
            "_present": F.when(F.size(after) != F.size(after_clean), F.map_keys(after_clean)),
            # an incremental snapshot is not a complete image: its rows are upserts ordered like CDC
            "_phase": F.when((op == C.SNAPSHOT) & (snapshot != "incremental"), F.lit(C.FULL_LOAD))
                       .otherwise(F.lit(C.CDC)),
            "_key": F.coalesce(
                configured_key(F.col("table_id"), row_image, options),
                # the message key's values are encoded as the row's (a Decimal key is base64, a date a
                # day number): the row image's converted value of each key column wins where it has one
                F.transform_values(F.col("_kafka_key"), lambda k, v: F.coalesce(F.element_at(row_image, k), v)),
            ),
        })

        # 3. reasons, then the records of what decoded
        table_id = F.col("table_id")
        keyless = F.col("_key").isNull()
        value_is_empty = is_tombstone()
        reason = (
            F.when(value_is_empty, F.lit(TOMBSTONE))
            .when(F.col("_tx_status").isin("BEGIN", "END") & F.col("_tx_meta_id").isNull(),
                  F.lit("transaction metadata without an id"))
            .when(F.col("_tx_status").isin("BEGIN", "END"), F.lit(None))
            .when(F.col("_is_heartbeat"), F.lit("heartbeat"))
            .when(F.col("_corrupt").isNotNull() & ~is_flat,
                  F.lit("malformed JSON or not a JSON object"))
            .when(is_flat & (F.col("_flat_size") == 0),
                  F.lit("not a Debezium envelope: no op, before, after or source"))
            .when(is_change, F.lit(None))
            .when(op_code.isNull(), F.lit("missing 'op'"))
            .when(op.isNull(), F.concat(F.lit("unknown operation type '"), op_code, F.lit("'")))
            .when((op != C.MESSAGE) & table_id.isNull(), F.lit("no source table"))
            .when(op.isin(C.SNAPSHOT, C.INSERT, C.UPDATE) & after.isNull(),
                  F.concat(F.lit("'after' is null for op '"), op_code, F.lit("'")))
            .when((op == C.DELETE) & before.isNull() & keyless,
                  F.lit("delete has neither a 'before' image nor a message key"))
            .when((op == C.UPDATE) & before.isNull() & keyless,
                  F.lit("update has no key and no 'before' image: give --primary-keys, send message keys, "
                        "or set REPLICA IDENTITY FULL on a PostgreSQL source"))
        )
        df = df.withColumn("reason", reason)

        event_time = F.timestamp_millis(F.coalesce(src["ts_ms"].try_cast("bigint"), env["ts_ms"]))
        rec = RecordBuilder(
            self.name, table_id, F.col("_position"), event_time,
            tx_id=F.coalesce(env["transaction"]["id"], src["txId"]), tx_seq=env["transaction"]["total_order"],
            column_types=_types_map(F.col("_schema_hash"), specs_by_hash),
        ).record
        phase, present = F.col("_phase"), F.col("_present")

        def tx_marker(marker_op: str) -> Column:
            # END's event_count is kept for lineage: the pipeline may land a subset of the transaction's
            # tables, so the count is not required to be met
            return F.array(marker_record(
                self.name, F.lit(None), marker_op, C.CDC, F.lit(None), F.col("_tx_meta_id"), F.col("_tx_event_count"),
                F.lit(marker_op == C.TX_END), F.timestamp_millis(env["ts_ms"]),
                F.create_map(F.lit("status"), F.col("_tx_status"), F.lit("id"), F.col("_tx_meta_id"))))

        clean = F.col("_after_clean")
        message = env["message"]
        # a logical-decoding message changes no row: its prefix and content are kept as its `after`
        # a schema change keeps its statement and the changed tables' structure (their JSON)
        change_detail = F.create_map(F.lit("ddl"), F.col("_schema_change")["ddl"],
                                     F.lit("table_changes"), F.col("_schema_change")["tableChanges"])
        message_detail = F.when(message.isNotNull(), F.create_map(
            F.lit("prefix"), message["prefix"], F.lit("content"), message["content"]))
        records = (
            F.when(F.col("_tx_status") == "BEGIN", tx_marker(C.TX_BEGIN))
            .when(F.col("_tx_status") == "END", tx_marker(C.TX_END))
            .when(op == C.TRUNCATE, F.array(rec(op, phase, None, None, None)))
            .when(op == C.MESSAGE, F.array(rec(op, phase, None, None, message_detail)))
            .when(op == C.DDL, F.array(rec(op, phase, None, None, change_detail)))
            # a key change's create whose image lacks unchanged TOAST values: its before image is the
            # old key (the __debezium.oldkey header), so that the fold moves the old key's row to the new
            # key first and the image merges over it
            .when(~keyless & (op == C.INSERT) & present.isNotNull() & F.col("_old_key_c").isNotNull(),
                  F.array(rec(op, phase, F.col("_key"), F.col("_old_key_c"), clean, present)))
            .when(~keyless, F.array(rec(op, phase, F.col("_key"), before, clean, present)))
            # no key anywhere: the whole row is its identity (a keyless table), so an update is a
            # delete of the old row and an insert of the new one
            .when((op == C.UPDATE) & before.isNotNull(),
                  F.array(rec(C.DELETE, phase, before, before, None),
                          rec(C.INSERT, phase, clean, None, clean, present)))
            .when(op == C.DELETE, F.array(rec(op, phase, before, before, None)))
            .otherwise(F.array(rec(op, phase, clean, before, clean, present)))
        )
        # the snapshot's last row also ends the load: of its table, or of every table of the snapshot
        load_end = F.array(marker_record(
            self.name, table_id, C.LOAD_END, C.FULL_LOAD, F.col("_position"), F.lit(None), F.lit(None), F.lit(None),
            event_time,
            F.create_map(F.lit("scope"), F.when(snapshot == "last", F.lit("all")).otherwise(F.lit("table")))))
        ends_load = (phase == C.FULL_LOAD) & snapshot.isin("last", "last_in_data_collection")
        records = F.when(ends_load, F.concat(records, load_end)).otherwise(records)
        # the message's shape, which its topic must share (jobs.decode.decide_topic_shapes): an
        # ExtractNewRecordState row, or a full envelope (row event, transaction metadata, schema change)
        shape = (F.when(value_is_empty | F.col("_is_heartbeat"), F.lit(None))
                 .when(is_flat, F.when(F.col("_flat_size") > 0, F.lit(UNWRAPPED)))
                 .when(F.col("_corrupt").isNull(), F.lit(ENVELOPE)))
        return df.select(*decided_outcome(F.col("reason"), ("heartbeat",), table_id, records, shape))


@register("debezium")
def _factory() -> DebeziumDecoder:
    return DebeziumDecoder()
