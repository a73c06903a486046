"""Shared by the decoder tests: raw Kafka-schema rows built from message values in memory, a decode's
records, quarantine and counts as plain rows, numbers as a JSON text carries them, and the rows Flink's
and SeaTunnel's format tests expect from their ``products`` files."""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple

import pytest

from jobs.lake.raw import KAFKA_SCHEMA

LANDED_AT = datetime(2026, 11, 1, tzinfo=UTC)


def raw_frame(spark, values, keys=None, topic="t", headers=None):
    """One partition, offsets 0..n-1, in the order given; keys and values are text or bytes (None stays None)."""
    rows = []
    for i, value in enumerate(values):
        key = None if keys is None else keys[i]
        rows.append((
            None if key is None else key.encode(),
            value if value is None or isinstance(value, bytes) else value.encode(),
            topic, 0, i, LANDED_AT, 0, (headers or {}).get(i),
        ))
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def in_message_order(record: dict) -> tuple:
    """Records by message, a key change's DELETE before the INSERT / UPDATE of the same message."""
    return record["offset"], record["op"] != "DELETE"


class DecodedRows(NamedTuple):
    records: list[dict]  # change records, sorted by ``order``
    quarantine: list[dict]  # quarantined rows by offset
    counts: dict  # jobs.decode.stage.decode_counts, as decode.json writes them
    remembered: list[str]  # documents the decode found for later runs


def decoded_rows(raw, fmt: str, options: Any = None, order=in_message_order) -> DecodedRows:
    """``raw`` decoded as ``fmt`` (jobs.decode.stage.decode_messages), collected; the decoded frame released."""
    from jobs.decode.stage import decode_counts, decode_messages, release
    from jobs.formats import DecodeOptions

    decoded = decode_messages(raw, fmt, options or DecodeOptions())
    try:
        records = sorted((r.asDict(recursive=True) for r in decoded.changes.collect()), key=order)
        quarantine = [r.asDict() for r in decoded.quarantine.orderBy("offset").collect()]
        return DecodedRows(records, quarantine, decode_counts(decoded.outcomes).to_json(), decoded.remembered)
    finally:
        release(decoded.materialized)


# Numbers as a JSON text carries them, for the decoders that must keep their digits: a test writes a
# quoted placeholder (json.dumps would round a float first) and with_exact_numbers puts the number there
EXACT_NUMBERS = {"@BIG@": "12345678901234567890.12", "@FINE@": "0.1234567890123456789", "@TWO@": "1.50",
                 "@INT@": "123456789012345678901234567890", "@NESTED@": '{"x":98765432109876543.21}'}


def with_exact_numbers(text: str) -> str:
    for placeholder, number in EXACT_NUMBERS.items():
        text = text.replace(f'"{placeholder}"', number)
    return text


# The 20 row changes Flink's and SeaTunnel's JSON format tests expect from their `products` files
# (Debezium, OGG, and the first 20 of Maxwell's), as Flink RowKind + (id, name, description, weight)
FLINK_PRODUCT_ROWS = [
    ("+I", 101, "scooter", "Small 2-wheel scooter", 3.14),
    ("+I", 102, "car battery", "12V car battery", 8.1),
    ("+I", 103, "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", 0.8),
    ("+I", 104, "hammer", "12oz carpenter's hammer", 0.75),
    ("+I", 105, "hammer", "14oz carpenter's hammer", 0.875),
    ("+I", 106, "hammer", "16oz carpenter's hammer", 1.0),
    ("+I", 107, "rocks", "box of assorted rocks", 5.3),
    ("+I", 108, "jacket", "water resistent black wind breaker", 0.1),
    ("+I", 109, "spare tire", "24 inch spare tire", 22.2),
    ("-U", 106, "hammer", "16oz carpenter's hammer", 1.0),
    ("+U", 106, "hammer", "18oz carpenter hammer", 1.0),
    ("-U", 107, "rocks", "box of assorted rocks", 5.3),
    ("+U", 107, "rocks", "box of assorted rocks", 5.1),
    ("+I", 110, "jacket", "water resistent white wind breaker", 0.2),
    ("+I", 111, "scooter", "Big 2-wheel scooter ", 5.18),
    ("-U", 110, "jacket", "water resistent white wind breaker", 0.2),
    ("+U", 110, "jacket", "new water resistent white wind breaker", 0.5),
    ("-U", 111, "scooter", "Big 2-wheel scooter ", 5.18),
    ("+U", 111, "scooter", "Big 2-wheel scooter ", 5.17),
    ("-D", 111, "scooter", "Big 2-wheel scooter ", 5.17),
]


def flink_row_kinds(records):
    """Canonical records as Flink's row kinds: snapshot/insert +I, update -U then +U, delete -D."""
    def row(image):
        return (int(image["id"]), image["name"], image["description"], float(image["weight"]))

    out = []
    for r in records:
        if r["op"] in ("SNAPSHOT", "INSERT"):
            out.append(("+I", *row(r["after"])))
        elif r["op"] == "UPDATE":
            out += [("-U", *row(r["before"])), ("+U", *row(r["after"]))]
        elif r["op"] == "DELETE":
            out.append(("-D", *row(r["before"])))
    return out


def assert_rows_equal(actual, expected):
    """Row kinds and text equal; weights equal to float precision (formats send 3.14 or 3.140000104904175)."""
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a[:4] == e[:4]
        assert a[4] == pytest.approx(e[4], rel=1e-6)
