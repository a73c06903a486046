"""SharePlex JSON, as Alibaba DTS writes it to Kafka: ``{meta, data, key}``, one row per message.

``meta`` = {time, userid, op, scn, rowid, trans, seq, size, table "OWNER.TABLE", idx "n/size",
posttime}. Decoded in Spark SQL: one ``from_json``, row images read as variants so that a number
keeps its digits (common.exact_image_text); no UDF, nothing collected. SharePlex declares no column
types: ``column_types`` is null (columns stay strings in state); values keep their text, a number its
exact value (``12345678901234567890.12``; ``1.50`` reads ``1.5``).

- op ``ins``/``INSERT``: ``data`` is the new row.
- op ``upd``/``UPDATE`` (and DTS's ``UPDATE AFTER``): ``data`` holds only the changed columns' new
  values and ``key`` the before image of the columns SharePlex uses to find the row (their old
  values). The new image is ``key`` overlaid with ``data`` -- a column of ``key`` absent from ``data``
  did not change, so its old value is its current one -- and it is a *partial* image:
  ``present_columns`` names its columns and the fold merges it over the prior row.
  A key column whose value changes (old key != new key) is emitted as DELETE(old key) + UPDATE(new
  key, same partial image, ``before`` = the old key). The fold sees a move in that update (its
  ``before`` holds other key values than its ``key``): the new key starts from the old key's row as
  it was just before the move, and the partial image merges over it.
- op ``del``/``DELETE``: ``data`` is the old row (``key`` where sent overlays it).
- op ``truncate``/``TRUNCATE``: TRUNCATE of the table; ``DROP COLUMN``: recorded as DDL.
- ``UPDATE BEFORE`` + ``UPDATE AFTER``: an update sent as its two images, the BEFORE at ``seq`` n and
  the AFTER at n + 1 of the same transaction. The BEFORE is ignored (counted), and its ``data`` is the
  AFTER's ``key`` where the AFTER has none: the AFTER is then an update of the row the BEFORE names,
  a key change included. A run looks for such pairs only when a message says ``UPDATE BEFORE``, and
  within its own snapshot: a pair cut by the end of a run is not joined (its AFTER is then an update
  of its own key, or quarantined without --primary-keys).
- Key rule (the messages never name the primary key), in this order:
  1. ``--primary-keys`` for the table (``configured_key``);
  2. updates and deletes: the columns of ``key``;
  3. otherwise (inserts, deletes without ``key``): the whole row.
  The fold keeps the columns every record's key names, so inserts keyed by their whole row and
  updates keyed by ``key`` meet on the ``key`` columns.
- table_id: ``_.<OWNER>.<TABLE>`` (no database part). tx_id = trans, tx_seq = seq, tx_last = (idx n ==
  size). Position: scn (20 digits), then seq (10 digits), so that string order is source order.
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
    is_tombstone,
    keys_differ,
    literal_map,
    pad_unsigned,
    parse_with_exact_images,
)
from jobs.formats.shareplex import ENTRY
from jobs.model import record as C

_MAP = "map<string,string>"
_META = (
    "struct<time:string, userid:string, op:string, scn:string, rowid:string, trans:string, seq:string, "
    "size:string, table:string, idx:string, posttime:string>"
)
_VALUE_SCHEMA = f"struct<meta:{_META}, data:{EXACT_IMAGE}, key:{EXACT_IMAGE}, _corrupt:string>"
# SharePlex's short op names and the long names DTS documents
_OPS = {
    "ins": C.INSERT, "insert": C.INSERT,
    "upd": C.UPDATE, "update": C.UPDATE, "update after": C.UPDATE,
    "del": C.DELETE, "delete": C.DELETE,
    "truncate": C.TRUNCATE, "trunc": C.TRUNCATE,
    "drop column": C.DDL,
}
_IGNORED_OPS = {"update before": "update before image (its UPDATE AFTER carries the change)"}


def _empty_map() -> Column:
    # a function, not a module constant: a Column needs an active SparkSession
    return F.create_map().cast(_MAP)


def _without(image: Column, other: Column) -> Column:
    """The entries of ``image`` whose column ``other`` does not carry."""
    return F.map_filter(image, lambda k, v: ~F.map_contains_key(other, k))


def _overlay(base: Column, top: Column) -> Column:
    """``base`` with ``top``'s values winning (explicitly, whatever the map-key dedup policy)."""
    return F.map_concat(_without(base, top), top)


def _op_name(meta: Column) -> Column:
    return F.lower(F.trim(meta["op"]))


