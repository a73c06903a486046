"""A format's decoder by name: its module, which the format's registry entry names, imported only now
(a decoder imports pyspark; the registry does not)."""
from __future__ import annotations

import importlib

from jobs.formats.base import BaseDecoder
from jobs.formats.registry import entry


def get_decoder(name: str) -> BaseDecoder:
    """The decoder of format ``name`` (ValueError naming the known formats for another name)."""
    module, _, class_name = entry(name).decoder.partition(":")
    return getattr(importlib.import_module(module), class_name)()
