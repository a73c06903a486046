"""How a state table is laid out in key buckets, as Iceberg's own ``bucket[N]`` partition transform on its key
columns (so that every engine prunes a lookup by key), and how the pipeline numbers those buckets. No Spark.

Iceberg's bucket transform takes one column. A table keyed by one bucketable column is partitioned by
``bucket[N](key)``. A composite key is partitioned by one bucket field on its most distinct column when that
column alone fills the N buckets, else by a bucket field on each of its most distinct columns, their counts'
product about N: either way a lookup by the whole key reads one partition. A key without a bucketable
column (only boolean, float or double values) leaves the table unpartitioned.

The pipeline numbers a partition (the tuple of its fields' buckets) by one integer, the unit a run rewrites
or deletes from: mixed radix over the fields, each with one more digit than its bucket count for a null
value (a whole-row key may hold nulls).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# the state types Iceberg's bucket transform accepts (not boolean, float or double: the spec excludes them)
BUCKETABLE = ("int", "bigint", "date", "timestamp", "string", "binary")


def bucketable(state_type: str) -> bool:
    return state_type in BUCKETABLE or state_type.startswith("decimal(")


def hashes_alike(published: str, declared: str) -> bool:
    """Whether a key column's values keep their buckets when its type changes from ``published`` to ``declared``
    (Iceberg hashes an int as the long it widens to)."""
    return published == declared or (published, declared) == ("int", "bigint")


@dataclass(frozen=True)
class BucketField:
    column: str
    state_type: str
    count: int  # N of bucket[N]


@dataclass(frozen=True)
class BucketLayout:
    """A table's bucket partition fields, in the partition spec's order."""

    fields: tuple[BucketField, ...]

    @property
    def buckets(self) -> int:
        """How many buckets hold rows of non-null keys (the product of the fields' counts)."""
        return math.prod(f.count for f in self.fields)

    def index(self, partition: tuple) -> int:
        """The pipeline's number of a partition (its fields' buckets; None: the null value's)."""
        index = 0
        for field, value in zip(self.fields, partition, strict=True):
            index = index * (field.count + 1) + (field.count if value is None else int(value))
        return index

    def partition(self, index: int) -> tuple:
        """The partition (its fields' buckets) of the pipeline's bucket number ``index``."""
        values = []
        for field in reversed(self.fields):
            index, digit = divmod(index, field.count + 1)
            values.append(None if digit == field.count else digit)
        if index:
            raise ValueError(f"bucket number out of the layout's range ({self.describe()})")
        return tuple(reversed(values))

    def fits(self, key_types: dict[str, str]) -> bool:
        """Whether the layout still partitions a table keyed by ``key_types``: every field on a key column whose
        values hash as they did."""
        return all(f.column in key_types and hashes_alike(f.state_type, key_types[f.column]) for f in self.fields)

    def with_types(self, key_types: dict[str, str]) -> BucketLayout:
        """The layout with its columns' types as the key now has them (a fitting layout: int widened to bigint)."""
        return BucketLayout(tuple(BucketField(f.column, key_types[f.column], f.count) for f in self.fields))

    def describe(self) -> str:
        return ", ".join(f"bucket[{f.count}]({f.column})" for f in self.fields)


def choose_layout(key_types: dict[str, str], distinct: dict[str, int], buckets: int) -> BucketLayout | None:
    """The layout of a new (or re-keyed) table of about ``buckets`` buckets, from its key columns' types and
    how many distinct values each holds (``distinct``: an estimate; columns it lacks count as one value).
    None: no key column is bucketable, or ``buckets`` < 1."""
    candidates = [c for c, t in key_types.items() if bucketable(t)]
    if buckets < 1 or not candidates:
        return None
    # most distinct first (the key's own order breaks ties); a column of one value spreads nothing
    ranked = sorted(candidates, key=lambda c: -distinct.get(c, 1))
    useful = [c for c in ranked if distinct.get(c, 1) >= 2] or ranked[:1]
    fields, remaining = [], buckets
    for column in useful:
        # the last field takes what is left: the values seen when the layout is made are not all there will be
        last = column == useful[-1] or distinct.get(column, 1) >= remaining
        count = remaining if last else distinct[column]
        fields.append(BucketField(column, key_types[column], count))
        if last:
            break
        remaining = math.ceil(remaining / count)
    return BucketLayout(tuple(fields))
