"""What the decoders share: their base class and the column expressions of positions, keys, ids, change
records and outcome rows."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType

from jobs.formats import DECODED, IGNORED, QUARANTINED, DecodeOptions
from jobs.formats.entry import FormatEntry
from jobs.model import record as C
from jobs.model.keys import KEY_SETTING
from jobs.model.record import CHANGE_RECORD_COLUMNS, CHANGE_RECORD_SCHEMA
from jobs.model.table_rules import glob_regex, is_glob
from jobs.spark import jvm

RECORDS_TYPE = ArrayType(CHANGE_RECORD_SCHEMA)
LINEAGE = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")
_STRING_MAP = "map<string,string>"
_STRING_ARRAY = "array<string>"


class BaseDecoder:
    """A format's decoder: ``decode``, and the hooks a format overrides where it needs them."""

    entry: FormatEntry  # the format's registry entry (jobs/formats/<format>/__init__.py)

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def shaped(self) -> bool:
        """Whether one topic carries one of several shapes (FormatEntry.shaped; jobs.decode.stage)."""
        return self.entry.shaped

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """Raw Kafka-schema rows -> outcomes (see jobs/formats/__init__.py)."""
        raise NotImplementedError

    def remember(self, raw: DataFrame) -> list[str]:
        """Documents of this snapshot that later messages may need (kept by the decode stage, given
        back in DecodeOptions.memory); most formats need none."""
        return []


def pad_unsigned(col: Column, width: int = 20) -> Column:
    """A non-negative integer as fixed-width digits, so that string order is numeric order.

    64-bit log positions arrive as Java longs: a negative one is an unsigned value past 2^63.
    """
    number = col.try_cast("decimal(38,0)")
    unsigned = F.when(number < 0, number + F.lit("18446744073709551616").cast("decimal(38,0)")).otherwise(number)
    return F.lpad(unsigned.cast("string"), width, "0")


# what a timestamp holds: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z. A time past it is no time, and
# timestamp_seconds / timestamp_millis overflow on one far past it (long overflow fails the whole decode)
FIRST_SECOND, LAST_SECOND = -62135596800, 253402300799


def epoch_number(value: Column, per_second: int = 1, first_second: int = 0) -> Column:
    """A whole number of seconds since 1970 (``per_second`` 1000: of milliseconds) from ``first_second`` (the
    epoch, or FIRST_SECOND where a time may precede it) to LAST_SECOND -- a JSON number, or a string of
    one -- else null."""
    number = value.try_cast("bigint")
    return F.when(number.between(first_second * per_second, (LAST_SECOND + 1) * per_second - 1), number)


def literal_map(entries: dict[str, str]) -> Column:
    """A map literal of ``entries`` (a format's op names, type names, ignored reasons ...)."""
    return F.create_map(*[x for k, v in entries.items() for x in (F.lit(k), F.lit(v))])


def configured_key(table_id: Column, image: Column, options: DecodeOptions) -> Column:
    """The key map built from --primary-keys for this table (jobs.model.table_rules: by full id, last part, then
    globs in their order), else null."""
    if not options.primary_keys:
        return F.lit(None).cast(_STRING_MAP)
    exact = {name: cols for name, cols in options.primary_keys.items() if not is_glob(name)}
    cols = F.lit(None).cast("array<string>")
    if exact:
        pk_map = F.create_map(*[x for name, cols in sorted(exact.items()) for x in (F.lit(name), _names(cols))])
        last = F.element_at(F.split(table_id, r"\."), -1)
        cols = F.coalesce(F.element_at(pk_map, table_id), F.element_at(pk_map, last))
    for regex, glob_cols in key_globs(options):  # in their order: the first glob naming the table wins
        cols = F.when(cols.isNull() & table_id.rlike(regex), _names(glob_cols)).otherwise(cols)
    return F.when(
        cols.isNotNull() & image.isNotNull(),
        F.map_from_arrays(cols, F.transform(cols, lambda c: F.element_at(image, c))),
    )


def _names(cols: tuple[str, ...] | list[str]) -> Column:
    return F.array(*map(F.lit, cols)).cast("array<string>")


def key_globs(options: DecodeOptions) -> list[tuple[str, list[str]]]:
    """--primary-keys given as globs, in their order: (anchored regex, columns)."""
    return [(glob_regex(name), list(cols)) for name, cols in options.primary_keys.items() if is_glob(name)]


