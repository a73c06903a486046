"""Checkpoints: a source table's row count with the moment it is true, and the verdict on the lake.

A checkpoint is ``rows`` of one source table counted at a **moment**: a source position (a cut among
the format's positions, jobs.formats.registry.bound) or a source time (the commit clock every format's records
carry as ``event_time``), exact or a bracket ``[low, high]`` that the true cut lies in. A count
without a moment was true when it was read: its moment is assumed to be then (the counts file's
modification time, the time a SQL source was queried), and it is judged within its tolerance.

The lake's count at a moment is exact: the runs' ledger (jobs.lake.ledger) keeps, per run, how far
its changes reach and, per table, the count before it and every applied change that moved the count
(a *step*, +1 or -1, with its position and time). The count at a cut is the count before the run that
holds the cut plus its steps below the cut. Verdicts:

- ``match``: at some point of the bracket the lake held the source's rows;
- ``mismatch``: the lake has reached the moment and never held them there;
- ``behind``: no run has reached the moment yet; judged by a later run (persisted with the lake);
- ``unknown``: no count, or the lake's count there cannot be known exactly (a TRUNCATE in the same
  run dropped the changes before it; a run without a ledger).

Pure Python: the steps are read through ``StepSource`` (pyarrow over the lake, or lists in tests).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from jobs.fold import fingerprints as rule
from jobs.formats.registry import bound
from jobs.lake.ledger import MissingValueSteps, RunCounts
from jobs.model.positions import JUST_AFTER, PositionError
from jobs.reconcile import columns
from jobs.reconcile.columns import RowReader

MATCH, MISMATCH, BEHIND, UNKNOWN = "match", "mismatch", "behind", "unknown"
KEY_DIFF_LIMIT = 100  # keys named per side in a report
POSITION, TIME = "position", "time"
ENTRY_FIELDS = ("rows", "as_of", "position", "tolerance", "fingerprints")
_HEX16 = re.compile(r"[0-9a-fA-F]{1,16}")


class CheckpointError(ValueError):
    """A checkpoint as written cannot be read; the message names the table, the field and the fix."""


# ---- moments -------------------------------------------------------------------------------------
def parse_time(text: str) -> int:
    """ISO-8601 to microseconds since the epoch (a time without an offset is UTC)."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        raise CheckpointError(f"{text!r} is not an ISO-8601 time") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def format_time(micros: int | None) -> str | None:
    if micros is None:
        return None
    seconds, us = divmod(micros, 1_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=us).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Moment:
    """Where the source's count is true: the changes before the cut ``low`` are in it for sure, those at
    or after ``high`` are not (``low == high``: exact). Cuts are positions (strings) or times (epoch
    microseconds, exclusive: as of 10:00:00 holds the commits at 10:00:00)."""

    kind: str
    low: str | int
    high: str | int
    text: str
    previous_commit: bool = False
    assumed: str | None = None  # why, for a count that came without a moment (judged within its tolerance)

    def reached_by(self, cut: str | int) -> str | int:
        """The lowest reach of the lake that shows every change before ``cut`` arrived."""
        return cut.rstrip(JUST_AFTER) if isinstance(cut, str) else cut - 1

    @property
    def exact(self) -> bool:
        """One cut. A position of a format whose positions start with the previous commit is placed
        within one transaction only: a bracket over it."""
        return self.low == self.high and not self.previous_commit

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Moment:
        return cls(d["kind"], d["low"], d["high"], d["text"], bool(d.get("previous_commit")), d.get("assumed"))


def position_moment(fmt: str | None, low: str, high: str | None = None) -> Moment:
    """A moment from position texts in the source's terms (a bracket when ``high`` differs)."""
    try:
        lo, hi = bound(fmt, low), bound(fmt, high if high is not None else low)
    except PositionError as exc:
        raise CheckpointError(str(exc)) from None
    text = low if high in (None, low) else f"[{low}, {high}]"
    return Moment(POSITION, lo.at, hi.at, text, lo.previous_commit)


def time_moment(low: str, high: str | None = None) -> Moment:
    lo, hi = parse_time(low), parse_time(high if high is not None else low)
    text = low if high in (None, low) else f"[{low}, {high}]"
    return Moment(TIME, lo + 1, hi + 1, text)


FILE_WRITTEN = "the counts file's modification time"
SOURCE_QUERIED = "the time the source was queried"


