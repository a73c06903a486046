"""The fingerprint rule in its Python form, and Spark's form against it for what no database column holds
(NaN, infinities). The agreement of Spark and the real databases: tests/integration/test_fingerprints.py."""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest

from jobs.fold import fingerprints as rule
from jobs.reconcile import fingerprint as fp

KEY = {"id": "bigint"}


@pytest.mark.parametrize(("value", "text"), [
    (0.1, "1e-1"), (-2.5, "-25e-1"), (100.0, "1e2"), (1 / 3, "333333333333333e-15"), (2e23, "2e23"),
    (123456789012345680.0, "123456789012346e3"), (5e-324, "494065645841247e-338"), (-0.0, "0"),
    (1.7976931348623157e308, "179769313486232e294"), (math.inf, "Infinity"), (-math.inf, "-Infinity"),
    (math.nan, "NaN"),
])
def test_a_float_is_its_fifteen_significant_digits(value, text):
    assert rule.float_text(value) == text


def test_a_float_column_holds_its_32_bit_value():
    assert rule.value_text(0.1, "float") == "100000001490116e-15"
    assert rule.value_text(0.1, "double") == "1e-1"


@pytest.mark.parametrize(("value", "scale", "text"), [
    (Decimal("12.500"), 3, "12.5"), (Decimal("100"), 0, "100"), (Decimal("0.000"), 3, "0"),
    ("-0.0004", 3, "0"), ("1.0005", 3, "1.001"), ("-1.0005", 3, "-1.001"), (7, 2, "7"),
])
def test_a_decimal_is_rounded_to_its_scale_without_trailing_zeros(value, scale, text):
    assert rule.decimal_text(value, scale) == text


def test_other_types_text():
    assert rule.value_text(True, "boolean") == "true"
    assert rule.value_text(0, "boolean") == "false"
    assert rule.value_text(dt.date(999, 1, 2), "date") == "0999-01-02"
    assert rule.value_text(dt.datetime(2024, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=2))), "timestamp") == \
        "2023-12-31 23:00:00.000000"
    assert rule.value_text("2024-01-01 00:00:00.5", "timestamp") == "2024-01-01 00:00:00.500000"
    assert rule.value_text(b"\x00\xab", "binary") == "00ab"
    assert rule.value_text("{\"a\": 1}", "string") == "{\"a\": 1}"


def test_a_null_column_is_left_out_so_an_added_column_changes_no_older_row():
    row = {"id": 1, "name": "ann"}
    before = rule.row_text(row, {"id": "bigint", "name": "string"})
    assert before == "id=1:1;name=3:ann;"
    assert rule.row_text(row, {"id": "bigint", "name": "string", "added": "int"}) == before
    # lengths keep values apart that their concatenation would not
    assert rule.row_text({"a": "x;b=1:y", "b": None}, {"a": "string", "b": "string"}) != \
        rule.row_text({"a": "x", "b": "y"}, {"a": "string", "b": "string"})


def test_a_changed_value_changes_its_bucket_fingerprint_only_by_its_step():
    types = {"id": "bigint", "s": "string"}
    rows = [{"id": i, "s": f"v{i}"} for i in range(200)]
    before = _bucket_sums(rows, types)
    rows[17] = {"id": 17, "s": "changed"}
    after = _bucket_sums(rows, types)
    bucket = rule.text_bucket(rule.row_text({"id": 17}, KEY))
    assert {b for b in before if before[b] != after[b]} == {bucket}
    step = rule.text_hash(rule.row_text(rows[17], types)) - rule.text_hash(rule.row_text({"id": 17, "s": "v17"}, types))
    assert rule.add(before[bucket], step) == after[bucket]


def _bucket_sums(rows, types) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in rows:
        b = rule.text_bucket(rule.row_text(r, KEY))
        out[b] = rule.add(out.get(b, 0), rule.text_hash(rule.row_text(r, types)))
    return out


def test_spark_hashes_what_no_database_column_holds_as_the_rule_does(spark):
    values = [math.nan, math.inf, -math.inf, 0.0, 5e-324, 1e-300, 9.999999999999999e22]
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "id bigint, f double")
    got = {r["id"]: int(r["h"]) for r in frame.select("id", rule.row_hash({"id": "bigint", "f": "double"})
                                                          .alias("h")).collect()}
    assert got == {i: rule.text_hash(rule.row_text({"id": i, "f": v}, {"id": "bigint", "f": "double"}))
                   for i, v in enumerate(values)}


def test_sql_quotes_the_names_it_is_given():
    sql = fp.source_fingerprint_sql(fp.DIALECTS["postgresql"], lambda n: '"' + n.replace('"', '""') + '"',
                                    '"s"."t"', {'we"ird': "string", "id": "bigint"}, ["id"])
    assert '"we""ird"' in sql and "'we\"ird='" in sql
    sql = fp.source_fingerprint_sql(fp.DIALECTS["postgresql"], lambda n: '"' + n + '"', "t",
                                    {"it's": "string"}, ["it's"])
    assert "'it''s='" in sql
