"""Iceberg's bucket transform on the JVM (jvm/src/cdc/IcebergBucket.java) against pyiceberg's own
(an independent implementation over mmh3), on every key type a state table buckets."""
from __future__ import annotations

import datetime as dt
import decimal
import random

import pytest
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import BinaryType, DateType, DecimalType, IntegerType, LongType, StringType, TimestampType

from jobs.spark.jvm import register_iceberg_bucket

N = 16
_rng = random.Random(46)
_EPOCH = dt.datetime(1970, 1, 1)
CASES = [
    # (Iceberg type, Spark SQL type, the SQL of a value as the function takes it, the values)
    (IntegerType(), "int", "cast(v as bigint)", "long", [0, 1, -1, 34, 2**31 - 1, -2**31] +
     [_rng.randint(-2**31, 2**31 - 1) for _ in range(40)]),
    (LongType(), "bigint", "v", "long", [2**63 - 1, -2**63] + [_rng.randint(-2**63, 2**63 - 1) for _ in range(40)]),
    (StringType(), "string", "v", "string", ["", "a", "iceberg", "é", "日本語", "🙂 x", "a\x00b"] +
     ["".join(_rng.choice("abcxyz€") for _ in range(_rng.randint(0, 24))) for _ in range(40)]),
    (DateType(), "date", "cast(unix_date(v) as bigint)", "long", [dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(9999, 12, 31)] +
     [dt.date(1970, 1, 1) + dt.timedelta(days=_rng.randint(-20000, 20000)) for _ in range(40)]),
    (TimestampType(), "timestamp_ntz", "unix_micros(cast(v as timestamp))", "long",
     [_EPOCH + dt.timedelta(microseconds=_rng.randint(-2**50, 2**50)) for _ in range(40)]),
    (DecimalType(10, 2), "decimal(10,2)", "v", "decimal", [decimal.Decimal("14.20"), decimal.Decimal("-0.01")] +
     [decimal.Decimal(_rng.randint(-10**9, 10**9)).scaleb(-2) for _ in range(40)]),
    (BinaryType(), "binary", "v", "binary", [b"", b"\x00\x01\x02\x03"] +
     [bytes(_rng.randrange(256) for _ in range(_rng.randint(1, 24))) for _ in range(40)]),
]


@pytest.mark.parametrize("iceberg_type, spark_type, as_taken, function, values", CASES,
                         ids=[str(c[0]) for c in CASES])
def test_the_jvm_bucket_is_icebergs_on_every_key_type(spark, iceberg_type, spark_type, as_taken, function, values):
    register_iceberg_bucket(spark)
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], f"i int, v {spark_type}")
    rows = frame.selectExpr("i", f"iceberg_bucket_{function}({as_taken}, {N}) as b").collect()
    expected = BucketTransform(N).transform(iceberg_type)
    # timestamps as pyiceberg takes them: microseconds since the epoch
    taken = (lambda v: (v - _EPOCH) // dt.timedelta(microseconds=1)) if spark_type == "timestamp_ntz" else (
        (lambda v: (v - dt.date(1970, 1, 1)).days) if spark_type == "date" else (lambda v: v))
    assert {r["i"]: r["b"] for r in rows} == {i: expected(taken(v)) for i, v in enumerate(values)}


def test_a_null_key_has_no_bucket(spark):
    register_iceberg_bucket(spark)
    assert spark.sql("select iceberg_bucket_string(cast(null as string), 16) as b").first()["b"] is None
