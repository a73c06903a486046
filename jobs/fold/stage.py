"""The fold stage: a run's change records folded into Iceberg state, table by table (merge_changes).

A run, in order:
1. held transactions (jobs.fold.held): the records an earlier run held back join the run's, and those of
   transactions still open at the end of its snapshot are held back in turn;
2. describe (jobs.fold.describe): what the run brings per table, and how far it reaches;
3. per table: read what the table holds (of the buckets the run touches), fold it (jobs.fold.table:
   plan -> fold), write its count steps, stage its history and its state (files written, snapshots staged:
   jobs.iceberg.write.stage_state);
4. the run's one commit of every table (jobs.iceberg.write.commit_states -> jobs.iceberg.commit: on a SQL
   catalog, all or nothing);
5. the held log, then the count ledger (jobs.lake.ledger).

Where the run's change records (cached by the decode) are read again: the held transactions' aggregates
(per transaction by id; the later changes that end one whose end marker is not landed, only when one is
open; the bracket markers: none when no record marks a transaction and none is held from before),
describe (one aggregate, two more with a full load), and per table the buckets it touches, a replayed
load's new start, the fold itself, and a removal's source time.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import failpoints
from jobs.fold import fingerprints as rule
from jobs.fold import held as held_log
from jobs.fold.buckets import new_layout, touched_buckets
from jobs.fold.core import FoldResult, Prior, removal_steps
from jobs.fold.describe import describe_changes
from jobs.fold.history import HISTORY_META, close_history
from jobs.fold.plan import WHOLE_ROW_KEY, PlanError, PublishedTable, TableChanges, TablePlan
from jobs.fold.table import TableFold, fold_one_table
from jobs.fold.types import META_COLUMNS, UNIQUE_META_COLUMNS
from jobs.fold.values import unconverted_values
from jobs.iceberg.catalog import (
    data_columns,
    ensure_namespace,
    history_table_id,
    key_columns_of,
    load_table,
    open_catalog,
    published_by,
    published_fingerprints,
    published_report,
    snapshot_record_count,
    table_columns,
)
from jobs.iceberg.commit import abandon
from jobs.iceberg.layout import identifier_columns, layout_of
from jobs.iceberg.read import read_state, read_tombstones
from jobs.iceberg.write import DEFAULT_BUCKETS, Bucketing, StagedState, commit_states, deltas_fit, stage_state
from jobs.lake import ledger as count_ledger
from jobs.lake.layout import Lake
from jobs.lake.lease import Attempt, attempt_folder, new_attempt_id
from jobs.model.properties import BUCKETS_PROP, HISTORY_OF_PROP, KEY_COLUMNS_PROP, PENDING_LOAD_PROP, TABLE_ID_PROP
from jobs.model.reports import FoldReport
from jobs.model.table_rules import setting_for
from jobs.spark.session import without_dictionary


@dataclass(frozen=True)
class _Run:
    """One run of the stage: where it reads and publishes, and the rules it folds by."""

    spark: SparkSession
    lake: Lake
    catalog: object
    pipeline: str
    run_id: str
    attempt: Attempt
    history: tuple[tuple[str, bool], ...]  # (table pattern, on) rules
    buckets: int  # of a table laid out by this run; 0: unbucketed


@dataclass
class _Staged:
    """A table the run folded: its report so far, and what to commit for it (its history first)."""

    report: dict
    states: list[StagedState] = field(default_factory=list)


def merge_changes(spark: SparkSession, lake: Lake, pipeline: str, run_id: str, changes: DataFrame,
                  history: tuple[tuple[str, bool], ...] = (), buckets: int | None = None,
                  attempt: Attempt | None = None, transaction_marks: int | None = None) -> FoldReport:
    """Fold each table's changes over its published state and commit the result; returns the report.

    Records of transactions still open at the end of the run's snapshot are held back (written under
    ``held/<pipeline>/run=<run_id>/attempt=<attempt>``) and applied by the run that completes them.
    ``buckets`` is the key-hash bucket count of a table laid out by this run (None: DEFAULT_BUCKETS; an existing
    layout keeps its own; 0 leaves a table without one unbucketed: one unpartitioned file set,
    rewritten whole by every run). ``history``: which tables also keep an SCD2 history table, as
    (table pattern, on) rules (jobs.model.table_rules; ``(("*", True),)``: every table). ``attempt``: this
    attempt of the run (jobs.lake.lease): the folder its files go to, and the lease checked before the run's
    commit and each rewrite of the pipeline's logs (None: a new attempt id, no lease). ``transaction_marks``:
    how many of ``changes`` mark a transaction (jobs.fold.transactions.marks_a_transaction), where the
    caller counted them (None: not known); with none, and nothing held from before, no split is computed.
    """
    run = _Run(spark, lake, open_catalog(lake), pipeline, run_id, attempt or Attempt(new_attempt_id()), history,
               DEFAULT_BUCKETS if buckets is None else buckets)
    ensure_namespace(run.catalog, pipeline)
    held = held_log.hold_open_transactions(spark, lake, pipeline, run_id, changes, run.attempt.id,
                                           marked=transaction_marks != 0)
    failpoints.reached("merge.held-written")
    described = describe_changes(held.applied)
    tables = _commit(run, _stage_tables(run, held.applied, described.tables))
    failpoints.reached("merge.run-committed")
    # after the run's commit: the next run starts from this run's held records
    run.attempt.check()
    held_log.record_held(lake, pipeline, run_id, held)
    # how far the applied records reach, and where the first transaction held back starts: the lake holds
    # every change before a cut once its reach is past it
    reach = {"reach_position": described.reach_position, "reach_time": described.reach_time,
             "held_position": held.report["from_position"], "held_time": held.report["from_time"]}
    count_ledger.record_run(lake, pipeline, _ledger_entry(run_id, reach, tables))
    # the typed report of the tables' reports as published (a re-run's: as the snapshot keeps it)
    return FoldReport.from_json({"pipeline": pipeline, "run_id": run_id, "tables": tables, "held": held.report,
                                 "reach": reach})


def _ledger_entry(run_id: str, reach: dict, tables: dict[str, dict]) -> dict:
    counted = {t: {**r["counts"], "rows_after": r["state_rows"]} for t, r in tables.items()
               if isinstance(r.get("counts"), dict) and "state_rows" in r}
    return {"run_id": run_id, **reach, "tables": counted}


def _with_pending_loads(run: _Run, tables: dict[str, TableChanges]) -> list[TableChanges]:
    """What the run brings per table, in table order; with the tables whose pending full load the end
    of a snapshot of several tables closes, though this run has no row of them (their rows came in
    earlier runs)."""
    tables = dict(tables)
    every_load_end = max((i.every_load_end for i in tables.values() if i.every_load_end), default=None)
    if every_load_end:
        for table_id in _pending_load_tables(run.catalog, run.pipeline, every_load_end, exclude=set(tables)):
            tables[table_id] = TableChanges(table_id, load_end_marker=every_load_end, every_load_end=every_load_end)
    return [tables[t] for t in sorted(tables)]


def _pending_load_tables(catalog, pipeline: str, ended_through: str, exclude: set[str]) -> list[str]:
    """The state tables of the pipeline, but ``exclude``, whose pending full load ends at or before
    ``ended_through`` (a load marked ended there: an older marker, redelivered, closes nothing)."""
    pending = []
    for ident in catalog.list_tables(pipeline):
        props = catalog.load_table(ident).properties
        table_id, load = props.get(TABLE_ID_PROP), props.get(PENDING_LOAD_PROP)
        if (load and table_id and table_id not in exclude and HISTORY_OF_PROP not in props
                and json.loads(load)["end"] <= ended_through):
            pending.append(table_id)
    return sorted(pending)


def _stage_tables(run: _Run, applied: DataFrame, described: dict[str, TableChanges]) -> dict[str, dict | _Staged]:
    """Each table's report (committed already, or not foldable) or what to commit for it; on a failure, what
    the tables before it staged is given up."""
    outcomes: dict[str, dict | _Staged] = {}
    try:
        for info in _with_pending_loads(run, described):
            outcomes[info.table_id] = _stage_table(run, info, applied.where(F.col("table_id") == info.table_id))
    except BaseException:
        abandon([s.transaction for o in outcomes.values() if isinstance(o, _Staged) for s in o.states])
        raise
    return outcomes


def _commit(run: _Run, outcomes: dict[str, dict | _Staged]) -> dict[str, dict]:
    """The run's one commit of every staged table (history before state); each table's report."""
    staged = [s for o in outcomes.values() if isinstance(o, _Staged) for s in o.states]
    committed = iter(commit_states(run.catalog, run.pipeline, run.run_id, staged, run.attempt))
    tables = {}
    for table_id, o in outcomes.items():
        if isinstance(o, dict):
            tables[table_id] = o
        else:
            *_, state = [next(committed) for _ in o.states]  # the state is last
            tables[table_id] = {**state.as_dict(), **o.report}
    return tables


def _stage_table(run: _Run, info: TableChanges, changes: DataFrame) -> dict | _Staged:
    """One table's report when this run already committed it (left alone) or cannot fold it (it says why,
    and is not published); else folded over what it holds and staged."""
    table = load_table(run.catalog, run.pipeline, info.table_id)
    done = published_by(table, run.run_id)
    if done is not None:
        # what this run committed and reported, not a later run's rows
        return published_report(table, done)
    try:
        fold = fold_one_table(changes, info, _published(table), partial(_read_prior, run.spark, table, changes),
                              run_id=run.run_id, default_buckets=run.buckets,
                              history=setting_for(run.history, info.table_id, False))
    except PlanError as e:
        return {"error": str(e), "records": info.records}
    return _stage(run, table, fold)


def _published(table) -> PublishedTable:
    if table is None:
        return PublishedTable()
    return PublishedTable(
        columns=table_columns(table), key_columns=tuple(key_columns_of(table) or ()),
        properties=dict(table.properties),
        buckets=int(table.properties[BUCKETS_PROP]) if BUCKETS_PROP in table.properties else None,
        layout=layout_of(table),
    )


def _read_prior(spark: SparkSession, table, changes: DataFrame, p: TablePlan) -> Prior:
    """What the table holds of the buckets its changes touch (all of them when the plan rewrites the whole
    table), the rows with their positions where the new state may go out as a delta of position deletes
    (jobs.iceberg.write.deltas_fit)."""
    touched = None if p.layout is None or p.whole_table else touched_buckets(changes, p.layout, p.key_types)
    positioned = p.layout is not None and deltas_fit(table, touched, p.changes.records)
    return Prior(read_state(spark, table, touched, positions=positioned), read_tombstones(spark, table, p.key_types),
                 positioned, touched)


def _stage(run: _Run, table, fold: TableFold) -> _Staged:
    """The fold's count steps into the lake, its history, then the new state staged (a delta where it fits),
    and the table's report so far; on a failure, what it staged is given up."""
    p, result = fold.plan, fold.result
    states: list[StagedState] = []
    try:
        # before the state is staged, which then reads the folded rows from the cache this fills
        report = {**p.report(),
                  "unconverted_values": unconverted_values(F.col("_cdc_s.row"), dict(p.columns), result.folded)}
        report["counts"] = _write_steps(run, table, p, result)
        if result.versions is not None:
            report["history"], history = _stage_history(run, p, result)
            states += [history] if history is not None else []
        # the report kept in the state's snapshot holds the history's staged snapshot id and rows: the commit's
        states.append(stage_state(
            run.catalog, run.pipeline, p.table_id, result.changed if result.is_delta else result.state,
            {**p.columns, **META_COLUMNS}, run.run_id, dict(p.properties), tombstones=result.tombstones,
            bucketing=_bucketing(p, fold.prior.touched, result.state), replaced=result.replaced, report=report,
            attempt=run.attempt, identifier=identifier_columns(p.key_types, p.key_source == WHOLE_ROW_KEY),
            unique_columns=UNIQUE_META_COLUMNS,
        ))
    except BaseException:
        abandon([s.transaction for s in states])
        raise
    finally:
        result.release()  # every Spark write of the table is done: the commit needs no cache
    return _Staged(report, states)


