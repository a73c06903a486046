"""land from Azure Event Hubs Capture Avro files (``land_eventhubs_capture``); the topic is the event hub.

Capture keeps the enqueued time, so an interval ends at the first event enqueued at or after ``end``
(sequence numbers as offsets, chained on the previous landing like Kafka; see jobs.land.exports).
Files are found in Capture's default archive name format ``{Namespace}/{EventHub}/{PartitionId}/
{Year}/{Month}/{Day}/{Hour}/{Minute}/{Second}.avro`` (a container or folder may come before it);
records of the documented schema (Microsoft.ServiceBus.Messaging.EventData): SequenceNumber long,
Offset string, EnqueuedTimeUtc string, SystemProperties and Properties map<long|double|string|bytes>,
Body bytes or null.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from jobs.lake import storage
from jobs.lake.layout import Lake, check_name
from jobs.land.common import (
    BATCH_ROWS,
    ROWS_PER_FILE,
    LandError,
    _check_interval,
    _ms,
    _refuse_shared_folders,
)
from jobs.land.exports import _ExportPlan, _ExportRecord, _land_export_topic

EVENTHUBS_CAPTURE = "eventhubs_capture"
# Capture writes a file per partition and time window (at most 15 minutes): a record enqueued at or
# after ``start`` is in a file whose window starts no earlier than start - window. Files older than
# start - lookback are not read unless a previous landing is chained on (which says where to resume).
CAPTURE_LOOKBACK = timedelta(hours=1)

_CAPTURE_FIELDS = ("SequenceNumber", "EnqueuedTimeUtc", "Properties", "Body")
_US_TIME = re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4}) (\d{1,2}):(\d{2}):(\d{2})(?:\.(\d+))? ?([AaPp][Mm])?$")
_PARTITION_KEY = "x-opt-partition-key"


@dataclass(frozen=True)
class _CaptureFile:
    location: str
    rel: str
    namespace: str
    eventhub: str
    partition: int
    window: tuple[int, ...]  # year, month, day, hour, minute, second of the capture window


def _capture_files(prefix: str) -> list[_CaptureFile]:
    if not storage.exists(prefix):
        raise LandError(f"{prefix}: no such file or directory")
    found = []
    for entry in storage.list_files(prefix, suffix=".avro"):
        parts = entry.rel.split("/")
        if len(parts) < 9 or any(part.startswith((".", "_")) for part in parts):
            continue
        namespace, eventhub, partition, *when = parts[-9:]
        when[-1] = when[-1][:-len(".avro")]
        if not (partition.isdigit() and all(w.isdigit() for w in when)):
            continue  # not the default archive name format
        found.append(_CaptureFile(f"{prefix.rstrip('/')}/{entry.rel}", entry.rel, namespace, eventhub,
                                  int(partition), tuple(int(w) for w in when)))
    return found


def _index_capture_files(prefix: str, topics: list[str] | None
                         ) -> tuple[dict[str, dict[int, list[_CaptureFile]]], dict[str, str]]:
    """The files by event hub and partition, and each event hub's namespace (one per event hub landed)."""
    by_topic: dict[str, dict[int, list[_CaptureFile]]] = {}
    namespaces: dict[str, str] = {}
    for file in _capture_files(prefix):
        seen = namespaces.setdefault(file.eventhub, file.namespace)
        if seen != file.namespace and (topics is None or file.eventhub in topics):
            raise LandError(f"event hub {file.eventhub!r} is captured below {prefix} for namespaces {seen!r} and "
                            f"{file.namespace!r}; land each namespace from its own prefix")
        by_topic.setdefault(file.eventhub, {}).setdefault(file.partition, []).append(file)
    return by_topic, namespaces


def _enqueued_us(text: Any, where: str) -> int:
    """EnqueuedTimeUtc as Capture writes it (.NET's invariant ``M/d/yyyy h:mm:ss tt``, UTC), or ISO-8601."""
    if isinstance(text, str):
        match = _US_TIME.match(text.strip())
        if match:
            month, day, year, hour, minute, second, fraction, half = match.groups()
            hour = int(hour)
            if half is not None:
                hour = hour % 12 + (12 if half.upper() == "PM" else 0)
            at = datetime(int(year), int(month), int(day), hour, int(minute), int(second), tzinfo=UTC)
            return _ms(at) * 1000 + int((fraction or "0")[:6].ljust(6, "0"))
        try:
            cut = re.sub(r"(\.\d{6})\d+", r"\1", text.strip())  # .NET writes 7 fraction digits
            at = datetime.fromisoformat(cut)
            at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
            return int(at.timestamp()) * 1_000_000 + at.microsecond
        except ValueError:
            pass
    raise LandError(f"{where}: EnqueuedTimeUtc {text!r} is not a time; the event cannot be placed in an interval")


def _property_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return str(value).encode("ascii")  # long or double: its decimal text


