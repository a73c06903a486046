"""The demo DAG end to end with dag.test(): real Airflow, spark-submit on local Spark, real lake."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

RUNNER = """
import json, sys
from datetime import datetime, timezone
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
dag = bag.get_dag("cdc_demo_pipeline")
# CronDataIntervalTimetable: this logical date's run covers [2026-11-01, 2026-11-02)
run = dag.test(logical_date=datetime(2026, 11, 2, tzinfo=timezone.utc))
print("RESULT " + json.dumps({"state": str(run.state),
                              "tis": {ti.task_id: str(ti.state) for ti in run.get_task_instances()}}))
"""


def test_demo_dag_runs_one_interval(tmp_path):
    venv_bin = str(Path(sys.executable).parent)
    topics, source = tmp_path / "topics", tmp_path / "source.db"
    subprocess.run([sys.executable, str(REPO / "scripts/make_demo.py"), "--out", str(topics), "--source-db",
                    str(source), "--messages", "600"], check=True, capture_output=True)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",  # spark-submit lives in the venv
        "PYTHONPATH": str(REPO),
        "CDC_LAKE": str(tmp_path / "lake"),
        "CDC_TOPICS_DIR": str(topics),
        "CDC_SOURCE_COUNTS": f"sqlite:///{source}",
    }
    migrate = subprocess.run([f"{venv_bin}/airflow", "db", "migrate"], env=env, capture_output=True, text=True,
                             timeout=300)
    assert migrate.returncode == 0, migrate.stderr[-2000:]
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(REPO / "dags")], env=env, capture_output=True,
                          text=True, timeout=900)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, (proc.stdout + proc.stderr)[-4000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["tis"] == {t: "success" for t in ["land", "decode", "merge", "validate", "reconcile", "alert"]}
    assert result["state"] == "success"

    reports = tmp_path / "lake/reports/demo/run=20261101T000000Z_20261102T000000Z"
    decode = json.loads((reports / "decode.json").read_text())
    assert decode["balanced"] and decode["total"]["landed"] > 0
    recon = json.loads((reports / "reconciliation.json").read_text())
    # the source db holds the state after both days: after the first day counts differ, and say so
    assert {r["table"] for r in recon["tables"]} == {"shop.public.customers", "shop.public.orders",
                                                    "shop.public.order_lines"}
    assert all(r["state_rows"] > 0 and r["status"] in ("match", "mismatch") for r in recon["tables"])
    assert (reports / "validation.json").exists() and (reports / "alert.json").exists()
