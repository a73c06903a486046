"""pad_unsigned: fixed-width digits whose string order is the numeric (unsigned 64-bit) order, and its
Python twin for the formats' cuts (jobs.model.positions.pad)."""
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from jobs.formats.base import pad_unsigned
from jobs.model.positions import pad

# plain longs, values past 2^63 sent as negative longs or as unsigned text, and text
# that is a number in another form (the decimal path)
TEXTS = ["0", "7", "007", "+12", " 12", "1.4", "1.5", "1e3", "9223372036854775807", "9223372036854775808",
         "18446744073709551615", "-1", "-9223372036854775808", "123456789012345678901", "abc", "", None]


def _reference(text: str | None, width: int) -> str | None:
    """Independent reading: the integer (rounded half up), negatives as unsigned 64-bit, padded with
    zeros to ``width`` (and cut to ``width`` when longer, as Spark's lpad does)."""
    if text is None:
        return None
    try:
        number = Decimal(text.strip()).quantize(Decimal(1), rounding="ROUND_HALF_UP")
    except ArithmeticError:
        return None
    if number < 0:
        number += 2**64
    return str(int(number)).rjust(width, "0")[:width]


@pytest.mark.parametrize("width", [20, 10])
def test_pad_unsigned_matches_an_independent_reading(spark, width):
    df = spark.createDataFrame([(t,) for t in TEXTS], "t string")
    got = {r["t"]: r["p"] for r in df.select("t", pad_unsigned(F.col("t"), width).alias("p")).collect()}
    assert got == {t: _reference(t, width) for t in TEXTS}


def test_pad_unsigned_of_long_columns(spark):
    df = spark.createDataFrame([(5,), (-1,), (None,)], "n bigint")
    got = [r["p"] for r in df.select(pad_unsigned(F.col("n")).alias("p")).collect()]
    assert got == ["00000000000000000005", "18446744073709551615", None]


def test_padded_positions_sort_in_unsigned_order(spark):
    values = ["3", "12", "9223372036854775807", "-9223372036854775808", "-1"]  # the last two: 2^63, 2^64-1
    df = spark.createDataFrame([(v,) for v in values], "t string")
    ordered = [r["t"] for r in df.orderBy(pad_unsigned(F.col("t"))).collect()]
    assert ordered == values


def test_the_cuts_pad_a_number_as_the_decoders_do(spark):
    numbers = [0, 7, 1234, 2**31, 2**63, 2**64 - 1, 10**9]
    df = spark.createDataFrame([(str(n),) for n in numbers], "t string")
    got = df.select(*[pad_unsigned(F.col("t"), w).alias(str(w)) for w in (10, 20, 38)]).collect()
    for width in (10, 20, 38):
        fitting = [(n, row[str(width)]) for n, row in zip(numbers, got) if len(str(n)) <= width]
        assert [text for _, text in fitting] == [pad(n, width) for n, _ in fitting]