def assumed_moment(low: int, high: int, why: str) -> Moment:
    """The moment of a count that came without one: a time (epoch microseconds), or a bracket of the times
    its reading began and ended; ``why`` says what time it is."""
    text = format_time(low) if low == high else f"[{format_time(low)}, {format_time(high)}]"
    return Moment(TIME, low + 1, high + 1, text, assumed=why)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``6h``, ``90m``, ``3600s``, ``1d`` (a bare number is hours) to seconds."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*", str(text))
    if not m:
        raise CheckpointError(f"{text!r} is not a duration (6h, 90m, 3600s, 1d)")
    return float(m.group(1)) * _UNITS[m.group(2) or "h"]


@dataclass(frozen=True)
class Tolerance:
    """How far a count without a moment may be from the lake's at its assumed moment and still match."""

    rows: int = 0
    percent: float = 0.0

    def allows(self, source_rows: int, lake_rows: int) -> bool:
        gap = abs(source_rows - lake_rows)
        return gap <= self.rows or (self.percent > 0 and gap * 100 <= self.percent * max(source_rows, 1))


def parse_tolerance(text: str) -> Tolerance:
    """``10`` (rows), ``0.5%`` or ``10,0.5%``."""
    rows, percent = 0, 0.0
    for part in (p.strip() for p in str(text).split(",") if p.strip()):
        try:
            if part.endswith("%"):
                percent = float(part[:-1])
            else:
                rows = int(part)
        except ValueError:
            raise CheckpointError(f"tolerance {text!r}: expected rows (10), a percent (0.5%) or both "
                                  "(10,0.5%)") from None
        if rows < 0 or percent < 0:
            raise CheckpointError(f"tolerance {text!r} is negative")
    return Tolerance(rows, percent)


@dataclass(frozen=True)
class Checkpoint:
    """One source count: ``table`` as the source names it, ``table_id`` the lake's table it stands for."""

    table: str
    rows: int
    moment: Moment | None
    source: str
    taken_in: str  # the run whose reconcile captured it
    table_id: str | None = None
    taken_at: int | None = None  # the source clock when counted (epoch microseconds), for the lag
    keys: tuple[str, ...] | None = None  # the source's keys at the moment (JSON text), small tables only
    tolerance: Tolerance | None = None
    judged_in: str | None = None
    verdict: dict[str, Any] | None = None
    # a position moment's source time: every change below its high end had committed by then (a SQL
    # source reads its clock with the bracket's high end), so a lake holding every change up to it in
    # time (a landing's evidence) has reached the position
    committed_by: int | None = None
    # each bucket's value fingerprint at the moment (16 hex digits each: jobs.reconcile.fingerprint)
    fingerprints: tuple[str, ...] | None = None
    row_hashes: dict[str, str] | None = None  # key -> its row's hash, small tables only
    # the buckets row_hashes holds every key of (a large table's, drilled into after a value mismatch); None: all
    row_hash_buckets: tuple[int, ...] | None = None

    @property
    def same_count(self) -> tuple:
        """What makes two checkpoints the same count: table, moment, rows and where it came from."""
        return (self.table_id or self.table, self.moment, self.rows, self.source)

    @property
    def ident(self) -> str:
        return f"{self.table_id or self.table}@{self.moment.text if self.moment else 'end'}#{self.taken_in}"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["moment"] = self.moment.as_dict() if self.moment else None
        # the keys are those of the row hashes where the snapshot kept these: kept once
        d["keys"] = list(self.keys) if self.keys is not None and self.row_hashes is None else None
        d["row_hash_buckets"] = list(self.row_hash_buckets) if self.row_hash_buckets is not None else None
        d["fingerprints"] = list(self.fingerprints) if self.fingerprints is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Checkpoint:
        return cls(d["table"], int(d["rows"]), Moment.from_dict(d["moment"]) if d.get("moment") else None,
                   d["source"], d["taken_in"], d.get("table_id"), d.get("taken_at"),
                   tuple(d["keys"]) if d.get("keys") is not None else
                   tuple(d["row_hashes"]) if d.get("row_hashes") is not None and d.get("row_hash_buckets") is None
                   else None,
                   Tolerance(**d["tolerance"]) if d.get("tolerance") else None, d.get("judged_in"), d.get("verdict"),
                   d.get("committed_by"), tuple(d["fingerprints"]) if d.get("fingerprints") else None,
                   d.get("row_hashes"), tuple(d["row_hash_buckets"]) if d.get("row_hash_buckets") is not None else None)


