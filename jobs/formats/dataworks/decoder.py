"""Alibaba DataWorks real-time sync JSON (seed 001): ``schema`` + ``payload`` + ``version``.

- Six value types, typed in state: LONG bigint, DOUBLE double, BOOLEAN boolean, DATE timestamp
  (epoch milliseconds), BYTES binary (base64, kept as sent: base64 is the canonical binary string),
  STRING string.
- Updates arrive merged (one UPDATE_AFTER with both images) or split (UPDATE_BEFOR + UPDATE_AFTER
  sharing a sequenceId). The before half of a split update is decoded as a delete of the old key
  ordered just before its after half (position suffix .0 / .1): the images are complete rows, so
  delete-then-upsert is exact whether or not the key changed, and needs no pairing across messages.
  The halves are one transaction (tx_id ``update <sequenceId>``, ended by the UPDATE_AFTER): a run
  whose snapshot ends between them holds the UPDATE_BEFOR back for the next run, instead of
  publishing the row deleted.
- Full sync rows carry sequenceId -1 (as in the real messages under shared/samples/dataworks): they
  are the full load, ordered by offset.
- Key: schema.primaryKey, else the synthetic row id column (``#alibaba_rds_row_id#`` for MySQL,
  ``rowid`` for Oracle), else --primary-keys, else the whole row.
- TRANSACTION_BEGIN / TRANSACTION_END carry no transaction id: they are kept as TX_BEGIN / TX_END
  markers that bracket the records between them in their partition (a transaction still open at the
  end of a run is held back, see jobs.fold.split_open_transactions).
- MHEARTBEAT, GTID and XA markers are ignored and counted; CREATE/ALTER/RENAME/QUERY/CINDEX/
  DINDEX/ERASE are recorded as DDL (statement in ``after['ddl']``); TRUNCATE empties the table, as
  does a QUERY (or other DDL op) whose statement is a TRUNCATE.
The documentation's examples carry ``//`` comments: they are accepted (JSON parsed with comments).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.formats import DecodeOptions
from jobs.formats.base import (
    FIRST_SECOND,
    TOMBSTONE,
    BaseDecoder,
    RecordBuilder,
    configured_key,
    decided_outcome,
    epoch_number,
    is_tombstone,
    is_truncate,
    key_of,
    literal_map,
    marker_record,
    pad_unsigned,
    parse_value,
    row_change_records,
)
from jobs.formats.dataworks import ENTRY
from jobs.model import record as C

_MAP = "map<string,string>"
_IMAGE = f"struct<dataColumn:{_MAP}>"
_VALUE_SCHEMA = (
    "struct<schema:struct<dataColumn:array<struct<name:string,type:string>>, primaryKey:array<string>, "
    "source:struct<dbType:string,dbVersion:string,dbName:string,schemaName:string,tableName:string>>, "
    f"payload:struct<before:{_IMAGE}, after:{_IMAGE}, sequenceId:string, scn:string, op:string, "
    "timestamp:struct<eventTime:bigint,systemTime:bigint,checkpointTime:bigint>, "
    "ddl:struct<text:string,ddlMeta:string>>, "
    "version:string, _corrupt:string>"
)
_TYPES = {"LONG": "bigint", "DOUBLE": "double", "BOOLEAN": "boolean", "DATE": "timestamp", "BYTES": "binary",
          "STRING": "string"}
_ROW_ID_COLUMNS = ("#alibaba_rds_row_id#", "rowid")
_DDL_OPS = ("CREATE", "ALTER", "RENAME", "QUERY", "CINDEX", "DINDEX", "ERASE")
_IGNORED_OPS = {"MHEARTBEAT": "heartbeat", "GTID": "transaction marker",
                "XACOMMIT": "transaction marker", "XAROLLBACK": "transaction marker"}
_TS_FMT = "yyyy-MM-dd HH:mm:ss.SSSSSS"


def _typed_image(image: Column, types: Column) -> Column:
    """DATE values are epoch milliseconds: to the canonical timestamp string; the rest, and a time no
    timestamp holds (kept by the change records, counted by the state), as sent."""
    def typed(k: Column, v: Column) -> Column:
        millis = epoch_number(v, 1000, FIRST_SECOND)
        is_time = (F.element_at(types, k) == "timestamp") & v.rlike(r"^-?[0-9]+$") & millis.isNotNull()
        return F.when(is_time, F.date_format(F.timestamp_millis(millis), _TS_FMT)).otherwise(v)

    return F.transform_values(image, typed)


def _with_images(df: DataFrame) -> DataFrame:
    """The message's op, column types, table, sequenceId and typed images as named columns (each
    non-trivial expression evaluated once)."""
    schema, payload = F.col("j")["schema"], F.col("j")["payload"]
    columns = schema["dataColumn"]
    types = F.map_from_arrays(
        F.transform(columns, lambda c: c["name"]),
        F.transform(columns, lambda c: F.coalesce(F.element_at(literal_map(_TYPES), F.upper(c["type"])),
                                                  F.lit("string"))),
    )
    source = schema["source"]
    # a column without a name could not be told apart from the others (and cannot key a map)
    nameless = F.coalesce(F.exists(columns, lambda c: c["name"].isNull()), F.lit(False))
    df = df.withColumns({
        "_op_code": payload["op"],
        "_nameless": nameless,
        "_types": F.when(columns.isNotNull() & ~nameless, types),
        "table_id": F.when(F.coalesce(source["tableName"], F.lit("")) != "",
                           C.table_id_col(source["dbName"], source["schemaName"], source["tableName"])),
        "_seq": payload["sequenceId"],
    })
    return df.withColumns({
        "_before": _typed_image(payload["before"]["dataColumn"], F.col("_types")),
        "_after": _typed_image(payload["after"]["dataColumn"], F.col("_types")),
    })


def _with_keys_and_position(df: DataFrame, options: DecodeOptions) -> DataFrame:
    """The keys -- --primary-keys, else the declared primary key, else the synthetic row id column where the
    row has one -- and the position: sequenceId, then .0 for a split update's before half, else .1."""
    schema, op_code, before, after = F.col("j")["schema"], F.col("_op_code"), F.col("_before"), F.col("_after")
    columns = schema["dataColumn"]
    row_id_col = F.coalesce(*[F.when(F.array_contains(F.transform(columns, lambda c: c["name"]), F.lit(c)),
                                     F.array(F.lit(c))) for c in _ROW_ID_COLUMNS])
    pk = F.when(F.size(F.coalesce(schema["primaryKey"], F.array())) > 0, schema["primaryKey"]).otherwise(row_id_col)
    full_load = F.col("_seq") == "-1"
    position_base = F.when(~full_load & F.col("_seq").rlike(r"^[0-9]+$"), pad_unsigned(F.col("_seq")))
    return df.withColumns({
        "_new_key": F.coalesce(configured_key(F.col("table_id"), after, options), key_of(after, pk)),
        "_old_key": F.coalesce(configured_key(F.col("table_id"), before, options), key_of(before, pk)),
        "_position": F.when(position_base.isNotNull(), F.concat(
            position_base, F.when(op_code == "UPDATE_BEFOR", F.lit(".0")).otherwise(F.lit(".1")))),
    })


