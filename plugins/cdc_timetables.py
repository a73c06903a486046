"""Registers the pipelines' timetable with Airflow (jobs.airflow.timetable): a pipeline file with
``pipeline.end`` makes a DAG on it, which Airflow serializes, schedules and shows only when this plugin is
loaded. Load it by pointing ``[core] plugins_folder`` (``AIRFLOW__CORE__PLUGINS_FOLDER``) at this folder;
``make airflow`` and docker-compose.yml do. The repository must be on ``PYTHONPATH``, as for the DAGs."""
from airflow.plugins_manager import AirflowPlugin

from jobs.airflow.timetable import EndingCronDataIntervalTimetable


class CdcTimetablesPlugin(AirflowPlugin):
    name = "cdc_timetables"
    timetables = [EndingCronDataIntervalTimetable]
