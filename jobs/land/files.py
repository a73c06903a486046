"""land from files: topics already dumped as Parquet in Spark's Kafka schema (``land_files``).

The messages whose timestamp is in [start, end) land; the files are read in name order, one at a
time (an ``s3://`` source is downloaded file by file to a temporary folder). Rows without a topic (no
topic column, or a null one) take it from the folder (``topics/<topic>/partition=N/`` or ``<topic>/part-*``).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs.lake import storage
from jobs.lake.layout import Lake, check_name
from jobs.land.common import (
    _TS_TYPE,
    BATCH_ROWS,
    KAFKA_ARROW_SCHEMA,
    ROWS_PER_FILE,
    LandError,
    _check_interval,
    _commit_partitions,
    _existing_manifest,
    _Output,
    _refuse_overlaps,
    _RollingWriter,
    _write_empty,
)
from jobs.land.outside import outside
from jobs.model.intervals import interval_name


def _source_files(source_dir: str) -> Iterator[tuple[str, str]]:
    """(readable local path, path relative to source_dir) of every Parquet file, in name order.
    S3 files are downloaded one at a time to a temporary folder (bounded disk)."""
    if storage.is_dir(source_dir):
        # hidden and underscore names are writers' bookkeeping (_SUCCESS, .crc, _temporary/)
        rels = sorted((f.rel for f in storage.list_files(source_dir, suffix=".parquet")
                       if not any(part.startswith((".", "_")) for part in f.rel.split("/"))),
                      key=lambda rel: rel.split("/"))
        found = [(f"{source_dir.rstrip('/')}/{rel}", rel) for rel in rels]
    elif storage.exists(source_dir):
        found = [(source_dir, source_dir.rsplit("/", 1)[-1])]
    else:
        raise LandError(f"{source_dir}: no such file or directory")
    if not found:
        raise LandError(f"{source_dir}: no .parquet files")
    if not storage.is_s3(source_dir):
        yield from ((storage.local_path(location), rel) for location, rel in found)
        return
    tmp = tempfile.mkdtemp(prefix="cdc-land-src-")
    try:
        for location, rel in found:
            local = os.path.join(tmp, "current.parquet")
            storage.download(location, local)
            yield local, rel
            os.remove(local)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _default_topic(source_dir: str, rel_path: str) -> str:
    """The topic of rows without a topic column: the first folder below source_dir (Kafka Connect's
    ``topics/<topic>/partition=N/`` layout, or ``<topic>/part-*.parquet``), else source_dir's name."""
    parts = rel_path.split("/")
    if len(parts) > 1:
        return parts[0]
    source = Path(source_dir.rstrip("/"))
    return source.parent.name if source.suffix == ".parquet" else source.name


def _to_kafka_schema(batch: pa.RecordBatch, default_topic: str, where: str) -> pa.Table:
    table = pa.Table.from_batches([batch])
    if "value" not in table.column_names or "timestamp" not in table.column_names:
        raise LandError(f"{where}: needs at least 'value' and 'timestamp' columns (Spark's Kafka source schema)")
    columns = []
    for fld in KAFKA_ARROW_SCHEMA:
        if fld.name in table.column_names:
            col = table[fld.name]
            try:
                col = col.cast(fld.type)  # naive timestamps are taken as UTC; ms/ns become us
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise LandError(f"{where}: column {fld.name} ({col.type}) is not {fld.type}: {exc}") from None
        else:
            col = pa.nulls(table.num_rows, fld.type)
        if fld.name == "topic":
            col = pc.fill_null(col, default_topic)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=KAFKA_ARROW_SCHEMA)


