"""The Airflow DAG of the pipeline file beside this stub, of the same name (docs/pipelines.md)."""
from jobs.airflow.dags import pipeline_dag

dag = pipeline_dag(__file__)
