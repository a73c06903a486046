"""One DAG per pipeline file in dags/pipelines/ (or $CDC_PIPELINES_DIR): see docs/pipelines.md.

Wiring only: jobs.airflow.dags builds the DAGs from the files, jobs.airflow.tasks runs their tasks.
"""
from jobs.airflow.dags import load_dags

globals().update(load_dags())
