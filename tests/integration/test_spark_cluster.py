"""transform on a Spark standalone cluster (tests/support/spark_cluster.py) through Airflow's
SparkSubmitOperator with jobs.spark.submit's settings: the ``jobs`` package reaches the driver and the
executors only as the shipped archive (the worker has no PYTHONPATH and its own cwd, the driver no
checkout on its path), the decoders' jar with --jars, and the Iceberg state it publishes is the state
the same interval gets on local Spark."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.airflow import tasks as tasks
from jobs.spark.submit import submit_settings
from tests.support.paths import REPO
from tests.support.pipelines import pipeline
from tests.support.spark_cluster import spark_standalone

START, END = "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z"
CONN_ID = "spark_cluster_test"

# an application that asks the executors where they import `jobs` from (and that it works there)
PROBE = '''
import json, sys
from pyspark.sql import SparkSession

def where(_):
    import os
    import jobs
    from jobs.formats import available_formats
    return {"jobs": jobs.__file__, "cwd": os.getcwd(), "formats": available_formats(), "python": sys.executable}

spark = SparkSession.builder.appName("cdc-probe").getOrCreate()
rows = spark.sparkContext.parallelize(range(2), 2).map(where).collect()
import jobs
with open(sys.argv[1], "w") as out:
    json.dump({"driver": jobs.__file__, "executors": rows}, out)
spark.stop()
'''


@pytest.fixture()
def clean_env(monkeypatch, tmp_path):
    """The same pipeline settings for both runs, none of the caller's CDC_ ones; Airflow in tmp."""
    for key in list(os.environ):
        if key.startswith(("CDC_", "AIRFLOW_VAR_CDC_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("CDC_JIT", "c1")  # a fresh JVM on a small interval (jobs.spark.session)
    monkeypatch.setenv("CDC_SHUFFLE_PARTITIONS", "2")
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    return monkeypatch


def _landed(lake: Path, topics: Path):
    """The demo pipeline (dags/pipelines/demo.yaml's blocks) writing to ``lake``, in a file beside it: the
    file, its settings and what its landing brought."""
    cfg, path = pipeline(lake.parent / f"{lake.name}-pipelines", lake=str(lake), source={"files": str(topics)})
    start, end = tasks.resolve_interval({"start": START, "end": END}, None, None)
    return path, cfg, tasks.land_interval(cfg, start, end)


def _published(lake: Path) -> dict[str, list]:
    from jobs.iceberg.catalog import open_catalog
    from jobs.lake.layout import Lake

    catalog = open_catalog(Lake.at(str(lake)))
    state = {}
    for ident in catalog.list_tables("demo"):
        rows = catalog.load_table(ident).scan().to_arrow().to_pylist()
        state[".".join(ident)] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return state


def _submit(cluster, settings: dict, args: list[str], name: str) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    SparkSubmitOperator(task_id=name, name=name, conn_id=CONN_ID, application_args=args,
                        **settings).execute(context={})


def test_transform_on_a_standalone_cluster_publishes_what_local_spark_does(tmp_path, clean_env, capsys, demo_topics):
    jobs_alone = subprocess.run([sys.executable, "-c", "import importlib.util; print(importlib.util.find_spec('jobs'))"],
                                cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                                capture_output=True, text=True, check=True)
    assert jobs_alone.stdout.strip() == "None", "jobs is installed in the venv: executors would not need the archive"

    cluster_lake, local_lake = tmp_path / "cluster-lake", tmp_path / "local-lake"
    (cluster_file, cluster_cfg, cluster_plan), (local_file, _, local_plan) = (_landed(cluster_lake, demo_topics),
                                                                               _landed(local_lake, demo_topics))
    assert cluster_plan.messages == local_plan.messages > 0 and cluster_plan.run_id == local_plan.run_id

    with spark_standalone() as cluster:
        clean_env.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(
            {"conn_type": "spark", "host": f"spark://{cluster.master_url.split('://')[1].split(':')[0]}",
             "port": int(cluster.master_url.rsplit(":", 1)[1])}))
        # as the DAG builds them for a pipeline with spark.ship_package and spark.executor_python
        settings = submit_settings(tmp_path / "archives", ship=True, executor_python=sys.executable,
                                   conf=cluster_cfg.spark.conf, packages=cluster_cfg.spark.packages)
        assert Path(settings["py_files"]).name.startswith("cdc-jobs-") and settings["jars"]
        assert str(REPO) not in settings["env_vars"]["PYTHONPATH"].split(os.pathsep)

        began = time.monotonic()
        # as the DAG's transform task: the pipeline file and the interval, the driver makes the settings
        _submit(cluster, settings, tasks.transform_args(str(cluster_file), cluster_plan.start, cluster_plan.end),
                "cdc-transform")
        cluster_seconds = time.monotonic() - began
        submitted = capsys.readouterr()  # spark-submit's output, as the hook logs it
        archive = Path(settings["py_files"]).name
        driver_lines = [line for line in (submitted.out + submitted.err).splitlines() if "cdc: jobs package from" in line]
        assert driver_lines and all(f"{archive}/jobs" in line for line in driver_lines), driver_lines  # jobs.spark_entry

        probe_out = tmp_path / "probe.json"
        (tmp_path / "probe.py").write_text(PROBE)
        _submit(cluster, {**settings, "application": str(tmp_path / "probe.py")}, [str(probe_out)], "cdc-probe")

        state = cluster.state()
        # the job names itself (jobs.spark.session.build_spark): cdc-transform-<pipeline>
        completed = {app["name"]: app for app in state.get("completedapps", [])}
        transform_apps = [app for name, app in completed.items() if name.startswith("cdc-transform")]
        assert len(transform_apps) == 1 and "cdc-probe" in completed, (sorted(completed), cluster.logs())
        transform_app = transform_apps[0]
        stderr_files = list((cluster.work_dir / transform_app["id"]).glob("*/stderr"))
        assert stderr_files, f"no executor of {transform_app['id']} ran on the worker: {cluster.logs()}"
        assert any(path.stat().st_size > 0 for path in stderr_files)

    probe = json.loads(probe_out.read_text())
    assert f"{archive}/jobs/__init__.py" in probe["driver"]
    for executor in probe["executors"]:
        assert f"{archive}/jobs/__init__.py" in executor["jobs"], executor  # the shipped archive, not the repo
        assert str(cluster.work_dir) in executor["cwd"]
        assert executor["python"] == sys.executable
        assert "debezium" in executor["formats"]

    began = time.monotonic()
    local_args = tasks.transform_args(str(local_file), local_plan.start, local_plan.end)
    local = subprocess.run([sys.executable, "-m", "jobs", *local_args], cwd=REPO, capture_output=True, text=True,
                           timeout=900)
    local_seconds = time.monotonic() - began
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]

    cluster_state, local_state = _published(cluster_lake), _published(local_lake)
    assert cluster_state.keys() == local_state.keys() and cluster_state
    for table, rows in local_state.items():
        assert rows, table
        assert cluster_state[table] == rows, table
    with capsys.disabled():
        print(f"\ntransform of {local_plan.messages} messages ({START} .. {END}): "
              f"standalone cluster (1 worker, 1 core, spark-submit via Airflow) {cluster_seconds:.1f}s; "
              f"local Spark (python -m jobs transform, local[*] on {os.cpu_count()} cores) {local_seconds:.1f}s")
