"""Counts taken as observed metrics of a pass that does other work (``DataFrame.observe``), so that a
handful of figures cost no pass of their own: ``observe_groups`` puts a grouped count on a frame,
``ObservedGroups.rows`` reads it once the frame's first action has run (``observe_count``: the rows a
condition holds for). The grouped aggregate is jvm/src/cdc/GroupCounts.java (Spark's observed metrics take
aggregates only, not a GROUP BY)."""
from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from jobs.spark.jvm import register_group_counts


@dataclass(frozen=True)
class GroupRow:
    """One group: its columns' values (in the order observe_groups was given them), its rows and the sum
    of the value column over them."""

    group: tuple
    rows: int
    total: int


@dataclass(frozen=True)
class ObservedGroups:
    observation: Observation

    def rows(self) -> list[GroupRow]:
        """The groups, once the observed frame's first action ran (before it, this waits for one)."""
        text = self.observation.get["groups"]
        return [GroupRow(tuple(group), rows, total) for group, rows, total in json.loads(text or "[]")]


def observe_groups(df: DataFrame, groups: list[Column], value: Column, where: Column | None = None,
                   ) -> tuple[DataFrame, ObservedGroups]:
    """``df`` observed: per distinct combination of the ``groups`` columns over its rows (those ``where``
    holds), the rows and the sum of ``value``, known after the frame's first action. Meant for a
    handful of groups: the aggregate holds one entry per group."""
    function = register_group_counts(df.sparkSession)
    group = F.to_json(F.array(*[c.cast("string") for c in groups]))
    if where is not None:
        group = F.when(where, group)
    observation = Observation()  # a name of its own
    observed = df.observe(observation, F.call_function(function, group, value.cast("long")).alias("groups"))
    return observed, ObservedGroups(observation)


@dataclass(frozen=True)
class ObservedCount:
    observation: Observation

    def value(self) -> int:
        """The rows counted, once the observed frame's first action ran (before it, this waits for one)."""
        return int(self.observation.get["rows"])


def observe_count(df: DataFrame, where: Column) -> tuple[DataFrame, ObservedCount]:
    """``df`` observed: how many of its rows ``where`` holds for, known after the frame's first action."""
    observation = Observation()
    observed = df.observe(observation, F.count(F.when(where, F.lit(1))).alias("rows"))
    return observed, ObservedCount(observation)
