"""``--format auto``: each message is sniffed and decoded by the decoder of its format.

One topic may mix formats (a migration from one replication tool to another, or several tools writing
into one Event Hub). Every message is probed once (one ``from_json`` with every probed field as text,
plus two byte tests), routed to the first format whose signature it carries, and decoded by that
format's own decoder; what no decoder accepts is quarantined with the reason "no decoder accepts this
message". Signatures, in the order they are tried:

=========  ===========================================================================================
qlik       Avro bytes starting with the envelope magic ``atMSG``; JSON with ``"magic": "atMSG"``, or a bare
           data message (``headers.operation`` beside ``data``)
dataworks  ``payload.sequenceId`` or ``schema.dataColumn``, or an upper-case word as ``payload.op`` (a
           heartbeat, MHEARTBEAT, has no sequenceId nor columns)
debezium   ``payload.op`` / ``payload.source`` (with schema), or ``op`` beside ``source`` / ``before`` /
           ``after``; transaction metadata (``status`` BEGIN/END with ``id``)
shareplex  ``meta.op``
ogg        ``op_type`` with ``table``
maxwell    ``database`` + ``table`` + a lower-case ``type`` (insert, bootstrap-insert, table-alter...)
canal      ``isDdl``, or ``database`` + ``table`` + an upper-case ``type`` (INSERT, INIT, ...)
dts_avro   binary (the first byte is a control byte: a DTS ``Record`` starts with its version number)
=========  ===========================================================================================

Debezium rows flattened by ExtractNewRecordState carry no signature: decode those with
``--format debezium``. Tombstones (empty values) are ignored and counted, as every decoder does.
"""
from __future__ import annotations

from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.formats import DecodeOptions
from jobs.formats.base import TOMBSTONE, BaseDecoder, is_tombstone, outcome, status_of
from jobs.formats.decoders import get_decoder
from jobs.formats.registry import AUTO

NO_DECODER = "no decoder accepts this message"
_PROBE = (
    "struct<magic:string, headers:string, data:string, payload:string, schema:string, op:string, "
    "source:string, before:string, after:string, status:string, id:string, meta:string, op_type:string, "
    "table:string, type:string, database:string, isDdl:string>"
)
_DEBEZIUM_OPS = ("c", "u", "d", "r", "t", "m")


def sniff_format() -> Column:
    """The format of each raw message (null: none), from its bytes and one JSON probe."""
    value = F.col("value")
    text = F.ltrim(value.cast("string"))
    p = F.from_json(text, _PROBE)

    def has(c: Column) -> Column:
        return c.isNotNull()

    def sub(c: Column, path: str) -> Column:
        return F.get_json_object(c, path)

    is_json = text.startswith("{")
    return (
        F.when(value.isNull() | (F.length(value) == 0), F.lit(None))
        .when(F.substring(value, 1, 5) == F.lit(b"atMSG"), F.lit("qlik"))
        .when(~is_json & (F.hex(F.substring(value, 1, 1)) < F.lit("20")), F.lit("dts_avro"))
        .when(~is_json, F.lit(None))
        .when((p["magic"] == "atMSG") | (has(sub(p["headers"], "$.operation")) & has(p["data"])), F.lit("qlik"))
        # a heartbeat has neither, but an upper-case op word (MHEARTBEAT; Debezium's ops are single letters)
        .when(has(sub(p["payload"], "$.sequenceId")) | has(sub(p["schema"], "$.dataColumn"))
              | sub(p["payload"], "$.op").rlike("^[A-Z][A-Z_]+$"), F.lit("dataworks"))
        .when(has(sub(p["payload"], "$.op")) | has(sub(p["payload"], "$.source"))
              | (p["op"].isin(*_DEBEZIUM_OPS) & (has(p["source"]) | has(p["before"]) | has(p["after"])))
              | (p["status"].isin("BEGIN", "END") & has(p["id"])), F.lit("debezium"))
        .when(has(sub(p["meta"], "$.op")), F.lit("shareplex"))
        .when(has(p["op_type"]) & has(p["table"]), F.lit("ogg"))
        .when(has(p["database"]) & has(p["table"]) & has(p["type"]) & (p["type"] == F.lower(p["type"])),
              F.lit("maxwell"))
        .when(has(p["isDdl"]) | (has(p["database"]) & has(p["table"]) & has(p["type"])), F.lit("canal"))
    )


class AutoDecoder(BaseDecoder):
    entry = AUTO

    def remember(self, raw: DataFrame) -> list[str]:
        return get_decoder("qlik").remember(raw)

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        # computed once: the probe is not repeated for every format's decoder (dropped with the frame)
        sniffed = raw.withColumn("_format", sniff_format()).localCheckpoint(
            eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
        present = sorted(r["_format"] for r in sniffed.select("_format").distinct().collect() if r["_format"])
        parts = [get_decoder(fmt).decode(sniffed.where(F.col("_format") == fmt).drop("_format"), options)
                 for fmt in present]
        reason = F.when(is_tombstone(), F.lit(TOMBSTONE)).otherwise(F.lit(NO_DECODER))
        rest = sniffed.where(F.col("_format").isNull()).select(
            *outcome(status_of(reason), reason, F.lit(None), F.lit(None)))
        return reduce(DataFrame.unionByName, parts, rest)
