"""The dedupe + merge + publish stage: a run's change records folded into Iceberg state, table by table."""
from __future__ import annotations

import json
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import failpoints
from jobs.fold import core, describe, plan, transactions
from jobs.fold.buckets import key_bucket, touched_buckets
from jobs.fold.history import HISTORY_META, close_history
from jobs.fold.types import META_COLUMNS
from jobs.fold.values import unconverted_values
from jobs.iceberg.catalog import (
    ensure_namespace,
    history_table_id,
    is_bucketed,
    key_columns_of,
    load_table,
    open_catalog,
    published_by,
    published_report,
    snapshot_record_count,
    table_columns,
)
from jobs.iceberg.read import read_state, read_tombstones
from jobs.iceberg.write import DEFAULT_BUCKETS, Bucketing, deltas_fit, publish_state
from jobs.lake import ledger as count_ledger
from jobs.lake.layout import Lake, check_name
from jobs.lake.lease import Attempt, attempt_folder, new_attempt_id
from jobs.model import record as C
from jobs.model.properties import BUCKETS_PROP, HISTORY_OF_PROP, KEY_COLUMNS_PROP, PENDING_LOAD_PROP, TABLE_ID_PROP
from jobs.model.reports import FoldReport
from jobs.model.table_rules import setting_for


def held_pointer(lake: Lake, pipeline: str) -> str:
    return f"{Lake.held_dir(pipeline)}/_state.json"


def _held_log(lake: Lake, pipeline: str) -> list[dict]:
    """Every run's held records and what it started from, in the order the runs were first merged."""
    rel = held_pointer(lake, pipeline)
    if not lake.exists(rel):
        return []
    state = lake.read_json(rel)
    return state.get("runs") or [{k: state.get(k) for k in ("run_id", "held", "consumed")}]


def held_input(lake: Lake, pipeline: str, run_id: str) -> str | None:
    """The held records this run starts from: the latest run's, or, when re-running a run (the latest
    one or an earlier one, as a backfill does), the same input it started from the first time."""
    log = _held_log(lake, pipeline)
    for entry in log:
        if entry["run_id"] == run_id:
            return entry["consumed"]
    return log[-1]["held"] if log else None


def transactions_ended_before(lake: Lake, pipeline: str, run_id: str) -> str | None:
    """The highest position of a transaction by id that the runs before this one ended (a re-run sees
    what it saw the first time): records of a transaction at or before it are redeliveries."""
    log = _held_log(lake, pipeline)
    index = next((i for i, e in enumerate(log) if e["run_id"] == run_id), len(log))
    return max((e["ended_through"] for e in log[:index] if e.get("ended_through")), default=None)


def _record_held(lake: Lake, pipeline: str, run_id: str, held: str | None, consumed: str | None,
                 ended_through: str | None) -> None:
    """A new run becomes the latest; re-running a run rewrites its own entry, never the ones after it."""
    log = _held_log(lake, pipeline)
    entry = {"run_id": run_id, "held": held, "consumed": consumed, "ended_through": ended_through}
    index = next((i for i, e in enumerate(log) if e["run_id"] == run_id), None)
    if index is None:
        log.append(entry)
    else:
        log[index] = entry
    lake.write_json(held_pointer(lake, pipeline), {**log[-1], "runs": log})


def merge_changes(spark: SparkSession, lake: Lake, pipeline: str, run_id: str, changes: DataFrame,
                  history: tuple[tuple[str, bool], ...] = (), buckets: int | None = None,
                  attempt: Attempt | None = None) -> FoldReport:
    """Fold each table's changes over its published state and commit the result; returns the report.

    Records of transactions still open at the end of the run's snapshot are held back (written under
    ``held/<pipeline>/run=<run_id>/attempt=<attempt>``) and applied by the run that completes them.
    ``buckets`` is the key-hash bucket count of a table laid out by this run (None: DEFAULT_BUCKETS; an existing
    layout keeps its own; 0 leaves a table without one unbucketed: one unpartitioned file set,
    rewritten whole by every run). ``history``: which tables also keep an SCD2 history table, as
    (table pattern, on) rules (jobs.model.table_rules; ``(("*", True),)``: every table). ``attempt``: this
    attempt of the run (jobs.lake.lease): the folder its files go to, and the lease checked before each commit
    and each rewrite of the pipeline's logs (None: a new attempt id, no lease).
    """
    attempt = attempt or Attempt(new_attempt_id())
    buckets = DEFAULT_BUCKETS if buckets is None else buckets
    catalog = open_catalog(lake)
    ensure_namespace(catalog, pipeline)
    consumed = held_input(lake, pipeline, run_id)
    changes, held, ended_through = _hold_open_transactions(spark, lake, pipeline, run_id, changes, consumed,
                                                           attempt.id)
    failpoints.reached("merge.held-written")
    reach = _reach(changes, held)
    tables: dict[str, dict] = {}
    for info in _tables_of(catalog, pipeline, changes):
        table = load_table(catalog, pipeline, info.table_id)
        done = published_by(table, run_id)
        if done is not None:
            # what this run committed and reported, not a later run's rows
            tables[info.table_id] = published_report(table, done)
            continue
        published = _published(table)
        replayed_through = plan.replayed_load_floor(info, published)
        if replayed_through:
            info = replace(info, load_start_position=describe.load_start_after(changes, info, replayed_through))
        try:
            table_plan = plan.plan_table(info, published, buckets)
        except plan.PlanError as e:
            tables[info.table_id] = {"error": str(e), "records": info.records}
            continue
        table_changes = changes.where(F.col("table_id") == info.table_id)
        tables[info.table_id] = _fold_and_publish(spark, catalog, lake, pipeline, run_id, table, table_plan,
                                                  table_changes, setting_for(history, info.table_id, False), attempt)
        failpoints.reached("merge.table-committed")
    # after every table's commit: the next run starts from this run's held records
    attempt.check()
    _record_held(lake, pipeline, run_id, held["path"], consumed, ended_through)
    count_ledger.record_run(lake, pipeline, _ledger_entry(run_id, reach, tables))
    # the typed report of the tables' reports as published (a re-run's: as the snapshot keeps it)
    return FoldReport.from_json({"pipeline": pipeline, "run_id": run_id, "tables": tables, "held": held,
                                 "reach": reach})