# ---- counts files --------------------------------------------------------------------------------
def read_counts_file(listed: Any, path: str, fmt: str | None, run_id: str,
                     default_tolerance: Tolerance | None = None, place_positions: bool = True,
                     modified_at: int | None = None) -> list[Checkpoint]:
    """The checkpoints of a counts file: ``{table: N}`` (no moment: true when the file was written, at
    ``modified_at``, epoch microseconds), ``{table: {"rows": N, "as_of": ISO-8601}}``, ``{table: {"rows": N,
    "position": "..."}}`` (either as ``[low, high]`` for a bracket), or a list of such objects per table.
    ``place_positions`` False (a check before the format is known): a position is read as text, not
    placed among the format's."""
    written = None if modified_at is None else assumed_moment(modified_at, modified_at, FILE_WRITTEN)
    if not isinstance(listed, dict):
        raise CheckpointError(f"source counts {path}: expected a JSON object {{table: count or checkpoint}}")
    out = []
    for table, value in listed.items():
        entries = value if isinstance(value, list) else [value]
        for i, entry in enumerate(entries):
            if entry is None:  # listed without a count: unknown
                continue
            where = f"source counts {path}: {table!r}" + (f"[{i}]" if isinstance(value, list) else "")
            cp = _entry(entry, table, where, fmt if place_positions else _UNPLACED, run_id, default_tolerance)
            out.append(cp if cp.moment is not None else replace(cp, moment=written))
    return out


_UNPLACED = object()  # the format is not known yet: positions are read as text only


def _entry(entry: Any, table: str, where: str, fmt: Any, run_id: str,
           default_tolerance: Tolerance | None) -> Checkpoint:
    source = "file"
    if _is_count(entry):
        return Checkpoint(table, entry, None, source, run_id, tolerance=default_tolerance)
    if not isinstance(entry, dict):
        raise CheckpointError(f"{where}: expected a row count or an object {{\"rows\": N, \"as_of\" or \"position\"}}")
    unknown = sorted(set(entry) - set(ENTRY_FIELDS))
    if unknown:
        raise CheckpointError(f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(ENTRY_FIELDS)})")
    rows = entry.get("rows")
    if not _is_count(rows):
        raise CheckpointError(f"{where}: \"rows\" must be a row count (an integer >= 0), not {rows!r}")
    if "as_of" in entry and "position" in entry:
        raise CheckpointError(f"{where}: give \"as_of\" or \"position\", not both")
    tolerance = parse_tolerance(entry["tolerance"]) if "tolerance" in entry else default_tolerance
    try:
        if "as_of" in entry:
            moment = time_moment(*_bracket(entry["as_of"], where, "as_of"))
        elif "position" in entry:
            low, high = _bracket(entry["position"], where, "position")
            moment = (Moment(POSITION, low, high or low, entry["position"]) if fmt is _UNPLACED
                      else position_moment(fmt, low, high))
        else:
            moment = None
    except CheckpointError as exc:
        raise CheckpointError(f"{where}: {exc}") from None
    return Checkpoint(table, rows, moment, source, run_id, tolerance=tolerance,
                      fingerprints=_file_fingerprints(entry.get("fingerprints"), where))


def _file_fingerprints(value: Any, where: str) -> tuple[str, ...] | None:
    """A counts file's value fingerprints: one per bucket of keys, in bucket order, as hex (the statement of
    docs/design/fingerprints.md, run in the same snapshot as the count)."""
    if value is None:
        return None
    if (not isinstance(value, list) or len(value) != rule.BUCKETS
            or not all(isinstance(v, str) and _HEX16.fullmatch(v) for v in value)):
        raise CheckpointError(f"{where}: \"fingerprints\" must be a list of {rule.BUCKETS} fingerprints, one per "
                              "bucket of keys in bucket order, each up to 16 hex digits (docs/design/fingerprints.md)")
    return tuple(rule.hex_of(int(v, 16)) for v in value)


def _is_count(value: Any) -> bool:
    # bool is an int in Python; a true/false count is a typo, not a number
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _bracket(value: Any, where: str, name: str) -> tuple[str, str | None]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return value[0], value[1]
    raise CheckpointError(f"{where}: \"{name}\" is a string or a bracket [low, high] of strings")


