"""Failpoints: named moments of a run at which a crash test kills the whole job.

With ``CDC_KILL_AT`` set to a failpoint's name, reaching it sends SIGKILL to the process's whole
process group (the Python driver, its JVM and any Python workers), as an out-of-memory killer or a
lost machine would: no handler runs, nothing is flushed. tests/integration/test_killed_runs.py kills
a run at each of them and checks that re-running the run id publishes exactly what an uninterrupted
run does. Unset (production), a failpoint is one environment lookup.

The failpoints: ``decode.changes-written`` (change records written, quarantine and decode.json not
yet), ``merge.held-written`` (the run's held transactions written, no table folded yet),
``merge.table-committed`` (after each table's commit: the first one kills between two tables'
commits), ``validate.report-written`` (validation.json written, reconciliation and alert not yet),
``land.files-written`` (a landing's Parquet files written, its manifest not yet).
"""
from __future__ import annotations

import os
import signal

KILL_AT = "CDC_KILL_AT"


def reached(name: str) -> None:
    """Kill the whole process group here when ``CDC_KILL_AT`` names this failpoint."""
    if os.environ.get(KILL_AT) == name:
        os.killpg(os.getpgrp(), signal.SIGKILL)
