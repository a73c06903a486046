"""What a long run says while it runs: one line when a stage starts, one when it ends with what it did
(messages, tables, rows), read from the report the stage just wrote. Pure text from reports: no Spark.

The command line prints them on stderr (``--quiet`` turns them off, for cron); the DAG's tasks log them.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

# the report each stage writes (jobs.stages), whose figures its closing line gives
STAGE_REPORTS = {"decode": "decode.json", "fold_publish": "merge.json", "validate": "validation.json",
                 "reconcile": "reconciliation.json", "alert": "alert.json", "expire": "expire.json"}


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _decode(r: dict) -> str:
    t = r.get("total") or {}
    return (f"{_n(t.get('landed', 0))} messages: {_n(t.get('decoded', 0))} decoded, "
            f"{_n(t.get('quarantined', 0))} quarantined, {_n(t.get('ignored', 0))} ignored; "
            f"{len(r.get('tables') or {})} tables")


def _tables(n: int) -> str:
    return f"{_n(n)} table{'' if n == 1 else 's'}"


def _merge(r: dict) -> str:
    tables = r.get("tables") or {}
    rows = sum(t.get("state_rows") or 0 for t in tables.values())
    failed = sorted(name for name, t in tables.items() if t.get("error"))
    # a re-run of a published run id commits nothing for the tables that run already committed
    unchanged = sum(1 for t in tables.values() if t.get("already_published"))
    committed = len(tables) - len(failed) - unchanged
    done = ([f"{_tables(committed)} committed"] if committed or not unchanged else []) + (
        [f"{_tables(unchanged)} unchanged (already published by this run)"] if unchanged else [])
    held = (r.get("held") or {}).get("records") or 0
    return (", ".join(done) + f", {_n(rows)} rows in their state"
            + (f", {_n(held)} records held for the next run" if held else "")
            + (f"; not published: {', '.join(failed)}" if failed else ""))


def _validate(r: dict) -> str:
    suites = r.get("suites") or []
    failed = [s for s in suites if not s.get("success", True)]
    return f"{len(suites)} suites, {'all passed' if not failed else f'{len(failed)} failed'}"


def _reconcile(r: dict) -> str:
    rows = r.get("tables") or []
    by: dict[str, int] = {}
    for row in rows:
        by[row.get("status", "?")] = by.get(row.get("status", "?"), 0) + 1
    return f"{len(rows)} tables: " + (", ".join(f"{n} {s}" for s, n in sorted(by.items())) or "no source counts")


def _alert(r: dict) -> str:
    problems = len(r.get("reasons") or [])
    if r.get("sent"):
        return f"email sent ({problems} problem{'s' if problems != 1 else ''})"
    return f"no email: {r.get('error') or r.get('skipped') or 'nothing to say'}"


def _expire(r: dict) -> str:
    tables = r.get("tables") or []
    return (f"{sum(t.get('snapshots_expired', 0) for t in tables)} snapshots expired, "
            f"{_n(sum(t.get('bytes_deleted', 0) for t in tables))} bytes deleted")


SUMMARIES: dict[str, Callable[[dict], str]] = {
    "decode": _decode, "fold_publish": _merge, "validate": _validate, "reconcile": _reconcile,
    "alert": _alert, "expire": _expire,
}


def stage_done(stage: str, seconds: float, report: dict | None) -> str:
    """The closing line of a stage: its time and what its report says it did."""
    what = SUMMARIES[stage](report) if report is not None and stage in SUMMARIES else "done"
    return f"{stage}: {what} ({seconds:.1f} s)"


def to_stderr(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)