def _event_ms() -> Column:
    return F.col("j")["payload"]["timestamp"]["eventTime"]


def _records(rec, marker) -> Column:
    """The change records of a message, made by ``rec`` (RecordBuilder.record) and ``marker`` (a
    transaction marker of an op); null for an op DataWorks does not document."""
    op_code, ddl, cdc = F.col("_op_code"), F.col("j")["payload"]["ddl"], C.CDC
    by_kind = row_change_records(rec, F.col("_before"), F.col("_after"), F.col("_new_key"), F.col("_old_key"))
    return (
        F.when(op_code == "TRANSACTION_BEGIN", marker(C.TX_BEGIN))
        .when(op_code == "TRANSACTION_END", marker(C.TX_END))
        # full sync rows carry sequenceId -1
        .when(op_code == "INSERT", F.when(F.col("_seq") == "-1", by_kind["load"]).otherwise(by_kind["insert"]))
        # a split update's before half: a delete of the old row, ordered just before its after half
        .when(op_code.isin("UPDATE_BEFOR", "DELETE"), by_kind["delete"])
        .when(op_code == "UPDATE_AFTER", by_kind["update"])
        # QUERY is DataWorks' op for statements it does not classify, a TRUNCATE among them
        .when((op_code == "TRUNCATE") | (op_code.isin(*_DDL_OPS) & is_truncate(ddl["text"])),
              F.array(rec(C.TRUNCATE, cdc, None, None, None)))
        .when(op_code.isin(*_DDL_OPS), F.array(rec(C.DDL, cdc, None, None, F.create_map(F.lit("ddl"), ddl["text"]))))
    )