def _reach(applied: DataFrame, held: dict) -> dict:
    """How far the run's applied records reach (any op: a heartbeat moves it too), and where the first
    transaction it holds back starts: the lake holds every change before a cut once its reach is past it."""
    top = applied.agg(F.max("position").alias("p"), F.max(F.unix_micros("event_time")).alias("t")).first()
    return {"reach_position": top["p"], "reach_time": top["t"],
            "held_position": held.get("from_position"), "held_time": held.get("from_time")}


def _ledger_entry(run_id: str, reach: dict, tables: dict[str, dict]) -> dict:
    counted = {t: {**r["counts"], "rows_after": r["state_rows"]} for t, r in tables.items()
               if isinstance(r.get("counts"), dict) and "state_rows" in r}
    return {"run_id": run_id, **reach, "tables": counted}


def _hold_open_transactions(spark: SparkSession, lake: Lake, pipeline: str, run_id: str, changes: DataFrame,
                            consumed: str | None, attempt: str) -> tuple[DataFrame, dict, str | None]:
    """The records this run applies (with those an earlier run held), and the report of what it holds
    back, written under ``held/``; and the highest position of a transaction the run ends."""
    if consumed:
        previous = spark.read.schema(changes.schema).parquet(lake.spark_path(consumed))
        changes = changes.unionByName(previous)
    split = transactions.split_open_transactions(changes, transactions_ended_before(lake, pipeline, run_id))
    held = split.held.persist()
    counts = held.agg(F.count(F.lit(1)).alias("records"), F.countDistinct("held_transaction").alias("tx"),
                      F.min("position").alias("from_position"),
                      F.min(F.unix_micros("event_time")).alias("from_time")).first()
    held_rel = (f"{Lake.held_dir(pipeline)}/run={check_name('run id', run_id)}/{attempt_folder(attempt)}"
                if counts["records"] else None)
    if held_rel:
        held.drop("held_transaction").write.parquet(lake.spark_path(held_rel))
    held.unpersist()
    report = {"transactions": counts["tx"], "records": counts["records"], "path": held_rel, "released_from": consumed,
              "from_position": counts["from_position"], "from_time": counts["from_time"]}
    return split.applied, report, split.ended_through


def _tables_of(catalog, pipeline: str, changes: DataFrame) -> list[plan.TableChanges]:
    """What the run brings per table, in table order; with the tables whose pending full load the end
    of a snapshot of several tables closes, though this run has no row of them (their rows came in
    earlier runs)."""
    infos = describe.describe_changes(changes)
    every_load_end = max((i.every_load_end for i in infos.values() if i.every_load_end), default=None)
    if every_load_end:
        for table_id in _pending_load_tables(catalog, pipeline, every_load_end, exclude=set(infos)):
            infos[table_id] = plan.TableChanges(table_id, load_end_marker=every_load_end,
                                                every_load_end=every_load_end)
    return [infos[t] for t in sorted(infos)]


def _published(table) -> plan.PublishedTable:
    if table is None:
        return plan.PublishedTable()
    return plan.PublishedTable(
        columns=table_columns(table), key_columns=tuple(key_columns_of(table) or ()),
        properties=dict(table.properties),
        buckets=int(table.properties[BUCKETS_PROP]) if is_bucketed(table) else None,
    )


