"""The formats, by name: each one's entry (jobs.formats.entry), declared in its folder.

Light on purpose -- no pyspark here nor in the entries (an import-linter contract in pyproject.toml
keeps it so): the pipeline file's schema (jobs.config) takes its format names from here, and reconcile
places a checkpoint's source position with the format's own cut (``bound``), without Spark. A run
imports a format's decoder only when it decodes (jobs.formats.decoders.get_decoder).
"""
from __future__ import annotations

from jobs.formats import canal, dataworks, debezium, dts_avro, maxwell, ogg, qlik, shareplex
from jobs.formats.entry import FormatEntry
from jobs.model.positions import Cut, place

# each message sniffed and decoded by the decoder of its format (jobs/formats/auto.py)
AUTO = FormatEntry("auto", "jobs.formats.auto:AutoDecoder")

ENTRIES: dict[str, FormatEntry] = {e.name: e for e in sorted(
    (AUTO, canal.ENTRY, dataworks.ENTRY, debezium.ENTRY, dts_avro.ENTRY, maxwell.ENTRY, ogg.ENTRY, qlik.ENTRY,
     shareplex.ENTRY), key=lambda e: e.name)}


def names() -> tuple[str, ...]:
    """Every format's name, in order (``auto`` among them)."""
    return tuple(ENTRIES)


def entry(name: str) -> FormatEntry:
    try:
        return ENTRIES[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; known: {', '.join(ENTRIES)}") from None


def bound(fmt: str | None, text: str) -> Cut:
    """The cut a checkpoint's position text stands for among ``fmt``'s positions (jobs.model.positions)."""
    known = ENTRIES.get(fmt or "")
    return place(fmt, text, known.cut if known else None)