def _capture_records(file: _CaptureFile, tmp: str) -> Iterator[dict[str, Any]]:
    import fastavro

    if storage.is_s3(file.location):
        local = os.path.join(tmp, "current.avro")
        try:
            storage.download(file.location, local)
        except OSError as exc:
            raise LandError(f"{file.location}: cannot be read: {exc}") from None
    else:
        local = storage.local_path(file.location)
    n = 0
    try:
        with open(local, "rb") as fh:
            reader = fastavro.reader(fh)
            fields = {f["name"] for f in (reader.writer_schema or {}).get("fields", [])}
            missing = [f for f in _CAPTURE_FIELDS if f not in fields]
            if missing:
                raise LandError(f"{file.location}: not an Event Hubs Capture file (no field {', '.join(missing)})")
            for n, record in enumerate(reader, start=1):  # noqa: B007 - n names the failing record below
                yield record
    except LandError:
        raise
    except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds for a damaged file
        raise LandError(f"{file.location}: not a readable Avro file after {n} records ({type(exc).__name__}: "
                        f"{exc}); nothing was landed for this interval: restore or remove the file") from None
    finally:
        if storage.is_s3(file.location) and os.path.exists(local):
            os.remove(local)


def _capture_event(record: dict[str, Any], file: _CaptureFile) -> _ExportRecord:
    """A captured event as a message: value = Body, offset = SequenceNumber, timestamp = EnqueuedTimeUtc,
    headers = Properties, key = the partition key."""
    where = f"{file.location} (SequenceNumber {record.get('SequenceNumber')})"
    properties = record.get("Properties") or {}
    system = record.get("SystemProperties") or {}
    headers = [{"key": str(k), "value": _property_bytes(v)} for k, v in properties.items()]
    return _ExportRecord(int(record["SequenceNumber"]), record.get("Body"),
                         _property_bytes(system.get(_PARTITION_KEY)),
                         _enqueued_us(record.get("EnqueuedTimeUtc"), where), headers or None)


def _read_capture_partition(partitions: dict[int, list[_CaptureFile]], earliest_window: tuple[int, ...], tmp: str,
                            plan: _ExportPlan, state: dict[str, Any]) -> Iterator[_ExportRecord]:
    """A partition's events in capture window order, from where the landing chained on stopped reading
    (else from the files of windows since start - lookback)."""
    files = sorted(partitions.get(plan.partition, []), key=lambda f: f.window)
    resume = next((f.window for f in files if f.rel == plan.resume_file), None)
    for file in files:
        if resume is not None and file.window < resume:
            continue  # read up to there by the landing this one chains on
        if resume is None and plan.begin is None and file.window < earliest_window:
            continue  # holds no event enqueued at or after start - lookback
        state["file"], state["files"] = file.rel, state["files"] + 1
        for record in _capture_records(file, tmp):
            yield _capture_event(record, file)


def land_eventhubs_capture(prefix: str, topics: list[str] | None, lake: Lake, pipeline: str, start: datetime,
                           end: datetime, *, lookback: timedelta = CAPTURE_LOOKBACK,
                           rows_per_file: int = ROWS_PER_FILE, batch_rows: int = BATCH_ROWS) -> list[dict[str, Any]]:
    """Land [start, end) of Azure Event Hubs Capture Avro files below ``prefix`` (a local folder or an
    ``s3://`` prefix, laid out in Capture's default archive name format); the topic is the event hub.

    Each event becomes a message: value = Body, partition = the partition id, offset = SequenceNumber,
    timestamp = EnqueuedTimeUtc (log-append time), headers = Properties (numbers as their decimal text),
    key = the partition key when SystemProperties has one. Per partition, like Kafka: the events from
    the end of the latest landed interval ending at or before ``start`` (else from the first event
    enqueued at or after ``start``) up to the first event enqueued at or after ``end`` (or the start of
    an interval already landed right after); events captured late land in the next interval. A damaged
    Avro file or an unreadable time fails the landing naming the file (nothing is committed).
    """
    check_name("pipeline", pipeline)
    start, end = _check_interval(start, end)
    by_topic, namespaces = _index_capture_files(prefix, topics)
    wanted = sorted(set(topics)) if topics else sorted(by_topic)
    _refuse_shared_folders(lake, pipeline, wanted, start, end)
    earliest = start - lookback
    earliest_window = (earliest.year, earliest.month, earliest.day, earliest.hour, earliest.minute, earliest.second)
    tmp = tempfile.mkdtemp(prefix="cdc-land-src-")
    try:
        manifests = []
        for topic in wanted:
            source = {"kind": EVENTHUBS_CAPTURE, "path": prefix, "namespace": namespaces.get(topic)}
            partitions = by_topic.get(topic, {})
            read = functools.partial(_read_capture_partition, partitions, earliest_window, tmp)
            manifests.append(_land_export_topic(
                EVENTHUBS_CAPTURE, source, topic, lake, pipeline, start, end, sorted(partitions), read,
                by_time=True, ts_type=1, contiguous=True, rows_per_file=rows_per_file, batch_rows=batch_rows))
        return manifests
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