def _fold_and_publish(spark: SparkSession, catalog, lake: Lake, pipeline: str, run_id: str, table,
                      p: plan.TablePlan, table_changes: DataFrame, history: bool, attempt: Attempt) -> dict:
    """The Spark work the plan asks for: fold the table's changes over the rows they touch, commit the
    new state (a delta of position deletes where it fits, see jobs.iceberg.write), and report it."""
    key_columns, key_types = list(p.key_columns), p.key_types
    bucketing = _bucketing(table_changes, p)
    delta = bucketing is not None and deltas_fit(table, bucketing.touched, p.changes.records)
    tombstones = read_tombstones(spark, table, key_types)
    if p.rekeyed_from and tombstones is not None:
        tombstones = core.narrowed_tombstones(tombstones, read_state(spark, table), key_columns)
    folded = core.fold_table(
        read_state(spark, table, bucketing.touched if bucketing else None, positions=delta),
        tombstones, table_changes, p.changes, dict(p.columns), key_columns, run_id,
        skip_cdc_through=p.skip_cdc_through, skip_all_through=p.skip_all_through, history=history,
        replace_before=p.replace_before, as_delta=delta,
    )
    delta = delta and folded.replaced is not None
    try:
        # before the publish, which then reads the folded rows from the cache this fills
        report = {**p.report(),
                  "unconverted_values": unconverted_values(F.col("_cdc_s.row"), dict(p.columns), folded.folded)}
        report["counts"] = _write_steps(spark, lake, pipeline, run_id, table, p, folded, table_changes, attempt.id)
        if history:
            report["history"] = _publish_history(spark, catalog, pipeline, p.table_id, run_id, folded,
                                                 dict(p.columns), key_columns, attempt)
        result = publish_state(
            catalog, pipeline, p.table_id, folded.changed if delta else folded.state,
            {**p.columns, **META_COLUMNS}, run_id, dict(p.properties), tombstones=folded.tombstones,
            bucketing=bucketing, replaced=folded.replaced if delta else None, report=report, attempt=attempt,
        )
    finally:
        folded.release()
    return {**result.as_dict(), **report}


def _write_steps(spark: SparkSession, lake: Lake, pipeline: str, run_id: str, table, p: plan.TablePlan,
                 folded: core.FoldResult, table_changes: DataFrame, attempt: str) -> dict:
    """The run's row-count steps of the table into the lake (jobs.lake.ledger), before its commit (a
    re-run writes them again); with the rows it removes without an event of their key."""
    rows_before = snapshot_record_count(table)
    steps, exact_from = folded.steps, None
    if p.changes.has_truncate and p.changes.truncate_position:
        # nothing before the TRUNCATE survives, nor is the count before it known within the run
        exact_from = p.changes.truncate_position
        steps = steps.unionByName(_removal_steps(spark, table_changes, exact_from, C.TRUNCATE, rows=rows_before))
    if folded.removed is not None:
        steps = steps.unionByName(_removal_steps(spark, table_changes, p.replace_before, keys=folded.removed))
    # the attempt's own folder below the table's (which jobs.lake.ledger.drop_steps deletes whole)
    rel = f"{count_ledger.steps_dir(pipeline, run_id, p.table_id)}/{attempt_folder(attempt)}"
    # as many files as the fold has partitions: a coalesce would run the fold in one task, when this write
    # is the job that fills the fold's cache (a table of strings checks no conversions first)
    steps.write.parquet(lake.spark_path(rel))
    return {"rows_before": rows_before, "steps": rel, "exact_from": exact_from}


def _removal_steps(spark: SparkSession, table_changes: DataFrame, position: str, op: str | None = None,
                   rows: int = 0, keys: DataFrame | None = None) -> DataFrame:
    """-1 per removed key at ``position`` (or -``rows`` in one step without a key), at the source time of
    the run's records there."""
    time = core.time_at(table_changes, position, op)
    if keys is None:
        keys = spark.range(1).select(F.lit(None).cast("string").alias("key"))
        return core.removal_steps(keys, F.col("key"), position, time, -rows)
    return core.removal_steps(keys, core.key_json(keys.columns), position, time)


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


def _bucketing(table_changes: DataFrame, p: plan.TablePlan) -> Bucketing | None:
    """Which buckets of the table this run rewrites: those its changes touch, or all of them when the
    plan rewrites the whole table. None: the table is and stays unbucketed."""
    if p.buckets is None:
        return None
    touched = None if p.whole_table else touched_buckets(table_changes, p.key_types, p.buckets)
    return Bucketing(p.buckets, key_bucket(p.key_types, p.buckets), touched)


def _publish_history(spark: SparkSession, catalog, pipeline: str, table_id: str, run_id: str,
                     result_of_fold: core.FoldResult, data_columns: dict[str, str], key_columns: list[str],
                     attempt: Attempt) -> dict:
    """The table's SCD2 history after this run, committed as one snapshot of its history table (first,
    so that a state published by this run always has its history)."""
    history_id = history_table_id(table_id)
    table = load_table(catalog, pipeline, history_id)
    done = published_by(table, run_id) if table is not None else None
    if done is not None:
        return {"already_published": True, "snapshot_id": done}
    prior_columns = table_columns(table) if table is not None else {}
    columns = {**{c: t for c, t in prior_columns.items() if c not in HISTORY_META}, **data_columns}
    rows = close_history(read_state(spark, table), result_of_fold.versions, key_columns, columns,
                              result_of_fold.removals)
    result = publish_state(catalog, pipeline, history_id, rows, {**columns, **HISTORY_META}, run_id,
                                   {HISTORY_OF_PROP: table_id,
                                    KEY_COLUMNS_PROP: json.dumps(key_columns)}, attempt=attempt)
    return result.as_dict()
