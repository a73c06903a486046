"""Formats: one folder per format (its registry entry, its decoder) behind one small interface.

``jobs.formats.registry`` lists the formats' entries (no pyspark); ``jobs.formats.decoders.get_decoder``
gives a format's decoder; ``jobs.formats.base`` holds the decoders' base class and the column
expressions they share.

A decoder turns raw Kafka-schema rows into *outcomes*, one row per message:

    status   'decoded' | 'quarantined' | 'ignored'
    reason   why a message was quarantined or ignored (null when decoded)
    table_id the table a message belongs to, where known (for per-table counts)
    records  array<CHANGE_RECORD_SCHEMA> (empty unless decoded)
    shape    the message's shape, where the format has several that one topic never mixes
             (Debezium: 'envelope' or 'unwrapped' ExtractNewRecordState rows); else null
    + the raw lineage columns (key, value, topic, partition, offset, timestamp, headers)

Everything after decoding (counts, quarantine, changes, the fold) is format-agnostic.
"""
from __future__ import annotations

from dataclasses import dataclass, field

DECODED, QUARANTINED, IGNORED = "decoded", "quarantined", "ignored"
ENVELOPE, UNWRAPPED = "envelope", "unwrapped"
MESSAGE_SHAPES = (ENVELOPE, UNWRAPPED)


@dataclass(frozen=True)
class DecodeOptions:
    # table (full table_id or its last part) -> primary-key columns, from --primary-keys
    primary_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # documents remembered from earlier runs (Qlik metadata messages), kept in the lake by the
    # decode stage; each is self-describing JSON and a decoder uses those it understands
    memory: tuple[str, ...] = ()
    # the shape every topic of the pipeline carries (--message-shape); None: decided per topic
    message_shape: str | None = None
    # topic -> the shape an earlier run of the pipeline decided it carries (jobs.decode.stage)
    topic_shapes: dict[str, str] = field(default_factory=dict)


def available_formats() -> list[str]:
    """Every ``--format`` (jobs.formats.registry), ``auto`` among them."""
    from jobs.formats.registry import names

    return list(names())
