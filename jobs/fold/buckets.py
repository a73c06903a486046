"""Key buckets of state rows (Iceberg's bucket transform, jobs.model.buckets): the unit a run rewrites (or
deletes from) when it touches few keys, and the layout of a table that gets one."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.fold.values import from_canonical_string
from jobs.iceberg.layout import BUCKET_COLUMN, with_bucket
from jobs.model.buckets import BucketLayout, bucketable, choose_layout


def touched_buckets(changes: DataFrame, layout: BucketLayout, key_types: dict[str, str]) -> frozenset[int]:
    """The buckets a table's change records touch (at most as many small rows as buckets reach the driver)."""
    keys = changes.where(F.col("key").isNotNull()).select(
        *[from_canonical_string(F.element_at("key", k), t).alias(k) for k, t in key_types.items()])
    rows = with_bucket(keys, layout).select(BUCKET_COLUMN).distinct().collect()
    return frozenset(int(r[BUCKET_COLUMN]) for r in rows)


def new_layout(state: DataFrame, key_types: dict[str, str], buckets: int) -> BucketLayout | None:
    """The layout of a table laid out by this run, from the state it writes: a key of several bucketable
    columns is spread by the most distinct of them (one aggregation of the state); one needs no look."""
    candidates = [c for c, t in key_types.items() if bucketable(t)]
    distinct = {}
    if len(candidates) > 1:
        row = state.select(*[F.approx_count_distinct(F.col(f"`{c.replace('`', '``')}`")).alias(f"d{i}")
                             for i, c in enumerate(candidates)]).first()
        distinct = {c: int(row[f"d{i}"]) for i, c in enumerate(candidates)}
    return choose_layout(key_types, distinct, buckets)
