"""The bucket layout rule (jobs.model.buckets): which key columns a table is bucketed by, and the pipeline's
numbering of a partition."""
from __future__ import annotations

import pytest

from jobs.model.buckets import BucketField, BucketLayout, choose_layout


@pytest.mark.parametrize(("distinct", "fields"), [
    ({}, [("a", 16)]),  # an empty table: its first bucketable key column
    ({"a": 1000, "b": 3}, [("a", 16)]),  # one column fills the buckets alone
    ({"a": 3, "b": 5}, [("b", 5), ("a", 4)]),  # neither does: the most distinct first, the last takes the rest
    ({"a": 1, "b": 5}, [("b", 16)]),  # a column of one value spreads nothing
])
def test_a_composite_key_is_bucketed_by_its_most_distinct_columns(distinct, fields):
    layout = choose_layout({"a": "int", "b": "string", "f": "double"}, distinct, 16)
    assert [(f.column, f.count) for f in layout.fields] == fields
    assert layout.buckets >= 16


def test_a_key_of_floats_or_booleans_only_is_not_bucketed():
    assert choose_layout({"f": "double", "ok": "boolean"}, {"f": 100}, 16) is None
    assert choose_layout({"a": "int"}, {}, 0) is None


def test_bucket_numbers_and_partitions_are_one_to_one_nulls_included():
    layout = BucketLayout((BucketField("b", "string", 5), BucketField("a", "int", 4)))
    numbers = {layout.index(p) for p in [(b, a) for b in [*range(5), None] for a in [*range(4), None]]}
    assert len(numbers) == 6 * 5
    assert all(layout.index(layout.partition(n)) == n for n in numbers)
    with pytest.raises(ValueError, match="out of the layout"):
        layout.partition(6 * 5)


def test_a_layout_fits_a_key_whose_columns_hash_alike():
    layout = BucketLayout((BucketField("id", "int", 8),))
    assert layout.fits({"id": "bigint"}) and layout.fits({"id": "int", "x": "string"})
    assert not layout.fits({"id": "string"}) and not layout.fits({"other": "int"})
