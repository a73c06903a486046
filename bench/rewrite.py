"""Rewrite amplification of publishing: the bytes a run rewrites in a large state table.

    .venv/bin/python -m bench.rewrite --rows 10000000 --changed 0.01,0.001,0.0001,0.000001

A table of ``--rows`` rows (id, owner, balance, note) is published once, then runs each update a
share of its keys, drawn uniformly (the change records written to Parquet once); for each layout
(``--buckets``: 0 = one unpartitioned file set, the layout before key-hash buckets; N = N buckets)
and way of publishing (``--modes``: ``rewrite``, copy-on-write of the touched buckets; ``delta``,
merge-on-read: changed rows appended, replaced rows deleted by position, until a bound makes the run
rewrite -- an unbucketed table is always rewritten) it prints and saves (bench/results/rewrite-*.json)
the bytes each run removed from the table (files replaced) and wrote, against the table's size, the
run's fold + publish seconds, and the seconds of reading the table back afterwards (a pass over every
column, position deletes applied). The change records go straight to the merge stage (jobs.fold.stage),
as decoding is not what is measured here.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.iceberg.catalog import load_table, open_catalog
from jobs.iceberg.read import read_state
from jobs.model import record as C

TABLE_ID = "bench.public.accounts"
TYPES = {"id": "bigint", "owner": "string", "balance": "decimal(12,2)", "note": "string"}
RESULTS = Path(__file__).resolve().parent / "results"


def change_records(ids: DataFrame, op: str, run: int) -> DataFrame:
    """Canonical change records (jobs.model.record) of ``op`` for every ``id`` in ``ids``, at run ``run``."""
    sid = F.col("id").cast("string")
    after = F.create_map(
        F.lit("id"), sid,
        F.lit("owner"), F.concat(F.lit(f"owner-{run}-"), sid),
        F.lit("balance"), F.format_string("%d.%02d", F.col("id") % 100000, F.col("id") % 100),
        F.lit("note"), F.sha2(F.concat(sid, F.lit(str(run))), 256),
    )
    position = F.concat(F.lpad(F.lit(str(run)), 6, "0"), F.lit("."), F.lpad(sid, 20, "0"))
    columns = {
        "format": F.lit("bench"), "table_id": F.lit(TABLE_ID), "op": F.lit(op), "phase": F.lit(C.CDC),
        "key": F.create_map(F.lit("id"), sid), "before": F.lit(None), "after": after,
        "present_columns": F.lit(None), "position": position, "tx_id": F.lit(None), "tx_seq": F.lit(None),
        "tx_last": F.lit(None), "event_time": F.timestamp_seconds(F.lit(1_700_000_000 + run)),
        "column_types": F.create_map(*[x for c, t in TYPES.items() for x in (F.lit(c), F.lit(t))]),
        "topic": F.lit("bench"), "partition": F.lit(0), "offset": F.col("id"), "kafka_ts": F.lit(None),
        "event_id": F.concat(F.lit(f"{run}-"), sid),
    }
    return ids.select(*[columns[f.name].cast(f.dataType).alias(f.name) for f in C.CHANGE_RECORD_SCHEMA.fields])


def table_bytes(lake, pipeline: str) -> int:
    table = load_table(open_catalog(lake), pipeline, TABLE_ID)
    tasks = list(table.scan().plan_files())
    deletes = {d.file_path: d for task in tasks for d in task.delete_files}
    return sum(task.file.file_size_in_bytes for task in tasks) + sum(d.file_size_in_bytes for d in deletes.values())


def read_back(spark: SparkSession, lake, pipeline: str) -> tuple[int, float]:
    """The table's rows as the next run and the validation read them (every column: a plain count
    would be answered from the Parquet footers), and the seconds it took."""
    start = time.perf_counter()
    state = read_state(spark, load_table(open_catalog(lake), pipeline, TABLE_ID))
    # max, not count, of a hash: the optimizer turns a count of a never-null value into count(*)
    count, _ = state.select(F.count(F.lit(1)), F.max(F.xxhash64(*state.columns))).first()
    return count, time.perf_counter() - start


def measure(spark: SparkSession, rows: int, shares: list[float], buckets: int, mode: str, root: Path) -> list[dict]:
    from jobs.iceberg import write

    deltas, write.DELTAS = write.DELTAS, mode == "delta"
    try:
        return _runs(spark, rows, shares, buckets, mode, root)
    finally:
        write.DELTAS = deltas


def _runs(spark: SparkSession, rows: int, shares: list[float], buckets: int, mode: str, root: Path) -> list[dict]:
    from jobs.fold.stage import merge_changes
    from jobs.lake.layout import Lake

    lake = Lake.at(str(root / f"lake-{buckets}-{mode}"))
    pipeline = "rewrite"
    layout = (f"{buckets} buckets, {mode}" if buckets else "unbucketed")
    out = []
    for run, share in enumerate([1.0, *shares]):
        if run == 0:
            ids, op = spark.range(rows), C.INSERT
        else:  # a uniform draw of about share * rows keys, the same for every layout
            ids, op = spark.range(rows).where(F.rand(run) < share), C.UPDATE
        # the records in Parquet, as the decode stage hands them to the merge (written once, the same
        # files for every layout)
        records = root / f"changes-{run}"
        if not records.exists():
            change_records(ids, op, run).write.parquet(str(records))
        changes = spark.read.schema(C.CHANGE_RECORD_SCHEMA).parquet(str(records))
        changed = changes.count()
        size_before = table_bytes(lake, pipeline) if run else 0
        start = time.perf_counter()
        # the table's report as merge.json writes it
        report = merge_changes(spark, lake, pipeline, f"run-{run}", changes, buckets=buckets).tables[TABLE_ID].to_json()
        seconds = time.perf_counter() - start
        state_rows, read_seconds = read_back(spark, lake, pipeline)
        if state_rows != rows or report["state_rows"] != rows:  # every run updates existing keys only
            raise AssertionError(f"{layout} run {run}: {state_rows} rows read, {report['state_rows']} reported")
        out.append({
            "layout": layout, "run": run, "keys_changed": changed, "mode": report.get("mode"),
            "share_changed": changed / rows, "table_bytes": size_before, "bytes_removed": report["bytes_removed"],
            "bytes_added": report["bytes_added"], "files_removed": report["files_removed"],
            "position_deletes": report.get("position_deletes"), "buckets_rewritten": report.get("buckets_rewritten"),
            "seconds": round(seconds, 1), "read_seconds": round(read_seconds, 1),
            "share_rewritten": report["bytes_removed"] / size_before if size_before else None,
        })
        print(json.dumps(out[-1]), flush=True)
    return out


def print_table(rows: list[dict]) -> None:
    head = (f"{'layout':>20} {'run':>8} {'keys changed':>13} {'% keys':>7} {'table MB':>9} {'rewritten MB':>13} "
            f"{'% rewritten':>12} {'written MB':>11} {'s':>7} {'read s':>7}")
    print(head)
    for r in rows:
        if not r["run"]:
            continue
        print(f"{r['layout']:>20} {r['mode'] or '':>8} {r['keys_changed']:>13,} {100 * r['share_changed']:>7.4f} "
              f"{r['table_bytes'] / 1e6:>9.1f} {r['bytes_removed'] / 1e6:>13.1f} "
              f"{100 * r['share_rewritten']:>12.1f} {r['bytes_added'] / 1e6:>11.1f} {r['seconds']:>7.1f} "
              f"{r['read_seconds']:>7.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--changed", default="0.01,0.001,0.0001,0.000001", help="shares of keys each run updates")
    ap.add_argument("--buckets", default="0,16", help="layouts: 0 = unbucketed, N = N key-hash buckets")
    ap.add_argument("--modes", default="rewrite,delta",
                    help="rewrite (copy-on-write) and/or delta (merge-on-read) for the bucketed layouts")
    ap.add_argument("--results", type=Path, default=RESULTS, help="where the JSON goes")
    ap.add_argument("--driver-memory", default="6g", help="the Spark driver heap (local mode)")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-memory {args.driver_memory} pyspark-shell")
    from jobs.spark.session import build_spark

    spark = build_spark("cdc-bench-rewrite")
    shares = [float(x) for x in args.changed.split(",")]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="cdc-rewrite-") as tmp:
        for buckets in [int(x) for x in args.buckets.split(",")]:
            for mode in args.modes.split(",") if buckets else ["rewrite"]:
                rows += measure(spark, args.rows, shares, buckets, mode, Path(tmp))
    print_table(rows)
    args.results.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.results / f"rewrite-{stamp}.json"
    path.write_text(json.dumps({"rows": args.rows, "cores": os.cpu_count(), "runs": rows}, indent=1))
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
