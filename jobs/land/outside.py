"""What a landing saw of its source outside the interval ``[start, end)``, and the warning of an interval
that lands nothing while the source holds messages outside it (``python -m jobs land``, the land task's
log and its run's note, report.html).

Each topic's manifest holds ``outside``: ``before`` and ``after``, how many messages the source holds
before ``start`` and at or after ``end`` (null: the source cannot tell without reading what it does not
read); ``last_before`` and ``first_after``, the times of the nearest of them that the landing saw; and
``earliest`` / ``latest``, the source's first and last message times, where known (topic dumps, which are
read whole). Light: no pyarrow, no Airflow.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from jobs.model.intervals import iso, utc

FIELDS = ("before", "after", "last_before", "first_after", "earliest", "latest")
_COUNTS, _LATEST_WINS = ("before", "after"), ("last_before", "latest")
MANIFEST = "_manifest.json"  # jobs.land.common's commit marker


def _time(value: datetime | str | None) -> str | None:
    return None if value is None else iso(utc(value))


def outside(before: int | None = None, after: int | None = None, last_before: datetime | str | None = None,
            first_after: datetime | str | None = None, earliest: datetime | str | None = None,
            latest: datetime | str | None = None) -> dict[str, Any]:
    """A manifest's ``outside`` (times as ISO-8601 text, ``Z``)."""
    return {"before": before, "after": after, "last_before": _time(last_before), "first_after": _time(first_after),
            "earliest": _time(earliest), "latest": _time(latest)}


def combine(entries: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """The ``outside`` of several topics (or partitions): counts added (null if one is unknown), the
    nearest and extreme times kept; None when one of them says nothing (an older manifest)."""
    entries = list(entries)
    if not entries or any(e is None for e in entries):
        return None
    out: dict[str, Any] = {}
    for name in FIELDS:
        values = [e.get(name) for e in entries]
        if name in _COUNTS:
            out[name] = None if any(v is None for v in values) else sum(values)
            continue
        times = [utc(v) for v in values if v is not None]
        out[name] = iso((max if name in _LATEST_WINS else min)(times)) if times else None
    return out


def quiet_interval_warning(start: datetime | str, end: datetime | str, landed: int,
                           outside_interval: Mapping[str, Any] | None) -> str | None:
    """One line when nothing landed in [start, end) while the source holds messages outside it; else None."""
    if landed or not outside_interval:
        return None
    sides = []
    for side, count, near, which in (("before", "before", "last_before", "last"),
                                     ("after", "after", "first_after", "first")):
        n, at = outside_interval.get(count), outside_interval.get(near)
        if n or (n is None and at):
            sides.append(f"{n if n is not None else 'messages'} {side} it" + (f" (the {which} at {at})" if at else ""))
    if not sides:
        return None
    return (f"0 messages in [{_time(start)}, {_time(end)}) but the source holds {' and '.join(sides)}: "
            "is this the interval you meant?")


def landing_summary(raw: str | list[str] | None) -> dict[str, Any] | None:
    """The interval, the messages landed and ``outside`` of a run's landed folders (its ``--raw``: folders
    or a local glob), from their manifests; None when no folder has one (not landed by ``jobs land``)."""
    from jobs.lake import storage

    folders = [match for folder in ([raw] if isinstance(raw, str) else raw or []) for match in _expand(folder)]
    manifests = []
    for folder in folders:
        location = f"{folder.rstrip('/')}/{MANIFEST}"
        if storage.exists(location):
            manifests.append(json.loads(storage.read_text(location)))
    if not manifests:
        return None
    interval = manifests[0].get("interval") or {}
    return {"start": interval.get("start"), "end": interval.get("end"),
            "records": sum(int(m["totals"]["records"]) for m in manifests),
            "outside": combine(m.get("outside") for m in manifests)}


def _expand(folder: str) -> list[str]:
    if not any(ch in folder for ch in "*?["):
        return [folder]
    from jobs.lake.raw import RawInputError, expand  # a --raw glob: the command line's run, where pyspark is loaded

    try:
        return expand(folder)
    except RawInputError:
        return []
