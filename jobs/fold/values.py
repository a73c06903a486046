"""Canonical strings (how decoders render every value) to typed state values and back, in Spark SQL."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.fold.types import DECIMAL, READABLE_DATES

_TS_FMT = "yyyy-MM-dd HH:mm:ss.SSSSSS"


def to_canonical_string(col: Column, spark_type: str) -> Column:
    """Typed state value -> the canonical string a decoder would have produced."""
    if spark_type == "binary":
        return F.base64(col)
    if spark_type == "timestamp":
        return F.date_format(col, _TS_FMT)
    return col.cast("string")


def from_canonical_string(col: Column, spark_type: str) -> Column:
    """Canonical string -> typed state value (jobs.fold.types.from_canonical_sql: the same as SQL text)."""
    if spark_type == "binary":
        return F.try_to_binary(col, F.lit("base64"))
    if spark_type == "string":
        return col
    typed = col.try_cast(spark_type)
    if spark_type in ("date", "timestamp"):
        # a date past what readers hold does not convert: published null, and counted as unconverted
        earliest, latest = (F.lit(d).cast(spark_type) for d in READABLE_DATES)
        return F.when(typed.between(earliest, latest), typed)
    return typed


_EXAMPLE_CHARS = 100


def unconverted_values(rows: Column, types: dict[str, str], frame: DataFrame) -> dict[str, dict]:
    """What the typed state cannot hold of the row images ``rows`` (a map column of ``frame``), per
    column: values published as null because they do not convert to the column's type (``nulled``),
    and decimals with more fraction digits than its scale, published rounded (``rounded``), with the
    least such value as an ``example``. One aggregate, only over typed columns (a table of strings
    converts nothing); columns with nothing lost are left out."""
    checks: list[Column] = []
    typed = [c for c, t in types.items() if t != "string"]
    for i, col in enumerate(typed):
        text = F.element_at(rows, col)
        converted = from_canonical_string(text, types[col])
        nulled = text.isNotNull() & converted.isNull()
        decimal = DECIMAL.fullmatch(types[col])
        # a digit other than 0 past the scale's digits of the fraction: try_cast rounds it away
        rounded = (converted.isNotNull() & text.rlike(rf"^\s*[-+]?[0-9]*\.[0-9]{{{decimal.group(2)}}}[0-9]*[1-9]")
                   if decimal else F.lit(False))
        checks += [F.count(F.when(nulled, 1)).alias(f"n{i}"), F.count(F.when(rounded, 1)).alias(f"r{i}"),
                   F.min(F.when(nulled | rounded, text)).alias(f"x{i}")]
    if not checks:
        return {}
    found = frame.where(rows.isNotNull()).agg(*checks).first()
    return {col: {"type": types[col], "nulled": found[f"n{i}"], "rounded": found[f"r{i}"],
                  "example": found[f"x{i}"][:_EXAMPLE_CHARS]}
            for i, col in enumerate(typed) if found[f"n{i}"] or found[f"r{i}"]}
