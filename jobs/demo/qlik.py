"""Qlik Replicate messages built the way Replicate writes them (seed 000 and
tests/resources/qlik/attunity-json-converter), for tests and generated workloads.

A table is described once (``QlikTable``: schema, table, version, columns with Replicate types and
``primaryKeyPosition``); from it come the metadata message (JSON or Avro envelope, with the
``MetadataMessage`` Avro schema in ``messageSchema`` and the table's ``dataSchema``) and its data
messages (JSON bare / enveloped, or Avro enveloped, encoded with that ``dataSchema``).
"""
from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Replicate type -> Avro type of the data schema (no logical types: Replicate's default)
_AVRO_TYPES = {"INT1": "int", "INT2": "int", "INT4": "int", "UINT1": "int", "UINT2": "int", "INT8": "long",
               "UINT4": "long", "REAL4": "float", "REAL8": "double", "BOOLEAN": "boolean", "BYTES": "bytes",
               "BLOB": "bytes"}
_HEADER_FIELDS = ("changeSequence", "timestamp", "streamPosition", "transactionId")


@dataclass(frozen=True)
class QlikColumn:
    name: str
    type: str  # Replicate type: INT4, INT8, NUMERIC, STRING, DATE, DATETIME, BOOLEAN, BYTES, REAL8, ...
    primary_key_position: int = 0
    precision: int = 0
    scale: int = 0
    length: int = 0


@dataclass(frozen=True)
class QlikTable:
    schema: str
    table: str
    columns: Sequence[QlikColumn]
    version: int = 1
    server: str = "replicate-01"
    task: str = "cdc-task"

    @property
    def schema_id(self) -> str:
        """Replicate's schemaId: 32 hex digits, a new one for every table version."""
        text = f"{self.schema}.{self.table}.{self.version}." + ",".join(f"{c.name}:{c.type}" for c in self.columns)
        return hashlib.md5(text.encode()).hexdigest().upper()

    def data_schema(self) -> dict[str, Any]:
        fields = [{"name": c.name, "type": ["null", _AVRO_TYPES.get(c.type, "string")]} for c in self.columns]
        headers = [{"name": "operation", "type": {"type": "enum", "name": "operation",
                                                  "symbols": ["INSERT", "UPDATE", "DELETE", "REFRESH"]}}]
        headers += [{"name": n, "type": "string"} for n in _HEADER_FIELDS]
        headers += [{"name": "changeMask", "type": ["null", "bytes"]},
                    {"name": "columnMask", "type": ["null", "bytes"]},
                    {"name": "transactionEventCounter", "type": ["null", "long"]},
                    {"name": "transactionLastEvent", "type": ["null", "boolean"]}]
        return {"type": "record", "name": "DataRecord", "fields": [
            {"name": "data", "type": {"type": "record", "name": "Data", "fields": fields}},
            {"name": "beforeData", "type": ["null", "Data"]},
            {"name": "headers", "type": {"type": "record", "name": "Headers", "fields": headers}},
        ]}

    def metadata_schema(self) -> dict[str, Any]:
        """The MetadataMessage Avro schema Replicate puts in an MD envelope's messageSchema."""
        column = [{"name": n, "type": {"type": t}} for n, t in (
            ("ordinal", "int"), ("type", "string"), ("length", "int"), ("precision", "int"), ("scale", "int"),
            ("primaryKeyPosition", "int"), ("nullable", "boolean"))]
        lineage = [{"name": n, "type": {"type": t}} for n, t in (
            ("server", "string"), ("task", "string"), ("schema", "string"), ("table", "string"),
            ("tableVersion", "long"), ("timestamp", "string"))]
        columns = [{"name": c.name, "type": {"type": "record", "name": c.name, "fields": column}} for c in self.columns]
        return {"type": "record", "name": "MetadataMessage", "fields": [
            {"name": "schemaId", "type": {"type": "string"}},
            {"name": "lineage", "type": {"type": "record", "name": "Lineage", "fields": lineage}},
            {"name": "tableStructure", "type": {"type": "record", "name": "TableStructure", "fields": [
                {"name": "tableColumns", "type": {"type": "record", "name": "TableColumns", "fields": columns}}]}},
            {"name": "dataSchema", "type": {"type": "string"}},
        ]}

    def metadata(self, timestamp: str = "2026-11-01T00:00:00.000") -> dict[str, Any]:
        return {
            "schemaId": self.schema_id,
            "lineage": {"server": self.server, "task": self.task, "schema": self.schema, "table": self.table,
                        "tableVersion": self.version, "timestamp": timestamp},
            "tableStructure": {"tableColumns": {
                c.name: {"ordinal": i, "type": c.type, "length": c.length, "precision": c.precision,
                         "scale": c.scale, "primaryKeyPosition": c.primary_key_position,
                         "nullable": c.primary_key_position == 0}
                for i, c in enumerate(self.columns, start=1)}},
            "dataSchema": json.dumps(self.data_schema()),
        }

    def mask(self, columns: Sequence[str]) -> str:
        """A little-endian hex bitmap of the named columns' ordinals (byte 0 = ordinals 1-8)."""
        bits = 0
        for i, c in enumerate(self.columns):
            if c.name in columns:
                bits |= 1 << i
        return bits.to_bytes(max(1, (len(self.columns) + 7) // 8), "little").hex().upper()


def headers(operation: str, change_sequence: str = "", *, timestamp: str = "", tx: str = "",
            tx_counter: int | None = None, tx_last: bool | None = None, change_mask: str | None = None,
            column_mask: str | None = None, stream_position: str = "") -> dict[str, Any]:
    return {"operation": operation, "changeSequence": change_sequence, "timestamp": timestamp,
            "streamPosition": stream_position, "transactionId": tx, "changeMask": change_mask,
            "columnMask": column_mask, "transactionEventCounter": tx_counter, "transactionLastEvent": tx_last}


def change_sequence(when: str, number: int) -> str:
    """``YYYYMMDDHHmmSShh`` + a 19-digit change number (Replicate's changeSequence)."""
    return when + f"{number:019d}"


def json_metadata(table: QlikTable) -> str:
    return json.dumps({"magic": "atMSG", "type": "MD", "headers": None, "messageSchemaId": table.schema_id,
                       "messageSchema": json.dumps(table.metadata_schema()), "message": table.metadata()})


def json_data(table: QlikTable, data: Mapping[str, Any], hdrs: Mapping[str, Any],
              before: Mapping[str, Any] | None = None, *, envelope: bool = True) -> str:
    message = {"data": dict(data), "beforeData": dict(before) if before is not None else None, "headers": dict(hdrs)}
    if not envelope:
        return json.dumps(message)
    return json.dumps({"magic": "atMSG", "type": "DT", "headers": None, "messageSchemaId": table.schema_id,
                       "messageSchema": None, "message": message})


def _envelope(kind: str, schema_id: str, message: bytes, message_schema: str | None) -> bytes:
    import fastavro

    from jobs.formats.qlik.decoder import ENVELOPE_SCHEMA

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(ENVELOPE_SCHEMA), {
        "magic": b"atMSG", "type": kind, "headers": None, "messageSchemaId": schema_id,
        "messageSchema": message_schema, "message": message})
    return buf.getvalue()


def _avro(schema: dict[str, Any], record: Mapping[str, Any]) -> bytes:
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def avro_metadata(table: QlikTable) -> bytes:
    schema = table.metadata_schema()
    return _envelope("MD", table.schema_id, _avro(schema, table.metadata()), json.dumps(schema))


def _avro_row(table: QlikTable, row: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-form values (binary as hex digits) -> the data schema's Avro values."""
    out = {}
    for c in table.columns:
        v = row.get(c.name)
        kind = _AVRO_TYPES.get(c.type, "string")
        if v is not None and kind == "bytes" and isinstance(v, str):
            v = bytes.fromhex(v)
        elif v is not None and kind == "string" and not isinstance(v, str):
            v = str(v)
        out[c.name] = v
    return out


def avro_data(table: QlikTable, data: Mapping[str, Any], hdrs: Mapping[str, Any],
              before: Mapping[str, Any] | None = None) -> bytes:
    h = dict(hdrs)
    for mask in ("changeMask", "columnMask"):
        h[mask] = bytes.fromhex(h[mask]) if h.get(mask) else None
    record = {"data": _avro_row(table, data), "beforeData": _avro_row(table, before) if before is not None else None,
              "headers": h}
    return _envelope("DT", table.schema_id, _avro(table.data_schema(), record), None)