@dataclass
class _FilesTopic:
    rel_dir: str
    output: _Output
    writer: _RollingWriter
    partitions: dict[int | None, dict[str, Any]] = field(default_factory=dict)
    # the topic's messages outside the interval (jobs.land.outside): counts, nearest and extreme times
    before: int = 0
    after: int = 0
    times: dict[str, datetime] = field(default_factory=dict)

    def note_outside(self, row: dict[str, Any]) -> None:
        """One topic's figures of a batch (``_outside_by_topic``)."""
        self.before += row["is_before_sum"]
        self.after += row["is_after_sum"]
        for name, column, pick in (("last_before", "before_ts_max", max), ("first_after", "after_ts_min", min),
                                   ("earliest", "timestamp_min", min), ("latest", "timestamp_max", max)):
            if row[column] is not None:
                self.times[name] = row[column] if name not in self.times else pick(self.times[name], row[column])

    def outside(self) -> dict[str, Any]:
        return outside(self.before, self.after, **self.times)


class _FilesLanding:
    """The topics of one ``land_files`` run: those being written (``live``) and those landed (``done``,
    in this run or before it)."""

    def __init__(self, source_dir: str, lake: Lake, pipeline: str, start: datetime, end: datetime,
                 rows_per_file: int):
        self.source_dir, self.lake, self.pipeline = source_dir, lake, pipeline
        self.start, self.end, self.rows_per_file = start, end, rows_per_file
        self.live: dict[str, _FilesTopic] = {}
        self.done: dict[str, dict[str, Any]] = {}

    def output_for(self, topic: str) -> _FilesTopic | None:
        """Where a topic's messages go; None if it is landed already (the first time: its manifest)."""
        if topic in self.done:
            return None
        if topic not in self.live:
            rel_dir = self.lake.raw_dir(self.pipeline, topic, interval_name(self.start), interval_name(self.end))
            sharing = sorted(t for t, target in self.live.items() if target.rel_dir == rel_dir)
            sharing += sorted(t for t, manifest in self.done.items() if manifest.get("path") == rel_dir)
            if sharing:
                # safe_part maps e.g. "a.b" and "a_b" to one folder: refuse rather than mix two topics
                raise LandError(f"topics {sharing[0]!r} and {topic!r} would share the folder {rel_dir}; "
                                "land them in pipelines of their own")
            existing = _existing_manifest(self.lake, rel_dir, topic)
            if existing is not None:
                self.done[topic] = existing
                return None
            _refuse_overlaps(self.lake, self.pipeline, topic, self.start, self.end)
            output = _Output(self.lake, rel_dir)
            output.clear()
            self.live[topic] = _FilesTopic(rel_dir, output, _RollingWriter(output, "part", self.rows_per_file))
        return self.live[topic]

    def write(self, in_interval: pa.Table) -> None:
        """Messages of the interval, to the topics being written."""
        for topic in pc.unique(in_interval["topic"]).to_pylist():
            target = self.live.get(topic)
            if target is None:
                continue
            rows = in_interval.filter(pc.equal(in_interval["topic"], topic))
            target.writer.write(rows)
            _count_partitions(target.partitions, rows)

    def commit(self) -> None:
        """Close the topics being written and write their manifests."""
        for topic, target in sorted(self.live.items()):
            files = target.writer.close() or [_write_empty(target.output)]
            partitions_out = [
                {"partition": p, **stats}
                for p, stats in sorted(target.partitions.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
            ]
            self.done[topic] = _commit_partitions(self.lake, target.rel_dir, {"kind": "files", "path": self.source_dir},
                                                  self.pipeline, topic, self.start, self.end, partitions_out, files,
                                                  target.outside())

    def close(self) -> None:
        for target in self.live.values():
            target.output.close()


def land_files(source_dir: str, topics: list[str] | None, lake: Lake, pipeline: str, start: datetime,
               end: datetime, *, rows_per_file: int = ROWS_PER_FILE,
               batch_rows: int = BATCH_ROWS) -> list[dict[str, Any]]:
    """Land [start, end) of topics already dumped as Parquet in Spark's Kafka schema (e.g. the demo's
    topics, or a Kafka Connect S3 sink's files): the messages whose timestamp is in the interval.

    ``topics`` None lands every topic found in the files (each gets a manifest, empty or not).
    Returns the manifests in topic order; topics already landed for the interval are not rewritten.
    """
    check_name("pipeline", pipeline)
    start, end = _check_interval(start, end)
    wanted = set(topics) if topics else None
    run = _FilesLanding(source_dir, lake, pipeline, start, end, rows_per_file)
    try:
        for local, rel_path in _source_files(source_dir):
            _land_source_file(run, local, rel_path, wanted, batch_rows)
        for topic in sorted(wanted or ()):
            run.output_for(topic)  # asked for but absent from the files: an empty interval
        run.commit()
    finally:
        run.close()
    return [run.done[t] for t in sorted(run.done)]


def _land_source_file(run: _FilesLanding, local: str, rel_path: str, wanted: set[str] | None,
                      batch_rows: int) -> None:
    """The messages of one Parquet file whose timestamp is in the interval, batch by batch."""
    source_dir = run.source_dir
    default_topic = _default_topic(source_dir, rel_path)
    lo = pa.scalar(run.start, _TS_TYPE)
    hi = pa.scalar(run.end, _TS_TYPE)
    parquet = pq.ParquetFile(local)
    for batch in parquet.iter_batches(batch_size=batch_rows):
        table = _to_kafka_schema(batch, default_topic, f"{source_dir}/{rel_path}")
        if table.num_rows == 0:
            continue
        missing_ts = table["timestamp"].null_count
        if missing_ts:
            raise LandError(f"{source_dir}/{rel_path}: {missing_ts} messages have no timestamp; "
                            "they cannot be placed in an interval")
        for topic in pc.unique(table["topic"]).to_pylist():
            if wanted is None or topic in wanted:
                run.output_for(topic)
        is_before, is_after = pc.less(table["timestamp"], lo), pc.greater_equal(table["timestamp"], hi)
        for row in _outside_by_topic(table, is_before, is_after):
            if row["topic"] in run.live:
                run.live[row["topic"]].note_outside(row)
        run.write(table.filter(pc.invert(pc.or_(is_before, is_after))))


def _outside_by_topic(table: pa.Table, is_before: pa.ChunkedArray, is_after: pa.ChunkedArray) -> list[dict[str, Any]]:
    """Per topic of a batch: its messages before and after the interval, the nearest of their times and
    the extreme times of all its messages."""
    ts = table["timestamp"]
    figures = pa.table({"topic": table["topic"], "timestamp": ts, "is_before": pc.cast(is_before, pa.int64()),
                        "is_after": pc.cast(is_after, pa.int64()),
                        "before_ts": pc.if_else(is_before, ts, pa.scalar(None, ts.type)),
                        "after_ts": pc.if_else(is_after, ts, pa.scalar(None, ts.type))})
    return figures.group_by("topic", use_threads=False).aggregate(
        [("is_before", "sum"), ("is_after", "sum"), ("before_ts", "max"), ("after_ts", "min"),
         ("timestamp", "min"), ("timestamp", "max")]).to_pylist()


def _count_partitions(stats: dict[int | None, dict[str, Any]], rows: pa.Table) -> None:
    """Per partition: record count and the offset range [min, max + 1) of the landed messages."""
    grouped = rows.group_by("partition", use_threads=False).aggregate(
        [("offset", "min"), ("offset", "max"), ("offset", "count", pc.CountOptions(mode="all"))]
    )
    for row in grouped.to_pylist():
        p = row["partition"]
        entry = stats.setdefault(p, {"start_offset": None, "end_offset": None, "records": 0})
        entry["records"] += row["offset_count"]
        if row["offset_min"] is not None:
            lo, hi = row["offset_min"], row["offset_max"] + 1
            entry["start_offset"] = lo if entry["start_offset"] is None else min(entry["start_offset"], lo)
            entry["end_offset"] = hi if entry["end_offset"] is None else max(entry["end_offset"], hi)
