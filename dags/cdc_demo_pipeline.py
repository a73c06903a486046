"""
### CDC demo pipeline

Runs the demo pipeline for its data interval `[start, end)`, one task per stage:

`land` (topic dumps → raw snapshot + manifest) → `decode` → `merge` (dedupe + fold + Iceberg
commit) → `validate` (Great Expectations) → `reconcile` (state rows vs source rows) → `alert`
(one data-quality email when a check failed).

- Spark stages run through `SparkSubmitOperator` on connection `spark_default` (`local[*]` on the
  embedded default); SMTP comes from connection `smtp_default`.
- The run id is the interval (`20261101T000000Z_20261102T000000Z`): re-running or backfilling an
  interval reuses it, and re-running a published run changes nothing.
- Manual runs have no width: give `start` and `end` (ISO-8601) as params.
- Intervals fold in order: `max_active_runs=1` and `depends_on_past`.
- Settings (lake, pipeline, topics, source counts, recipients): see `jobs/airflow_tasks.py`.
"""
from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Param
from airflow.timetables.interval import CronDataIntervalTimetable

from jobs import airflow_tasks as tasks

with DAG(
    dag_id="cdc_demo_pipeline",
    doc_md=__doc__,
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["cdc", "debezium", "iceberg", "demo"],
    default_args={
        "owner": "data-platform",
        "retries": 1,
        "retry_delay": timedelta(minutes=2),
        "depends_on_past": True,
    },
    params={
        "start": Param("", type="string", description="interval start (ISO-8601); empty = data interval"),
        "end": Param("", type="string", description="interval end (ISO-8601); empty = data interval"),
    },
) as dag:
    land = PythonOperator(task_id=tasks.LAND_TASK, python_callable=tasks.land)
    spark_stages = [
        SparkSubmitOperator(
            task_id=stage,
            application=tasks.APPLICATION,
            application_args=tasks.stage_args(stage),
            conn_id="spark_default",
            env_vars=tasks.spark_env(),
            name=f"cdc-{stage}",
        )
        for stage in ("decode", "merge", "validate")
    ]
    reconcile = PythonOperator(task_id="reconcile", python_callable=tasks.reconcile)
    alert = PythonOperator(task_id="alert", python_callable=tasks.alert)

    land >> spark_stages[0] >> spark_stages[1] >> spark_stages[2] >> reconcile >> alert
