"""The dedupe + merge + publish stage: a run's change records folded into Iceberg state, table by table."""
from __future__ import annotations

import json
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import failpoints, fold, publish
from jobs.lake import Lake, check_name


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
                  history: bool = False, buckets: int | None = None) -> dict:
    """Fold each table's changes over its published state and commit the result; returns the report.

    Records of transactions still open at the end of the run's snapshot are held back (written under
    ``held/<pipeline>/run=<run_id>``) and applied by the run that completes them. ``buckets`` is the
    key-hash bucket count of a table laid out by this run (None: publish.DEFAULT_BUCKETS; an existing
    layout keeps its own; 0 leaves a table without one unbucketed: one unpartitioned file set,
    rewritten whole by every run).
    """
    buckets = publish.DEFAULT_BUCKETS if buckets is None else buckets
    catalog = publish.open_catalog(lake)
    publish.ensure_namespace(catalog, pipeline)
    consumed = held_input(lake, pipeline, run_id)
    if consumed:
        previous = spark.read.schema(changes.schema).parquet(lake.spark_path(consumed))
        changes = changes.unionByName(previous)
    ended_before = transactions_ended_before(lake, pipeline, run_id)
    changes, held, ended_through = fold.split_open_transactions(changes, ended_before)
    held = held.persist()
    held_counts = held.agg(F.count(F.lit(1)).alias("records"),
                           F.countDistinct("held_transaction").alias("tx")).first()
    held_rel = f"{Lake.held_dir(pipeline)}/run={check_name('run id', run_id)}" if held_counts["records"] else None
    if held_rel:
        held.drop("held_transaction").write.mode("overwrite").parquet(lake.spark_path(held_rel))
    held.unpersist()
    failpoints.reached("merge.held-written")
    infos = fold.describe_changes(changes)
    every_load_end = max((i.every_load_end for i in infos.values() if i.every_load_end), default=None)
    if every_load_end:
        # the end of a snapshot of several tables closes the pending loads of tables this run has no
        # row of (their rows came in earlier runs)
        for table_id in _pending_load_tables(catalog, pipeline, every_load_end, exclude=set(infos)):
            infos[table_id] = fold.TableChanges(table_id, load_end_marker=every_load_end,
                                                every_load_end=every_load_end)
    tables: dict[str, dict] = {}
    for table_id, info in sorted(infos.items()):
        table = publish.load_table(catalog, pipeline, table_id)
        done = publish.published_by(table, run_id)
        if done is not None:
            # what this run committed and reported, not a later run's rows
            tables[table_id] = publish.published_report(table, done)
            continue

        prior_columns = publish.table_columns(table) if table is not None else {}
        data_columns = {c: t for c, t in prior_columns.items() if c not in fold.META_COLUMNS}
        type_changes = []
        for col in info.columns:
            declared = fold.state_type(info.types.get(col))
            if col not in data_columns:
                data_columns[col] = declared
            elif info.types.get(col) and declared != data_columns[col]:
                # never silently cast away: widen where Iceberg can promote the column, else keep the
                # published type (values that do not fit it become null); either way it is reported
                promoted = fold.promotable(data_columns[col], declared)
                type_changes.append({"column": col, "published": data_columns[col], "declared": declared,
                                     "action": "promoted" if promoted else "kept published type"})
                if promoted:
                    data_columns[col] = declared
        # a published column that no full row image of this run names was dropped at the source (or is
        # no longer replicated): it is kept, null in new rows, and reported
        dropped = sorted(c for c in prior_columns if c not in fold.META_COLUMNS and info.full_image_columns is not None
                         and c not in info.full_image_columns)
        added = [c for c in info.columns if prior_columns and c not in prior_columns]
        published_keys = publish.key_columns_of(table)
        key_columns = published_keys or info.key_columns
        # Keyed by columns this run's records do not all name: the table was keyed by its whole row
        # while its messages carried no key (inserts only, in text dumps), or by a key block that also
        # held a changed column's old value (SharePlex), and the run's deletes and updates name the key
        # the source finds rows by. The columns both name are the table's key from now on (its rows
        # re-keyed, so every bucket is rewritten).
        common = [c for c in published_keys or [] if c in info.key_columns]
        rekeyed = bool(common and len(common) < len(published_keys))
        if rekeyed:
            key_columns = common
        if not key_columns:
            tables[table_id] = {"error": "no key columns could be determined", "records": info.records}
            continue
        props = table.properties if table is not None else {}
        truncated_through = props.get(publish.TRUNCATE_POSITION_PROP)
        if info.truncate_position and truncated_through and info.truncate_position <= truncated_through:
            # a TRUNCATE an earlier run applied, redelivered: it must not empty what came after it
            info = replace(info, has_truncate=False, truncate_position=None, truncate_lineage=None)
        load_position = max([p for p in (props.get(publish.FULL_LOAD_POSITION_PROP), info.full_load_position) if p],
                            default=None)
        truncate_position = max(
            [p for p in (truncated_through, info.truncate_position) if p], default=None
        )
        loaded_through = props.get(publish.FULL_LOAD_POSITION_PROP)
        if info.load_start_position and loaded_through and info.load_start_position <= loaded_through \
                and not props.get(publish.PENDING_LOAD_PROP):
            # redelivered rows of a load already applied are no new load: a new one starts past them
            info.load_start_position = fold.load_start_after(changes, info, loaded_through)
        load = complete_load(props.get(publish.PENDING_LOAD_PROP), info)
        table_changes = changes.where(F.col("table_id") == table_id)
        key_types = {k: data_columns[k] for k in key_columns}
        bucketing = _bucketing(table, table_changes, key_types, buckets,
                               whole_table=info.has_truncate or bool(load and load["complete"]) or rekeyed
                               or any(t["column"] in key_columns for t in type_changes))
        # merge-on-read when the run changes few of the touched buckets' rows (see jobs.publish)
        delta = bucketing is not None and publish.deltas_fit(table, bucketing.touched, info.records)
        tombstones = publish.read_tombstones(spark, table, key_types)
        if rekeyed and tombstones is not None:
            tombstones = fold.narrowed_tombstones(tombstones, publish.read_state(spark, table), key_columns)
        result_of_fold = fold.fold_table(
            publish.read_state(spark, table, bucketing.touched if bucketing else None, positions=delta),
            tombstones,
            table_changes,
            info,
            data_columns,
            key_columns,
            run_id,
            skip_cdc_through=load_position,
            skip_all_through=truncated_through,
            history=history,
            replace_before=load["start"] if load and load["complete"] else None,
            as_delta=delta,
        )
        delta = delta and result_of_fold.replaced is not None
        properties = {publish.KEY_COLUMNS_PROP: json.dumps(key_columns)}
        if load_position:
            properties[publish.FULL_LOAD_POSITION_PROP] = load_position
        if truncate_position:
            properties[publish.TRUNCATE_POSITION_PROP] = truncate_position
        pending = load and not load["complete"]
        if pending or props.get(publish.PENDING_LOAD_PROP):
            properties[publish.PENDING_LOAD_PROP] = json.dumps(
                {"start": load["start"], "end": load["end"]}) if pending else ""
        try:
            # before the publish, which then reads the folded rows from the cache this fills
            unconverted = fold.unconverted_values(F.col("_cdc_s.row"), data_columns, result_of_fold.folded)
            history_report = None
            if history:
                history_report = _publish_history(spark, catalog, pipeline, table_id, run_id, result_of_fold,
                                                  data_columns, key_columns)
            report = {
                "records": info.records,
                "key_columns": key_columns,
                # a table whose messages carry no key is keyed by the whole row
                "key_source": "whole row (no key in the messages)" if set(key_columns) == set(data_columns)
                else "message key or --primary-keys",
                **({"rekeyed_from": published_keys} if rekeyed else {}),
                "type_changes": type_changes,
                "unconverted_values": unconverted,
                "added_columns": added,
                "dropped_columns": dropped,
                "full_load_position": load_position,
                "full_load": load,
                "key_moves": info.key_moves,
                **({"history": history_report} if history_report else {}),
            }
            result = publish.publish_state(
                catalog, pipeline, table_id, result_of_fold.changed if delta else result_of_fold.state,
                {**data_columns, **fold.META_COLUMNS}, run_id, properties, tombstones=result_of_fold.tombstones,
                bucketing=bucketing, replaced=result_of_fold.replaced if delta else None, report=report,
            )
        finally:
            result_of_fold.release()
        tables[table_id] = {**result.as_dict(), **report}
        failpoints.reached("merge.table-committed")
    # after every table's commit: the next run starts from this run's held records
    _record_held(lake, pipeline, run_id, held_rel, consumed, ended_through)
    return {"pipeline": pipeline, "run_id": run_id, "tables": tables,
            "held": {"transactions": held_counts["tx"], "records": held_counts["records"], "path": held_rel,
                     "released_from": consumed}}


