"""Every pipeline file makes a DAG (through its stub) that imports, serializes, is documented, owned, tagged,
retried, and loads no Spark at parse time; a broken file is the import error of its own stub.

The DagBag is filled in a subprocess: parsing a DAG imports providers and sets Airflow's config,
which must not leak into the other tests (nor theirs into this check, e.g. pyspark already loaded).
"""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO
from tests.support.pipelines import blocks, write_pipeline

DAGS = REPO / "dags"
PLUGINS = REPO / "plugins"
STAGES = ["land", "transform", "reconcile", "alert", "expire"]

PROBE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization
from airflow.sdk.definitions.xcom_arg import XComArg

bag = DagBag(dag_folder=sys.argv[1])
out = {"errors": {k: str(v)[:1000] for k, v in bag.import_errors.items()},
       "spark_loaded": sorted(m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")),
       "dags": {}}
for dag_id, dag in bag.dags.items():
    serialized = DagSerialization.to_dict(dag)  # what the DAG processor stores for the scheduler
    scheduler_dag = DagSerialization.from_dict(serialized)  # what the scheduler makes runs and tasks from
    intervals, info = [], None
    while len(intervals) < 5 and (info := scheduler_dag.next_dagrun_info(last_automated_run_info=info)):
        intervals.append([info.data_interval.start.isoformat(), info.data_interval.end.isoformat()])
    tasks = dag.tasks
    out["dags"][dag_id] = {
        "doc_md": dag.doc_md or "", "tags": sorted(dag.tags), "max_active_runs": dag.max_active_runs,
        "catchup": dag.catchup, "start_date": dag.start_date.isoformat() if dag.start_date else None,
        "timetable": type(dag.timetable).__name__, "timetable_summary": dag.timetable.summary,
        "serialized_tasks": len(serialized["dag"]["tasks"]),
        "owners": sorted({t.owner for t in tasks}), "retries": min(t.retries for t in tasks),
        "retry_delay_s": min(t.retry_delay.total_seconds() for t in tasks),
        "depends_on_past": sorted({t.depends_on_past for t in tasks}),
        "tasks": {t.task_id: sorted(t.upstream_task_ids) for t in tasks},
        "types": {t.task_id: type(t).__name__ for t in tasks},
        "application_args": {t.task_id: [[a.operator.task_id, a.key] if isinstance(a, XComArg) else a
                                         for a in t.application_args]
                             for t in tasks if hasattr(t, "application_args")},
        "op_kwargs": {t.task_id: sorted(k for k, v in t.op_kwargs.items() if isinstance(v, XComArg))
                      for t in tasks if getattr(t, "op_kwargs", None)},
        "spark": {t.task_id: {"application": t.application, "conn_id": t._conn_id, "env": sorted(t.env_vars or {}),
                              "py_files": t.py_files,
                              "outlets": [[type(o).__name__, o.name, getattr(o, "uri", None)] for o in t.outlets]}
                  for t in tasks if hasattr(t, "application")},
        "params": sorted(dag.params.keys()),
        "failure_callbacks": sorted({type(c).__name__ for t in tasks for c in (t.on_failure_callback or [])}),
        "tasks_with_failure_callbacks": sum(bool(t.on_failure_callback) for t in tasks),
        "scheduled_intervals": intervals,
        "task_end_dates": sorted({str(t.end_date) for t in scheduler_dag.tasks}),
        "paused_at_creation": dag.is_paused_upon_creation,
    }
print(json.dumps(out))
"""


def _load(tmp_path, folder: Path = DAGS, extra_env=None):
    """What a DagBag makes of the DAG files of ``folder`` (the repository's dags/ unless given)."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "PYTHONPATH": str(REPO), **(extra_env or {})}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(folder)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_dag_imports_serializes_and_is_well_formed(tmp_path):
    loaded = _load(tmp_path)
    assert loaded["errors"] == {}
    assert loaded["dags"], "no DAG found"
    assert loaded["spark_loaded"] == [], "parsing the DAGs must not import pyspark"
    for dag_id, dag in loaded["dags"].items():
        assert dag["doc_md"].strip(), dag_id
        assert dag["tags"], dag_id
        assert dag["max_active_runs"] == 1, dag_id
        assert dag["owners"] and "airflow" not in dag["owners"], dag_id
        assert dag["retries"] >= 1 and dag["retry_delay_s"] > 0, dag_id
        assert dag["serialized_tasks"] == len(dag["tasks"]), dag_id


def test_demo_dag_runs_the_stages_in_order_on_real_daily_windows(tmp_path):
    dag = _load(tmp_path)["dags"]["cdc_demo"]
    assert "### Pipeline `demo`" in dag["doc_md"] and "demo.yaml" in dag["doc_md"]  # made from its file
    assert "| `shop.public.order_lines` | order_id, line_no |" in dag["doc_md"]
    # @daily would give data_interval_start == data_interval_end in Airflow 3
    assert dag["timetable"] == "CronDataIntervalTimetable" and dag["timetable_summary"] == "0 0 * * *"
    assert dag["catchup"] is False and dag["start_date"].startswith("2026-11-01T00:00:00")
    assert dag["depends_on_past"] == [True]  # intervals fold in order
    assert dag["tags"] == ["cdc", "debezium", "demo"] and dag["owners"] == ["data-platform"]
    assert dag["retries"] == 1 and dag["retry_delay_s"] == 120
    chain = {task: [prev] for prev, task in zip(STAGES, STAGES[1:])}
    for task, upstream in dag["tasks"].items():
        # land feeds every later task through XCom as well as through the chain
        assert set(upstream) == set(chain.get(task, [])) | ({"land"} if task != "land" else set()), task
    # one Spark application per run: decode, fold, publish and validate in the transform task
    assert dag["types"] == {"land": "LineagePythonOperator", "transform": "TransformOperator",
                            "reconcile": "LineagePythonOperator", "alert": "PythonOperator",
                            "expire": "PythonOperator"}
    # its arguments are the pipeline file and the interval land resolved: no setting of the file as a flag
    demo = str(DAGS / "pipelines" / "demo.yaml")
    assert dag["application_args"] == {"transform": ["transform", "--pipeline-file", demo,
                                                     "--start", ["land", "start"], "--end", ["land", "end"]]}
    assert dag["op_kwargs"] == {"land": [], **{t: ["end", "start"] for t in ("reconcile", "alert", "expire")}}
    spark = dag["spark"]["transform"]
    assert spark["py_files"] is None  # no spark.ship_package: this checkout is on the driver's PYTHONPATH
    assert spark["application"] == str(REPO / "jobs" / "spark_entry.py") and spark["conn_id"] == "spark_default"
    assert {"PYTHONPATH", "PYSPARK_PYTHON"} <= set(spark["env"])
    # the published tables are assets: the namespace, and each table through the alias its runs fill
    assert spark["outlets"] == [["Asset", "cdc_demo", "iceberg://cdc/demo"], ["AssetAlias", "cdc_demo.tables", None]]
    assert set(dag["params"]) == {"start", "end"}


def test_a_broken_file_is_its_own_import_error_and_the_others_load(tmp_path):
    folder = tmp_path / "pipelines"
    write_pipeline(folder, blocks("orders", lake=str(tmp_path / "l1"), alert={"to": ["oncall@example.com"]}))
    write_pipeline(folder, blocks("refunds", lake=str(tmp_path / "l2"), pipeline={"schedule": "0 * * * *",
                                                                                   "tags": ["hourly"]}))
    broken = blocks("broken")
    broken["source"]["format"] = "debezum"
    write_pipeline(folder, broken)
    write_pipeline(folder, blocks("orders"), file_name="orders_copy.yaml")  # a name taken twice
    (folder / "gone.py").write_text((DAGS / "pipelines" / "demo.py").read_text())  # a stub without its file
    loaded = _load(tmp_path, folder, {"AIRFLOW_CONN_SMTP_DEFAULT": ""})
    assert sorted(loaded["dags"]) == ["cdc_orders", "cdc_refunds"]
    # Airflow names each broken file's stub; the error names the file, the field and the fix
    assert sorted(Path(k).name for k in loaded["errors"]) == ["broken.py", "gone.py", "orders_copy.py"]
    [broken_error] = [v for k, v in loaded["errors"].items() if k.endswith("broken.py")]
    assert f"{folder / 'broken.yaml'}: source.format: 'debezum' is not one of" in broken_error
    assert "did you mean `debezium`?" in broken_error
    [taken] = [v for k, v in loaded["errors"].items() if k.endswith("orders_copy.py")]
    assert f"{folder / 'orders_copy.yaml'}: pipeline.name: 'orders' is also the name in" in taken
    [gone] = [v for k, v in loaded["errors"].items() if k.endswith("gone.py")]
    assert "without its pipeline file gone.yaml" in gone
    assert loaded["dags"]["cdc_refunds"]["timetable_summary"] == "0 * * * *"
    assert "hourly" in loaded["dags"]["cdc_refunds"]["tags"]
    # recipients add a failure notifier, built at parse time without an SMTP server
    assert loaded["dags"]["cdc_orders"]["failure_callbacks"] == ["SmtpNotifier"]
    assert loaded["dags"]["cdc_orders"]["tasks_with_failure_callbacks"] == len(STAGES)
    assert loaded["dags"]["cdc_refunds"]["failure_callbacks"] == []


def test_every_stub_is_the_one_the_package_writes(tmp_path):
    from jobs.airflow.dags import STUB, write_stub

    stubs = [*DAGS.rglob("*.py"), *(REPO / "deploy" / "compose" / "pipelines").glob("*.py")]
    assert stubs and all(stub.read_text() == STUB for stub in stubs)
    assert all(stub.with_suffix(".yaml").is_file() for stub in stubs)
    (tmp_path / "orders.yaml").write_text("x")
    assert write_stub(tmp_path / "orders.yaml").read_text() == STUB


def test_dag_files_only_wire_tasks():
    for path in DAGS.rglob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any(m.startswith("pyspark") for m in imported), path
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
        assert functions == [], f"{path.name}: logic belongs in an importable module (jobs/airflow/dags.py)"
        assert ast.get_docstring(tree), f"{path.name}: the module docstring is the DAG's doc_md"


# ---- pipeline.end: the schedule ends, the runs made after it still have their tasks -----------------
def _ending(tmp_path) -> Path:
    folder = tmp_path / "pipelines"
    write_pipeline(folder, blocks("ending", lake=str(tmp_path / "lake"),
                                  pipeline={"start": "2026-11-01", "end": "2026-11-03", "catchup": True}))
    write_pipeline(folder, blocks("open", lake=str(tmp_path / "lake2")))
    return folder


def test_a_pipeline_end_ends_the_schedule_but_gives_no_task_an_end_date(tmp_path):
    loaded = _load(tmp_path, _ending(tmp_path), {"AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS)})
    assert loaded["errors"] == {}
    dag = loaded["dags"]["cdc_ending"]
    # the last interval the scheduler makes ends at `end`: [start, end) is covered, nothing after it
    assert dag["scheduled_intervals"] == [["2026-11-01T00:00:00+00:00", "2026-11-02T00:00:00+00:00"],
                                          ["2026-11-02T00:00:00+00:00", "2026-11-03T00:00:00+00:00"]]
    # Airflow creates no task instance of a task whose end date is before the run's logical date: a manual
    # run after `end` (`airflow dags test` defaults to now) would finish "success" with no task at all
    assert dag["task_end_dates"] == ["None"]


def test_a_pipeline_end_without_the_timetable_plugin_is_its_own_import_error(tmp_path):
    loaded = _load(tmp_path, _ending(tmp_path), {"AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path / "no-plugins")})
    assert sorted(loaded["dags"]) == ["cdc_open"]  # a pipeline without `end` needs no plugin
    [(path, error)] = loaded["errors"].items()
    assert path.endswith("ending.py") and "ending.yaml: pipeline.end" in error
    assert "plugins_folder" in error and "plugins/cdc_timetables.py" in error, error



# ---- pipeline.paused: whether a new pipeline's DAG waits for someone to unpause it -------------------
def test_a_pipeline_file_says_whether_its_dag_starts_paused(tmp_path):
    folder = tmp_path / "pipelines"
    write_pipeline(folder, blocks("held", lake=str(tmp_path / "l1"), pipeline={"paused": True}))
    write_pipeline(folder, blocks("live", lake=str(tmp_path / "l2"), pipeline={"paused": False}))
    write_pipeline(folder, blocks("default", lake=str(tmp_path / "l3")))
    write_pipeline(folder, blocks("wrong", lake=str(tmp_path / "l4"), pipeline={"paused": "maybe"}))
    loaded = _load(tmp_path, folder)
    assert {d: loaded["dags"][d]["paused_at_creation"] for d in ("cdc_held", "cdc_live", "cdc_default")} == \
        {"cdc_held": True, "cdc_live": False, "cdc_default": None}  # None: Airflow's dags_are_paused_at_creation
    [(path, error)] = loaded["errors"].items()
    assert path.endswith("wrong.py") and "pipeline.paused" in error, error


def test_the_dag_doc_shows_each_table_rules_value_checks(tmp_path):
    from jobs.airflow.dags import doc_md
    from jobs.config import load_pipeline

    tables = [{"match": "shop.public.items", "primary_keys": ["id"], "sensitive_columns": ["email"],
               "value_tolerances": {"price": 0.005, "weight": 1e-9}}]
    path = write_pipeline(tmp_path, blocks(tables=tables))
    doc = doc_md(load_pipeline(path, env={}), path)
    assert "| `shop.public.items` | id | - | - | - | email | price ±0.005, weight ±1e-09 |" in doc