def _bucketing(p: TablePlan, touched: frozenset[int] | None, state: DataFrame) -> Bucketing | None:
    """The buckets of the table this run rewrites (``touched``; None: all of them), in its layout or the one
    this run makes from the ``state`` it writes whole. None: the table is and stays unbucketed (or its key has
    no column Iceberg buckets)."""
    layout = p.layout if p.layout is not None or p.buckets is None else new_layout(state, p.key_types, p.buckets)
    return Bucketing(p.buckets, layout, touched) if layout is not None else None


# the steps' columns of nearly one value per step (the key repeats only with a key's events)
STEP_UNIQUE_COLUMNS = ("key", "position", "event_time_us", "dh_hi", "dh_lo")


def _write_steps(run: _Run, table, p: TablePlan, result: FoldResult) -> dict:
    """The run's row-count and value fingerprint steps of the table into the lake (jobs.lake.ledger), before
    its commit (a re-run writes them again); with the rows it removes without an event of their key."""
    rows_before = snapshot_record_count(table)
    steps = result.steps
    for removal in result.removals:
        steps = steps.unionByName(removal_steps(removal, list(p.key_columns), rows_before, dict(p.columns)))
    # nothing before a TRUNCATE survives, nor is the count before it known within the run
    exact_from = p.changes.truncate_position if p.changes.has_truncate else None
    # the attempt's own folder below the table's (which jobs.lake.ledger.drop_steps deletes whole)
    rel = f"{count_ledger.steps_dir(run.pipeline, run.run_id, p.table_id)}/{attempt_folder(run.attempt.id)}"
    # as many files as the fold has partitions: a coalesce would run the fold in one task, when this write
    # is the job that fills the fold's cache (a table of strings checks no conversions first)
    steps.write.options(**without_dictionary(STEP_UNIQUE_COLUMNS)).parquet(run.lake.spark_path(rel))
    before = None if exact_from else _fingerprints_before(run, table, p, rows_before)
    # read back with the schema it was written with: no job to infer it from the files' footers
    after = None if before is None else _added(before, run.spark.read.schema(steps.schema).parquet(
        run.lake.spark_path(rel)))
    return {"rows_before": rows_before, "steps": rel, "exact_from": exact_from,
            "fingerprints": {"buckets": rule.BUCKETS, "key_columns": list(p.key_columns),
                             "before": rule.hexes(before), "after": rule.hexes(after)}}