def has_configured_key(table_id: Column, options: DecodeOptions) -> Column:
    """Whether --primary-keys names this table's key columns."""
    return configured_key(table_id, F.create_map().cast(_STRING_MAP), options).isNotNull()


def keys_differ(old_key: Column, new_key: Column) -> Column:
    """Whether two keys differ (true where either is null: the caller says where a key must be)."""
    # maps do not compare in Spark SQL: their JSON text does (same key columns, same order)
    return ~F.coalesce(F.to_json(old_key) == F.to_json(new_key), F.lit(False))


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
    # Maps are hashed as they are (spark.sql.legacy.allowHashOnMapType, jobs/spark/session.py): entry by entry
    # in their order, the same value as hashing their map_entries, without copying them to arrays first
    parts = [table_id, op, F.coalesce(position, F.lit("")), key, before, after,
             *[m.isNull() for m in (key, before, after)]]
    return F.concat(F.lpad(F.hex(F.xxhash64(*parts)), 16, "0"), F.lpad(F.hex(F.hash(*parts)), 8, "0"))


# the table id of records that belong to no table (transaction markers without one)
NO_TABLE = C.make_table_id(None, None, None)


def _typed(value: Column | str | None, null_type: str) -> Column:
    """A record field as given: a string is a literal, None the typed null of a field left empty."""
    if value is None:
        return F.lit(None).cast(null_type)
    return F.lit(value) if isinstance(value, str) else value


@dataclass(frozen=True, eq=False)  # eq=False: Columns compare into Columns, not booleans
class RecordBuilder:
    """The change records of one message, in the canonical shape: the fields a format fixes once per
    message are held here, the ones that vary from record to record are given to ``record``. An
    optional field left None is the typed null of a format that does not carry it."""

    fmt: str
    table_id: Column
    position: Column
    event_time: Column
    tx_id: Column | None = None
    tx_seq: Column | None = None
    tx_last: Column | None = None
    column_types: Column | None = None  # None: the format declares no types
    # what the event id takes in place of the position (a format's stand-in where it has none)
    identity: Column | None = None

    def record(self, op: Column | str, phase: Column | str, key: Column | None, before: Column | None,
               after: Column | None, present_columns: Column | None = None) -> Column:
        """One CHANGE_RECORD_SCHEMA struct, with the message's lineage and the record's event id."""
        op, phase = _typed(op, "string"), _typed(phase, "string")
        key, before, after = (_typed(m, _STRING_MAP) for m in (key, before, after))
        identity = self.position if self.identity is None else self.identity
        fields = {
            "format": F.lit(self.fmt), "table_id": self.table_id, "op": op, "phase": phase,
            "key": key, "before": before, "after": after,
            "present_columns": _typed(present_columns, _STRING_ARRAY), "position": self.position,
            "tx_id": _typed(self.tx_id, "string"), "tx_seq": _typed(self.tx_seq, "bigint"),
            "tx_last": _typed(self.tx_last, "boolean"), "event_time": self.event_time,
            "column_types": _typed(self.column_types, _STRING_MAP),
            "topic": F.col("topic"), "partition": F.col("partition"), "offset": F.col("offset"),
            "kafka_ts": F.col("timestamp"),
            "event_id": event_id(self.table_id, op, identity, key, before, after),
        }
        return F.struct(*[fields[name].alias(name) for name in CHANGE_RECORD_COLUMNS])


def marker_record(fmt: str, table_id: Column, op: str, phase: str, position: Column, tx_id: Column,
                  tx_seq: Column, tx_last: Column, event_time: Column, detail: Column) -> Column:
    """A record that changes no row -- a transaction's begin / end, a full load's end -- in the
    canonical shape; ``detail`` (a string map) is kept as its ``after`` and makes its event id."""
    markers = RecordBuilder(fmt, F.coalesce(table_id, F.lit(NO_TABLE)), position, event_time,
                            tx_id=tx_id.cast("string"), tx_seq=tx_seq.cast("bigint"),
                            tx_last=tx_last.cast("boolean"))
    return markers.record(op, phase, None, None, detail)


