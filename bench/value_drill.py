"""What the drill-down of a value mismatch costs on a large table, against a real PostgreSQL.

    .venv/bin/python -m bench.value_drill [--rows 1000000]

A table ``accounts (id, balance, note)`` of ``--rows`` rows reaches the lake through one ``jobs run`` of its
Debezium messages (from a ``test_decoding`` slot), one UPDATE left out of them. Prints the seconds of each
step: the capture (rows and fingerprints in one scan), the verdict naming the bucket that differs (the
table is over its key limit), the next capture keeping the row hashes of that bucket's keys, and the verdict
naming the key and its column with both values (the lake's state scanned for the bucket's keys, the
source's rows read again).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def _timed(label: str, step):
    t0 = time.perf_counter()
    out = step()
    print(f"{label:<58}{time.perf_counter() - t0:8.2f} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)

    import sqlalchemy as sa

    from jobs.demo.simulator import write_parquet
    from jobs.iceberg.catalog import state_summary
    from jobs.lake.layout import Lake
    from jobs.reconcile.stage import JudgedRows, ReconcileOptions, drill_buckets, reconcile_run, source_checkpoints
    from jobs.stages import LakeRowsNow
    from tests.support.databases import debezium_records, pg_changes, pg_tables_with_slot, postgres_server
    from tests.support.pipeline_runs import jobs_run

    work = Path(tempfile.mkdtemp(prefix="value-drill-"))
    lake = Lake.at(str(work / "lake"))
    # a bucket holds a 64th of the table's keys: the table's key limit must hold one bucket's
    limit = max(10_000, 2 * args.rows // 64)
    options = ReconcileOptions(fmt="debezium", table_key_rows_limits=(("accounts", limit),))
    print(f"accounts: {args.rows:,} rows, key_rows_limit {limit:,}")
    with postgres_server() as url:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            pg_tables_with_slot(conn, "CREATE TABLE accounts (id int PRIMARY KEY, balance int, note text)")
            conn.exec_driver_sql("INSERT INTO accounts SELECT i, mod(i, 1000), 'note ' || i "
                                 f"FROM generate_series(1, {args.rows}) AS i")
            conn.commit()
            conn.exec_driver_sql("UPDATE accounts SET balance = -1 WHERE id = 4242")  # lost on its way
            conn.commit()

            def land(n: int) -> None:
                for i in range(3):  # later transactions: the lake's reach passes the capture
                    conn.exec_driver_sql(f"INSERT INTO accounts VALUES ({-10 * n - i}, 0, 'later')")
                    conn.commit()
                records = [r for r in debezium_records(pg_changes(conn, "cdc"), {"accounts": ["id"]})
                           if b'"balance": -1' not in r["value"]]
                write_parquet(work / f"raw{n}" / "part-0.parquet", records)
                assert jobs_run("debezium", work / f"raw{n}", work / "lake", "src", f"run{n}") == 0

            def judged(n: int, captured) -> object:
                state = state_summary(lake, "src")
                lake_rows = LakeRowsNow(lake, "src", state, options.key_rows_limit_of)
                [row] = reconcile_run(lake, "src", f"run{n}", captured, state, options, hashes_now=lake_rows.hashes,
                                      rows_now=JudgedRows(url, state, lake_rows.texts, options))
                return (row.checkpoints or row.pending)[-1]

            state = {"shop.public.accounts": {"state_rows": 0, "snapshot_id": None, "key_columns": ["id"],
                                              "columns": {"id": "string", "balance": "string", "note": "string"}}}
            first = _timed("capture: rows and fingerprints (one scan)",
                           lambda: source_checkpoints(url, state, "run1", options)[0])
            _timed(f"jobs run: {args.rows:,} messages (not the drill-down's)", lambda: land(1))
            verdict = _timed("judge: the buckets that differ", lambda: judged(1, first))
            print(f"  {verdict.verdict}: {verdict.reason}")
            drilled = replace(options, drill_buckets=drill_buckets(lake, "src"))
            second = _timed("capture: fingerprints + the bucket's row hashes",
                            lambda: source_checkpoints(url, state_summary(lake, "src"), "run2", drilled)[0])
            print(f"  row hashes kept: {len(second[0].row_hashes or {})} of bucket(s) {second[0].row_hash_buckets}")
            _timed("jobs run: a few messages (not the drill-down's)", lambda: land(2))
            verdict = _timed("judge: the keys and columns (lake scan + source rows)", lambda: judged(2, second))
            print(f"  {verdict.verdict}: keys {verdict.value_diff.keys.differ}, "
                  f"columns {[c.to_json() for r in verdict.value_diff.rows for c in r.columns or ()]}")
        engine.dispose()


if __name__ == "__main__":
    main()
