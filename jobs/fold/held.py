"""Held transactions across runs: the records of transactions still open at the end of a run's snapshot
are written under ``held/<pipeline>/run=<run_id>/attempt=<id>`` and applied by the run that completes
them; ``held/<pipeline>/_state.json`` logs, per run, what it held and what it started from."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.fold.transactions import split_open_transactions
from jobs.lake.layout import Lake, check_name
from jobs.lake.lease import attempt_folder


@dataclass(frozen=True)
class Held:
    """The run's records split by transaction: those it applies, and what it holds back."""

    applied: DataFrame  # the run's records and those an earlier run held, but the ones held back
    report: dict  # what the run holds back (merge.json ``held``), and the held records it started from
    consumed: str | None  # the held records it started from (their folder)
    ended_through: str | None  # the highest position of a transaction by id it ends


def hold_open_transactions(spark: SparkSession, lake: Lake, pipeline: str, run_id: str, changes: DataFrame,
                           attempt: str, marked: bool = True) -> Held:
    """The records this run applies (with those an earlier run held), and the records of transactions
    still open at the end of its snapshot, held back: written under ``held/``, applied by the run that
    completes them. ``marked``: whether any of ``changes`` marks a transaction (False only when that is
    known: jobs.fold.transactions.marks_a_transaction)."""
    consumed = held_input(lake, pipeline, run_id)
    if not consumed and not marked:
        # no record can open a transaction, and none is held from before: nothing to split or hold
        return Held(changes, _held_report(None, consumed, {"records": 0, "tx": 0, "from_position": None,
                                                            "from_time": None}), consumed, None)
    if consumed:
        previous = spark.read.schema(changes.schema).parquet(lake.spark_path(consumed))
        changes = changes.unionByName(previous)
    split = split_open_transactions(changes, transactions_ended_before(lake, pipeline, run_id))
    held = split.held.persist()
    counts = held.agg(F.count(F.lit(1)).alias("records"), F.countDistinct("held_transaction").alias("tx"),
                      F.min("position").alias("from_position"),
                      F.min(F.unix_micros("event_time")).alias("from_time")).first()
    held_rel = (f"{Lake.held_dir(pipeline)}/run={check_name('run id', run_id)}/{attempt_folder(attempt)}"
                if counts["records"] else None)
    if held_rel:
        held.drop("held_transaction").write.parquet(lake.spark_path(held_rel))
    held.unpersist()
    return Held(split.applied, _held_report(held_rel, consumed, counts), consumed, split.ended_through)


def _held_report(path: str | None, consumed: str | None, counts) -> dict:
    """merge.json's ``held``: what the run holds back (at ``path``) and the held records it started from."""
    return {"transactions": counts["tx"], "records": counts["records"], "path": path, "released_from": consumed,
            "from_position": counts["from_position"], "from_time": counts["from_time"]}


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


def record_held(lake: Lake, pipeline: str, run_id: str, held: Held) -> None:
    """The run's entry of the held log. A new run becomes the latest; re-running a run rewrites its own
    entry, never the ones after it."""
    log = _held_log(lake, pipeline)
    entry = {"run_id": run_id, "held": held.report["path"], "consumed": held.consumed,
             "ended_through": held.ended_through}
    index = next((i for i, e in enumerate(log) if e["run_id"] == run_id), None)
    if index is None:
        log.append(entry)
    else:
        log[index] = entry
    lake.write_json(held_pointer(lake, pipeline), {**log[-1], "runs": log})
