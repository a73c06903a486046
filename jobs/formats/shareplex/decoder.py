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

from jobs.formats import BaseDecoder, DecodeOptions, register
from jobs.formats.base import (
    EXACT_IMAGE,
    TOMBSTONE,
    RecordBuilder,
    configured_key,
    decided_outcome,
    is_tombstone,
    keys_differ,
    literal_map,
    pad_unsigned,
    parse_with_exact_images,
)
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


class SharePlexDecoder(BaseDecoder):
    name = "shareplex"

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        images = {"_data_image": "data", "_key_image": "key"}  # new column: field of the value
        parsed = parse_with_exact_images(raw, _VALUE_SCHEMA, images)
        text = F.col("value").cast("string")
        # the op is read in any case (and trimmed), so is the look for it
        if raw.where(text.rlike(r"(?i)update\s+before")).limit(1).count():
            parsed = _with_paired_before_images(parsed)
        else:
            parsed = parsed.withColumn("_paired_before", F.lit(None).cast(_MAP))
        return self._outcomes(parsed, options)

    def _outcomes(self, df: DataFrame, options: DecodeOptions) -> DataFrame:
        # Built in steps of named columns so that each non-trivial expression is evaluated once.
        j, data_image = F.col("j"), F.col("_data_image")
        # an UPDATE AFTER without ``key``: its UPDATE BEFORE's image names the row
        key_image = F.coalesce(F.col("_key_image"), F.col("_paired_before"))
        meta = j["meta"]
        op_name = _op_name(meta)
        owner_table = F.split(meta["table"], r"\.", 2)
        has_owner = F.size(owner_table) == 2
        idx, idx_size = _idx_part(meta, 1), _idx_part(meta, 2)
        seq = _sequence(meta)
        size = F.coalesce(meta["size"].try_cast("bigint"), F.nullif(idx_size, F.lit("")).try_cast("bigint"))
        scn = pad_unsigned(meta["scn"])
        data, key = F.coalesce(data_image, _empty_map()), F.coalesce(key_image, _empty_map())
        op_map = literal_map(_OPS)

        # 1. message-level facts
        df = df.withColumns({
            "_op_name": op_name,
            "_op": F.element_at(op_map, op_name),
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
        op, table_id = F.col("_op"), F.col("table_id")
        upd_after, del_before = F.col("_upd_after"), F.col("_del_before")
        key_cols = F.map_keys(key_image)
        has_key = F.size(key_cols) > 0  # null key -> size -1
        # old values of the key columns: from ``key``; a configured key column absent from ``key`` is
        # taken from ``data`` (it is then assumed unchanged)
        upd_before_for_key = _overlay(data, key)
        df = df.withColumns({
            # key rule 1: --primary-keys; 2: the columns of ``key``; 3: the whole row (see module doc)
            "_ins_key": F.coalesce(configured_key(table_id, data_image, options), data_image),
            "_old_key": F.coalesce(configured_key(table_id, upd_before_for_key, options),
                                   F.when(has_key, key_image)),
            "_new_key": F.coalesce(configured_key(table_id, upd_after, options),
                                   F.when(has_key, F.map_from_arrays(
                                       key_cols, F.transform(key_cols, lambda c: F.element_at(upd_after, c))))),
            "_del_key": F.coalesce(configured_key(table_id, del_before, options),
                                   F.when(has_key, key_image), del_before),
        })
        old_key, new_key = F.col("_old_key"), F.col("_new_key")

        # 2. reasons, then the records of what decoded
        ignored = literal_map(_IGNORED_OPS)
        reason = (
            F.when(is_tombstone(), F.lit(TOMBSTONE))
            .when(j["_corrupt"].isNotNull() | j.isNull(),
                  F.lit("malformed JSON, not a JSON object, or a field of the wrong JSON type"))
            .when(meta.isNull(), F.lit("not a SharePlex message: no 'meta'"))
            .when(F.col("_op_name").isNull(), F.lit("missing 'meta.op'"))
            .when(F.element_at(ignored, F.col("_op_name")).isNotNull(), F.element_at(ignored, F.col("_op_name")))
            .when(op.isNull(), F.concat(F.lit("unknown operation type '"), meta["op"], F.lit("'")))
            .when(table_id.isNull(), F.lit("no source table ('meta.table')"))
            .when((op == C.INSERT) & data_image.isNull(), F.lit("'data' is null for an insert"))
            .when((op == C.UPDATE) & data_image.isNull(), F.lit("'data' is null for an update"))
            .when((op == C.UPDATE) & (old_key.isNull() | new_key.isNull()),
                  F.lit("update has no 'key' (the before image's key columns): give --primary-keys"))
            .when((op == C.DELETE) & F.col("_del_before").isNull(), F.lit("delete has neither 'data' nor 'key'"))
        )
        df = df.withColumn("reason", reason)

        position = F.col("_position")
        rec = RecordBuilder(
            self.name, table_id, position, event_time=meta["time"].try_cast("timestamp"),
            tx_id=meta["trans"], tx_seq=F.col("_seq"), tx_last=F.col("_tx_last"),
            # what tells events apart when there is no SCN (never used for ordering)
            identity=F.coalesce(position, F.concat_ws("|", F.lit("t"), meta["time"], meta["trans"],
                                                      F.col("_seq").cast("string"), meta["rowid"])),
        ).record
        cdc = C.CDC

        key_changed = keys_differ(old_key, new_key)
        upd_present = F.map_keys(upd_after)
        records = (
            F.when(op == C.INSERT, F.array(rec(op, cdc, F.col("_ins_key"), None, data_image)))
            .when((op == C.UPDATE) & key_changed,
                  F.array(rec(C.DELETE, cdc, old_key, key_image, None),
                          rec(op, cdc, new_key, key_image, upd_after, upd_present)))
            .when(op == C.UPDATE, F.array(rec(op, cdc, new_key, key_image, upd_after, upd_present)))
            .when(op == C.DELETE, F.array(rec(op, cdc, F.col("_del_key"), del_before, None)))
            .when(op == C.TRUNCATE, F.array(rec(op, cdc, None, None, None)))
            .otherwise(F.array(rec(op, cdc, None, None, F.create_map(
                F.lit("ddl"), meta["op"], F.lit("columns"), F.to_json(data_image)))))
        )
        return df.select(*decided_outcome(F.col("reason"), _IGNORED_OPS.values(), table_id, records))


@register("shareplex")
def _factory() -> SharePlexDecoder:
    return SharePlexDecoder()