# ---- the lake's counts through time --------------------------------------------------------------
class StepSource(Protocol):
    """The row-count steps of one table in one run (jobs.lake.ledger reads them with pyarrow)."""

    def total(self, rel: str) -> int: ...
    def sum_below(self, rel: str, kind: str, cut: str | int) -> int: ...
    def within(self, rel: str, kind: str, low: str | int, high: str | int) -> list[tuple[str | int, int]]: ...
    def group_below(self, rel: str, cut: str) -> str | None: ...
    def keys_from(self, rel: str, kind: str, cut: str | int) -> list[tuple[str, int]]: ...
    def value_sums_below(self, rel: str, kind: str, cut: str | int) -> dict[int, int]: ...
    def value_keys_from(self, rel: str, kind: str, cut: str | int) -> list[tuple[str | None, int, int | None]]: ...
    def value_points(self, rel: str, kind: str, low: str | int,
                     high: str | int) -> list[tuple[str | int, int, int | None, int]]: ...


def _first_reaching(kind: str, cut: str | int, runs: Sequence[RunCounts], moment: Moment,
                    committed_by: int | None = None) -> int | None:
    """The index of the first run after which the lake holds every change before ``cut`` (its records
    reach past it, or its landing reaches its time: the cut's own for a time, ``committed_by`` for a
    position; and no transaction before it is held back), or None."""
    need, reach, landed = moment.reached_by(cut), None, None
    need_time = need if kind == TIME else committed_by
    for i, run in enumerate(runs):
        mine = run.reach_position if kind == POSITION else run.reach_time
        held = run.held_position if kind == POSITION else run.held_time
        if mine is not None and (reach is None or mine > reach):
            reach = mine
        if run.landed_time is not None and (landed is None or run.landed_time > landed):
            landed = run.landed_time
        reached = (reach is not None and reach >= need) or (
            landed is not None and need_time is not None and landed >= need_time)
        if reached and (held is None or held >= cut):
            return i
    return None


# a table's row hash of each key now (of the keys in some buckets; None: all), or None where not at hand
HashesNow = Callable[[str, frozenset[int] | None], dict[str, int] | None]


@dataclass
class Judgement:
    verdict: str
    lake_rows: int | list[int] | None = None  # one count, or the counts the lake held across the bracket
    reason: str | None = None
    judged_run: str | None = None
    lag: dict[str, Any] | None = None
    key_diff: dict[str, list[str]] | None = None
    value_diff: dict[str, Any] | None = None


def judge(cp: Checkpoint, ledger: Sequence[RunCounts], steps: StepSource, max_lag_s: float | None = None,
          judged_at: int | None = None, keys_now: Callable[[str], list[str] | None] | None = None,
          hashes_now: HashesNow | None = None,
          rows_now: RowReader | None = None) -> Judgement:
    """The verdict on a checkpoint with a moment, from the ledger up to this run (in run order).
    ``keys_now``: the lake's keys of a table now (None: too large), for the keys of a mismatch; ``hashes_now``
    and ``rows_now``: each key's row hash, and some keys' rows, for the keys and columns of a value mismatch."""
    m, table = cp.moment, cp.table_id or cp.table
    assert m is not None
    i = _first_reaching(m.kind, m.high, ledger, m, cp.committed_by)
    if i is not None:
        verdict = _counted(cp, table, ledger[: i + 1], steps)
        if verdict.verdict == MATCH and cp.fingerprints is not None:
            verdict = judge_values(cp, table, ledger[: i + 1], steps, verdict)
            if verdict.value_diff is not None and cp.row_hashes is not None and hashes_now is not None:
                found = _value_keys(cp, table, ledger, steps, hashes_now)
                verdict.value_diff["keys"] = found and found.named()
                if found is not None and rows_now is not None:
                    verdict = _value_columns(cp, table, verdict, found, rows_now)
        if verdict.verdict == MISMATCH and cp.keys is not None and keys_now is not None:
            verdict.key_diff = _key_diff(cp, table, ledger, steps, keys_now)
    else:
        verdict = Judgement(BEHIND, reason="the lake has not reached the checkpoint's moment",
                            lag=_lag(cp, ledger, max_lag_s, judged_at))
    if m.assumed:
        verdict.reason = "; ".join(filter(None, [_assumed(cp), verdict.reason]))
    return verdict


