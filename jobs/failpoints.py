"""Failpoints: named moments of a run at which a crash test kills, or a concurrency test stops, the job.

With ``CDC_KILL_AT`` set to a failpoint's name, reaching it sends SIGKILL to the process's whole
process group (the Python driver, its JVM and any Python workers), as an out-of-memory killer or a
lost machine would: no handler runs, nothing is flushed. tests/integration/test_killed_runs.py kills
a run at each of them and checks that re-running the run id publishes exactly what an uninterrupted
run does. With ``CDC_PAUSE_AT`` set to one, the driver stops itself (SIGSTOP) the first time it
reaches it, as a stalled attempt would, until it is sent SIGCONT (tests/support/attempts.py). Unset
(production), a failpoint is two environment lookups.

The failpoints: ``decode.reported`` (the quarantine, decoder memory and decode.json written, nothing
folded yet), ``merge.held-written`` (the run's held transactions written, no table folded yet),
``publish.files-written`` (once per run: every table's files written and staged, the lease and files not
yet checked, the run's commit not yet made), ``merge.run-committed`` (after the run's one commit of its
tables, the held log and ledger not yet written), ``validate.report-written`` (validation.json written,
reconciliation and alert not yet), ``land.files-written`` (a landing's Parquet files written, its manifest
not yet).
"""
from __future__ import annotations

import os
import signal

from jobs import env

KILL_AT = "CDC_KILL_AT"
PAUSE_AT = "CDC_PAUSE_AT"
_paused: set[str] = set()


def reached(name: str) -> None:
    """Kill the whole process group here when ``CDC_KILL_AT`` names this failpoint; stop this process
    the first time here when ``CDC_PAUSE_AT`` does."""
    if env.get(KILL_AT) == name:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    if env.get(PAUSE_AT) == name and name not in _paused:
        _paused.add(name)
        os.kill(os.getpid(), signal.SIGSTOP)
