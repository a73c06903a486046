"""Debezium JSON (PostgreSQL, SQL Server, MySQL, Oracle connectors), with or without the schema section.

Decoded on the JVM side, in one streaming pass per message: jvm/src/cdc/DebeziumUdf.java, with the
schema section's types and conversions in DebeziumTypes.java (jobs.spark.jvm; its jar must be on the Spark
class path, else decoding fails with a setup error that says how to build it). This module gives that
decoder its columns and settings; what it reads and makes is docs/formats/debezium.md.

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

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.formats import DecodeOptions
from jobs.formats.base import BaseDecoder, decoded_on_jvm
from jobs.formats.debezium import ENTRY

_UNAVAILABLE = "__debezium_unavailable_value"


def _unavailable_forms(placeholder: str) -> tuple[str, ...]:
    """Every text an unchanged TOAST value arrives as in a row image, by column type, as the
    PostgreSQL connector renders its placeholder (UnchangedToastedPlaceholder): the text itself (text,
    json, xml ...); its bytes as base64 or hex (bytea, per binary.handling.mode); a one-element array
    of the text, of its base64 or of the name-based UUID of its bytes (text[], bytea[], uuid[]); its
    bytes as an array of numbers (int[], bigint[]); and a map of the text to itself (hstore). Nested
    values are compared as compact JSON, as the JVM-side decoder renders them."""
    raw = placeholder.encode("utf-8")
    md5 = bytearray(hashlib.md5(raw).digest())  # Java's UUID.nameUUIDFromBytes: MD5, version 3
    md5[6], md5[8] = (md5[6] & 0x0F) | 0x30, (md5[8] & 0x3F) | 0x80
    b64 = base64.b64encode(raw).decode("ascii")
    compact = {"separators": (",", ":")}
    return (placeholder, b64, raw.hex(), json.dumps([placeholder], **compact), json.dumps([b64], **compact),
            json.dumps([str(uuid.UUID(bytes=bytes(md5)))], **compact), json.dumps(list(raw), **compact),
            json.dumps({placeholder: placeholder}, **compact))


_UNAVAILABLE_FORMS = _unavailable_forms(_UNAVAILABLE)


class DebeziumDecoder(BaseDecoder):
    # shaped: a topic carries full envelopes or ExtractNewRecordState rows, never both (jobs.decode.stage)
    entry = ENTRY

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """The outcomes of the JVM-side decoder (jobs.spark.jvm): one pass of a streaming parser per message,
        its schema section's types and conversions included; records leave with their ids to the
        decode stage."""
        return decoded_on_jvm(
            raw, self.entry, options,
            [F.col(c) for c in ("key", "value", "topic", "partition", "offset")]
            + [F.unix_micros("timestamp"), F.col("headers")],
            unavailable=list(_UNAVAILABLE_FORMS))

