"""Regenerate the Event Hubs Capture samples beside this file (deterministic; see README.md):

    .venv/bin/python tests/resources/eventhubs_capture/generate.py
"""
from __future__ import annotations

import json
from pathlib import Path

import fastavro

HERE = Path(__file__).resolve().parent
NAMESPACE, EVENT_HUB = "cdcns", "orders"
# the schema Capture writes, as Microsoft documents it (Avro Tools' getschema of a capture file)
SCHEMA = {
    "type": "record",
    "name": "EventData",
    "namespace": "Microsoft.ServiceBus.Messaging",
    "fields": [
        {"name": "SequenceNumber", "type": "long"},
        {"name": "Offset", "type": "string"},
        {"name": "EnqueuedTimeUtc", "type": "string"},
        {"name": "SystemProperties", "type": {"type": "map", "values": ["long", "double", "string", "bytes"]}},
        {"name": "Properties", "type": {"type": "map", "values": ["long", "double", "string", "bytes"]}},
        {"name": "Body", "type": ["null", "bytes"]},
    ],
}
SYNC = bytes(range(16))  # a fixed sync marker: the same bytes on every run


def body(op: str, row: dict) -> bytes:
    return json.dumps({"op": op, "after": row}, separators=(",", ":")).encode()


def event(seq: int, offset: int, enqueued: str, body_: bytes | None, properties=None, partition_key=None) -> dict:
    system = {"x-opt-partition-key": partition_key} if partition_key else {}
    return {"SequenceNumber": seq, "Offset": str(offset), "EnqueuedTimeUtc": enqueued,
            "SystemProperties": system, "Properties": properties or {}, "Body": body_}


# (partition, capture window "YYYY/MM/DD/HH/mm/ss") -> events; EnqueuedTimeUtc as Capture writes it
FILES = {
    (0, "2026/01/01/00/00/00"): [
        event(0, 0, "1/1/2026 12:00:10 AM", body("c", {"id": 1}), {"source": "shop", "attempt": 2}, "order-1"),
        event(1, 368, "1/1/2026 12:02:00 AM", b"\x00\xff binary body", {"blob": b"\x01\x02", "ratio": 0.5}),
        event(2, 736, "1/1/2026 12:04:59 AM", None),  # no body
    ],
    (0, "2026/01/01/00/05/00"): [
        event(3, 1104, "1/1/2026 12:05:00 AM", body("u", {"id": 1}), partition_key="order-1"),  # on the boundary
        event(4, 1472, "1/1/2026 12:07:30 AM", body("d", {"id": 1})),
    ],
    (1, "2026/01/01/00/00/00"): [
        event(0, 0, "1/1/2026 12:01:00 AM", body("c", {"id": 2}), {"source": "shop"}),
    ],
    (1, "2026/01/01/00/05/00"): [],  # Capture writes a file for an empty window too (unless told not to)
}


def main() -> None:
    for (partition, window), events in FILES.items():
        path = HERE / NAMESPACE / EVENT_HUB / str(partition) / f"{window}.avro"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            fastavro.writer(out, SCHEMA, events, sync_marker=SYNC)


if __name__ == "__main__":
    main()
