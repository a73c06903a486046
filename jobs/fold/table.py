"""One table's fold, with no catalog, lake or Iceberg access: describe -> plan -> fold over what the
caller reads of the table for the plan.

The fold stage (jobs.fold.stage) reads the table's prior state from Iceberg and publishes the result;
the fold's tests (tests/support/change_records.FoldChain) keep the published state in memory. Both call
``fold_one_table``: how the parts are wired lives here only.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame

from jobs.fold.core import FoldResult, Prior, fold_table, narrowed_tombstones
from jobs.fold.describe import load_start_after
from jobs.fold.plan import PublishedTable, TableChanges, TablePlan, plan_table, replayed_load_floor

# reads what the table held before the run, as far as the plan needs it (the buckets it touches, the
# prior rows' positions where the new state may go out as a delta)
PriorReader = Callable[[TablePlan], Prior]


@dataclass
class TableFold:
    plan: TablePlan
    prior: Prior  # what the reader read for the plan
    result: FoldResult


def plan_one_table(changes: DataFrame, info: TableChanges, published: PublishedTable,
                   default_buckets: int) -> TablePlan:
    """The table's plan from what the run brings (``info``, from the run's describe) and what the catalog
    holds of it: full-load rows of a load already applied are replays, the run's load starts past them."""
    floor = replayed_load_floor(info, published)
    if floor:
        info = replace(info, load_start_position=load_start_after(changes, info, floor))
    return plan_table(info, published, default_buckets)


def fold_one_table(changes: DataFrame, info: TableChanges, published: PublishedTable, read_prior: PriorReader,
                   *, run_id: str, default_buckets: int, history: bool = False) -> TableFold:
    """The plan of one table and its new state: ``changes`` are the table's change records of the run,
    ``published`` what the catalog holds of it. Raises plan.PlanError, before reading anything, for a
    table the run cannot fold."""
    plan = plan_one_table(changes, info, published, default_buckets)
    prior = read_prior(plan)
    if plan.rekeyed_from and prior.tombstones is not None and prior.rows is not None:
        # read in the narrower key (a re-keyed table's rows are read whole: every bucket is rewritten)
        prior = replace(prior, tombstones=narrowed_tombstones(prior.tombstones, prior.rows, list(plan.key_columns)))
    return TableFold(plan, prior, fold_table(plan, changes, prior, run_id, history))
