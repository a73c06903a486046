"""Oracle GoldenGate (OGG for Big Data) JSON, operation model: one row per message.

``{table "SCHEMA.TABLE", op_type I/U/D/T, op_ts, current_ts, pos, primary_keys, tokens, before, after}``.
Decoded in Spark SQL: one ``from_json``, row images read as variants so that a NUMBER, which the
formatter sends as a JSON number, keeps its digits (common.exact_image_text); no UDF, nothing
collected. The JSON formatter declares no column types: ``column_types`` is null (columns stay
strings in state); a number reads as its exact value (``3.140000104904175``, ``1``,
``12345678901234567890.12``; ``1.50`` reads ``1.5``).

- op_type I -> INSERT (``after``), U -> UPDATE, D -> DELETE (``before``; ``after`` where a producer
  puts the row there), T -> TRUNCATE. The long names (INSERT, UPDATE, DELETE, TRUNCATE), which the
  formatter's op keys may be set to, are read too.
- Updates: ``before`` may be partial or absent, and a compressed update's ``after`` holds only the
  changed columns (plus the key): ``present_columns`` = the columns of ``after`` (with the key), so
  the fold merges it over the prior row -- for a complete ``after`` that is the same as replacing it.
- A primary-key change (``before``'s key != ``after``'s key) is DELETE(old key) + INSERT(new key) of
  ``before`` overlaid with ``after`` (the most complete image the message has), partial, with
  ``before``: the fold starts the new key from the old key's row, so the columns a compressed
  message lacks move too.
- Key rule: ``--primary-keys`` for the table, else ``primary_keys`` of the message, else the whole row
  (a keyless table: an update with a ``before`` image is DELETE(before) + INSERT(after)).
- table_id: ``SCHEMA.TABLE`` -> ``_.<SCHEMA>.<TABLE>``; ``CATALOG.SCHEMA.TABLE`` -> all three parts.
- Position: ``pos`` (trail sequence number + RBA, a string of digits) zero-padded to 38 digits, so
  that string order is numeric order whatever width a producer writes. event_time = ``op_ts`` (UTC).
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
    has_configured_key,
    is_tombstone,
    key_of,
    keys_differ,
    literal_map,
    pad_unsigned,
    parse_with_exact_images,
)
from jobs.formats.ogg import ENTRY, POSITION_DIGITS
from jobs.model import record as C

_MAP = "map<string,string>"
_VALUE_SCHEMA = (
    "struct<table:string, op_type:string, op_ts:string, current_ts:string, pos:string, "
    f"primary_keys:array<string>, tokens:{_MAP}, before:{EXACT_IMAGE}, after:{EXACT_IMAGE}, _corrupt:string>"
)
_OPS = {
    "I": C.INSERT, "INSERT": C.INSERT,
    "U": C.UPDATE, "UPDATE": C.UPDATE,
    "D": C.DELETE, "DELETE": C.DELETE,
    "T": C.TRUNCATE, "TRUNCATE": C.TRUNCATE,
}


def _empty_map() -> Column:
    # a function, not a module constant: a Column needs an active SparkSession
    return F.create_map().cast(_MAP)


def _overlay(base: Column, top: Column) -> Column:
    """``base`` with ``top``'s values winning (explicitly, whatever the map-key dedup policy)."""
    return F.map_concat(F.map_filter(base, lambda k, v: ~F.map_contains_key(top, k)), top)


def _table_id(table: Column) -> Column:
    """``SCHEMA.TABLE`` -> ``_.<SCHEMA>.<TABLE>``; ``CATALOG.SCHEMA.TABLE`` -> all three parts."""
    parts = F.split(table, r"\.")
    n_parts = F.size(parts)
    return F.when(
        F.coalesce(table, F.lit("")) != "",
        C.table_id_col(
            F.when(n_parts >= 3, parts[0]),
            F.when(n_parts == 2, parts[0]).when(n_parts >= 3, parts[1]),
            # a table name may hold further dots only in the three-part form's last part
            F.when(n_parts <= 2, F.element_at(parts, -1)).otherwise(F.array_join(F.slice(parts, 3, 1 << 20), ".")),
        ),
    )


