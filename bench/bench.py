"""The benchmark: topic snapshot -> published state, against what a user would do instead.

    make bench                       # 1M and 4M messages, every format, every contender
    .venv/bin/python -m bench.bench --sizes 1000000,4000000,10000000 --formats debezium
    .venv/bin/python -m bench.bench --sizes 1000000,4000000 --formats debezium --warm

For each size and format, on the same generated files (bench/generate.py; kept under --data and reused):
``pipeline`` is ``python -m jobs run`` end to end (its stage timings from the run's own report), then
the contenders of bench/contenders.py: ``floor`` (Spark from_json, counted), ``naive_spark`` (window
fold) and ``duckdb`` (the same naive fold in DuckDB). Each runs in its own process, watched for the
peak RSS of its JVM and of its Python processes. Seconds are measured from a ready engine (the JVM
start is not counted; the pipeline's are the sum of its stage timings). With ``--warm`` each contender
runs twice in one process (bench/warm.py) and the second run is measured: the steady state of a
long-lived engine, without a fresh JVM's warm-up. Prints a table, writes
``bench/results/bench-<time>.json`` (with the machine's cores and memory) and a PNG of time vs messages.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.contenders import CONTRACT_FORMATS
from bench.generate import DECODER, FORMATS, ensure_snapshot

REPO = Path(__file__).resolve().parents[1]
CONTENDERS = ("pipeline", "floor", "naive_spark", "duckdb")
# on request only (--contenders): the contract's lower bound (bench/contenders.py: change records written +
# naive fold; Debezium only)
OPTIONAL_CONTENDERS = ("contract_floor",)
BINARY_FORMATS = ("dts_avro",)  # no JSON contenders: Spark and DuckDB cannot parse DTS Avro values


class PeakRss:
    """Samples a process tree's resident memory: the JVM's and the Python processes' (summed)."""

    def __init__(self, pid: int, interval: float = 0.2):
        import psutil

        self._root = psutil.Process(pid)
        self._interval = interval
        self.jvm_mb = 0.0
        self.python_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self._root, *self._root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            jvm = python = 0
            for p in procs:
                try:
                    name, rss = p.name(), p.memory_info().rss
                except psutil.NoSuchProcess:
                    continue
                if name == "java":
                    jvm += rss
                elif name.startswith("python"):
                    python += rss
            self.jvm_mb = max(self.jvm_mb, jvm / 2**20)
            self.python_mb = max(self.python_mb, python / 2**20)
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _run(cmd: list[str], env: dict[str, str]) -> tuple[int, float, PeakRss, str]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rss = PeakRss(proc.pid)
    out, _ = proc.communicate()
    rss.stop()
    return proc.returncode, time.perf_counter() - start, rss, out


def pipeline_args(fmt: str, raw: Path | str, lake: Path | str) -> list[str]:
    """``jobs run``'s arguments for the pipeline contender: pipeline ``bench``, run ``bench`` (the reports
    pipeline_result reads)."""
    return ["run", "--format", DECODER[fmt], "--raw", str(raw), "--lake", str(lake), "--pipeline", "bench",
            "--run-id", "bench"]


def pipeline_result(lake: Path) -> dict:
    """A ``jobs run`` of pipeline ``bench``, run ``bench``, from its reports: seconds are the sum of its stage
    timings (decode, fold + publish, validate, reconcile)."""
    report = lake / "reports/bench/run=bench"
    timings = json.loads((report / "run.json").read_text())["timings_s"]
    decode = json.loads((report / "decode.json").read_text())
    merge = json.loads((report / "merge.json").read_text())
    stages = {k: timings.get(k, 0.0) for k in ("decode", "fold_publish", "validate", "reconcile")}
    return {"seconds": round(sum(stages.values()), 3), "core_seconds": round(stages["decode"] + stages["fold_publish"], 3),
            "stages": stages, "quarantined": decode["total"]["quarantined"],
            "state_rows": sum(t.get("state_rows", 0) for t in merge["tables"].values())}


