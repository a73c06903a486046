"""What every land source shares: the schema, intervals, landed intervals and their manifests, output.

An interval [start, end) of a topic lands as ``<lake>/raw/<pipeline>/<topic>/interval=<start>_<end>/``
``part-*.parquet`` in exactly the schema of Spark's Kafka source, then ``_manifest.json`` last: the
manifest is the commit marker, and a snapshot whose manifest exists is never rewritten (landing it
again returns that manifest). Landed intervals of a topic never overlap (``_refuse_overlaps``); Kafka and
the exports chain an interval on the positions its neighbours' manifests recorded (``_Chain``), so that
intervals neither overlap nor leave gaps.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from jobs import failpoints
from jobs.lake.layout import Lake
from jobs.model import intervals
from jobs.model.intervals import IntervalError, interval_name, iso, parse_interval_name

log = logging.getLogger("jobs.land.command")

MANIFEST = "_manifest.json"
MANIFEST_VERSION = 1

# Bounded memory: at most BATCH_ROWS messages (or BATCH_BYTES of keys+values) are buffered per
# output before they become a row group; a file is closed (and uploaded) after ROWS_PER_FILE rows.
BATCH_ROWS = 20_000
BATCH_BYTES = 32 * 1024 * 1024
ROWS_PER_FILE = 1_000_000

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
# Spark's Kafka source schema (key binary, value binary, topic string, partition int, offset long,
# timestamp timestamp, timestampType int, headers array<struct<key string, value binary>>)
KAFKA_ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", pa.list_(pa.field("element", HEADER_TYPE))),
    ]
)
_TS_TYPE = KAFKA_ARROW_SCHEMA.field("timestamp").type


class LandError(RuntimeError):
    """The interval cannot be landed (unknown topic, overlapping interval, broker not answering...)."""


# ---- interval names (jobs.model.intervals) -------------------------------------------------------------
def parse_time(text: str) -> datetime:
    """An ISO-8601 instant; ``Z`` allowed; a time without an offset is taken as UTC."""
    try:
        return intervals.utc(text)
    except IntervalError as e:
        raise LandError(str(e)) from None


def _check_interval(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    try:
        return intervals.checked(start, end)
    except IntervalError as e:
        raise LandError(str(e)) from None


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


# ---- lake access: listing, clearing, file upload -------------------------------------------------
@dataclass(frozen=True)
class LandedInterval:
    start: datetime
    end: datetime
    rel_dir: str


def topic_dir(lake: Lake, pipeline: str, topic: str) -> str:
    """The lake-relative folder holding every interval of a topic."""
    return lake.raw_dir(pipeline, topic, "x", "x").rsplit("/", 1)[0]


def landed_intervals(lake: Lake, pipeline: str, topic: str) -> list[LandedInterval]:
    """Intervals of a topic whose manifest exists (committed snapshots), ordered by start."""
    base = topic_dir(lake, pipeline, topic)
    # one listing of the topic's files, not a request per interval folder (S3)
    names = [rel[len(base) + 1:-len(MANIFEST) - 1] for rel in lake.list_files(base, recursive=True)
             if rel.count("/") == base.count("/") + 2 and rel.endswith(f"/{MANIFEST}")]
    out = []
    for name in names:
        if not name.startswith("interval="):
            continue
        try:
            start_text, end_text = name[len("interval="):].split("_")
            out.append(LandedInterval(parse_interval_name(start_text), parse_interval_name(end_text),
                                      f"{base}/{name}"))
        except ValueError:
            continue  # not a folder this module wrote
    return sorted(out, key=lambda i: (i.start, i.end))


class _Output:
    """Where an interval's files go: the lake folder itself, or a local staging folder uploaded to S3."""

    def __init__(self, lake: Lake, rel_dir: str):
        self.lake = lake
        self.rel_dir = rel_dir
        self.staging = Path(tempfile.mkdtemp(prefix="cdc-land-")) if lake.is_s3 else None

    def clear(self) -> None:
        """Remove what an interrupted run may have left (no manifest yet), so readers of the folder
        never see files of two attempts."""
        self.lake.delete_tree(self.rel_dir)
        self.lake.make_dirs(self.rel_dir)  # where local files are written; nothing on S3

    def local_path(self, name: str) -> str:
        if self.staging is not None:
            return str(self.staging / name)
        return os.path.join(self.lake.join(self.rel_dir), name)

    def publish(self, name: str) -> dict[str, Any]:
        """Checksum a finished file and (on S3) upload it; returns its manifest entry."""
        path = self.local_path(name)
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        size = os.path.getsize(path)
        if self.staging is not None:
            self.lake.upload(path, f"{self.rel_dir}/{name}")
            os.remove(path)
        return {"name": name, "bytes": size, "sha256": digest.hexdigest()}

    def close(self) -> None:
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)