def _added(before: list[int], steps: DataFrame) -> list[int]:
    """Each bucket's fingerprint before, plus its value steps (read back: two small columns of what was just
    written, rather than an aggregate per bucket over every step as it is written)."""
    after = list(before)
    for r in steps.where(F.col("bucket").isNotNull()).groupBy("bucket").agg(
            F.sum("dh_hi").alias("hi"), F.sum("dh_lo").alias("lo")).collect():
        after[r["bucket"]] = rule.add(after[r["bucket"]], r["hi"] * rule.HALF + r["lo"])
    return after


def _fingerprints_before(run: _Run, table, p: TablePlan, rows_before: int) -> list[int] | None:
    """Each bucket's fingerprint of what the table held before the run: what the run that published it
    reported, else (a table published before fingerprints, or keyed otherwise) one aggregate over it; None
    where its rows lack a key column of the plan."""
    if table is None or rows_before == 0:
        return [0] * rule.BUCKETS
    stored = published_fingerprints(table)
    if stored and stored.get("after") and stored.get("key_columns") == list(p.key_columns) \
            and stored.get("buckets") == rule.BUCKETS:
        return [int(h, 16) for h in stored["after"]]
    columns = data_columns(table)
    if not set(p.key_columns) <= set(columns):
        return None
    found = {r["bucket"]: int(r["fingerprint"]) for r in rule.bucket_fingerprints(
        read_state(run.spark, table), columns, list(p.key_columns)).collect()}
    return [rule.add(found.get(b, 0)) for b in range(rule.BUCKETS)]


def _stage_history(run: _Run, p: TablePlan, result: FoldResult) -> tuple[dict, StagedState | None]:
    """The table's SCD2 history after this run, staged as one snapshot of its history table, and its report
    (None staged: this run committed it already). Committed before the state, so that where a catalog commits
    one table at a time a state published by this run always has its history."""
    history_id = history_table_id(p.table_id)
    table = load_table(run.catalog, run.pipeline, history_id)
    done = published_by(table, run.run_id) if table is not None else None
    if done is not None:
        return {"already_published": True, "snapshot_id": done}, None
    prior_columns = table_columns(table) if table is not None else {}
    columns = {**{c: t for c, t in prior_columns.items() if c not in HISTORY_META}, **p.columns}
    rows = close_history(read_state(run.spark, table), result.versions, list(p.key_columns), columns,
                         result.removals)
    staged = stage_state(run.catalog, run.pipeline, history_id, rows, {**columns, **HISTORY_META}, run.run_id,
                         {HISTORY_OF_PROP: p.table_id, KEY_COLUMNS_PROP: json.dumps(list(p.key_columns))},
                         attempt=run.attempt)
    return staged.published.as_dict(), staged
