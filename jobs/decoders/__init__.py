"""Decoders: one module per format behind one small interface, chosen from a registry.

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
from typing import Callable, Protocol

from pyspark.sql import DataFrame

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
    # topic -> the shape an earlier run of the pipeline decided it carries (jobs.decode)
    topic_shapes: dict[str, str] = field(default_factory=dict)


class Decoder(Protocol):
    name: str

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """Raw Kafka-schema rows -> outcomes (see the module docstring)."""


def remembered_documents(decoder: Decoder, raw: DataFrame) -> list[str]:
    """What later messages may need from this snapshot (a decoder's optional ``remember``)."""
    remember = getattr(decoder, "remember", None)
    return remember(raw) if remember else []


_REGISTRY: dict[str, Callable[[], Decoder]] = {}


def register(name: str) -> Callable[[Callable[[], Decoder]], Callable[[], Decoder]]:
    def wrap(factory: Callable[[], Decoder]) -> Callable[[], Decoder]:
        _REGISTRY[name] = factory
        return factory

    return wrap


_SUPPORT_MODULES = {"common"}


def _load_builtin() -> None:
    """Import every decoder module of this package: importing one registers it."""
    import importlib
    import pkgutil

    for module in pkgutil.iter_modules(__path__):
        if module.name not in _SUPPORT_MODULES:
            importlib.import_module(f"{__name__}.{module.name}")


def available_formats() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def get_decoder(name: str) -> Decoder:
    _load_builtin()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown format {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None
