"""What a long run says while it runs: one line when a stage starts, one when it ends with what it did
(messages, tables, rows), read from the report the stage just wrote. Pure text from reports: no Spark.

The command line prints them on stderr (``--quiet`` turns them off, for cron); the DAG's tasks log them.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from jobs.model.reports import (
    AlertReport,
    DecodeReport,
    ExpireReport,
    FoldReport,
    ReconciliationReport,
    Report,
    ValidationReport,
)


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _decode(r: DecodeReport) -> str:
    t = r.total
    return (f"{_n(t.landed)} messages: {_n(t.decoded)} decoded, {_n(t.quarantined)} quarantined, "
            f"{_n(t.ignored)} ignored; {len(r.tables)} tables")


def _tables(n: int) -> str:
    return f"{_n(n)} table{'' if n == 1 else 's'}"


def _fold(r: FoldReport) -> str:
    tables = r.tables
    rows = sum(t.state_rows or 0 for t in tables.values())
    failed = sorted(name for name, t in tables.items() if t.error)
    # a re-run of a published run id commits nothing for the tables that run already committed
    unchanged = sum(1 for t in tables.values() if t.already_published)
    committed = len(tables) - len(failed) - unchanged
    done = ([f"{_tables(committed)} committed"] if committed or not unchanged else []) + (
        [f"{_tables(unchanged)} unchanged (already published by this run)"] if unchanged else [])
    held = r.held.records or 0
    return (", ".join(done) + f", {_n(rows)} rows in their state"
            + (f", {_n(held)} records held for the next run" if held else "")
            + (f"; not published: {'; '.join(f'{name} ({tables[name].error})' for name in failed)}" if failed else ""))


def _validate(r: ValidationReport) -> str:
    failed = [s for s in r.suites if not s.success]
    return f"{len(r.suites)} suites, {'all passed' if not failed else f'{len(failed)} failed'}"


def _reconcile(r: ReconciliationReport) -> str:
    by: dict[str, int] = {}
    for row in r.tables:
        by[row.status] = by.get(row.status, 0) + 1
    return f"{len(r.tables)} tables: " + (", ".join(f"{n} {s}" for s, n in sorted(by.items())) or "no source counts")


def _alert(r: AlertReport) -> str:
    problems = len(r.reasons)
    if r.sent:
        return f"email sent ({problems} problem{'s' if problems != 1 else ''})"
    return f"no email: {r.error or r.skipped or 'nothing to say'}"


def _expire(r: ExpireReport) -> str:
    return (f"{sum(t.snapshots_expired for t in r.tables)} snapshots expired, "
            f"{_n(sum(t.bytes_deleted for t in r.tables))} bytes deleted")


# each stage's report (jobs.stages writes it) and what its closing line makes of it
STAGE_REPORTS: dict[str, tuple[type[Report], Callable[[Any], str]]] = {
    "decode": (DecodeReport, _decode), "fold_publish": (FoldReport, _fold), "validate": (ValidationReport, _validate),
    "reconcile": (ReconciliationReport, _reconcile), "alert": (AlertReport, _alert), "expire": (ExpireReport, _expire),
}


def stage_report(stage: str) -> type[Report] | None:
    """The kind of report a stage writes (None: none)."""
    return STAGE_REPORTS[stage][0] if stage in STAGE_REPORTS else None


def stage_done(stage: str, seconds: float, report: Report | None) -> str:
    """The closing line of a stage: its time and what its report says it did."""
    what = STAGE_REPORTS[stage][1](report) if report is not None and stage in STAGE_REPORTS else "done"
    return f"{stage}: {what} ({seconds:.1f} s)"


def to_stderr(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)
