"""State column types: what a declared type becomes in state, and which changes Iceberg can promote (no Spark)."""
from __future__ import annotations

import re

META_COLUMNS = {
    "_cdc_position": "string",
    "_cdc_op": "string",
    "_cdc_event_time": "timestamp",
    "_cdc_run_id": "string",
}
# the meta columns of nearly one value per state row (jobs.spark.session.without_dictionary)
UNIQUE_META_COLUMNS = ("_cdc_position", "_cdc_event_time")
# the types a state column may have; narrower integer types widen (Iceberg has no int8/int16)
_WIDEN = {"tinyint": "int", "smallint": "int", "byte": "int", "short": "int", "integer": "int", "long": "bigint",
          "real": "float", "bool": "boolean", "timestamp_ntz": "timestamp"}
_SIMPLE = {"string", "int", "bigint", "float", "double", "boolean", "date", "timestamp", "binary"}
DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")  # a state type's precision and scale


def state_type(declared: str | None) -> str:
    """A declared column type -> the state type (unknown or exotic types stay strings)."""
    if not declared:
        return "string"
    t = _WIDEN.get(declared.strip().lower(), declared.strip().lower())
    if t in _SIMPLE or (t.startswith("decimal(") and t.endswith(")")):
        return t
    return "string"


def promotable(published: str, declared: str) -> bool:
    """Whether Iceberg can widen a column from ``published`` to ``declared`` (int -> bigint, float ->
    double, a decimal to more precision at the same scale) without rewriting data."""
    if (published, declared) in (("int", "bigint"), ("float", "double")):
        return True
    p, d = DECIMAL.fullmatch(published), DECIMAL.fullmatch(declared)
    return bool(p and d and p.group(2) == d.group(2) and int(d.group(1)) > int(p.group(1)))


# the dates Spark holds and readers do not: Python's (pyiceberg's statistics, GX) end in year 9999
READABLE_DATES = ("0001-01-02", "9999-12-30")


def from_canonical_sql(v: str, spark_type: str) -> str:
    """``from_canonical_string`` as Spark SQL text over the SQL ``v`` (for SQL inside a fold's lambda)."""
    if spark_type == "binary":
        return f"try_to_binary({v}, 'base64')"
    if spark_type == "string":
        return v
    typed = f"try_cast({v} AS {spark_type})"
    if spark_type in ("date", "timestamp"):
        earliest, latest = (f"CAST('{d}' AS {spark_type})" for d in READABLE_DATES)
        return f"transform(array({typed}), _cv -> CASE WHEN _cv BETWEEN {earliest} AND {latest} THEN _cv END)[0]"
    return typed
