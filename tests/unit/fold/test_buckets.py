"""Key-hash buckets of state rows (jobs.fold.buckets.key_bucket / touched_buckets)."""
from __future__ import annotations

from pyspark.sql import functions as F

from jobs.fold.buckets import key_bucket, touched_buckets


def test_bucket_is_in_range_spread_and_stable_under_key_promotion(spark):
    df = spark.range(2000).select(F.col("id").cast("int").alias("id"), F.lit("x").alias("k2"))
    as_int = df.select(key_bucket({"id": "int", "k2": "string"}, 16).alias("b"))
    as_bigint = df.select(F.col("id").cast("bigint").alias("id"), "k2").select(
        key_bucket({"id": "bigint", "k2": "string"}, 16).alias("b"))
    sizes = {r["b"]: r["count"] for r in as_int.groupBy("b").count().collect()}
    assert set(sizes) == set(range(16))
    assert max(sizes.values()) < 2 * 2000 / 16  # a hash, not a skew
    # an int key column widened to bigint keeps every row in its bucket
    assert as_int.exceptAll(as_bigint).count() == 0 and as_int.count() == as_bigint.count()


def test_touched_buckets_are_those_of_the_changed_keys(spark):
    state = spark.range(500).select(F.col("id").cast("int").alias("id"))
    buckets = {r["id"]: r["b"] for r in state.select("id", key_bucket({"id": "int"}, 8).alias("b")).collect()}
    changes = spark.createDataFrame(
        [({"id": "3"},), ({"id": "003"},), ({"id": "41"},), (None,)], "key map<string,string>")
    # "003" is the canonical key 3 once typed: the same bucket
    assert touched_buckets(changes, {"id": "int"}, 8) == frozenset({buckets[3], buckets[41]})
