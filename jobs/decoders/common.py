"""Column expressions shared by decoders: positions, keys, ids, outcome rows."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType

from jobs import canonical as C
from jobs import jvm
from jobs.canonical import CHANGE_RECORD_SCHEMA
from jobs.decoders import DecodeOptions

RECORDS_TYPE = ArrayType(CHANGE_RECORD_SCHEMA)
LINEAGE = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")


def pad_unsigned(col: Column, width: int = 20) -> Column:
    """A non-negative integer as fixed-width digits, so that string order is numeric order.

    64-bit log positions arrive as Java longs: a negative one is an unsigned value past 2^63.
    """
    number = col.try_cast("decimal(38,0)")
    unsigned = F.when(number < 0, number + F.lit("18446744073709551616").cast("decimal(38,0)")).otherwise(number)
    return F.lpad(unsigned.cast("string"), width, "0")


def configured_key(table_id: Column, image: Column, options: DecodeOptions) -> Column:
    """The key map built from --primary-keys for this table (by full id or last part), else null."""
    if not options.primary_keys:
        return F.lit(None).cast("map<string,string>")
    pk_map = F.create_map(
        *[x for name, cols in sorted(options.primary_keys.items()) for x in (F.lit(name), F.array(*map(F.lit, cols)))]
    )
    last = F.element_at(F.split(table_id, r"\."), -1)
    cols = F.coalesce(F.element_at(pk_map, table_id), F.element_at(pk_map, last))
    return F.when(
        cols.isNotNull() & image.isNotNull(),
        F.map_from_arrays(cols, F.transform(cols, lambda c: F.element_at(image, c))),
    )


def key_of(image: Column, columns: Column) -> Column:
    """The key of ``image`` by the key ``columns`` a message names; null when it names none (or only
    entries without a name, which cannot key a map): the decoder then keys by --primary-keys or the
    whole row."""
    named = F.filter(columns, lambda c: c.isNotNull())
    return F.when(image.isNotNull() & (F.size(named) > 0),
                  F.map_from_arrays(named, F.transform(named, lambda c: F.element_at(image, c))))


def event_id(table_id: Column, op: Column, position: Column, key: Column, before: Column, after: Column) -> Column:
    """Deterministic id of an event's content: a redelivered message (same bytes, or re-sent by a
    restarted connector with a new ts_ms) gets the same id; distinct rows sharing one position do not."""
    # two independent hashes of the content, entries hashed as they are (no JSON rendering). The
    # 32-bit one's hex is cut to 8 characters, which keeps only the sign bits of a negative value, so
    # an id holds 64-96 bits; copies are matched within one key's events only, where 64 bits suffice
    # (changing the cut would change every id: copies decoded by versions apart would not match).
    # Maps are hashed as they are (spark.sql.legacy.allowHashOnMapType, jobs/spark.py): entry by entry
    # in their order, the same value as hashing their map_entries, without copying them to arrays first
    parts = [table_id, op, F.coalesce(position, F.lit("")), key, before, after,
             *[m.isNull() for m in (key, before, after)]]
    return F.concat(F.lpad(F.hex(F.xxhash64(*parts)), 16, "0"), F.lpad(F.hex(F.hash(*parts)), 8, "0"))


# the table id of records that belong to no table (transaction markers without one)
NO_TABLE = C.make_table_id(None, None, None)


def marker_record(fmt: str, table_id: Column, op: str, phase: str, position: Column, tx_id: Column,
                  tx_seq: Column, tx_last: Column, event_time: Column, detail: Column) -> Column:
    """A record that changes no row -- a transaction's begin / end, a full load's end -- in the
    canonical shape; ``detail`` (a string map) is kept as its ``after`` and makes its event id."""
    no_map = F.lit(None).cast("map<string,string>")
    table = F.coalesce(table_id, F.lit(NO_TABLE))
    return F.struct(
        F.lit(fmt).alias("format"), table.alias("table_id"), F.lit(op).alias("op"), F.lit(phase).alias("phase"),
        no_map.alias("key"), no_map.alias("before"), detail.alias("after"),
        F.lit(None).cast("array<string>").alias("present_columns"), position.alias("position"),
        tx_id.cast("string").alias("tx_id"), tx_seq.cast("bigint").alias("tx_seq"),
        tx_last.cast("boolean").alias("tx_last"), event_time.alias("event_time"),
        no_map.alias("column_types"), F.col("topic"), F.col("partition"), F.col("offset"),
        F.col("timestamp").alias("kafka_ts"),
        event_id(table, F.lit(op), position, no_map, no_map, detail).alias("event_id"),
    )


def outcome(status: Column, reason: Column, table_id: Column, records: Column,
            shape: Column | None = None) -> list[Column]:
    """The outcome columns every decoder returns, beside the raw lineage columns."""
    return [
        status.alias("status"),
        reason.cast(StringType()).alias("reason"),
        table_id.cast(StringType()).alias("table_id"),
        records.cast(RECORDS_TYPE).alias("records"),
        (F.lit(None) if shape is None else shape).cast(StringType()).alias("shape"),
        *[F.col(c) for c in LINEAGE],
    ]


def decoded_on_jvm(raw: DataFrame, class_name: str, fmt: str, options: DecodeOptions, arguments: list[Column],
                   **settings: object) -> DataFrame:
    """The outcomes of the JVM-side decoder ``class_name`` (jobs.jvm) called on ``arguments`` of each raw
    message, made with the format's ``settings`` and the rules every decoder shares (--primary-keys,
    the table-id limits of jobs.canonical); records leave with event_id null, for the decode stage."""
    config = {
        "format": fmt,
        "primary_keys": {table: list(cols) for table, cols in options.primary_keys.items()},
        "no_table": NO_TABLE,
        "missing_part": C.MISSING_PART,
        "name_hash_digits": C.NAME_HASH_DIGITS,
        "max_id_chars": C.MAX_ID_CHARS,
        "max_part_chars": C.MAX_PART_CHARS,
        **settings,
    }
    udf = jvm.register_udf(raw.sparkSession, class_name, config, jvm.outcome_type())
    # one column first: the projection below reads it four times, the UDF runs once
    decoded = raw.withColumn("_outcome", F.call_function(udf, *arguments))
    o = F.col("_outcome")
    return decoded.select(*outcome(o["status"], o["reason"], o["table_id"], o["records"], o["shape"]))


# from_json's bounds: the longest string a message may hold (Jackson's own 20M characters would
# quarantine the value of a large TEXT or JSON column as malformed JSON; memory is the real bound), as
# the JVM-side decoders read (jobs/jvm/src/cdc/Json.java MAX_STRING_CHARS)
JSON_LIMITS = {"maxStringLen": "536870912"}


def parse_value(schema: str, allow_comments: bool = False, text: Column | None = None) -> Column:
    """The message value (or ``text``) parsed into the format's envelope schema (which must end in
    ``_corrupt:string``): a value that is not JSON, or not an object, leaves its text there."""
    options = {"columnNameOfCorruptRecord": "_corrupt", "mode": "PERMISSIVE", **JSON_LIMITS}
    if allow_comments:  # vendor examples carry // comments
        options["allowComments"] = "true"
    return F.from_json(F.col("value").cast("string") if text is None else text, schema, options)


# A JSON number that from_json reads into a string is rendered again through a double (Spark 4.1 parses
# from_json's text through a Reader, so its exact-text path is not taken): 12345678901234567890.12 would
# become "1.2345678901234567E19". Formats whose row images may hold decimals as JSON numbers (Maxwell,
# OGG, SharePlex) declare them as EXACT_IMAGE and render them with exact_image_text. The others keep
# the cheaper string path: Debezium's decimals are never JSON numbers past a double's digits, Qlik
# sends NUMERIC as a JSON string (its REAL4/REAL8 as numbers), Canal's values are text, DataWorks'
# are typed LONG (an integer keeps its digits) or DOUBLE.
EXACT_IMAGE = "map<string,variant>"


def exact_image_text(image: Column) -> Column:
    """A row image parsed as EXACT_IMAGE -> map<string,string> of canonical strings: a JSON string's
    text; a number by its exact value while it fits decimal(38), trailing zeros dropped (``1.50`` reads
    ``1.5``, ``1.0`` reads ``1``), as a double past 38 digits or with an exponent; an object's or
    array's JSON; null for null."""
    return F.transform_values(image, lambda _, v: v.cast("string"))


def parse_with_exact_images(raw: DataFrame, schema: str, images: dict[str, str]) -> DataFrame:
    """``raw`` with its value parsed into ``j`` (parse_value) and its row images as canonical strings:
    ``images`` maps a new column to the field of ``j`` (declared EXACT_IMAGE) it renders, in a step of
    its own, as the decoders read each image several times."""
    j = F.col("j")
    parsed = raw.select("*", parse_value(schema).alias("j"))
    return parsed.withColumns({name: exact_image_text(j[image]) for name, image in images.items()})


def is_truncate(sql: Column) -> Column:
    """Whether a DDL statement is a TRUNCATE; leading comments (/* hints */, -- lines) do not hide it."""
    stripped = F.regexp_replace(sql, r"^(\s|/\*.*?\*/|--[^\n]*\n|#[^\n]*\n)*", "")
    return F.upper(stripped).rlike(r"^TRUNCATE\b")
