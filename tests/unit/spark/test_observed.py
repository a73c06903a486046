"""Counts observed on a pass that does other work (jobs.spark.observed, jvm/src/cdc/GroupCounts.java):
the same figures a GROUP BY gives, known once the frame's first action ran, with no job of their own."""
from __future__ import annotations

from collections import Counter

from pyspark.sql import functions as F

from jobs.spark.observed import observe_count, observe_groups

ROWS = [("a", "x", 1), ("a", "x", 2), ("a", None, 5), (None, "y", None), ("b", 'q"uote', 3), ("a", "x", 4)]


def _frame(spark, rows=ROWS):
    return spark.createDataFrame(rows, "t string, s string, v long")


def test_each_group_counts_its_rows_and_sums_its_values_as_a_group_by_would(spark):
    observed, groups = observe_groups(_frame(spark), [F.col("t"), F.col("s")], F.col("v"))
    assert observed.count() == len(ROWS)  # the frame's own action
    rows, totals = Counter(), Counter()
    for t, s, v in ROWS:
        rows[(t, s)] += 1
        totals[(t, s)] += v or 0  # a null value adds nothing
    assert {g.group: (g.rows, g.total) for g in groups.rows()} == {k: (rows[k], totals[k]) for k in rows}


def test_only_the_rows_where_the_condition_holds_are_counted(spark):
    observed, groups = observe_groups(_frame(spark), [F.col("t")], F.lit(1), where=F.col("v") > 2)
    observed.write.format("noop").mode("overwrite").save()
    assert sorted((g.group, g.rows) for g in groups.rows()) == [(("a",), 2), (("b",), 1)]


def test_a_frame_without_rows_has_no_groups(spark):
    observed, groups = observe_groups(_frame(spark).where(F.lit(False)), [F.col("t")], F.col("v"))
    assert observed.collect() == []
    assert groups.rows() == []


def test_the_figures_ride_on_the_frames_own_job(spark):
    observed, groups = observe_groups(_frame(spark), [F.col("t")], F.col("v"))
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("observed-test", "the frame's action")
    try:
        observed.collect()
        jobs = len(tracker.getJobIdsForGroup("observed-test"))
        assert {g.group: g.rows for g in groups.rows()} == {("a",): 4, (None,): 1, ("b",): 1}
        assert len(tracker.getJobIdsForGroup("observed-test")) == jobs  # reading them ran no job
    finally:
        spark.sparkContext.setJobGroup("", "")


def test_a_count_of_the_rows_a_condition_holds_for_rides_on_the_frames_own_job(spark):
    observed, counted = observe_count(_frame(spark), F.col("t") == "a")
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("observed-count-test", "the frame's action")
    try:
        # the frame's own action, filtered after it is observed (one of the rows counted is filtered out)
        assert observed.where(F.col("v") > 1).count() == 4
        jobs = len(tracker.getJobIdsForGroup("observed-count-test"))
        assert counted.value() == sum(1 for t, _, _ in ROWS if t == "a")  # every row of the frame was observed
        assert len(tracker.getJobIdsForGroup("observed-count-test")) == jobs
    finally:
        spark.sparkContext.setJobGroup("", "")
