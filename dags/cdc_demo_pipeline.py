"""
### CDC demo pipeline

Runs the pipeline for the data interval `[start, end)` of each run:

`land` (topics → raw snapshot + `_manifest.json` per topic) → `transform` (one Spark job: decode →
dedupe + fold → Iceberg commit → Great Expectations) → `reconcile` (source counts vs the lake's at their moment) →
`alert` (one data-quality email when a check failed) → `expire` (the tables' snapshots older than
the retention, 7 days before the interval's end and each table's 10 newest kept, go with the files
only they held). A retry of `transform` redoes all of its Spark work; every part is idempotent for
the run id.

- **Windows**: daily, `00:00 UTC` to `00:00 UTC` (`CronDataIntervalTimetable`). A manual run has
  no window of its own: trigger it with params `start` and `end` (ISO-8601), e.g.
  `airflow dags trigger cdc_demo_pipeline -c '{"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}'`.
- **Run id** = the window (`20261101T000000Z_20261102T000000Z`): clearing, re-running or
  backfilling an interval reuses it, and re-running a published run changes nothing.
- **In order**: `max_active_runs=1` and `depends_on_past` fold intervals one after the other.
- **Spark**: `transform` runs `jobs/cli.py transform` through `SparkSubmitOperator` on connection
  `spark_default` (e.g. `{"conn_type": "spark", "host": "local[*]"}`), one `--raw` per landed topic.
- **Email**: the `alert` task sends through connection `smtp_default`; with `CDC_ALERT_TO` set, a
  failed task also notifies those recipients.
- **Settings** (lake, pipeline, topics, format, source counts, recipients, snapshot retention, an
  audit copy of the change records): params, Variables `cdc_<name>` or `CDC_*` environment
  variables, see `jobs/airflow_tasks.py`.
"""
from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from jobs import airflow_tasks as tasks

with DAG(
    dag_id="cdc_demo_pipeline",
    description="Topic snapshots in, reconciled Iceberg tables out, one data interval per run",
    doc_md=__doc__,
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["cdc", "debezium", "iceberg", "spark", "demo"],
    params=tasks.dag_params(),
    default_args={
        "owner": "data-platform",
        "depends_on_past": True,
        "retries": 1,
        "retry_delay": timedelta(minutes=2),
        "execution_timeout": timedelta(hours=2),
        "on_failure_callback": tasks.failure_notifiers(),
    },
) as dag:
    land = PythonOperator(task_id=tasks.LAND_TASK, python_callable=tasks.land, multiple_outputs=True)

    transform = SparkSubmitOperator(
        task_id=tasks.TRANSFORM_TASK,
        application=tasks.APPLICATION,
        application_args=land.output["transform_args"],
        conn_id="spark_default",
        env_vars=tasks.spark_env(),
        conf=tasks.spark_conf(),
        packages=tasks.spark_packages(),
        name="cdc-transform",
    )

    reconcile = PythonOperator(task_id="reconcile", python_callable=tasks.reconcile,
                               op_kwargs={"plan": land.output["plan"]})
    alert = PythonOperator(task_id="alert", python_callable=tasks.alert, op_kwargs={"plan": land.output["plan"]})

    expire = PythonOperator(task_id="expire", python_callable=tasks.expire, op_kwargs={"plan": land.output["plan"]})
    land >> transform >> reconcile >> alert >> expire
