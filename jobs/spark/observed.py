"""Grouped counts taken as observed metrics of a pass that does other work (``DataFrame.observe``), so that
a handful of per-group figures cost no pass of their own: ``observe_groups`` puts the aggregate on a
frame, ``ObservedGroups.rows`` reads it once the frame's first action has run. The aggregate is
jvm/src/cdc/GroupCounts.java (Spark's observed metrics take aggregates only, not a GROUP BY)."""
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