def _pending_load_tables(catalog, pipeline: str, ended_through: str, exclude: set[str]) -> list[str]:
    """The state tables of the pipeline, but ``exclude``, whose pending full load ends at or before
    ``ended_through`` (a load marked ended there: an older marker, redelivered, closes nothing)."""
    pending = []
    for ident in catalog.list_tables(pipeline):
        props = catalog.load_table(ident).properties
        table_id, load = props.get(publish.TABLE_ID_PROP), props.get(publish.PENDING_LOAD_PROP)
        if (load and table_id and table_id not in exclude and publish.HISTORY_OF_PROP not in props
                and json.loads(load)["end"] <= ended_through):
            pending.append(table_id)
    return sorted(pending)


def _bucketing(table, table_changes: DataFrame, typed_keys: dict[str, str], buckets: int,
               whole_table: bool) -> publish.Bucketing | None:
    """Which buckets of the table this run rewrites: those its changes touch, or all of them when the
    table is new, of an earlier layout, replaced (TRUNCATE, a complete full load) or re-keyed.
    None: the table is and stays unbucketed (``buckets`` 0 for a table without a layout yet)."""
    if publish.is_bucketed(table):
        buckets = int(table.properties[publish.BUCKETS_PROP])
        touched = None if whole_table else fold.touched_buckets(table_changes, typed_keys, buckets)
    elif buckets == 0:
        return None
    else:
        touched = None
    return publish.Bucketing(buckets, fold.key_bucket(typed_keys, buckets), touched)


