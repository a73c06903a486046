"""A contender run several times in one process, the last run measured: the steady state of a long-lived
engine, whose JIT has compiled the code already (``python -m bench.bench --warm``).

    .venv/bin/python -m bench.warm pipeline|floor|naive_spark|duckdb|contract_floor --format F --raw DIR --out DIR [--runs 2]

bench.bench runs each contender in a fresh process, so each of its figures includes the JVM's warm-up
(the JIT compiling Spark's and the pipeline's code: bench/README.md, "The JIT and generated code"). Here the same work runs ``--runs`` times in one JVM, each run into a folder of its own
under --out (an earlier run's folder is removed once the next starts); the result is the last run's, with
the seconds of every run (the first is what a fresh process measures). The pipeline is ``python -m jobs
run`` called in this process (jobs.cli.main) on a fresh lake each time, timed as bench.bench times it
(the sum of its stage timings).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

CONTENDERS = ("pipeline", "floor", "naive_spark", "duckdb", "contract_floor")


def run_once(contender: str, fmt: str, raw: str, out: Path, spark) -> dict:
    """One run of ``contender`` into ``out``; its result, with ``seconds`` (from a ready engine)."""
    if contender == "pipeline":
        from bench.bench import pipeline_args, pipeline_result
        from jobs import cli

        code = cli.main(pipeline_args(fmt, raw, out))
        if code != 0:
            raise RuntimeError(f"jobs run exited with {code}")
        return pipeline_result(out)
    from bench.contenders import run_timed

    return run_timed(contender, fmt, raw, str(out), spark)


def run_warm(contender: str, fmt: str, raw: str, out: Path, runs: int, spark) -> dict:
    """``runs`` runs in this process: the last one's result, ``run_seconds`` of every run and the earlier
    runs' results (``earlier_runs``: the first is a fresh process's, as bench.bench measures it)."""
    if runs < 1:
        raise ValueError("at least one run")
    results = []
    for i in range(runs):
        if i:
            shutil.rmtree(out / f"run{i - 1}", ignore_errors=True)
        results.append(run_once(contender, fmt, raw, out / f"run{i}", spark))
    return {**results[-1], "warm_runs": runs, "run_seconds": [r["seconds"] for r in results],
            "earlier_runs": results[:-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.warm", description=__doc__.split("\n\n")[0])
    parser.add_argument("contender", choices=CONTENDERS)
    parser.add_argument("--format", required=True)
    parser.add_argument("--raw", required=True)
    parser.add_argument("--out", required=True, help="a folder for the runs' outputs")
    parser.add_argument("--runs", type=int, default=2, help="runs in this process; the last is measured")
    parser.add_argument("--result", help="write the result JSON here")
    args = parser.parse_args(argv)
    spark = None
    if args.contender != "duckdb":
        from jobs.spark.session import build_spark

        spark = build_spark(f"bench-warm-{args.contender}")
    result = run_warm(args.contender, args.format, args.raw, Path(args.out), args.runs, spark)
    text = json.dumps(result)
    if args.result:
        Path(args.result).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
