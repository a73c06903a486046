"""One small interval through the demo DAG's ``dag.test()``: what a scheduled run costs end to end.

    .venv/bin/python -m bench.dag_day [--messages 3000] [--days 2026-11-02] [--keep DIR] [--openlineage]
        [--no-class-archive]

Generates the demo topics (jobs/demo/generate.py), then runs ``dag.test()`` of the demo DAG for the
interval ending on each ``--days`` date in a fresh Airflow home (SQLite metadata db, spark-submit on
``local[2]``, the files source, the SQLite source database as the reconciliation connection, no SMTP
server: the alert's recipients are left unset). Prints each task's seconds (from its task instance)
and the run's wall time; the JSON line at the end is what bench/results keeps (bench/README.md,
"The DAG"). ``--openlineage`` turns Airflow's openlineage provider on (a file transport in the work
folder; the events' count is printed): run with and without it, alternated, for what lineage costs.
``--no-class-archive``: the driver without the JVM class archive (jobs.spark.class_archive; by default the one
in the user's cache folder, recorded by the first run of this JVM and these jars).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

RUNNER = """
import json, sys, time
from datetime import datetime, timezone
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
dag = bag.dags["cdc_demo"]
for day in sys.argv[2:]:
    start = time.perf_counter()
    run = dag.test(logical_date=datetime.fromisoformat(day).replace(tzinfo=timezone.utc))
    wall = time.perf_counter() - start
    tis = {ti.task_id: {"state": str(ti.state), "seconds": round(ti.duration or 0.0, 2)}
           for ti in run.get_task_instances()}
    print("RESULT " + json.dumps({"day": day, "state": str(run.state), "wall_s": round(wall, 2), "tasks": tis}))
"""


def pipeline_folder(work: Path, topics: Path, lake: Path) -> Path:
    """The bundled demo's pipeline file, on these topics and this lake, reconciled through the connection."""
    import yaml

    from jobs.airflow.dags import write_stub

    document = yaml.safe_load((REPO / "dags" / "pipelines" / "demo.yaml").read_text())
    document["source"]["files"] = str(topics)
    document["sink"].update(lake=str(lake), catalog=None)
    document["reconcile"] = {"connection": "cdc_source"}
    folder = work / "pipelines"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "demo.yaml").write_text(yaml.safe_dump(document))
    write_stub(folder / "demo.yaml")  # the DAG file beside it: the DAG folder the runner loads
    return folder


def airflow_env(home: Path, dags: Path, source: Path, events: Path | None = None,
                class_archive: bool = True) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    lineage = {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
        {"type": "file", "log_file_path": str(events), "append": True})} if events else {}
    return {
        **lineage,
        **{k: v for k, v in os.environ.items() if not k.startswith(("CDC_", "AIRFLOW_VAR_CDC_", "SMTP_"))},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_CDC_SOURCE": json.dumps({"conn_type": "sqlite", "host": str(source)}),
        "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "CDC_SHUFFLE_PARTITIONS": "2",
        "CDC_JIT": "c1",
        **({} if class_archive else {"CDC_CLASS_ARCHIVE": "off"}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000, help="demo messages over its two days")
    parser.add_argument("--days", default="2026-11-02", help="comma-separated logical dates (a run covers the day before)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    parser.add_argument("--openlineage", action="store_true", help="with OpenLineage events (a file transport)")
    parser.add_argument("--no-class-archive", action="store_true", help="the driver without the JVM class archive")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="cdc-dag-day-"))
    try:
        topics, source, lake = work / "topics", work / "source.db", work / "lake"
        # as a module from the checkout (the package need not be installed in the venv)
        subprocess.run([sys.executable, "-m", "jobs.demo.generate", "--out", str(topics), "--source-db",
                        str(source), "--messages", str(args.messages)], check=True, capture_output=True, cwd=REPO)
        dags = pipeline_folder(work, topics, lake)
        events = work / "openlineage.jsonl" if args.openlineage else None
        env = airflow_env(work / "airflow", dags, source, events, class_archive=not args.no_class_archive)
        venv_bin = Path(sys.executable).parent
        subprocess.run([str(venv_bin / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", RUNNER, str(dags), *args.days.split(",")],
                              env=env, capture_output=True, text=True)
        total = time.perf_counter() - start
        results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode or not results:
            print((proc.stdout + proc.stderr)[-5000:], file=sys.stderr)
            return 1
        for result in results:
            print(f"interval ending {result['day']}: {result['state']}, dag.test {result['wall_s']:.1f} s")
            for task, ti in result["tasks"].items():
                print(f"  {task:<12} {ti['seconds']:>7.1f} s  {ti['state']}")
        if events:
            print(f"OpenLineage events: {len(events.read_text().splitlines()) if events.exists() else 0}")
        print(json.dumps({"process_s": round(total, 1), "openlineage": bool(events), "runs": results}))
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
