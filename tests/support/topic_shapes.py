"""Debezium messages of one topic in its two shapes: full envelopes and ExtractNewRecordState's unwrapped rows."""
from __future__ import annotations

import json

TOPIC = "shop.public.customers"
SOURCE = {"connector": "postgresql", "db": "shop", "schema": "public", "table": "customers", "lsn": 100}


def envelope(i: int, name: str = "a") -> str:
    return json.dumps({"op": "c", "after": {"id": i, "name": name}, "source": {**SOURCE, "lsn": 100 + i},
                       "ts_ms": 1})


def unwrapped(i: int, name: str = "a") -> str:
    return json.dumps({"id": i, "name": name, "__op": "c", "__table": "customers"})
