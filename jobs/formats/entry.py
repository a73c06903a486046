"""A format's registry entry: what the pipeline knows of a format without Spark.

Each format's folder declares one (``ENTRY`` in jobs/formats/<format>/__init__.py) and
jobs.formats.registry lists them: the pipeline file's schema (jobs.config) and reconcile (a checkpoint's
position) read them without importing pyspark; a run imports the decoder only when it decodes.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jobs.model.positions import Cut


@dataclass(frozen=True)
class FormatEntry:
    name: str  # what --format and source.format say
    decoder: str  # "<module>:<class>" of its decoder (jobs.formats.base.BaseDecoder), imported when decoding
    # a source position's text (an LSN, a binlog position, an SCN ...) -> the cut among the format's
    # positions (jobs.model.positions); None: its messages carry no log position of the source's
    cut: Callable[[str], Cut] | None = None
    # its messages come in several shapes that one topic never mixes (the outcome's ``shape``): the decode
    # stage decides each topic's (jobs.decode.stage)
    shaped: bool = False
    # the Java class that decodes it (jvm/src/cdc, jobs.spark.jvm), where decoding is JVM-side
    jvm_decoder: str | None = None
