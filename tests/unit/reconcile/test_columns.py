"""The columns of a differing row (jobs.reconcile.columns): which differ, a tolerance, masking."""
from __future__ import annotations

import pytest

from jobs.reconcile.columns import MASKED, ColumnRules, all_tolerated, compare_rows, differing_columns


def test_a_null_differs_from_any_value_and_equal_texts_do_not_differ():
    assert differing_columns({"a": "1", "b": None, "c": "x"}, {"a": "1", "b": "0", "c": "x"}) == ["b"]
    assert differing_columns({"a": "1"}, {"a": "1", "new": None}) == []  # a column neither side has a value of
    assert differing_columns({"a": "1"}, {"a": "1", "new": "2"}) == ["new"]


@pytest.mark.parametrize(("source", "lake", "tolerated"), [
    ("1.5", "1.5000001", True), ("-3", "-3.0000009", True), ("1.5", "1.502", False),
    ("1.5", None, False), (None, "1.5", False), ("abc", "abd", False), ("NaN", "1", False),
    ("Infinity", "Infinity", False), ("1e300", "1.0000000000000001e300", True),
])
def test_a_tolerance_allows_a_small_absolute_difference_of_numbers_only(source, lake, tolerated):
    assert ColumnRules(tolerances={"x": 1e-6}).tolerated("x", source, lake) is tolerated
    assert ColumnRules().tolerated("x", source, lake) is False  # no tolerance declared


def test_rows_are_compared_only_where_both_sides_hold_them_as_at_the_moment():
    rules = ColumnRules(sensitive=frozenset({"ssn"}), tolerances={"price": 0.01})
    source = {"a": ("h1", {"price": "1.00", "ssn": "111"}), "b": ("h2-now", {"price": "2"}),
              "c": ("h3", {"price": "3"}), "d": ("h4", {"price": "4"})}
    lake = {"a": {"price": "1.005", "ssn": "112"}, "b": {"price": "2"}, "c": {"price": "3.5"}}
    rows = compare_rows(["a", "b", "c", "d", "e"], {"a": "h1", "b": "h2", "c": "h3", "d": "h4", "e": "h5"},
                        {"c"}, source, lake, rules)
    assert rows == [
        {"key": "a", "columns": [
            {"column": "price", "source": "1.00", "lake": "1.005", "within_tolerance": True},
            {"column": "ssn", "source": MASKED, "lake": MASKED, "within_tolerance": False}]},
        {"key": "b", "not_compared": "the source changed the row after the moment"},
        {"key": "c", "not_compared": "the lake changed the row after the moment"},
        {"key": "d", "not_compared": "the lake holds no such row now"},
        {"key": "e", "not_compared": "the source changed the row after the moment"},
    ]
    assert not all_tolerated(rows)
    assert all_tolerated(rows[:1]) is False  # ssn has no tolerance
    assert all_tolerated([{"key": "a", "columns": [rows[0]["columns"][0]]}])
    assert not all_tolerated([])
