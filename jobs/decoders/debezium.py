"""Debezium JSON (PostgreSQL, SQL Server, MySQL, Oracle connectors), with or without the schema section.

Decoded in Spark SQL: one ``from_json`` into the envelope with row images as ``map<string,string>``;
positions, keys and ids are column expressions. The only thing brought to the driver is the set of
distinct schema documents (a few per table), turned into per-column conversions of Debezium's
logical types (Decimal bytes, io.debezium.time.*) and into the state's column types.

Also read: key messages (with or without schema), tombstones (ignored), transaction-metadata and
heartbeat messages (ignored, counted), and records flattened by ExtractNewRecordState
(``__op`` / ``__deleted`` / ``__table`` fields).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs import canonical as C
from jobs.decoders import DECODED, IGNORED, QUARANTINED, DecodeOptions, register
from jobs.decoders.common import configured_key, event_id, outcome, pad_unsigned
from jobs.sql import sql_str

_MAP = "map<string,string>"
_ENVELOPE_FIELDS = (
    f"before:{_MAP}, after:{_MAP}, source:{_MAP}, op:string, ts_ms:bigint, "
    "transaction:struct<id:string,total_order:bigint,data_collection_order:bigint>, message:map<string,string>"
)
# both shapes at once: {"schema":..., "payload": {envelope}} and the bare envelope; plus the
# transaction-metadata shape ({"status": "BEGIN"|"END", "id": ...}) and the parse-error column
_VALUE_SCHEMA = (
    f"struct<schema:string, payload:struct<{_ENVELOPE_FIELDS}>, {_ENVELOPE_FIELDS}, "
    "status:string, id:string, _corrupt:string>"
)
_SNAPSHOT_MARKERS = ("true", "first", "last", "first_in_data_collection", "last_in_data_collection")
_OPS = {"r": C.SNAPSHOT, "c": C.INSERT, "u": C.UPDATE, "d": C.DELETE, "t": C.TRUNCATE, "m": C.MESSAGE}
_UNAVAILABLE = "__debezium_unavailable_value"


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
    padded = f"lpad({digits}, {scale} + 1, '0')"
    return (
        f"CASE WHEN {b64} IS NULL OR {digits} IS NULL THEN NULL ELSE concat("
        f"CASE WHEN {neg} THEN '-' ELSE '' END, substr({padded}, 1, length({padded}) - ({scale})), "
        f"CASE WHEN ({scale}) > 0 THEN concat('.', substr({padded}, length({padded}) - ({scale}) + 1)) ELSE '' END) END"
    )


def column_spec(field: dict) -> ColumnSpec:
    """Kafka Connect field schema (with Debezium's logical names) -> state type + value conversion."""
    name = field.get("name") or ""
    ftype = (field.get("type") or "string").lower()
    params = field.get("parameters") or {}
    if name == "org.apache.kafka.connect.data.Decimal":
        scale = int(params.get("scale", 0))
        precision = min(int(params.get("connect.decimal.precision", 38)), 38)
        return ColumnSpec(f"decimal({precision},{min(scale, precision)})", _decimal_sql("v", str(scale)))
    if name == "io.debezium.data.VariableScaleDecimal":
        value, scale = "get_json_object(v, '$.value')", "CAST(get_json_object(v, '$.scale') AS INT)"
        return ColumnSpec("decimal(38,18)", _decimal_sql(value, scale))
    if name in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return ColumnSpec("date", "CAST(date_add(DATE'1970-01-01', CAST(v AS INT)) AS STRING)")
    if name in ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"):
        return ColumnSpec("timestamp", f"date_format(timestamp_millis(CAST(v AS BIGINT)), {_TS_FMT})")
    if name == "io.debezium.time.MicroTimestamp":
        return ColumnSpec("timestamp", f"date_format(timestamp_micros(CAST(v AS BIGINT)), {_TS_FMT})")
    if name == "io.debezium.time.NanoTimestamp":
        return ColumnSpec("timestamp", f"date_format(timestamp_micros(CAST(v AS BIGINT) DIV 1000), {_TS_FMT})")
    if name == "io.debezium.time.ZonedTimestamp":
        return ColumnSpec("timestamp", f"date_format(try_cast(v AS TIMESTAMP), {_TS_FMT})")
    # times of day stay strings in state (no portable TIME type across Parquet readers)
    if name in ("io.debezium.time.Time", "org.apache.kafka.connect.data.Time"):
        return ColumnSpec("string", f"date_format(timestamp_millis(CAST(v AS BIGINT)), {_TIME_FMT})")
    if name == "io.debezium.time.MicroTime":
        return ColumnSpec("string", f"date_format(timestamp_micros(CAST(v AS BIGINT)), {_TIME_FMT})")
    if name == "io.debezium.time.NanoTime":
        return ColumnSpec("string", f"date_format(timestamp_micros(CAST(v AS BIGINT) DIV 1000), {_TIME_FMT})")
    if name == "io.debezium.time.Year":
        return ColumnSpec("int", None)
    if name in ("io.debezium.data.Json", "io.debezium.data.Enum", "io.debezium.data.EnumSet",
                "io.debezium.data.Uuid", "io.debezium.data.Xml", "io.debezium.time.ZonedTime"):
        return ColumnSpec("string", None)
    if name == "io.debezium.data.Bits":
        return ColumnSpec("binary", None)
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
    for wanted in ("after", "before"):
        for field in fields or []:
            if isinstance(field, dict) and field.get("field") == wanted and isinstance(field.get("fields"), list):
                return {
                    f["field"]: column_spec(f) for f in field["fields"] if isinstance(f, dict) and f.get("field")
                }
    return {}


def schema_hash(schema_doc: str) -> str:
    return hashlib.sha256(schema_doc.encode("utf-8")).hexdigest()


# ---- the decoder -------------------------------------------------------------------------------
def _source_position(src: Column) -> Column:
    """Each connector's own log position, encoded so that string order is source order."""
    connector = F.lower(src["connector"])
    pg_commit = F.from_json(src["sequence"], "array<string>")[0]
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


def _key_from_message_key(key: Column) -> Column:
    """Kafka message key: {"id": 1} or {"schema": ..., "payload": {"id": 1}} -> map; else null."""
    parsed = F.from_json(key.cast("string"), _MAP)
    inner = F.from_json(F.element_at(parsed, "payload"), _MAP)
    enveloped = F.map_contains_key(parsed, "payload") & F.map_contains_key(parsed, "schema")
    return F.when(key.isNull(), F.lit(None).cast(_MAP)).when(enveloped, inner).otherwise(parsed)


def _convert_image(image_column: str, specs_by_hash: dict[str, dict[str, ColumnSpec]]) -> Column:
    """Apply each schema's per-column conversions to a row image (values stay canonical strings).

    Written as SQL text because the conversions refer to the lambda's value variable."""
    branches = []
    for digest, specs in specs_by_hash.items():
        cases = " ".join(
            f"WHEN {sql_str(col)} THEN {spec.conversion}" for col, spec in specs.items() if spec.conversion
        )
        if cases:
            branches.append(
                f"WHEN _schema_hash = {sql_str(digest)} THEN transform_values({image_column}, (k, v) -> CASE k {cases} ELSE v END)"
            )
    if not branches:
        return F.col(image_column)
    return F.expr(f"CASE {' '.join(branches)} ELSE {image_column} END")


def _types_map(hash_col: Column, specs_by_hash: dict[str, dict[str, ColumnSpec]]) -> Column:
    out = None
    for digest, specs in specs_by_hash.items():
        literal = F.create_map(*[x for col, spec in specs.items() for x in (F.lit(col), F.lit(spec.spark_type))])
        out = (F.when(hash_col == digest, literal) if out is None else out.when(hash_col == digest, literal))
    return out if out is not None else F.lit(None).cast(_MAP)


class DebeziumDecoder:
    name = "debezium"

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        text = F.col("value").cast("string")
        parsed = raw.select(
            "*",
            F.from_json(text, _VALUE_SCHEMA, {"columnNameOfCorruptRecord": "_corrupt", "mode": "PERMISSIVE"}).alias("j"),
        )
        j = F.col("j")
        env = F.when(j["payload"].isNotNull(), j["payload"]).otherwise(
            F.struct(*[j[f].alias(f) for f in ("before", "after", "source", "op", "ts_ms", "transaction", "message")])
        )
        staged = parsed.select(
            *raw.columns,
            env.alias("env"),
            j["schema"].alias("_schema"),
            j["status"].alias("_tx_status"),
            j["_corrupt"].alias("_corrupt"),
            F.when(j["schema"].isNotNull(), F.sha2(j["schema"], 256)).alias("_schema_hash"),
        )
        specs_by_hash = self._collect_schema_specs(staged)
        return self._outcomes(staged, specs_by_hash, options)

    @staticmethod
    def _collect_schema_specs(staged: DataFrame) -> dict[str, dict[str, ColumnSpec]]:
        # a few distinct schema documents per table: the only thing brought to the driver
        docs = (
            staged.where(F.col("_schema").isNotNull())
            .groupBy("_schema_hash")
            .agg(F.first("_schema").alias("doc"))
            .collect()
        )
        return {row["_schema_hash"]: row_specs(row["doc"]) for row in docs}

    def _outcomes(self, staged: DataFrame, specs_by_hash: dict[str, dict[str, ColumnSpec]],
                  options: DecodeOptions) -> DataFrame:
        env, src = F.col("env"), F.col("env")["source"]
        h = F.col("_schema_hash")
        raw_op = env["op"]
        value_text = F.col("value").cast("string")

        # ExtractNewRecordState output: a flat row, no envelope
        flat = F.from_json(value_text, _MAP)
        is_flat = (
            raw_op.isNull() & src.isNull() & env["before"].isNull() & env["after"].isNull()
            & F.col("_corrupt").isNull() & F.col("_tx_status").isNull()
        )
        flat_row = F.map_filter(flat, lambda k, v: ~k.startswith("__"))
        flat_deleted = F.lower(F.element_at(flat, "__deleted")) == "true"
        flat_op = F.when(flat_deleted, F.lit("d")).otherwise(F.coalesce(F.element_at(flat, "__op"), F.lit("c")))
        is_heartbeat = is_flat & (
            F.col("topic").startswith("__debezium-heartbeat")
            | (F.size(F.map_keys(flat)) == 1) & F.map_contains_key(flat, "ts_ms")
        )

        op_code = F.when(is_flat, flat_op).otherwise(raw_op)
        staged = staged.withColumns({
            "_before": F.when(is_flat & flat_deleted, flat_row).when(~is_flat, env["before"]),
            "_after": F.when(is_flat & ~flat_deleted, flat_row).when(~is_flat, env["after"]),
        })
        before = _convert_image("_before", specs_by_hash)
        after = _convert_image("_after", specs_by_hash)

        topic_parts = F.split(F.col("topic"), r"\.")
        table_id = F.when(
            is_flat,
            C.table_id_col(
                F.coalesce(F.element_at(flat, "__db"), F.lit(None)),
                F.coalesce(F.element_at(flat, "__schema"), F.when(F.size(topic_parts) >= 3, F.element_at(topic_parts, -2))),
                F.coalesce(F.element_at(flat, "__table"), F.element_at(topic_parts, -1)),
            ),
        ).when(src["table"].isNotNull() & (src["table"] != ""), C.table_id_col(src["db"], src["schema"], src["table"]))

        snapshot = F.lower(src["snapshot"])
        in_snapshot = snapshot.isin(*_SNAPSHOT_MARKERS)
        op_map = F.create_map(*[x for k, v in _OPS.items() for x in (F.lit(k), F.lit(v))])
        op = F.when(in_snapshot & op_code.isin("r", "c"), F.lit(C.SNAPSHOT)).otherwise(F.element_at(op_map, op_code))
        # an incremental snapshot is not a complete image: its rows are upserts ordered like CDC
        phase = F.when(op == C.SNAPSHOT, F.when(snapshot == "incremental", F.lit(C.CDC)).otherwise(F.lit(C.FULL_LOAD))).otherwise(F.lit(C.CDC))

        # unavailable (unchanged, not sent) TOAST values are left out of the image: present_columns says so
        def without_unavailable(image: Column) -> Column:
            return F.map_filter(image, lambda k, v: v.isNull() | (v != _UNAVAILABLE))

        after_clean = without_unavailable(after)
        has_unavailable = F.size(after) != F.size(after_clean)
        present = F.when(has_unavailable, F.map_keys(after_clean))

        kafka_key = _key_from_message_key(F.col("key"))
        image = F.coalesce(after, before)
        cfg_key = configured_key(table_id, image, options)
        explicit_key = F.coalesce(cfg_key, kafka_key)
        # no key anywhere: the whole row is its identity (a keyless table); an update then is a
        # delete of the old row and an insert of the new one
        keyless = explicit_key.isNull()

        position = F.when(is_flat, F.lit(None).cast("string")).otherwise(_source_position(src))
        event_time = F.timestamp_millis(F.coalesce(src["ts_ms"].cast("bigint"), env["ts_ms"]))
        tx_id = F.coalesce(env["transaction"]["id"], src["txId"])
        tx_seq = env["transaction"]["total_order"]
        types = _types_map(h, specs_by_hash)

        def record(rec_op: Column, rec_key: Column, rec_before: Column, rec_after: Column, rec_present: Column) -> Column:
            return F.struct(
                F.lit(self.name).alias("format"),
                table_id.alias("table_id"),
                rec_op.alias("op"),
                phase.alias("phase"),
                rec_key.alias("key"),
                rec_before.alias("before"),
                rec_after.alias("after"),
                rec_present.alias("present_columns"),
                position.alias("position"),
                tx_id.cast("string").alias("tx_id"),
                tx_seq.alias("tx_seq"),
                F.lit(None).cast("boolean").alias("tx_last"),
                event_time.alias("event_time"),
                types.alias("column_types"),
                F.col("topic").alias("topic"),
                F.col("partition").alias("partition"),
                F.col("offset").alias("offset"),
                F.col("timestamp").alias("kafka_ts"),
                event_id(table_id, rec_op, position, rec_key, rec_before, rec_after).alias("event_id"),
            )

        no_present = F.lit(None).cast("array<string>")
        records = (
            F.when(op.isin(C.TRUNCATE, C.MESSAGE),
                   F.array(record(op, F.lit(None).cast(_MAP), F.lit(None).cast(_MAP), F.lit(None).cast(_MAP), no_present)))
            .when(~keyless, F.array(record(op, explicit_key, before, after_clean, present)))
            .when((op == C.UPDATE) & before.isNotNull(),
                  F.array(record(F.lit(C.DELETE), before, before, F.lit(None).cast(_MAP), no_present),
                          record(F.lit(C.INSERT), after_clean, F.lit(None).cast(_MAP), after_clean, present)))
            .when(op == C.DELETE, F.array(record(op, before, before, F.lit(None).cast(_MAP), no_present)))
            .otherwise(F.array(record(op, after_clean, before, after_clean, present)))
        )

        value_is_empty = F.col("value").isNull() | (F.length(F.col("value")) == 0)
        reason = (
            F.when(value_is_empty, F.lit("tombstone"))
            .when(F.col("_tx_status").isin("BEGIN", "END"), F.lit("transaction metadata"))
            .when(is_heartbeat, F.lit("heartbeat"))
            .when(F.col("_corrupt").isNotNull(), F.lit("malformed JSON or not a JSON object"))
            .when(is_flat & (F.size(flat_row) == 0), F.lit("not a Debezium envelope: no op, before, after or source"))
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
        status = (
            F.when(reason.isNull(), F.lit(DECODED))
            .when(reason.isin("tombstone", "transaction metadata", "heartbeat"), F.lit(IGNORED))
            .otherwise(F.lit(QUARANTINED))
        )
        return staged.select(*outcome(status, reason, table_id, F.when(reason.isNull(), records)))


@register("debezium")
def _factory() -> DebeziumDecoder:
    return DebeziumDecoder()
