"""Alibaba DTS Avro (seed 004): binary records of the DTS ``Record`` schema.

The schema is ``schemas/dts_record.avsc``, the official one of aliyun/aliyun-dts-subscribe-demo
(Apache-2.0; the leaf types first, ``Record`` last). Decoded on the JVM side:
jvm/src/cdc/DtsAvroUdf.java reads each record with Avro's own Java reader, which Spark ships
(BoundedDecoder.java refuses a length the bytes left cannot hold before anything is allocated for it),
then makes its outcome there (jobs.spark.jvm; its jar must be on the Spark class path, else decoding fails
with a setup error that says how to build it). This module gives that decoder its columns and the
schema; ``record_schema`` parses the schema for fastavro, which the tests, the benchmark's generator
and jobs/demo/streams.py use to encode records. What is read and made: docs/formats/dts_avro.md.

- ``operation`` INSERT / UPDATE / DELETE are CDC, INIT is the full load (phase FULL_LOAD, op SNAPSHOT);
  DDL carries the statement as a string in ``afterImages`` (recorded as op DDL, a TRUNCATE statement
  empties the table); BEGIN is kept as a TX_BEGIN marker and COMMIT / ROLLBACK / ABORT as TX_END,
  each naming its transaction (``sourceTxid``, else ``begin@<safeSourcePosition>``); a transaction still
  open at the end of a run is held back (jobs.fold.split_open_transactions). HEARTBEAT / CHECKPOINT and
  DTS's control operations are ignored and counted.
- ``objectName`` is ``db.table`` (``db.schema.table`` for sources with schemas).
- Key: --primary-keys, else ``tags['pk_uk_info']`` (``{"PRIMARY":["id"]}``; the first unique key when
  there is no PRIMARY), else the whole row. An UPDATE that changes the key is a DELETE of the old key
  plus an INSERT (with the before image, so that a column DTS did not capture moves with the row).
- Values are typed by their union branch (Integer -> bigint, Character -> string by its MySQL charset,
  Decimal -> decimal(38,18), Float -> double, Timestamp / DateTime / TimestampWithTimeZone -> timestamp,
  date, time text or year, Binary* -> binary, Text* -> string); EmptyObject NULL is a null and NONE a
  value not captured (the column keeps its prior value).
- Position: ``sourcePosition`` as MySQL writes it (``<offset>@<binlog file index>``) then ``id``, each
  zero-padded; sources whose position is not ``offset@file`` are ordered by ``id`` alone.
"""
from __future__ import annotations

import importlib.resources
import json
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.formats import DecodeOptions
from jobs.formats.base import BaseDecoder, decoded_on_jvm
from jobs.formats.dts_avro import ENTRY

# package data, read from the package wherever it is (a checkout, a wheel, the zip spark-submit ships)
SCHEMA_FILE = importlib.resources.files("jobs.formats.dts_avro").joinpath("schemas/dts_record.avsc")


def record_schema() -> dict[str, Any]:
    """The ``Record`` schema parsed for fastavro (the file lists the named leaf types first): what the
    tests, the benchmark and jobs/demo/streams.py encode DTS records with."""
    import fastavro

    named: dict[str, Any] = {}
    parsed = None
    for schema in json.loads(SCHEMA_FILE.read_text()):
        parsed = fastavro.parse_schema(schema, named_schemas=named)
    return parsed


class DtsAvroDecoder(BaseDecoder):
    entry = ENTRY

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """The outcomes of the JVM-side decoder (jobs.spark.jvm): each record read by Avro's own reader and
        turned into its outcome there; records leave with their ids to the decode stage."""
        return decoded_on_jvm(
            raw, self.entry, options,
            [F.col(c) for c in ("value", "topic", "partition", "offset")] + [F.unix_micros("timestamp")],
            schema=SCHEMA_FILE.read_text())

