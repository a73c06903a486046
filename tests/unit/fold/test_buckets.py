"""Key buckets of state rows by Iceberg's bucket transform (jobs.fold.buckets: touched_buckets, new_layout),
checked against pyiceberg's own transform."""
from __future__ import annotations

from pyiceberg.transforms import BucketTransform
from pyiceberg.types import IntegerType, StringType
from pyspark.sql import functions as F

from jobs.fold.buckets import new_layout, touched_buckets
from jobs.iceberg.layout import with_bucket
from jobs.model.buckets import BucketField, BucketLayout


def test_touched_buckets_are_iceberg_buckets_of_the_changed_keys(spark):
    layout = BucketLayout((BucketField("id", "int", 8),))
    bucket = BucketTransform(8).transform(IntegerType())
    changes = spark.createDataFrame(
        [({"id": "3"},), ({"id": "003"},), ({"id": "41"},), (None,)], "key map<string,string>")
    # "003" is the canonical key 3 once typed: the same bucket
    assert touched_buckets(changes, layout, {"id": "int"}) == frozenset({bucket(3), bucket(41)})


def test_a_composite_keys_bucket_number_is_its_fields_buckets_in_mixed_radix(spark):
    layout = BucketLayout((BucketField("k", "string", 5), BucketField("id", "int", 4)))
    rows = spark.createDataFrame([("a", 1), ("b", 7), (None, 2)], "k string, id int")
    got = {(r["k"], r["id"]): r["_cdc_bucket"] for r in with_bucket(rows, layout).collect()}
    k, i = BucketTransform(5).transform(StringType()), BucketTransform(4).transform(IntegerType())
    assert got == {("a", 1): layout.index((k("a"), i(1))), ("b", 7): layout.index((k("b"), i(7))),
                   (None, 2): layout.index((None, i(2)))}


def test_a_new_layout_spreads_a_composite_key_by_its_most_distinct_column(spark):
    state = spark.range(200).select((F.col("id") % 2).cast("int").alias("flag"), F.col("id").cast("string").alias("k"))
    assert new_layout(state, {"flag": "int", "k": "string"}, 16) == BucketLayout((BucketField("k", "string", 16),))
    # one bucketable column needs no look at the state; none leaves the table unpartitioned
    assert new_layout(state, {"x": "double", "flag": "int"}, 16) == BucketLayout((BucketField("flag", "int", 16),))
    assert new_layout(state, {"x": "double"}, 16) is None
