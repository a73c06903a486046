"""Shared by the decoder tests: raw Kafka-schema rows built from message values in memory."""
from __future__ import annotations

from datetime import datetime, timezone

from jobs.raw import KAFKA_SCHEMA

LANDED_AT = datetime(2026, 11, 1, tzinfo=timezone.utc)


def raw_frame(spark, values, keys=None, topic="t", headers=None):
    """One partition, offsets 0..n-1, in the order given; keys and values are text (None stays None)."""
    rows = []
    for i, value in enumerate(values):
        key = None if keys is None else keys[i]
        rows.append((
            None if key is None else key.encode(),
            None if value is None else value.encode(),
            topic, 0, i, LANDED_AT, 0, (headers or {}).get(i),
        ))
    return spark.createDataFrame(rows, KAFKA_SCHEMA)
