"""The canonical change record: declared once, used by every decoder and by the fold.

Every decoder turns its format into rows of ``CHANGE_RECORD_SCHEMA``; nothing downstream of
decoding knows which format a record came from (``format`` is lineage only).
"""
from __future__ import annotations

import hashlib
import re

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# ---- op / phase vocabulary -------------------------------------------------------------------
SNAPSHOT = "SNAPSHOT"
INSERT = "INSERT"
UPDATE = "UPDATE"
DELETE = "DELETE"
TRUNCATE = "TRUNCATE"
DDL = "DDL"
HEARTBEAT = "HEARTBEAT"
TX_BEGIN = "TX_BEGIN"
TX_END = "TX_END"
MESSAGE = "MESSAGE"
# the end of a full load (Debezium snapshot=last): ``after['scope']`` says whose, 'table' or 'all' tables
LOAD_END = "LOAD_END"
OPS = (SNAPSHOT, INSERT, UPDATE, DELETE, TRUNCATE, DDL, HEARTBEAT, TX_BEGIN, TX_END, MESSAGE, LOAD_END)
# ops that change a table's rows; everything else is recorded but never folded into state
ROW_OPS = (SNAPSHOT, INSERT, UPDATE, DELETE, TRUNCATE)

FULL_LOAD = "FULL_LOAD"
CDC = "CDC"
PHASES = (FULL_LOAD, CDC)

_STR_MAP = MapType(StringType(), StringType())

CHANGE_RECORD_SCHEMA = StructType(
    [
        StructField("format", StringType()),
        StructField("table_id", StringType()),
        StructField("op", StringType()),
        StructField("phase", StringType()),
        StructField("key", _STR_MAP),
        StructField("before", _STR_MAP),
        StructField("after", _STR_MAP),
        StructField("present_columns", ArrayType(StringType())),
        StructField("position", StringType()),
        StructField("tx_id", StringType()),
        StructField("tx_seq", LongType()),
        StructField("tx_last", BooleanType()),
        StructField("event_time", TimestampType()),
        # column -> Spark SQL type name ("int", "decimal(10,2)", "timestamp", ...) where the format
        # declares types; null where it does not (columns then stay strings in state)
        StructField("column_types", _STR_MAP),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("kafka_ts", TimestampType()),
        StructField("event_id", StringType()),
    ]
)
CHANGE_RECORD_COLUMNS = tuple(f.name for f in CHANGE_RECORD_SCHEMA.fields)

