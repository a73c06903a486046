"""What one fold of a handful of change records costs, step by step: the fixed cost every run and every
fold-level test pays whatever its size (Spark's per-query floor on test-sized data).

    .venv/bin/python -m bench.fold_floor [--repeat 5]

Prints, per repetition (the first one warms the JVM up): building the records' frame, describe
(jobs.fold.describe: the run's per-table facts, a few small aggregates), plan (jobs.fold.table.plan_one_table:
no Spark for a new table), fold (jobs.fold.core.fold_table, building the plan of the new state) and reading the new state.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("CDC_SHUFFLE_PARTITIONS", "2")
os.environ.setdefault("CDC_SPARK_ADAPTIVE", "false")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    from jobs.fold.core import Prior, fold_table
    from jobs.fold.describe import describe_changes
    from jobs.fold.plan import PublishedTable
    from jobs.fold.table import plan_one_table
    from jobs.model import record as C
    from jobs.spark.session import build_spark
    from tests.support.change_records import change, frame, pos

    spark = build_spark("fold-floor", master="local[2]")
    records = [change(C.INSERT, 1, pos(1), {"name": "a"}), change(C.UPDATE, 1, pos(3), {"name": "c"}),
               change(C.UPDATE, 2, pos(2), {"name": "b"})]
    print(f"{'run':>4}{'frame':>8}{'describe':>10}{'plan':>8}{'fold':>8}{'read':>8}   seconds")
    for run in range(1, args.repeat + 1):
        t0 = time.perf_counter()
        changes = frame(spark, records)
        t1 = time.perf_counter()
        info = describe_changes(changes).tables["db.t"]
        t2 = time.perf_counter()
        plan = plan_one_table(changes, info, PublishedTable(), default_buckets=0)
        t3 = time.perf_counter()
        result = fold_table(plan, changes, Prior(), "r")
        t4 = time.perf_counter()
        result.state.collect()
        t5 = time.perf_counter()
        result.release()
        print(f"{run:>4}{t1 - t0:>8.2f}{t2 - t1:>10.2f}{t3 - t2:>8.3f}{t4 - t3:>8.2f}{t5 - t4:>8.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