def _assumed(cp: Checkpoint) -> str:
    tolerance = cp.tolerance or Tolerance()
    return (f"a count without a moment, judged as of {cp.moment.assumed} ({cp.moment.text}) within a tolerance "
            f"of {tolerance.rows} rows, {tolerance.percent}% (give as_of or position to say when it was true)")


def _lag(cp: Checkpoint, ledger: Sequence[RunCounts], max_lag_s: float | None, judged_at: int | None) -> dict:
    reach_position = max((r.reach_position for r in ledger if r.reach_position is not None), default=None)
    landed = max((r.landed_time for r in ledger if r.landed_time is not None), default=None)
    reach_time = max((t for r in ledger for t in (r.reach_time, r.landed_time) if t is not None), default=None)
    moment_time = (cp.moment.high - 1) if cp.moment.kind == TIME else cp.taken_at
    lag: dict[str, Any] = {"checkpoint": cp.moment.text, "lake_position": reach_position,
                           "lake_time": format_time(reach_time), "landed_through": format_time(landed),
                           "seconds": None, "overdue": False}
    if moment_time is not None and reach_time is not None:
        lag["seconds"] = round(max(moment_time - reach_time, 0) / 1e6, 6)
    if max_lag_s is not None and moment_time is not None and judged_at is not None:
        # waiting longer than the maximum for a moment the lake should hold by now
        lag["waiting_seconds"] = round((judged_at - moment_time) / 1e6, 3)
        lag["overdue"] = judged_at - moment_time > max_lag_s * 1e6
    return lag


def _counted(cp: Checkpoint, table: str, runs: Sequence[RunCounts], steps: StepSource) -> Judgement:
    judged_run = runs[-1].run_id
    try:
        counts = _counts_across(table, runs, steps, cp.moment, cp.committed_by)
    except _NotExact as exc:
        return Judgement(UNKNOWN, reason=str(exc), judged_run=judged_run)
    lake_rows: int | list[int] = counts[0] if len(counts) == 1 else counts
    # a count of an assumed moment was taken some time before it: its tolerance absorbs that
    tolerance = (cp.tolerance or Tolerance()) if cp.moment.assumed else Tolerance()
    held = any(tolerance.allows(cp.rows, count) for count in counts)
    return Judgement(MATCH if held else MISMATCH, lake_rows, judged_run=judged_run)


class _NotExact(Exception):
    pass


def _group_start(runs: Sequence[RunCounts], steps: StepSource, m: Moment) -> str:
    """For positions that start with the previous commit: the start of the last transaction group below
    the cut, over every table's steps in every run (the transaction straddling the cut sorts below it;
    any transaction after it starts at or past the cut)."""
    groups = [steps.group_below(e["steps"], m.low) for r in runs for e in r.tables.values() if e.get("steps")]
    return max((g for g in groups if g), default=m.low)


def _by_group(points: list[tuple[str | int, int]]) -> list[tuple[str | int, int]]:
    """Steps summed per transaction group (the positions' first component): no cut falls inside one."""
    grouped: dict[str | int, int] = {}
    for coordinate, delta in points:
        group = coordinate.split(".", 1)[0] if isinstance(coordinate, str) else coordinate
        grouped[group] = grouped.get(group, 0) + delta
    return sorted(grouped.items())


def _table_before(table: str, runs: Sequence[RunCounts], index: int) -> int:
    """The table's published count before run ``index`` (0 before any run touched it)."""
    for run in reversed(runs[:index]):
        if table in run.tables:
            return int(run.tables[table]["rows_after"])
    return 0


def _checked(entry: dict[str, Any], run: RunCounts, table: str, steps: StepSource) -> str:
    rel = entry.get("steps")
    if not rel:
        raise _NotExact(f"run {run.run_id} kept no count steps of {table}")
    if int(entry["rows_before"]) + steps.total(rel) != int(entry["rows_after"]):
        raise _NotExact(f"run {run.run_id}: the count steps of {table} do not add up to its published rows")
    return rel