def run_pipeline(fmt: str, raw: Path, work: Path, env: dict[str, str]) -> dict:
    lake = work / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    code, wall, rss, out = _run([sys.executable, "-m", "jobs", *pipeline_args(fmt, raw, lake)], env)
    if code != 0:
        raise RuntimeError(f"pipeline failed on {fmt}:\n{out[-3000:]}")
    return {**pipeline_result(lake), "wall_seconds": round(wall, 3), "jvm_peak_mb": round(rss.jvm_mb),
            "python_peak_mb": round(rss.python_mb)}


def run_contender(name: str, fmt: str, raw: Path, work: Path, env: dict[str, str],
                  warm: bool = False) -> dict | None:
    """A contender of bench.contenders in a process of its own; with ``warm``, any contender (the pipeline
    too) run twice in one process by bench.warm, the second run measured."""
    if (fmt in BINARY_FORMATS and name != "pipeline") or (name == "contract_floor" and fmt not in CONTRACT_FORMATS):
        return None
    out, result = work / f"out-{name}", work / f"{name}.json"
    shutil.rmtree(out, ignore_errors=True)
    module = ["bench.warm", name, "--runs", "2"] if warm else ["bench.contenders", name]
    code, wall, rss, text = _run([sys.executable, "-m", *module, "--format", fmt, "--raw", str(raw),
                                  "--out", str(out), "--result", str(result)], env)
    if code != 0:
        raise RuntimeError(f"{name} failed on {fmt}:\n{text[-3000:]}")
    data = json.loads(result.read_text())
    return {**data, "wall_seconds": round(wall, 3), "jvm_peak_mb": round(rss.jvm_mb), "python_peak_mb": round(rss.python_mb)}