def _with_images_and_keys(df: DataFrame, options: DecodeOptions) -> DataFrame:
    """The message's op, table, position and images, then its keys, as named columns (each non-trivial
    expression evaluated once)."""
    j = F.col("j")
    before, after = F.col("_before"), F.col("_after")
    df = df.withColumns({
        "_op": F.element_at(literal_map(_OPS), F.upper(F.trim(j["op_type"]))),
        "table_id": _table_id(j["table"]),
        "_position": F.when(j["pos"].rlike(r"^\s*[0-9]{1,38}\s*$"), pad_unsigned(F.trim(j["pos"]), POSITION_DIGITS)),
        "_pk_cols": F.when(F.size(j["primary_keys"]) > 0, j["primary_keys"]),
        # an update's most complete images: the old row as far as known, the new row as far as known
        "_old_image": F.when(before.isNotNull(), _overlay(F.coalesce(after, _empty_map()), before)),
        "_new_image": F.when(after.isNotNull(), _overlay(F.coalesce(before, _empty_map()), after)),
        "_del_image": F.coalesce(before, after),
    })
    table_id, pk_cols = F.col("table_id"), F.col("_pk_cols")
    old_image, new_image, del_image = F.col("_old_image"), F.col("_new_image"), F.col("_del_image")
    return df.withColumns({
        # key rule: --primary-keys, else the message's primary_keys, else (keyless) the whole row
        "_new_key": F.coalesce(configured_key(table_id, new_image, options), key_of(new_image, pk_cols)),
        "_old_key": F.coalesce(configured_key(table_id, old_image, options), key_of(old_image, pk_cols)),
        "_del_key": F.coalesce(configured_key(table_id, del_image, options), key_of(del_image, pk_cols), del_image),
    })


def _reason(keyless: Column) -> Column:
    """Why a message is not decoded (null: it is)."""
    j, op = F.col("j"), F.col("_op")
    return (
        F.when(is_tombstone(), F.lit(TOMBSTONE))
        .when(j["_corrupt"].isNotNull() | j.isNull(),
              F.lit("malformed JSON, not a JSON object, or a field of the wrong JSON type"))
        .when(j["op_type"].isNull(), F.lit("not an OGG message: no 'op_type'"))
        .when(op.isNull(), F.concat(F.lit("unknown operation type '"), j["op_type"], F.lit("'")))
        .when(F.col("table_id").isNull(), F.lit("no source table ('table')"))
        .when(op.isin(C.INSERT, C.UPDATE) & F.col("_after").isNull(),
              F.concat(F.lit("'after' is null for op_type '"), j["op_type"], F.lit("'")))
        .when((op == C.DELETE) & F.col("_del_image").isNull(),
              F.lit("delete has neither a 'before' nor an 'after' image"))
        .when((op == C.UPDATE) & keyless & F.col("_before").isNull(),
              F.lit(f"update of a table without a known key has no 'before' image: give {KEY_SETTING}"))
    )


def _records(rec, keyless: Column) -> Column:
    """The change records of a message, made by ``rec`` (RecordBuilder.record)."""
    op, cdc = F.col("_op"), C.CDC
    before, after, new_image = F.col("_before"), F.col("_after"), F.col("_new_image")
    new_key, old_key = F.col("_new_key"), F.col("_old_key")
    # the update's image: `after` with the key columns it may lack (compressed updates), partial
    upd_after = _overlay(F.coalesce(new_key, _empty_map()), after)
    key_changed = old_key.isNotNull() & keys_differ(old_key, new_key)
    return (
        F.when(op == C.TRUNCATE, F.array(rec(op, cdc, None, None, None)))
        .when(op == C.DELETE, F.array(rec(op, cdc, F.col("_del_key"), F.col("_del_image"), None)))
        .when(op == C.INSERT, F.array(rec(op, cdc, F.coalesce(new_key, after), None, after)))
        # no key anywhere: the whole row is its identity, so an update replaces one row by another
        .when(keyless, F.array(rec(C.DELETE, cdc, before, before, None), rec(C.INSERT, cdc, after, None, after)))
        .when(key_changed, F.array(rec(C.DELETE, cdc, old_key, before, None),
                                   rec(C.INSERT, cdc, new_key, before, new_image, F.map_keys(new_image))))
        .otherwise(F.array(rec(op, cdc, new_key, before, upd_after, F.map_keys(upd_after))))
    )


class OggDecoder(BaseDecoder):
    entry = ENTRY

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        images = {"_before": "before", "_after": "after"}  # new column: field of the value
        df = _with_images_and_keys(parse_with_exact_images(raw, _VALUE_SCHEMA, images), options)
        table_id, j, position = F.col("table_id"), F.col("j"), F.col("_position")
        keyless = F.col("_pk_cols").isNull() & ~has_configured_key(table_id, options)
        df = df.withColumn("reason", _reason(keyless))
        rec = RecordBuilder(
            self.name, table_id, position,
            event_time=F.coalesce(j["op_ts"].try_cast("timestamp"), j["current_ts"].try_cast("timestamp")),
            # what tells events apart when there is no position (never used for ordering)
            identity=F.coalesce(position, F.concat_ws("|", F.lit("ts"), j["op_ts"], j["current_ts"])),
        ).record
        return df.select(*decided_outcome(F.col("reason"), (), table_id, _records(rec, keyless)))