def _counts_across(table: str, runs: Sequence[RunCounts], steps: StepSource, m: Moment,
                   committed_by: int | None = None) -> list[int]:
    """Every count the table held at a cut inside the moment's bracket, in order, without repeats: the
    count at its low end (in the first run that reaches it), then the count after each step below its
    high end, through the runs up to the one that reaches it."""
    low = _group_start(runs, steps, m) if m.previous_commit else m.low
    # the high end is reached, so the low end is too (a landing that reached the high end's time reached
    # every change below the low end: counting from that run is exact)
    first = _first_reaching(m.kind, low, runs, m, committed_by)
    counts, total = [], None
    for k in range(first, len(runs)):
        run, entry = runs[k], runs[k].tables.get(table)
        if entry is None:
            if total is None:  # untouched: the count it had before this run
                total = _table_before(table, runs, k)
                counts.append(total)
            continue
        rel = _checked(entry, run, table, steps)
        exact_from = entry.get("exact_from")
        if exact_from is not None and m.kind == POSITION and low < exact_from:
            raise _NotExact(f"a TRUNCATE in run {run.run_id} dropped {table}'s changes before it, so its count "
                            "before the TRUNCATE is not known")
        total = int(entry["rows_before"]) + steps.sum_below(rel, m.kind, low)
        counts.append(total)
        points = steps.within(rel, m.kind, low, m.high)
        for _coord, delta in _by_group(points) if m.previous_commit else points:
            total += delta
            counts.append(total)
    return list(dict.fromkeys(counts))


def _key_diff(cp: Checkpoint, table: str, ledger: Sequence[RunCounts], steps: StepSource,
              keys_now: Callable[[str], list[str] | None]) -> dict[str, list[str]] | None:
    """The keys that differ at the moment (at the low end of a bracket: a change inside the bracket may
    show as a difference): the lake's keys then are its keys now with each key's first step at or after
    the cut undone (a key that appeared after it was not there; one that went was). None when a step
    without a key (a TRUNCATE) follows the cut, or the keys are not at hand."""
    now = keys_now(table)
    after = None if now is None else _keyed_steps_after(cp, table, ledger, steps.keys_from)
    if after is None:
        return None
    first_after: dict[str, int] = {}
    for key, delta in after:
        first_after.setdefault(key, delta)
    lake = set(now)
    for key, delta in first_after.items():
        (lake.discard if delta > 0 else lake.add)(key)
    source = set(cp.keys or ())
    return {"missing_in_lake": sorted(source - lake)[:KEY_DIFF_LIMIT],
            "extra_in_lake": sorted(lake - source)[:KEY_DIFF_LIMIT]}


# ---- values: the lake's fingerprints at the moment against the source's ------------------------------
# Like its count, a table's fingerprint per bucket of keys at a cut is the one before the run that holds the
# cut (what the previous run published) plus that run's value steps below it (jobs.fold.stage writes them
# beside the count steps). A checkpoint whose count matched is judged again by its values: ``match`` where,
# at a cut of its bracket where the count holds, every bucket's fingerprint is the source's; else
# ``mismatch`` naming the buckets that differ (docs/design/fingerprints.md).

class NotCompared(Exception):
    """The lake's fingerprints at the moment are not known (why: the message)."""


BUCKETS_SHOWN = 20  # differing buckets a verdict names


def judge_values(cp: Checkpoint, table: str, runs: Sequence[RunCounts], steps: StepSource,
                 counted: Judgement) -> Judgement:
    """``counted`` (a count ``match``) judged again by the values at the same moment."""
    if cp.moment.assumed:
        return replace(counted, reason=_joined(counted.reason, "values not compared: a count without a moment"))
    try:
        states = states_across(table, runs, steps, cp)
    except (NotCompared, MissingValueSteps) as exc:
        return replace(counted, reason=_joined(counted.reason, f"values not compared: {exc}"))
    source = [int(h, 16) for h in cp.fingerprints]
    held = [fps for rows, fps in states if rows == cp.rows]
    if any(fps == source for fps in held):
        return counted
    closest = min(held or [fps for _rows, fps in states], key=lambda fps: _differing(fps, source))
    differing = [b for b in range(len(source)) if closest[b] != source[b]]
    diff = {"buckets": len(source), "differing": len(differing),
            "source": {str(b): rule.hex_of(source[b]) for b in differing[:BUCKETS_SHOWN]},
            "lake": {str(b): rule.hex_of(closest[b]) for b in differing[:BUCKETS_SHOWN]}}
    reason = (f"the counts agree, the values do not: {len(differing)} of {len(source)} buckets of keys differ "
              f"at the moment ({', '.join(map(str, differing[:BUCKETS_SHOWN]))})")
    return replace(counted, verdict=MISMATCH, reason=_joined(counted.reason, reason), value_diff=diff)