def complete_load(pending: str | None, info: fold.TableChanges) -> dict | None:
    """The table's latest full load: where it starts and ends, and whether it is complete -- a CDC event
    of the table after its end closes it (in this run, or in a later one for a load still pending), and
    so does the format's end-of-load marker at or after its end (Debezium snapshot=last).
    A load continues a pending one when no CDC event of the table came between them."""
    previous = json.loads(pending) if pending else None
    if info.load_start_position:
        start = info.load_start_position
        # no CDC event between the pending load's end and this run's rows (a redelivered older one
        # does not count): the same load goes on
        if previous and (info.cdc_before_position is None or info.cdc_before_position <= previous["end"]):
            start = previous["start"]
        end = info.full_load_position
    elif previous:
        start, end = previous["start"], previous["end"]
    else:
        return None
    complete = ((info.cdc_max_position is not None and info.cdc_max_position > end)
                or (info.load_end_marker is not None and info.load_end_marker >= end))
    return {"start": start, "end": end, "complete": complete}


def _publish_history(spark: SparkSession, catalog, pipeline: str, table_id: str, run_id: str,
                     result_of_fold: fold.FoldResult, data_columns: dict[str, str], key_columns: list[str]) -> dict:
    """The table's SCD2 history after this run, committed as one snapshot of its history table (first,
    so that a state published by this run always has its history)."""
    history_id = publish.history_table_id(table_id)
    table = publish.load_table(catalog, pipeline, history_id)
    done = publish.published_by(table, run_id) if table is not None else None
    if done is not None:
        return {"already_published": True, "snapshot_id": done}
    prior_columns = publish.table_columns(table) if table is not None else {}
    columns = {**{c: t for c, t in prior_columns.items() if c not in fold.HISTORY_META}, **data_columns}
    rows = fold.close_history(publish.read_state(spark, table), result_of_fold.versions, key_columns, columns,
                              result_of_fold.removals)
    result = publish.publish_state(catalog, pipeline, history_id, rows, {**columns, **fold.HISTORY_META}, run_id,
                                   {publish.HISTORY_OF_PROP: table_id,
                                    publish.KEY_COLUMNS_PROP: json.dumps(key_columns)})
    return result.as_dict()


def state_summary(lake: Lake, pipeline: str) -> dict[str, dict]:
    """table_id -> state rows and snapshot id of every published table of the pipeline."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    catalog = publish.open_catalog(lake)
    out = {}
    try:
        identifiers = catalog.list_tables(pipeline)
    except NoSuchNamespaceError:
        return out
    for ident in identifiers:
        table = catalog.load_table(ident)
        if publish.HISTORY_OF_PROP in table.properties:
            continue  # a history table is not a state table
        table_id = table.properties.get(publish.TABLE_ID_PROP, ident[-1])
        snapshot = table.current_snapshot()
        out[table_id] = {
            "state_rows": publish.snapshot_record_count(table),
            "snapshot_id": snapshot.snapshot_id if snapshot else None,
            "iceberg_table": ".".join(ident),
            "key_columns": publish.key_columns_of(table),
        }
    return out
