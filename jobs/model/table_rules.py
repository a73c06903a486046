"""Which tables a per-table setting applies to: one matching rule for the decoders, the fold and reconcile.

A pattern names tables as the pipeline's table ids do (``shop.public.orders``):

- without a wildcard it is a table id, or its last part (``orders``), as ``--primary-keys`` always took;
- with ``*`` (any run of characters, dots included) or ``?`` (one character) it is a glob over the whole
  table id, as Flink CDC's pipelines match ``source-table`` (``shop.public.*``, ``*.orders_2026_??``).

Standard library only: the DAG processor imports it through jobs.config.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

WILDCARDS = ("*", "?")


def is_glob(pattern: str) -> bool:
    return any(w in pattern for w in WILDCARDS)


def glob_regex(pattern: str) -> str:
    """The anchored regular expression of a glob, in the syntax Java and Python share (the JVM-side
    decoders and Spark's ``rlike`` match with it); ``(?s)``: a wildcard matches any character."""
    parts = []
    for ch in pattern:
        parts.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
    return "(?s)^" + "".join(parts) + "$"


def matches(pattern: str, table_id: str) -> bool:
    """Whether ``pattern`` names ``table_id`` (see the module's doc)."""
    if is_glob(pattern):
        return re.match(glob_regex(pattern), table_id) is not None
    return pattern == table_id or pattern == table_id.rsplit(".", 1)[-1]


def first_match(patterns: Iterable[str], table_id: str) -> str | None:
    """The first pattern naming ``table_id``: exact ids first, then last parts, then globs in their order,
    so that a rule for one table wins over a rule for a family of tables."""
    listed = list(patterns)
    for candidates in ([p for p in listed if p == table_id],
                       [p for p in listed if not is_glob(p) and p == table_id.rsplit(".", 1)[-1]],
                       [p for p in listed if is_glob(p) and matches(p, table_id)]):
        if candidates:
            return candidates[0]
    return None


def setting_for(rules: Sequence[tuple[str, Any]], table_id: str, default: Any = None) -> Any:
    """The value of the most specific (pattern, value) rule naming ``table_id`` (:func:`first_match`)."""
    pattern = first_match([p for p, _ in rules], table_id)
    return default if pattern is None else next(v for p, v in rules if p == pattern)