@dataclass(frozen=True)
class _KeysAtMoment:
    """The keys whose rows differ, are missing or extra in the lake at a moment; and the keys the lake changed
    after it (whose rows now are not their rows then)."""

    differ: list[str]
    missing_in_lake: list[str]
    extra_in_lake: list[str]
    changed_after: frozenset[str]

    def named(self) -> dict[str, list[str]]:
        return {"differ": self.differ[:KEY_DIFF_LIMIT], "missing_in_lake": self.missing_in_lake[:KEY_DIFF_LIMIT],
                "extra_in_lake": self.extra_in_lake[:KEY_DIFF_LIMIT]}


def _value_keys(cp: Checkpoint, table: str, ledger: Sequence[RunCounts], steps: StepSource,
                hashes_now: HashesNow) -> _KeysAtMoment | None:
    """The keys whose rows differ at the moment: the lake's row hash of each key then is its hash now less
    its value steps at or after the cut (0: no row), against the hashes the source's snapshot kept (of
    every key, or of the keys of some buckets). None when a step without a key (a TRUNCATE) follows the cut,
    or the lake's rows are not at hand."""
    buckets = frozenset(cp.row_hash_buckets) if cp.row_hash_buckets is not None else None
    now = hashes_now(table, buckets)
    try:
        after = None if now is None else _keyed_steps_after(cp, table, ledger, steps.value_keys_from)
    except MissingValueSteps:
        return None
    if after is None:
        return None
    after = [(key, dh) for key, dh, bucket in after if buckets is None or bucket in buckets]
    lake = dict(now)
    for key, dh in after:
        lake[key] = rule.add(lake.get(key, 0), -dh)
    lake = {k: h for k, h in lake.items() if h}
    source = {k: int(h, 16) for k, h in (cp.row_hashes or {}).items()}
    return _KeysAtMoment(sorted(k for k in source.keys() & lake.keys() if source[k] != lake[k]),
                         sorted(source.keys() - lake.keys()), sorted(lake.keys() - source.keys()),
                         frozenset(key for key, _dh in after))


def _value_columns(cp: Checkpoint, table: str, verdict: Judgement, found: _KeysAtMoment,
                   rows_now: RowReader) -> Judgement:
    """The differing keys' columns with both values (jobs.reconcile.columns); a mismatch whose every difference
    is within its column's declared tolerance is a match."""
    if not found.differ:
        return verdict
    lake = rows_now.lake(table, found.differ)
    source = None if lake is None else rows_now.source(table, found.differ)
    if source is None:
        verdict.value_diff["columns_not_compared"] = ("the lake's rows are not at hand" if lake is None
                                                      else "the source's rows cannot be read")
        return verdict
    rows = columns.compare_rows(found.differ, cp.row_hashes or {}, found.changed_after, source, lake,
                                rows_now.rules(table))
    verdict.value_diff["rows"] = rows[:columns.ROWS_SHOWN]
    if found.missing_in_lake or found.extra_in_lake or not _all_keys_compared(cp, verdict.value_diff) \
            or not columns.all_tolerated(rows):
        return verdict
    named = sorted({c["column"] for r in rows for c in r["columns"]})
    reason = (f"the values agree within the declared tolerance: {len(rows)} rows differ in "
              f"{', '.join(named)} by no more than it allows")
    return replace(verdict, verdict=MATCH, reason=reason)


def _all_keys_compared(cp: Checkpoint, diff: dict[str, Any]) -> bool:
    """Whether the keys compared were those of every differing bucket (all of a small table's; of a large one,
    those of the buckets its snapshot kept the row hashes of)."""
    if cp.row_hash_buckets is None:
        return True
    shown = {int(b) for b in diff.get("source") or {}}
    return len(shown) == diff["differing"] and shown <= set(cp.row_hash_buckets)


def _differing(fps: list[int], source: list[int]) -> int:
    return sum(a != b for a, b in zip(fps, source))


def _joined(*reasons: str | None) -> str:
    return "; ".join(r for r in reasons if r)