class _RollingWriter:
    """Parquet files in the Kafka schema: row groups of buffered rows, a new file every N rows."""

    def __init__(self, output: _Output, prefix: str, rows_per_file: int):
        self.output = output
        self.prefix = prefix
        self.rows_per_file = rows_per_file
        self.files: list[dict[str, Any]] = []
        self._writer: pq.ParquetWriter | None = None
        self._name = ""
        self._rows_in_file = 0

    def write(self, table: pa.Table) -> None:
        while table.num_rows:
            if self._writer is None:
                self._name = f"{self.prefix}-{len(self.files):05d}.parquet"
                self._writer = pq.ParquetWriter(self.output.local_path(self._name), KAFKA_ARROW_SCHEMA)
                self._rows_in_file = 0
            take = min(table.num_rows, self.rows_per_file - self._rows_in_file)
            self._writer.write_table(table.slice(0, take))
            self._rows_in_file += take
            table = table.slice(take)
            if self._rows_in_file >= self.rows_per_file:
                self._finish_file()

    def _finish_file(self) -> None:
        assert self._writer is not None
        self._writer.close()
        self._writer = None
        entry = self.output.publish(self._name)
        entry["records"] = self._rows_in_file
        self.files.append(entry)

    def close(self) -> list[dict[str, Any]]:
        if self._writer is not None:
            self._finish_file()
        return self.files


def _write_empty(output: _Output) -> dict[str, Any]:
    """An empty interval still gets one (empty) file, so Spark can read its folder and schema."""
    name = "part-empty.parquet"
    pq.write_table(KAFKA_ARROW_SCHEMA.empty_table(), output.local_path(name))
    entry = output.publish(name)
    entry["records"] = 0
    return entry


def _kafka_table(topic: str, partition: int, keys: list, values: list, offsets: list, timestamps: list,
                 ts_types: list, headers: list) -> pa.Table:
    """Buffered rows of one partition in the Kafka schema (timestamps in microseconds)."""
    n = len(offsets)
    return pa.Table.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(timestamps, _TS_TYPE),
            pa.array(ts_types, pa.int32()),
            pa.array(headers, KAFKA_ARROW_SCHEMA.field("headers").type),
        ],
        schema=KAFKA_ARROW_SCHEMA,
    )


# ---- manifests: the commit marker of an interval -------------------------------------------------
def _refuse_overlaps(lake: Lake, pipeline: str, topic: str, start: datetime, end: datetime) -> list[LandedInterval]:
    """The landed intervals of the topic, once it is known that none overlaps [start, end) but itself
    (a message landed twice would be counted twice)."""
    intervals = landed_intervals(lake, pipeline, topic)
    for other in intervals:
        if other.start < end and other.end > start and (other.start, other.end) != (start, end):
            raise LandError(f"{topic}: interval {interval_name(start)}_{interval_name(end)} overlaps the landed "
                            f"{other.rel_dir.rsplit('/', 1)[-1]}; land intervals on one grid")
    return intervals


def _refuse_shared_folders(lake: Lake, pipeline: str, topics: list[str], start: datetime, end: datetime) -> None:
    folders: dict[str, str] = {}
    for topic in sorted(topics):
        rel_dir = lake.raw_dir(pipeline, topic, interval_name(start), interval_name(end))
        if rel_dir in folders:
            # safe_part maps e.g. "a.b" and "a_b" to one folder: refuse rather than mix two topics
            raise LandError(f"topics {folders[rel_dir]!r} and {topic!r} would share the folder {rel_dir}; "
                            "land them in pipelines of their own")
        folders[rel_dir] = topic


def _existing_manifest(lake: Lake, rel_dir: str, topic: str) -> dict[str, Any] | None:
    if not lake.exists(f"{rel_dir}/{MANIFEST}"):
        return None
    manifest = lake.read_json(f"{rel_dir}/{MANIFEST}")
    if manifest.get("topic") != topic:
        # safe_part maps e.g. "a.b" and "a_b" to one folder: refuse rather than mix two topics
        raise LandError(f"{rel_dir} already holds topic {manifest.get('topic')!r}, not {topic!r}")
    return manifest