def row_change_records(rec, before: Column, after: Column, new_key: Column, old_key: Column) -> dict[str, Column]:
    """The records of a row change whose images are whole rows, by kind (``load``, ``insert``, ``update``,
    ``delete``), made by ``rec`` (RecordBuilder.record): without any key the whole row is its identity, and
    an update that changes the key is a DELETE of the old key and an INSERT of the new row."""
    k_new, k_old = F.coalesce(new_key, after), F.coalesce(old_key, before)
    key_changed = before.isNotNull() & keys_differ(k_old, k_new)
    return {
        "load": F.array(rec(C.SNAPSHOT, C.FULL_LOAD, k_new, None, after)),
        "insert": F.array(rec(C.INSERT, C.CDC, k_new, None, after)),
        "update": F.when(key_changed, F.array(rec(C.DELETE, C.CDC, k_old, before, None),
                                              rec(C.INSERT, C.CDC, k_new, None, after)))
                   .otherwise(F.array(rec(C.UPDATE, C.CDC, k_new, before, after))),
        "delete": F.array(rec(C.DELETE, C.CDC, k_old, before, None)),
    }


TOMBSTONE = "tombstone"


def is_tombstone() -> Column:
    """Whether the message has no value (Kafka's tombstone): ignored, and counted, by every format."""
    return F.col("value").isNull() | (F.length("value") == 0)


def status_of(reason: Column, ignored: Iterable[str] = ()) -> Column:
    """A message's status from the reason it was not decoded (null: decoded): ignored for a tombstone
    or one of the format's ``ignored`` reasons, else quarantined."""
    return (
        F.when(reason.isNull(), F.lit(DECODED))
        .when(reason.isin(*dict.fromkeys((TOMBSTONE, *ignored))), F.lit(IGNORED))
        .otherwise(F.lit(QUARANTINED))
    )


def decided_outcome(reason: Column, ignored: Iterable[str], table_id: Column, records: Column,
                    shape: Column | None = None) -> list[Column]:
    """The outcome columns of a message that ``reason`` decides (status_of): its records where it has none."""
    return outcome(status_of(reason, ignored), reason, table_id, F.when(reason.isNull(), records), shape)


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


def decoded_on_jvm(raw: DataFrame, entry: FormatEntry, options: DecodeOptions, arguments: list[Column],
                   **settings: object) -> DataFrame:
    """The outcomes of the format's JVM-side decoder (``entry.jvm_decoder``, jobs.spark.jvm) called on
    ``arguments`` of each raw message, made with the format's ``settings`` and the rules every decoder
    shares (--primary-keys, the table-id limits of jobs.model.record); records leave with event_id null,
    for the decode stage."""
    config = {
        "format": entry.name,
        "primary_keys": {table: list(cols) for table, cols in options.primary_keys.items() if not is_glob(table)},
        "primary_key_globs": key_globs(options),
        "key_setting": KEY_SETTING,
        "no_table": NO_TABLE,
        "missing_part": C.MISSING_PART,
        "name_hash_digits": C.NAME_HASH_DIGITS,
        "max_id_chars": C.MAX_ID_CHARS,
        "max_part_chars": C.MAX_PART_CHARS,
        **settings,
    }
    udf = jvm.register_udf(raw.sparkSession, entry.jvm_decoder, config, outcome_type())
    # one column first: the projection below reads it four times, the UDF runs once
    decoded = raw.withColumn("_outcome", F.call_function(udf, *arguments))
    o = F.col("_outcome")
    return decoded.select(*outcome(o["status"], o["reason"], o["table_id"], o["records"], o["shape"]))


# from_json's bounds: the longest string a message may hold (Jackson's own 20M characters would
# quarantine the value of a large TEXT or JSON column as malformed JSON; memory is the real bound), as
# the JVM-side decoders read (jvm/src/cdc/Json.java MAX_STRING_CHARS)
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
# the cheaper string path (Debezium and DTS Avro are read on the JVM side, jobs.spark.jvm): Qlik
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


def outcome_type():
    """The outcome struct a JVM-side decoder returns: status, reason, table_id, its change records and
    the message's shape (jobs.formats)."""
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([StructField("status", StringType()), StructField("reason", StringType()),
                       StructField("table_id", StringType()), StructField("records", RECORDS_TYPE),
                       StructField("shape", StringType())])
