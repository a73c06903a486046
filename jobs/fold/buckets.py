"""Key-hash buckets of state rows: the unit a run rewrites (or deletes from) when it touches few keys."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.fold.values import from_canonical_string, to_canonical_string


def key_bucket(typed_keys: dict[str, str], buckets: int) -> Column:
    """The state bucket of a row, from its typed key columns (name -> type). Hashed from their canonical
    strings, so a key column's promotion (int -> bigint) keeps every row in its bucket."""
    hashed = F.xxhash64(*[to_canonical_string(F.col(k), t) for k, t in typed_keys.items()])
    return F.pmod(hashed, F.lit(buckets)).cast("int")


def touched_buckets(changes: DataFrame, typed_keys: dict[str, str], buckets: int) -> frozenset[int]:
    """The buckets a table's change records touch (at most ``buckets`` small rows reach the driver)."""
    keys = changes.where(F.col("key").isNotNull()).select(
        *[from_canonical_string(F.element_at("key", k), t).alias(k) for k, t in typed_keys.items()])
    rows = keys.select(key_bucket(typed_keys, buckets).alias("b")).distinct().collect()
    return frozenset(int(r["b"]) for r in rows)
