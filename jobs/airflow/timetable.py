"""The schedule of a pipeline with an ``end``: its cron's data intervals, the last one ending at or before
``end`` (jobs.airflow.dags).

Airflow's own way to end a schedule, a DAG ``end_date``, is also every task's end date, and Airflow creates
no task instance of a task whose end date is before the run's logical date: a manual run after the end
(``airflow dags test`` takes now as its logical date, the UI offers now) would finish "success" without
any task. The end therefore lives in the timetable: the scheduler (and a backfill) makes no interval past
it, and every run made by hand still gets its tasks.

Airflow accepts a timetable of its own only when a plugin registers it: ``plugins/cdc_timetables.py``,
which the Airflow running the pipelines loads from its ``[core] plugins_folder``. Light at import: the DAG
processor and every Airflow component that loads the plugin import this module.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow._shared.timezones.timezone import parse_timezone
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction
from airflow.timetables.interval import CronDataIntervalTimetable


class EndingCronDataIntervalTimetable(CronDataIntervalTimetable):
    """``CronDataIntervalTimetable`` whose intervals stop at ``end``: the last ends at or before it."""

    def __init__(self, cron: str, timezone: Any, end: datetime) -> None:
        super().__init__(cron, timezone)
        self.end = end

    @property
    def summary(self) -> str:
        return f"{super().summary}, until {self.end.isoformat()}"

    def serialize(self) -> dict[str, Any]:
        return {**super().serialize(), "end": self.end.isoformat()}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> EndingCronDataIntervalTimetable:
        return cls(data["expression"], parse_timezone(data["timezone"]), datetime.fromisoformat(data["end"]))

    def next_dagrun_info(self, *, last_automated_data_interval: DataInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        info = super().next_dagrun_info(last_automated_data_interval=last_automated_data_interval,
                                        restriction=restriction)
        if info is None or info.data_interval is None or info.data_interval.end > self.end:
            return None
        return info
