"""DTS Avro records encoded with fastavro against the official DTS ``Record`` schema, in the shapes the
public Alibaba examples print (no repository ships a real serialized DTS record: tests/resources/dts_avro/SOURCE.md)."""
from __future__ import annotations

import io
import json

import fastavro

from jobs.formats.dts_avro.decoder import record_schema

NS = "com.alibaba.dts.formats.avro."
SCHEMA = record_schema()


def integer(v):
    return (NS + "Integer", {"precision": 32, "value": str(v)})


def chars(text, charset="utf8mb4", codec="utf-8"):
    return (NS + "Character", {"charset": charset, "value": text.encode(codec)})


def dts(op, table="mydb.t1", before=None, after=None, *, rid=1, pos="72469@78", pk=("a",), fields=None,
        ts=1696984408, txid="0", safe=None, source="MySQL", tags=None):
    """One Record, Avro-encoded. ``fields`` defaults to a (Integer) and b (Character); ``source`` is its
    ``sourceType``; ``tags`` replaces the tags ``pk`` makes."""
    record = {
        "version": 0, "id": rid, "sourceTimestamp": ts, "sourcePosition": pos, "safeSourcePosition": pos if safe is None else safe,
        "sourceTxid": txid, "source": {"sourceType": source, "version": "8.0.28"}, "operation": op,
        "objectName": table, "processTimestamps": None,
        "tags": tags if tags is not None else {"pk_uk_info": json.dumps({"PRIMARY": list(pk)})} if pk
        else {"thread_id": "1"},
        "fields": fields if fields is not None else [{"name": "a", "dataTypeNumber": 3},
                                                     {"name": "b", "dataTypeNumber": 253}],
        "beforeImages": before, "afterImages": after, "bornTimestamp": 0,
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, SCHEMA, record)
    return buf.getvalue()