# The quarantine keeps what could not be decoded, with the raw bytes, so nothing is lost.
QUARANTINE_SCHEMA = StructType(
    [
        StructField("format", StringType()),
        StructField("reason", StringType()),
        StructField("table_id", StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("kafka_ts", TimestampType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
    ]
)

# ---- table ids ---------------------------------------------------------------------------------
_UNSAFE = r"[^A-Za-z0-9_$-]"
MISSING_PART = "_"


def safe_part(part: str | None) -> str:
    """One part of a table id, made safe for a path and an identifier (Python twin of safe_part_col)."""
    if part is None or part == "":
        return MISSING_PART
    return re.sub(_UNSAFE, "_", part)


# a made-safe part carries this many hex digits of its name's SHA-256, so that names that differ only
# in what was replaced (販売.顧客 / 販売.注文, "Order Details" / Order_Details) stay different tables
NAME_HASH_DIGITS = 8
# A table id is one folder name of the change records (``table=<id>``) and, joined, of its Iceberg
# tables (``<name>__history`` and a hash), which file systems bound to 255 bytes: an id longer than
# MAX_ID_CHARS has each part longer than MAX_PART_CHARS cut to that many characters and a hash. Ids up
# to MAX_ID_CHARS keep the names they always had.
MAX_ID_CHARS = 234
MAX_PART_CHARS = 64


def _name_hash(part: str) -> str:
    return hashlib.sha256(part.encode("utf-8")).hexdigest()[:NAME_HASH_DIGITS]


def table_part(part: str | None) -> str:
    """One part of a table id: the name itself where it is safe, else its safe form and a short hash
    of the name (Python twin of table_part_col)."""
    safe = safe_part(part)
    if part is None or part == "" or safe == part:
        return safe
    return f"{safe}_{_name_hash(part)}"


def short_table_part(part: str | None) -> str:
    """A part of a table id too long for a folder name: table_part, cut to MAX_PART_CHARS and a hash
    where longer (Python twin of short_table_part_col)."""
    whole = table_part(part)
    if len(whole) <= MAX_PART_CHARS:
        return whole
    return f"{safe_part(part)[:MAX_PART_CHARS]}_{_name_hash(part)}"


def table_id_forms(parts: list[str | None]) -> tuple[str, ...]:
    """What some parts of a name (``table``, ``schema.table``, ...) may stand as in a table id: their
    table_part forms, and their cut forms when the id was too long."""
    return tuple(dict.fromkeys((".".join(table_part(p) for p in parts), ".".join(short_table_part(p) for p in parts))))


def make_table_id(database: str | None, schema: str | None, table: str | None) -> str:
    whole = ".".join(table_part(p) for p in (database, schema, table))
    if len(whole) <= MAX_ID_CHARS:
        return whole
    return ".".join(short_table_part(p) for p in (database, schema, table))


def safe_part_col(part: Column) -> Column:
    """Spark twin of safe_part: no separator, dot or control character survives."""
    cleaned = F.regexp_replace(part, _UNSAFE, "_")
    return F.when(part.isNull() | (part == ""), F.lit(MISSING_PART)).otherwise(cleaned)


def _name_hash_col(part: Column) -> Column:
    return F.substring(F.sha2(part, 256), 1, NAME_HASH_DIGITS)


def table_part_col(part: Column) -> Column:
    """Spark twin of table_part (the hash only for the names that needed replacing)."""
    safe = safe_part_col(part)
    return F.when(part.isNull() | (part == "") | (safe == part), safe).otherwise(
        F.concat(safe, F.lit("_"), _name_hash_col(part)))


def short_table_part_col(part: Column) -> Column:
    """Spark twin of short_table_part."""
    whole = table_part_col(part)
    return F.when(F.length(whole) <= MAX_PART_CHARS, whole).otherwise(
        F.concat(F.substring(safe_part_col(part), 1, MAX_PART_CHARS), F.lit("_"), _name_hash_col(part)))


def table_id_col(database: Column, schema: Column, table: Column) -> Column:
    """Spark twin of make_table_id."""
    whole = F.concat_ws(".", table_part_col(database), table_part_col(schema), table_part_col(table))
    return F.when(F.length(whole) <= MAX_ID_CHARS, whole).otherwise(F.concat_ws(
        ".", short_table_part_col(database), short_table_part_col(schema), short_table_part_col(table)))


# a table-id part that cannot be told from the ``__`` joining the parts of an Iceberg table name
_CLEAN_PART = re.compile(r"[A-Za-z0-9$-]+(_[A-Za-z0-9$-]+)*")


def joined_table_name(table_id: str) -> str:
    """The table id's parts joined by ``__`` (Iceberg table names may not hold dots: pyiceberg splits
    identifiers on them). Not one-to-one: ``a__b.c.d`` and ``a.b__c.d`` join alike."""
    return "__".join(safe_part(p) for p in table_id.split("."))


def iceberg_table_name(table_id: str) -> str:
    """The Iceberg table name of a table id: its parts joined by ``__`` where every part is clean (no
    ``__``, no leading or trailing ``_``; or the missing part ``_``), so that the join reads back one
    way only; else that join, ``__`` and a short hash of the id, so that ``a__b.c.d`` and ``a.b__c.d``,
    or a source table ``orders__history`` and the history table of ``orders``, stay apart."""
    parts = table_id.split(".")
    joined = joined_table_name(table_id)
    if all(p == MISSING_PART or _CLEAN_PART.fullmatch(p) for p in parts):
        return joined
    return hashed_table_name(table_id)


def hashed_table_name(table_id: str) -> str:
    """The joined name, ``__`` and a short hash of the id: one ``__`` part more than the id's joined
    name, ending in hex digits, so never the name of a clean id nor of a history table (``history``)."""
    return f"{joined_table_name(table_id)}__{_name_hash(table_id)}"