def _reason(records: Column) -> Column:
    """Why a message is not decoded (null: it is); ``records`` null: an unknown op."""
    j, op_code, event_ms = F.col("j"), F.col("_op_code"), _event_ms()
    ignored = literal_map(_IGNORED_OPS)
    return (
        F.when(is_tombstone(), F.lit(TOMBSTONE))
        .when(j["_corrupt"].isNotNull() | j.isNull(), F.lit("malformed JSON or not a JSON object"))
        .when(op_code.isNull(), F.lit("not a DataWorks message: no payload.op"))
        .when(F.col("_nameless"), F.lit("schema.dataColumn has a column without a name"))
        .when(F.element_at(ignored, op_code).isNotNull(), F.element_at(ignored, op_code))
        .when(records.isNull(), F.concat(F.lit("unknown operation type '"), op_code, F.lit("'")))
        .when(F.col("table_id").isNull() & ~op_code.isin("TRANSACTION_BEGIN", "TRANSACTION_END"),
              F.lit("no schema.source.tableName"))
        .when((event_ms > 0) & epoch_number(event_ms, 1000).isNull(),
              F.lit("'payload.timestamp.eventTime' is not a number of milliseconds since 1970 (epoch)"))
        .when(op_code.isin("INSERT", "UPDATE_AFTER") & F.col("_after").isNull(),
              F.concat(F.lit("'after' is null for op '"), op_code, F.lit("'")))
        .when(op_code.isin("DELETE", "UPDATE_BEFOR") & F.col("_before").isNull(),
              F.concat(F.lit("'before' is null for op '"), op_code, F.lit("'")))
    )


class DataWorksDecoder(BaseDecoder):
    entry = ENTRY

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        df = raw.select("*", parse_value(_VALUE_SCHEMA, allow_comments=True).alias("j"))
        df = _with_keys_and_position(_with_images(df), options)
        op_code, table_id, position, seq = F.col("_op_code"), F.col("table_id"), F.col("_position"), F.col("_seq")
        event_time = F.when(_event_ms() > 0, F.timestamp_millis(epoch_number(_event_ms(), 1000)))
        # the two halves of a split update are one change: its UPDATE_BEFOR (a delete of the old row) is
        # held with its update's sequenceId as a transaction that the UPDATE_AFTER ends, so that a run
        # cut between them does not publish the row deleted (jobs.fold.split_open_transactions)
        pair_id = F.when(op_code.isin("UPDATE_BEFOR", "UPDATE_AFTER") & seq.isNotNull(),
                         F.concat(F.lit("update "), seq))
        rec = RecordBuilder(self.name, table_id, position, event_time, tx_id=pair_id,
                            tx_last=F.when(pair_id.isNotNull(), op_code == "UPDATE_AFTER"),
                            column_types=F.col("_types")).record

        def marker(op: str) -> Column:
            return F.array(marker_record(
                self.name, table_id, op, C.CDC, position, F.lit(None), F.lit(None), F.lit(op == C.TX_END), event_time,
                F.create_map(F.lit("marker"), op_code, F.lit("sequenceId"), seq)))

        records = _records(rec, marker)
        df = df.withColumn("reason", _reason(records))
        return df.select(*decided_outcome(F.col("reason"), _IGNORED_OPS.values(), table_id, records))