def _idx_part(meta: Column, group: int) -> Column:
    """A number of ``idx`` "n/size": group 1 the operation's, 2 the transaction's size; '' if none."""
    return F.regexp_extract(meta["idx"], r"^\s*(\d+)\s*/\s*(\d+)\s*$", group)


def _sequence(meta: Column) -> Column:
    """The operation's number in its transaction: ``seq``, else the n of ``idx`` "n/size"."""
    idx = _idx_part(meta, 1)
    return F.coalesce(meta["seq"].try_cast("bigint"), F.nullif(idx, F.lit("")).try_cast("bigint"))


def _with_paired_before_images(parsed: DataFrame) -> DataFrame:
    """``parsed`` with ``_paired_before``: on an UPDATE AFTER, the ``data`` of the UPDATE BEFORE just
    before it in its transaction (same table and ``trans``, ``seq`` one less); else null. Redelivered
    BEFOREs count once."""
    meta = F.col("j")["meta"]
    befores = (
        parsed.where(_op_name(meta) == "update before")
        .select(meta["table"].alias("_b_table"), meta["trans"].alias("_b_trans"),
                (_sequence(meta) + 1).alias("_b_seq"), F.col("_data_image").alias("_paired_before"))
        .where(F.col("_b_trans").isNotNull() & F.col("_b_seq").isNotNull())
        .dropDuplicates(["_b_table", "_b_trans", "_b_seq"])
    )
    is_after = _op_name(meta) == "update after"
    return parsed.join(
        befores,
        is_after & (meta["table"] == F.col("_b_table")) & (meta["trans"] == F.col("_b_trans"))
        & (_sequence(meta) == F.col("_b_seq")),
        "left",
    ).drop("_b_table", "_b_trans", "_b_seq")


def _key_image() -> Column:
    """The before image of the row's key columns: ``key``; on an UPDATE AFTER without one, its UPDATE
    BEFORE's image, which names the row."""
    return F.coalesce(F.col("_key_image"), F.col("_paired_before"))


def _with_images(df: DataFrame) -> DataFrame:
    """The message's op, table, position, transaction and images as named columns (each non-trivial
    expression evaluated once)."""
    data_image, key_image = F.col("_data_image"), _key_image()
    meta = F.col("j")["meta"]
    owner_table = F.split(meta["table"], r"\.", 2)
    has_owner = F.size(owner_table) == 2
    idx, idx_size = _idx_part(meta, 1), _idx_part(meta, 2)
    seq = _sequence(meta)
    size = F.coalesce(meta["size"].try_cast("bigint"), F.nullif(idx_size, F.lit("")).try_cast("bigint"))
    scn = pad_unsigned(meta["scn"])
    data, key = F.coalesce(data_image, _empty_map()), F.coalesce(key_image, _empty_map())
    return df.withColumns({
        "_op_name": _op_name(meta),
        "_op": F.element_at(literal_map(_OPS), _op_name(meta)),
        "table_id": F.when(
            F.coalesce(meta["table"], F.lit("")) != "",
            C.table_id_col(F.lit(None), F.when(has_owner, owner_table[0]),
                           F.when(has_owner, owner_table[1]).otherwise(meta["table"])),
        ),
        "_seq": seq,
        "_position": F.when(scn.isNotNull(), F.concat_ws(".", scn, pad_unsigned(F.coalesce(seq, F.lit(0)), 10))),
        "_tx_last": F.when(idx != "", idx.cast("bigint") == idx_size.cast("bigint"))
                     .when(seq.isNotNull() & size.isNotNull(), seq == size),
        # update: the new (partial) image; delete: the old row
        "_upd_after": _overlay(key, data),
        "_del_before": F.when(data_image.isNotNull() | key_image.isNotNull(), _overlay(data, key)),
    })


def _with_keys(df: DataFrame, options: DecodeOptions) -> DataFrame:
    """Key rule 1: --primary-keys; 2: the columns of ``key``; 3: the whole row (see the module doc). The old
    values of the key columns come from ``key``; a configured key column absent from ``key`` is taken from
    ``data`` (it is then assumed unchanged)."""
    data_image, key_image = F.col("_data_image"), _key_image()
    table_id, upd_after, del_before = F.col("table_id"), F.col("_upd_after"), F.col("_del_before")
    key_cols = F.map_keys(key_image)
    has_key = F.size(key_cols) > 0  # null key -> size -1
    upd_before_for_key = _overlay(F.coalesce(data_image, _empty_map()), F.coalesce(key_image, _empty_map()))
    return df.withColumns({
        "_ins_key": F.coalesce(configured_key(table_id, data_image, options), data_image),
        "_old_key": F.coalesce(configured_key(table_id, upd_before_for_key, options), F.when(has_key, key_image)),
        "_new_key": F.coalesce(configured_key(table_id, upd_after, options),
                               F.when(has_key, F.map_from_arrays(
                                   key_cols, F.transform(key_cols, lambda c: F.element_at(upd_after, c))))),
        "_del_key": F.coalesce(configured_key(table_id, del_before, options), F.when(has_key, key_image), del_before),
    })


