"""What key moves cost the fold: one SharePlex run without and one with primary-key changes.

    .venv/bin/python -m bench.key_moves [--ops 20000] [--share 0.1]

Simulates two sources with the same number of operations (``--ops``: 30% inserts, 10% deletes,
the rest updates, of which, in the second, a share ``--share`` of all operations changes a row's
key instead), writes each as a SharePlex topic snapshot (key changes carry the changed columns
only), runs ``jobs run`` on each in this process, one after the other, and prints, per run, the
messages, the key moves the fold applied and the job's own stage timings (``run.json``). A first,
untimed run warms the JVM.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from jobs import cli
from jobs.demo.simulator import INVENTORY_TABLES, SourceSimulator, write_parquet
from jobs.demo.streams import FORMAT_RECORDS


def run_once(ops: int, key_share: float, work: Path, seed: int = 7) -> dict:
    """One simulated source of ``ops`` operations through ``jobs run``: messages, key moves, timings."""
    mix = {"insert": 0.3, "update": 0.6 - key_share, "delete": 0.1, "pk_change": key_share}
    sim = SourceSimulator(seed, INVENTORY_TABLES, "mysql", n_partitions=3)
    for table in ("items", "stock"):
        sim.populate(table, max(ops // 10, 1))
    sim.snapshot()
    sim.random_ops(ops, {k: v for k, v in mix.items() if v > 0}, max_tx_size=3, concurrency=2)
    records = FORMAT_RECORDS["shareplex"](sim)
    (work / "raw").mkdir(parents=True)
    write_parquet(work / "raw/part-0.parquet", records)
    keys = [f"--primary-keys={t.upper()}={','.join(s.primary_key)}" for t, s in sim.tables.items()]
    lake = work / "lake"
    if cli.main(["run", "--format", "shareplex", "--raw", str(work / "raw"), "--lake", str(lake),
                 "--pipeline", "km", "--run-id", "r1", *keys]) != 0:
        raise SystemExit("jobs run failed")
    reports = lake / "reports/km/run=r1"
    merge = json.loads((reports / "merge.json").read_text())
    return {"messages": len(records),
            "key_moves": sum(t.get("key_moves", 0) for t in merge["tables"].values()),
            "timings_s": json.loads((reports / "run.json").read_text())["timings_s"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.key_moves", description=__doc__.split("\n")[0])
    p.add_argument("--ops", type=int, default=20_000)
    p.add_argument("--share", type=float, default=0.1, help="share of the operations that change a key")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="key-moves-") as tmp:
        run_once(max(args.ops // 10, 100), args.share, Path(tmp) / "warm-up")
        for label, share in (("without key changes", 0.0), (f"{args.share:.0%} key changes", args.share)):
            result = run_once(args.ops, share, Path(tmp) / label.replace(" ", "-").replace("%", "pct"))
            t = result["timings_s"]
            print(f"{label}: {result['messages']:,} messages, {result['key_moves']:,} key moves; "
                  f"decode {t['decode']:.1f} s, fold+publish {t['fold_publish']:.1f} s, validate {t['validate']:.1f} s",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
