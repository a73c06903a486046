"""One DAG per pipeline file in dags/pipelines/ (or $CDC_PIPELINES_DIR): see docs/pipelines.md.

Wiring only: jobs.pipeline_dags builds the DAGs from the files, jobs.airflow_tasks runs their tasks.
"""
from jobs.pipeline_dags import load_dags

globals().update(load_dags())
