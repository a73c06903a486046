"""The last step of a value mismatch's drill-down: for each key whose row differs at the moment, the columns
whose values differ, with both values (docs/operations/reconciliation.md, "Values").

The source's hashes are the moment's (its snapshot kept them); its values are read later, when the mismatch
is judged. A row is compared only where both sides still hold it as it was at the moment: the source's row
hash now is the one its snapshot kept, and the lake applied no change of the key after the moment. Else the
row is named with why its columns are not shown. Values are the rule's canonical texts
(jobs.fold.fingerprints), the ones the hashes are of: a difference shown is a difference hashed.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

ROWS_SHOWN = 20  # differing keys whose columns a verdict shows
MASKED = "(masked)"  # a sensitive column's value, as every report shows it

Texts = Mapping[str, str | None]  # column -> canonical text (None: NULL)


@dataclass(frozen=True)
class ColumnRules:
    """What a pipeline file declares of a table's columns for the comparison of values."""

    sensitive: frozenset[str] = frozenset()  # values never shown: compared, named, masked
    tolerances: Mapping[str, float] = field(default_factory=dict)  # column -> largest absolute difference allowed

    def shown(self, column: str, text: str | None) -> str | None:
        return MASKED if column in self.sensitive and text is not None else text

    def tolerated(self, column: str, source: str | None, lake: str | None) -> bool:
        """Whether a difference of two values is within the column's tolerance (numbers only)."""
        tolerance = self.tolerances.get(column)
        if tolerance is None or source is None or lake is None:
            return False
        try:
            difference = abs(float(source) - float(lake))
        except ValueError:
            return False
        return math.isfinite(difference) and difference <= tolerance


class RowReader(Protocol):
    """The rows of some keys of a table, as each side holds them when the mismatch is judged."""

    def source(self, table: str, keys: Sequence[str]) -> Mapping[str, tuple[str, Texts]] | None:
        """key -> (its row hash in 16 hex digits, its texts); None: the source's rows cannot be read."""

    def lake(self, table: str, keys: Sequence[str]) -> Mapping[str, Texts] | None:
        """key -> its texts in the lake's state; None: not at hand."""

    def rules(self, table: str) -> ColumnRules: ...


def differing_columns(source: Texts, lake: Texts) -> list[str]:
    return sorted(c for c in set(source) | set(lake) if source.get(c) != lake.get(c))


def compare_rows(keys: Sequence[str], moment_hashes: Mapping[str, str], changed_after: Collection[str],
                 source_now: Mapping[str, tuple[str, Texts]], lake_now: Mapping[str, Texts],
                 rules: ColumnRules) -> list[dict]:
    """One entry per key: its differing columns with both values, or why they are not shown."""
    rows = []
    for key in keys:
        source = source_now.get(key)
        if key in changed_after:
            rows.append({"key": key, "not_compared": "the lake changed the row after the moment"})
        elif source is None or source[0] != moment_hashes.get(key):
            rows.append({"key": key, "not_compared": "the source changed the row after the moment"})
        elif key not in lake_now:
            rows.append({"key": key, "not_compared": "the lake holds no such row now"})
        else:
            texts, lake = source[1], lake_now[key]
            rows.append({"key": key, "columns": [
                {"column": c, "source": rules.shown(c, texts.get(c)), "lake": rules.shown(c, lake.get(c)),
                 "within_tolerance": rules.tolerated(c, texts.get(c), lake.get(c))}
                for c in differing_columns(texts, lake)]})
    return rows


def all_tolerated(rows: Sequence[dict]) -> bool:
    """Whether every row was compared and each of its differences is within its column's tolerance."""
    return bool(rows) and all("columns" in r and r["columns"] and all(c["within_tolerance"] for c in r["columns"])
                              for r in rows)