def _commit(lake: Lake, rel_dir: str, manifest: dict[str, Any]) -> dict[str, Any]:
    failpoints.reached("land.files-written")
    lake.write_json(f"{rel_dir}/{MANIFEST}", manifest)
    return manifest


def _manifest_base(source: dict[str, Any], pipeline: str, topic: str, start: datetime, end: datetime,
                   rel_dir: str) -> dict[str, Any]:
    return {
        "manifest_version": MANIFEST_VERSION,
        "pipeline": pipeline,
        "topic": topic,
        "source": source,
        "interval": {"start": iso(start), "end": iso(end)},
        "path": rel_dir,
        "schema": "spark-kafka-source",
        "landed_at": iso(datetime.now(UTC).replace(microsecond=0)),
    }


def _totals(partitions: list[dict[str, Any]], files: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "records": sum(p["records"] for p in partitions),
        "partitions": len(partitions),
        "files": len(files),
        "bytes": sum(f["bytes"] for f in files),
    }


def _note_time(plan: Any, ts: int) -> None:
    """Widen a partition plan's [min_ts, max_ts] to the time of a message it lands."""
    plan.min_ts = ts if plan.min_ts is None else min(plan.min_ts, ts)
    plan.max_ts = ts if plan.max_ts is None else max(plan.max_ts, ts)


def _partition_entry(plan: Any, **found: Any) -> dict[str, Any]:
    """A partition plan's manifest entry: where it started and ended and why, then what the source found."""
    return {
        "partition": plan.partition,
        "start_offset": plan.first_offset,
        "end_offset": plan.end,
        "records": plan.records,
        "start_from": plan.start_from,
        "previous_interval": plan.previous_interval,
        "end_reason": plan.end_reason,
        **found,
    }


def _commit_partitions(lake: Lake, rel_dir: str, source: dict[str, Any], pipeline: str, topic: str,
                       start: datetime, end: datetime, partitions: list[dict[str, Any]],
                       files: list[dict[str, Any]], outside: dict[str, Any]) -> dict[str, Any]:
    """Write the manifest of a landed interval (its partitions' positions, its files and what the source
    holds outside it: jobs.land.outside): the commit."""
    manifest = _manifest_base(source, pipeline, topic, start, end, rel_dir)
    manifest.update({"partitions": partitions, "files": files, "totals": _totals(partitions, files),
                     "outside": outside})
    return _commit(lake, rel_dir, manifest)


# ---- chaining on the neighbouring intervals ------------------------------------------------------
class _Chain:
    """The landed intervals of a topic before [start, end) (latest first) and after it (earliest first),
    once none overlaps it, and per partition the positions their manifests recorded when they landed
    from a source of ``kind`` (each manifest read once; other kinds have no positions to chain on)."""

    def __init__(self, lake: Lake, pipeline: str, topic: str, start: datetime, end: datetime, kind: str):
        intervals = _refuse_overlaps(lake, pipeline, topic, start, end)
        self.lake, self.topic, self.kind = lake, topic, kind
        self.before = [i for i in reversed(intervals) if i.end <= start]  # latest first
        self.after = [i for i in intervals if i.start >= end]  # earliest first
        self._positions: dict[str, dict[int, dict[str, Any]]] = {}

    def positions(self, interval: LandedInterval) -> dict[int, dict[str, Any]]:
        """A landed interval's manifest entries by partition (none if it landed from another kind)."""
        if interval.rel_dir not in self._positions:
            manifest = _existing_manifest(self.lake, interval.rel_dir, self.topic) or {}
            same = manifest.get("source", {}).get("kind") == self.kind
            self._positions[interval.rel_dir] = {int(p["partition"]): p for p in manifest.get("partitions", [])
                                                 if same and p.get("partition") is not None}
        return self._positions[interval.rel_dir]

    def previous(self, partition: int, needs: str | None = None) -> tuple[LandedInterval, dict[str, Any]] | None:
        """The latest interval before with an entry for the partition (whose ``needs`` is set, if given)."""
        return self._nearest(self.before, partition, needs)

    def next(self, partition: int, needs: str | None = None) -> tuple[LandedInterval, dict[str, Any]] | None:
        """The earliest interval after with an entry for the partition (whose ``needs`` is set, if given)."""
        return self._nearest(self.after, partition, needs)

    def _nearest(self, intervals: list[LandedInterval], partition: int,
                 needs: str | None) -> tuple[LandedInterval, dict[str, Any]] | None:
        for interval in intervals:
            entry = self.positions(interval).get(partition)
            if entry is not None and (needs is None or entry.get(needs) is not None):
                return interval, entry
        return None