def states_across(table: str, runs: Sequence[RunCounts], steps: StepSource,
                  cp: Checkpoint) -> list[tuple[int, list[int]]]:
    """(rows, fingerprint per bucket) at each cut inside the moment's bracket, in order: at its low end, then
    after each coordinate below its high end (a transaction group's, where positions start with the previous
    commit), through the runs up to the one that reaches it."""
    m = cp.moment
    low = _group_start(runs, steps, m) if m.previous_commit else m.low
    first = _first_reaching(m.kind, low, runs, m, cp.committed_by)
    states: list[tuple[int, list[int]]] = []
    current: tuple[int, list[int]] | None = None
    for k in range(first, len(runs)):
        entry = runs[k].tables.get(table)
        if entry is None:
            if current is None:
                current = (_table_before(table, runs, k), _fingerprints_before(table, runs, k))
                states.append(current)
            continue
        current = _run_states(table, runs[k].run_id, entry, steps, m, low, states)
    return states


def _run_states(table: str, run_id: str, entry: dict[str, Any], steps: StepSource, m, low,
                states: list[tuple[int, list[int]]]) -> tuple[int, list[int]]:
    kept = entry.get("fingerprints") or {}
    if not kept.get("before") or not entry.get("steps"):
        raise NotCompared(f"run {run_id} kept no value steps of {table}")
    rel = entry["steps"]
    fps = [int(h, 16) for h in kept["before"]]
    for bucket, dh in steps.value_sums_below(rel, m.kind, low).items():
        fps[bucket] = rule.add(fps[bucket], dh)
    rows = int(entry["rows_before"]) + steps.sum_below(rel, m.kind, low)
    states.append((rows, list(fps)))
    group = None
    for coordinate, delta, bucket, dh in steps.value_points(rel, m.kind, low, m.high):
        key = coordinate.split(".", 1)[0] if m.previous_commit and isinstance(coordinate, str) else coordinate
        if key != group and group is not None:
            states.append((rows, list(fps)))
        group = key
        rows += delta
        if bucket is not None:
            fps[bucket] = rule.add(fps[bucket], dh)
    if group is not None:
        states.append((rows, list(fps)))
    return rows, fps


def _fingerprints_before(table: str, runs: Sequence[RunCounts], index: int) -> list[int]:
    for run in reversed(runs[:index]):
        if table in run.tables:
            after = (run.tables[table].get("fingerprints") or {}).get("after")
            if not after:
                raise NotCompared(f"run {run.run_id} kept no value fingerprints of {table}")
            return [int(h, 16) for h in after]
    return [0] * rule.BUCKETS


KeyedSteps = Callable[[str, str, str | int], list[tuple]]  # StepSource.keys_from's shape: (key, change, ...)


def _keyed_steps_after(cp: Checkpoint, table: str, ledger: Sequence[RunCounts],
                       read: KeyedSteps) -> list[tuple] | None:
    """The table's steps at or after the checkpoint's cut (``read``: the StepSource's count or value form),
    (key, change) in run order; None where one has no key (a TRUNCATE: the keys before it are not known)."""
    found = []
    for run in ledger:
        entry = run.tables.get(table)
        if entry and entry.get("steps"):
            for step in read(entry["steps"], cp.moment.kind, cp.moment.low):
                if step[0] is None:
                    return None
                found.append(step)
    return found


# ---- the persisted checkpoints -------------------------------------------------------------------
def merge_pending(stored: Iterable[Checkpoint], new: Iterable[Checkpoint], run_id: str) -> list[Checkpoint]:
    """The checkpoints this run judges: those stored and still pending (or judged by this very run, when
    it is re-run), and the new ones; a re-run's capture replaces what the same run captured before. A
    new checkpoint an earlier run already took (a counts file read again, with the same table, moment
    and rows) is that one: not judged twice."""
    earlier = [c for c in stored if c.taken_in != run_id]
    known = {c.same_count for c in earlier if c.moment is not None}
    keep = [c for c in earlier if c.judged_in in (None, run_id)]
    return [replace(c, judged_in=None, verdict=None) for c in keep] + [c for c in new if c.same_count not in known]


def dumps(checkpoints: Iterable[Checkpoint]) -> str:
    return json.dumps([c.as_dict() for c in checkpoints], sort_keys=True)


def loads(text: str) -> list[Checkpoint]:
    return [Checkpoint.from_dict(d) for d in json.loads(text)]