def _reason() -> Column:
    """Why a message is not decoded (null: it is)."""
    j, op, op_name, data_image = F.col("j"), F.col("_op"), F.col("_op_name"), F.col("_data_image")
    meta = j["meta"]
    ignored = literal_map(_IGNORED_OPS)
    return (
        F.when(is_tombstone(), F.lit(TOMBSTONE))
        .when(j["_corrupt"].isNotNull() | j.isNull(),
              F.lit("malformed JSON, not a JSON object, or a field of the wrong JSON type"))
        .when(meta.isNull(), F.lit("not a SharePlex message: no 'meta'"))
        .when(op_name.isNull(), F.lit("missing 'meta.op'"))
        .when(F.element_at(ignored, op_name).isNotNull(), F.element_at(ignored, op_name))
        .when(op.isNull(), F.concat(F.lit("unknown operation type '"), meta["op"], F.lit("'")))
        .when(F.col("table_id").isNull(), F.lit("no source table ('meta.table')"))
        .when((op == C.INSERT) & data_image.isNull(), F.lit("'data' is null for an insert"))
        .when((op == C.UPDATE) & data_image.isNull(), F.lit("'data' is null for an update"))
        .when((op == C.UPDATE) & (F.col("_old_key").isNull() | F.col("_new_key").isNull()),
              F.lit(f"update has no 'key' (the before image's key columns): give {KEY_SETTING}"))
        .when((op == C.DELETE) & F.col("_del_before").isNull(), F.lit("delete has neither 'data' nor 'key'"))
    )


def _records(rec) -> Column:
    """The change records of a message, made by ``rec`` (RecordBuilder.record)."""
    op, cdc, key_image, upd_after = F.col("_op"), C.CDC, _key_image(), F.col("_upd_after")
    old_key, new_key = F.col("_old_key"), F.col("_new_key")
    key_changed = keys_differ(old_key, new_key)
    upd_present = F.map_keys(upd_after)
    return (
        F.when(op == C.INSERT, F.array(rec(op, cdc, F.col("_ins_key"), None, F.col("_data_image"))))
        .when((op == C.UPDATE) & key_changed,
              F.array(rec(C.DELETE, cdc, old_key, key_image, None),
                      rec(op, cdc, new_key, key_image, upd_after, upd_present)))
        .when(op == C.UPDATE, F.array(rec(op, cdc, new_key, key_image, upd_after, upd_present)))
        .when(op == C.DELETE, F.array(rec(op, cdc, F.col("_del_key"), F.col("_del_before"), None)))
        .when(op == C.TRUNCATE, F.array(rec(op, cdc, None, None, None)))
        .otherwise(F.array(rec(op, cdc, None, None, F.create_map(
            F.lit("ddl"), F.col("j")["meta"]["op"], F.lit("columns"), F.to_json(F.col("_data_image"))))))
    )


class SharePlexDecoder(BaseDecoder):
    entry = ENTRY

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        images = {"_data_image": "data", "_key_image": "key"}  # new column: field of the value
        parsed = parse_with_exact_images(raw, _VALUE_SCHEMA, images)
        text = F.col("value").cast("string")
        # the op is read in any case (and trimmed), so is the look for it
        if raw.where(text.rlike(r"(?i)update\s+before")).limit(1).count():
            parsed = _with_paired_before_images(parsed)
        else:
            parsed = parsed.withColumn("_paired_before", F.lit(None).cast(_MAP))
        df = _with_keys(_with_images(parsed), options).withColumn("reason", _reason())
        meta, position, table_id = F.col("j")["meta"], F.col("_position"), F.col("table_id")
        rec = RecordBuilder(
            self.name, table_id, position, event_time=meta["time"].try_cast("timestamp"),
            tx_id=meta["trans"], tx_seq=F.col("_seq"), tx_last=F.col("_tx_last"),
            # what tells events apart when there is no SCN (never used for ordering)
            identity=F.coalesce(position, F.concat_ws("|", F.lit("t"), meta["time"], meta["trans"],
                                                      F.col("_seq").cast("string"), meta["rowid"])),
        ).record
        return df.select(*decided_outcome(F.col("reason"), _IGNORED_OPS.values(), table_id, _records(rec)))
