"""Intervals and run ids: the one place times are parsed, checked and named (no Spark, no Airflow).

An interval is [start, end) in UTC, in whole seconds; it names the lake's ``interval=<start>_<end>``
folders, and its run id is the same pair, so a re-run or a backfill of an interval reuses its run id.
"""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

INTERVAL_FORMAT = "%Y%m%dT%H%M%SZ"  # the lake's interval= and run= folder names


class IntervalError(ValueError):
    """A time or an interval that cannot name a window of the lake."""


def utc(value: Any, what: str = "time") -> datetime:
    """An ISO-8601 text or a datetime (Airflow's pendulum ones too) as a plain UTC datetime; ``Z``
    allowed, a time without an offset is UTC, as everywhere in the pipeline."""
    if isinstance(value, datetime):
        parsed = value
    else:
        text = str(value).strip()
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise IntervalError(f"{what} {text!r} is not an ISO-8601 time (e.g. 2026-11-01T00:00:00Z)") from None
    parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    # a plain datetime, so results compare and print alike whatever the caller's datetime class
    return datetime(parsed.year, parsed.month, parsed.day, parsed.hour, parsed.minute, parsed.second,
                    parsed.microsecond, tzinfo=UTC)


def checked(start: Any, end: Any) -> tuple[datetime, datetime]:
    """[start, end) in UTC: refused when empty or inverted, or not in whole seconds (the bounds name
    the lake's folders)."""
    start, end = utc(start, "start"), utc(end, "end")
    if start.microsecond or end.microsecond:
        raise IntervalError("interval bounds must be whole seconds (they name the lake's folders)")
    if not start < end:
        raise IntervalError(f"interval start {iso(start)} is not before its end {iso(end)}")
    return start, end


def interval_name(moment: datetime) -> str:
    """The compact UTC form of folder names: 20261101T000000Z."""
    return utc(moment).strftime(INTERVAL_FORMAT)


def parse_interval_name(text: str) -> datetime:
    return datetime.strptime(text, INTERVAL_FORMAT).replace(tzinfo=UTC)


def run_id_for(start: datetime, end: datetime) -> str:
    """Deterministic from the interval, so a re-run or backfill of an interval reuses its run id."""
    return f"{interval_name(start)}_{interval_name(end)}"


def interval_of(run_id: str) -> tuple[datetime, datetime] | None:
    """The interval an interval run's id (``run_id_for``) names; None for any other run id."""
    start, sep, end = run_id.partition("_")
    try:
        bounds = parse_interval_name(start), parse_interval_name(end)
    except ValueError:
        return None
    return bounds if sep and bounds[0] < bounds[1] else None


def iso(moment: datetime) -> str:
    """ISO-8601 with ``Z`` (how reports and manifests write times)."""
    return utc(moment).isoformat().replace("+00:00", "Z")
