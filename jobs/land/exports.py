"""What the exports other tools already wrote share (Kafka Connect S3 sink, Event Hubs Capture).

Both are read partition by partition in position order (Kafka offsets, Event Hubs sequence numbers)
and chained on the previous landing's end positions like Kafka is, so that intervals neither
overlap nor leave gaps: a landing starts where the latest landed interval (of the same source
kind) ending at or before ``start`` ended, and stops where an interval already landed after it
starts. A source gives ``_land_export_topic`` a reader of one partition's records
(``_ExportRecord``) in position order.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from jobs.lake import storage
from jobs.lake.layout import Lake
from jobs.land.common import (
    BATCH_BYTES,
    LandError,
    _Chain,
    _commit_partitions,
    _existing_manifest,
    _kafka_table,
    _ms,
    _note_time,
    _Output,
    _partition_entry,
    _RollingWriter,
    _write_empty,
    log,
)
from jobs.land.outside import combine, outside
from jobs.model.intervals import interval_name, iso


@dataclass
class _ExportRecord:
    offset: int
    value: bytes | None
    key: bytes | None = None
    ts_us: int | None = None
    headers: list[dict[str, Any]] | None = None


@dataclass
class _ExportPlan:
    """One partition of one topic: where reading starts and stops (like _PartitionPlan) and what it found."""

    partition: int
    begin: int | None  # landed positions below this are already in an earlier interval
    cap: int | None  # a later interval starts here
    scan_for_start: bool
    stop_at_timestamp: bool
    start_from: str
    end_reason_at_cap: str
    previous_interval: str | None = None
    resume_file: str | None = None  # where the chained-on landing stopped reading
    first_offset: int | None = None
    end: int | None = None
    end_reason: str = ""
    last_seen: int | None = None
    records: int = 0
    skipped_before_start: int = 0
    already_landed: int = 0
    duplicates_skipped: int = 0
    gap_before: int = 0
    files_read: int = 0
    last_file: str | None = None
    not_json: int = 0
    min_ts: int | None = None  # microseconds
    max_ts: int | None = None
    lowest: int | None = None  # the lowest position the source's files hold, when their names say it
    last_before_ts: int | None = None  # the latest record read before the interval
    first_after_ts: int | None = None  # the record the interval ended at

    def manifest_entry(self) -> dict[str, Any]:
        return _partition_entry(self, skipped_before_start=self.skipped_before_start,
                                already_landed=self.already_landed, duplicates_skipped=self.duplicates_skipped,
                                gap_before=self.gap_before, files_read=self.files_read, last_file=self.last_file,
                                not_json=self.not_json, min_timestamp=_us_iso(self.min_ts),
                                max_timestamp=_us_iso(self.max_ts))


    def outside(self) -> dict[str, Any]:
        """The partition's records before and after the interval (jobs.land.outside): before, those
        below its first position (counted from the lowest position of the files where known, else those
        read); after, none when it read to the end of the files, unknown when it stopped earlier."""
        first = self.first_offset if self.first_offset is not None else self.begin
        if self.lowest is not None and first is not None:
            before = max(0, first - self.lowest)
        else:
            before = self.skipped_before_start + self.already_landed
        after = 0 if self.end_reason == "end_of_files" else None
        return outside(before, after, _us_iso(self.last_before_ts), _us_iso(self.first_after_ts))


# a partition's records in position order: read(plan, state) sets state["file"] to the file it reads,
# counts the files read in state["files"] and may set state["lowest"], the lowest position the files hold
_Reader = Callable[[_ExportPlan, dict[str, Any]], Iterator[_ExportRecord]]


def _us_iso(us: int | None) -> str | None:
    if us is None:
        return None
    return iso(datetime.fromtimestamp(us / 1_000_000, tz=UTC))


class _ExportRows:
    """Buffered rows of one partition in the Kafka schema."""

    def __init__(self, topic: str, partition: int, ts_type: int):
        self.topic, self.partition, self.ts_type = topic, partition, ts_type
        self.records: list[_ExportRecord] = []
        self.nbytes = 0

    def add(self, record: _ExportRecord) -> None:
        self.records.append(record)
        self.nbytes += len(record.key or b"") + len(record.value or b"")

    def take(self) -> pa.Table:
        rs = self.records
        table = _kafka_table(self.topic, self.partition, [r.key for r in rs], [r.value for r in rs],
                             [r.offset for r in rs], [r.ts_us for r in rs],
                             [self.ts_type if r.ts_us is not None else -1 for r in rs], [r.headers for r in rs])
        self.records, self.nbytes = [], 0
        return table


def _export_plans(lake: Lake, pipeline: str, topic: str, start: datetime, end: datetime, kind: str,
                  partitions: list[int], *, by_time: bool) -> dict[int, _ExportPlan]:
    """Per partition: chained on the landed intervals of the same kind (their manifests' offsets)."""
    chain = _Chain(lake, pipeline, topic, start, end, kind)
    plans = {}
    for p in partitions:
        prev = chain.previous(p, "end_offset")
        nxt = chain.next(p, "start_offset")
        cap, stop_at_ts, reason_at_cap = None, by_time, "end_of_files"
        if nxt is not None:
            cap, reason_at_cap = int(nxt[1]["start_offset"]), "next_interval"
            if nxt[0].start == end:
                stop_at_ts = False  # right before a landed interval: end exactly where it starts
        if prev is None:
            plans[p] = _ExportPlan(p, None, cap, by_time, stop_at_ts,
                                   "interval_start" if by_time else "earliest_file", reason_at_cap)
            continue
        interval, part = prev
        exact = interval.end == start or not by_time
        plans[p] = _ExportPlan(p, int(part["end_offset"]), cap, not exact, stop_at_ts,
                               "previous_interval" if exact else "scan_after_previous_interval", reason_at_cap,
                               interval.rel_dir.rsplit("/", 1)[-1], part.get("last_file"))
    return plans


def _land_export_topic(kind: str, source: dict[str, Any], topic: str, lake: Lake, pipeline: str, start: datetime,
                       end: datetime, partitions: list[int], read: _Reader, *, by_time: bool, ts_type: int,
                       contiguous: bool, rows_per_file: int, batch_rows: int) -> dict[str, Any]:
    """Land one topic of an export. ``read(plan, state)`` yields a partition's records in position order,
    setting ``state["file"]`` to the file it is reading. ``contiguous``: positions have no gaps (Event
    Hubs sequence numbers), so a jump past where the previous interval ended is reported."""
    rel_dir = lake.raw_dir(pipeline, topic, interval_name(start), interval_name(end))
    existing = _existing_manifest(lake, rel_dir, topic)
    if existing is not None:
        return existing
    plans = _export_plans(lake, pipeline, topic, start, end, kind, partitions, by_time=by_time)
    window = _Window(topic, _ms(start) * 1000, _ms(end) * 1000, contiguous)
    output = _Output(lake, rel_dir)
    try:
        output.clear()
        files: list[dict[str, Any]] = []
        for p in sorted(plans):
            writer = _RollingWriter(output, f"part-{p:05d}", rows_per_file)
            _land_export_partition(plans[p], read, window, writer, _ExportRows(topic, p, ts_type), batch_rows)
            files.extend({**entry, "partition": p} for entry in writer.close())
        if not files:
            files.append(_write_empty(output))
        partitions_out = [plans[p].manifest_entry() for p in sorted(plans)]
        beyond = combine(plan.outside() for plan in plans.values()) if plans else outside(0, 0)
        return _commit_partitions(lake, rel_dir, source, pipeline, topic, start, end, partitions_out, files, beyond)
    finally:
        output.close()


@dataclass(frozen=True)
class _Window:
    """The interval of a topic an export's records are placed in: [start_us, end_us) of their time."""

    topic: str
    start_us: int
    end_us: int
    contiguous: bool  # positions have no gaps: a jump past where the previous interval ended is reported

    def admit(self, plan: _ExportPlan, record: _ExportRecord) -> bool | None:
        """Whether the record lands (True) or is skipped (False); None: the partition ends before it
        (``plan.end`` is set)."""
        offset, ts = record.offset, record.ts_us
        if plan.last_seen is not None and offset <= plan.last_seen:
            plan.duplicates_skipped += 1  # a position read twice (overlapping files)
            return False
        if plan.begin is not None and offset < plan.begin:
            plan.already_landed += 1
            return False
        if plan.cap is not None and offset >= plan.cap:
            plan.end, plan.end_reason = plan.cap, plan.end_reason_at_cap
            return None
        if self.contiguous and plan.last_seen is None and plan.begin is not None and offset > plan.begin:
            plan.gap_before = offset - plan.begin
            log.warning("%s[%d]: positions %d..%d were never landed and are not in the files read "
                        "(removed, or older than the files read)", self.topic, plan.partition, plan.begin,
                        offset - 1)
        plan.last_seen = offset
        if plan.stop_at_timestamp and ts is not None and ts >= self.end_us:
            plan.end, plan.end_reason, plan.first_after_ts = offset, "timestamp", ts
            return None
        if plan.scan_for_start and plan.first_offset is None and ts is not None and ts < self.start_us:
            plan.skipped_before_start += 1
            plan.last_before_ts = max(ts, plan.last_before_ts or ts)
            return False
        if plan.first_offset is None:
            plan.first_offset = offset
        return True


def _land_export_partition(plan: _ExportPlan, read: _Reader, window: _Window, writer: _RollingWriter,
                           rows: _ExportRows, batch_rows: int) -> None:
    """Read one partition up to its end, writing the records that land; fills in the plan."""
    state: dict[str, Any] = {"file": None, "files": 0, "lowest": None}
    records = read(plan, state)
    try:
        for record in records:
            admitted = window.admit(plan, record)
            if admitted is None:
                break
            if not admitted:
                continue
            rows.add(record)
            plan.records += 1
            ts = record.ts_us
            if ts is not None:
                _note_time(plan, ts)
            if len(rows.records) >= batch_rows or rows.nbytes >= BATCH_BYTES:
                writer.write(rows.take())
    finally:
        records.close()  # removes a downloaded file
    if plan.end is None:  # every file read: the end is what the files hold now
        seen_end = plan.last_seen + 1 if plan.last_seen is not None else None
        candidates = [o for o in (seen_end, plan.begin) if o is not None]
        plan.end, plan.end_reason = (max(candidates) if candidates else None), "end_of_files"
    if plan.first_offset is None:
        plan.first_offset = plan.end
    plan.files_read, plan.lowest = state["files"], state["lowest"]
    plan.last_file = state["file"] or plan.resume_file
    if rows.records:
        writer.write(rows.take())


def _read_source(location: str) -> bytes:
    """A source file's bytes as stored (storage.read_bytes would already decompress a ``.gz`` name)."""
    try:
        local = storage.local_path(location)
        if local is not None:
            with open(local, "rb") as fh:
                return fh.read()
        tmp = tempfile.mkdtemp(prefix="cdc-land-src-")
        try:
            storage.download(location, os.path.join(tmp, "current"))
            with open(os.path.join(tmp, "current"), "rb") as fh:
                return fh.read()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        raise LandError(f"{location}: cannot be read: {exc}") from None