def machine() -> dict:
    import psutil

    return {"cores": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": sys.version.split()[0]}


def print_table(rows: list[dict]) -> None:
    head = (f"{'format':<16}{'messages':>10}  {'contender':<12}{'seconds':>9}{'msg/s':>10}{'MB/s':>8}"
            f"{'JVM MB':>8}{'Py MB':>7}{'/floor':>8}{'/naive':>8}{'/duckdb':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        def ratio(other: str, r: dict = r) -> str:
            o = r["ratios"].get(other)
            return f"{o:.2f}" if o is not None else "-"
        print(f"{r['format']:<16}{r['messages']:>10}  {r['contender']:<12}{r['seconds']:>9.1f}{r['msg_per_s']:>10.0f}"
              f"{r['mb_per_s']:>8.1f}{r['jvm_peak_mb']:>8}{r['python_peak_mb']:>7}{ratio('floor'):>8}"
              f"{ratio('naive_spark'):>8}{ratio('duckdb'):>8}")
        if r["contender"] == "pipeline":
            s = r["stages"]
            core = r["messages"] / r["core_seconds"] if r["core_seconds"] else 0
            print(f"{'':<28}stages: decode {s['decode']:.1f}s, fold+publish {s['fold_publish']:.1f}s, validate "
                  f"{s['validate']:.1f}s, reconcile {s['reconcile']:.1f}s; decode+fold+publish {core:,.0f} msg/s")
            # decode + fold + publish against the floors (the ratios above are the whole run's)
            share = r["core_seconds"] / r["seconds"] if r["seconds"] else 0
            against = [f"/ {o.replace('_', ' ')} {r['ratios'][o] * share:.2f}"
                       for o in ("floor", "contract_floor") if o in r["ratios"]]
            if against:
                print(f"{'':<28}decode+fold+publish {', '.join(against)}")
        if r["contender"] == "contract_floor":
            print(f"{'':<28}change records written after {r['records_seconds']:.1f}s "
                  f"({r['records_seconds'] / r['seconds'] * 100:.0f}%), then the naive fold over them")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    formats = sorted({r["format"] for r in rows})
    fig, axes = plt.subplots(1, len(formats), figsize=(4.5 * len(formats), 4), squeeze=False)
    for ax, fmt in zip(axes[0], formats):
        for contender in CONTENDERS + OPTIONAL_CONTENDERS:
            pts = sorted((r["messages"], r["seconds"]) for r in rows if r["format"] == fmt and r["contender"] == contender)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=contender)
        ax.set_title(f"{fmt} (warm: 2nd run in one process)" if any(r.get("warm") for r in rows) else fmt)
        ax.set_xlabel("messages")
        ax.set_ylabel("seconds")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,4000000", help="comma-separated message counts")
    parser.add_argument("--formats", default=",".join(FORMATS), help=f"comma-separated, of {', '.join(FORMATS)}")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help=f"comma-separated, of {', '.join(CONTENDERS + OPTIONAL_CONTENDERS)}")
    parser.add_argument("--data", default=str(REPO / "bench/data"), help="where generated snapshots are kept")
    parser.add_argument("--results", default=str(REPO / "bench/results"))
    parser.add_argument("--driver-memory", default="auto",
                        help="the Spark driver heap of every Spark contender (default: the pipeline's own default, "
                             "jobs.spark.session.driver_memory, as a user gets it)")
    parser.add_argument("--rows-per-file", type=int, default=1_000_000,
                        help="messages per generated Parquet file (e.g. 10000000: one file per snapshot)")
    parser.add_argument("--warm", action="store_true",
                        help="run every contender twice in one process and measure the second run: a long-lived "
                             "engine's steady state, without the fresh JVM's warm-up (bench/warm.py)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    formats = [f for f in args.formats.split(",") if f]
    contenders = [c for c in args.contenders.split(",") if c]
    from jobs.spark.session import driver_memory

    # every contender gets the heap the pipeline's command line starts its JVM with (or the one asked for)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CDC_SPARK_MASTER": os.environ.get("CDC_SPARK_MASTER", "local[*]"),
           "PYSPARK_SUBMIT_ARGS": f"--driver-memory {driver_memory(args.driver_memory)} pyspark-shell"}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="cdc-bench-") as tmp:
        for n in sizes:
            for fmt in formats:
                raw, stats = ensure_snapshot(fmt, n, Path(args.data), args.rows_per_file)
                mb = stats["value_bytes"] / 2**20
                results = {}
                for contender in contenders:
                    work = Path(tmp) / f"{fmt}-{n}"
                    work.mkdir(exist_ok=True)
                    try:
                        if contender == "pipeline" and not args.warm:
                            result = run_pipeline(fmt, raw, work, env)
                        else:
                            result = run_contender(contender, fmt, raw, work, env, warm=args.warm)
                    except RuntimeError as exc:  # one contender's failure does not lose the others' figures
                        print(f"{contender} on {fmt} x {n} failed: {exc}", file=sys.stderr)
                        continue
                    if result is not None:
                        results[contender] = result
                for contender, result in results.items():
                    secs = result["seconds"]
                    rows.append({
                        "format": fmt, "messages": n, "value_mb": round(mb, 1), "contender": contender,
                        "warm": args.warm, **result,
                        "msg_per_s": n / secs if secs else 0.0, "mb_per_s": mb / secs if secs else 0.0,
                        "ratios": {o: secs / results[o]["seconds"]
                                   for o in ("floor", "naive_spark", "duckdb", "contract_floor")
                                   if o in results and o != contender and results[o]["seconds"]},
                    })
                print_table([r for r in rows if r["format"] == fmt and r["messages"] == n])
                print(flush=True)
    print_table(rows)
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    (out / f"bench-{stamp}.json").write_text(json.dumps({"machine": machine(), "sizes": sizes, "warm": args.warm,
                                                              "rows": rows}, indent=1))
    plot(rows, out / f"bench-{stamp}.png")
    print(f"\nresults: {out / f'bench-{stamp}.json'} and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
