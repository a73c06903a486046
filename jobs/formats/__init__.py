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

from collections.abc import Callable
from dataclasses import dataclass, field

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
    # topic -> the shape an earlier run of the pipeline decided it carries (jobs.decode.stage)
    topic_shapes: dict[str, str] = field(default_factory=dict)


class BaseDecoder:
    """A format's decoder: ``decode``, and the hooks a format overrides where it needs them."""

    name: str
    # whether the format's messages come in several shapes that one topic never mixes (the outcome's
    # ``shape``): the decode stage then decides each topic's shape (jobs.decode.stage)
    shaped: bool = False

    def decode(self, raw: DataFrame, options: DecodeOptions) -> DataFrame:
        """Raw Kafka-schema rows -> outcomes (see the module docstring)."""
        raise NotImplementedError

    def remember(self, raw: DataFrame) -> list[str]:
        """Documents of this snapshot that later messages may need (kept by the decode stage, given
        back in DecodeOptions.memory); most formats need none."""
        return []


def remembered_documents(decoder: BaseDecoder, raw: DataFrame) -> list[str]:
    """What later messages may need from this snapshot (the decoder's ``remember``)."""
    return decoder.remember(raw)


_REGISTRY: dict[str, Callable[[], BaseDecoder]] = {}


def register(name: str) -> Callable[[Callable[[], BaseDecoder]], Callable[[], BaseDecoder]]:
    def wrap(factory: Callable[[], BaseDecoder]) -> Callable[[], BaseDecoder]:
        _REGISTRY[name] = factory
        return factory

    return wrap



def _load_builtin() -> None:
    """Import every format's decoder (``<format>/decoder.py``) and auto: importing one registers it."""
    import importlib
    import pkgutil

    for module in pkgutil.iter_modules(__path__):
        if module.ispkg:
            importlib.import_module(f"{__name__}.{module.name}.decoder")
    importlib.import_module(f"{__name__}.auto")


def available_formats() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def get_decoder(name: str) -> BaseDecoder:
    _load_builtin()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown format {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None
