"""land: one data interval [start, end) of a topic -> an immutable raw snapshot in the lake.

    python -m jobs land --kafka BOOTSTRAP --topic T [--topic T2 ...] --lake L --pipeline P \\
        --start 2026-11-01T00:00:00Z --end 2026-11-02T00:00:00Z [--consumer-config KEY=VALUE ...]
    python -m jobs land --from-files DIR [--topic T ...] --lake L --pipeline P --start ... --end ...

Writes ``<lake>/raw/<pipeline>/<topic>/interval=<start>_<end>/part-*.parquet`` in exactly the
schema of Spark's Kafka source, then ``_manifest.json`` last: the manifest is the commit marker,
and a snapshot whose manifest exists is never rewritten (landing it again returns that manifest).

Interval -> offsets (Kafka), per partition, so that intervals neither overlap nor leave gaps:

- start: the end offset of the latest landed interval ending at or before ``start``. If that interval
  ends exactly at ``start`` its end offset is taken as is; otherwise (a gap, or nothing landed yet)
  the start is the first message at or after a scan position whose timestamp is >= ``start``. The
  scan position is the previous interval's end, else the broker's ``offsets_for_times(start)`` used
  only as a hint (Tansu answers 0 for every timestamp, which merely makes the scan longer; an answer
  outside [low, high] watermark falls back to the low watermark, "no such message" to the high one).
- end: the start of an interval already landed right after this one, if any; otherwise the first
  message whose timestamp is >= ``end``, or the high watermark read at the start of the run (or the
  partition end the consumer reports, which is the last stable offset under read_committed) when
  no such message has arrived yet. Messages that arrive later with older timestamps therefore land
  in the next interval: late, never lost, never twice.

Kafka settings such as SASL credentials come from ``--consumer-config KEY=VALUE``,
``--consumer-config-env KEY=ENV_VAR`` or the JSON object in ``$CDC_KAFKA_CONFIG`` (e.g. rendered from
an Airflow connection); values are never printed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from jobs import failpoints, intervals, storage
from jobs.intervals import IntervalError, interval_name, iso, parse_interval_name
from jobs.lake import Lake, LakeError, check_name

log = logging.getLogger("jobs.land")

MANIFEST = "_manifest.json"
MANIFEST_VERSION = 1
KAFKA_CONFIG_ENV = "CDC_KAFKA_CONFIG"

# Bounded memory: at most BATCH_ROWS messages (or BATCH_BYTES of keys+values) are buffered per
# output before they become a row group; a file is closed (and uploaded) after ROWS_PER_FILE rows.
BATCH_ROWS = 20_000
BATCH_BYTES = 32 * 1024 * 1024
ROWS_PER_FILE = 1_000_000
# A broker that sends nothing (no message, no end-of-partition) for this long is an error.
IDLE_TIMEOUT_S = 60.0

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


# ---- interval names (jobs.intervals) -------------------------------------------------------------
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


def _refuse_overlaps(lake: Lake, pipeline: str, topic: str, start: datetime, end: datetime) -> list[LandedInterval]:
    """The landed intervals of the topic, once it is known that none overlaps [start, end) but itself
    (a message landed twice would be counted twice)."""
    intervals = landed_intervals(lake, pipeline, topic)
    for other in intervals:
        if other.start < end and other.end > start and (other.start, other.end) != (start, end):
            raise LandError(f"{topic}: interval {interval_name(start)}_{interval_name(end)} overlaps the landed "
                            f"{other.rel_dir.rsplit('/', 1)[-1]}; land intervals on one grid")
    return intervals


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


# ---- Kafka ---------------------------------------------------------------------------------------
@dataclass
class _PartitionPlan:
    partition: int
    low: int
    high: int
    start: int  # where reading begins
    cap: int  # never read at or past this offset
    scan_for_start: bool  # skip messages older than the interval start until the first one in it
    stop_at_timestamp: bool  # end at the first message whose timestamp is >= end
    start_from: str
    end_reason_at_cap: str
    previous_interval: str | None = None
    lost_to_retention: int = 0
    # filled while reading
    first_offset: int | None = None
    end: int | None = None
    end_reason: str = ""
    skipped_before_start: int = 0
    records: int = 0
    min_ts: int | None = None
    max_ts: int | None = None
    done: bool = False


@dataclass
class _Buffer:
    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)
    offsets: list = field(default_factory=list)
    timestamps: list = field(default_factory=list)
    ts_types: list = field(default_factory=list)
    headers: list = field(default_factory=list)
    nbytes: int = 0

    def add(self, msg) -> None:
        key, value = msg.key(), msg.value()
        ts_type, ts_ms = msg.timestamp()
        self.keys.append(key)
        self.values.append(value)
        self.offsets.append(msg.offset())
        # confluent-kafka: 0 none, 1 create, 2 log-append; Spark (Java TimestampType.id): -1, 0, 1
        self.ts_types.append(ts_type - 1)
        self.timestamps.append(ts_ms * 1000 if ts_type else None)
        raw_headers = msg.headers()
        self.headers.append([{"key": k, "value": v} for k, v in raw_headers] if raw_headers else None)
        self.nbytes += len(key or b"") + len(value or b"")

    def take(self, topic: str, partition: int) -> pa.Table:
        n = len(self.offsets)
        table = pa.Table.from_arrays(
            [
                pa.array(self.keys, pa.binary()),
                pa.array(self.values, pa.binary()),
                pa.array([topic] * n, pa.string()),
                pa.array([partition] * n, pa.int32()),
                pa.array(self.offsets, pa.int64()),
                pa.array(self.timestamps, _TS_TYPE),
                pa.array(self.ts_types, pa.int32()),
                pa.array(self.headers, KAFKA_ARROW_SCHEMA.field("headers").type),
            ],
            schema=KAFKA_ARROW_SCHEMA,
        )
        self.clear()
        return table

    def clear(self) -> None:
        self.keys, self.values, self.offsets = [], [], []
        self.timestamps, self.ts_types, self.headers = [], [], []
        self.nbytes = 0


def _consumer_config(bootstrap: str, pipeline: str, consumer_config: dict[str, Any] | None) -> dict[str, Any]:
    # group.id only because some services require one: land never joins the group nor commits.
    # The prefetch queue is capped per partition so a topic with many partitions stays in memory.
    config: dict[str, Any] = {"group.id": f"cdc-land-{pipeline}", "isolation.level": "read_committed",
                              "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 16384}
    env_config = os.environ.get(KAFKA_CONFIG_ENV)
    if env_config:
        try:
            config.update(json.loads(env_config))
        except json.JSONDecodeError:
            raise LandError(f"${KAFKA_CONFIG_ENV} is not a JSON object") from None  # value not echoed
    config.update(consumer_config or {})
    # what land relies on: never commit (the manifests are the positions), report partition ends
    config.update({"bootstrap.servers": bootstrap, "enable.auto.commit": False,
                   "enable.auto.offset.store": False, "enable.partition.eof": True})
    return config


def _redact(text: str, config: dict[str, Any]) -> str:
    """librdkafka quotes rejected setting values in its errors: never let a secret through."""
    for key, value in config.items():
        if key != "bootstrap.servers" and isinstance(value, str) and len(value) >= 3:
            text = text.replace(value, "***")
    return text


def _plan_partitions(consumer, lake: Lake, pipeline: str, topic: str, start: datetime, end: datetime,
                     partitions: list[int], timeout: float) -> list[_PartitionPlan]:
    from confluent_kafka import TopicPartition

    intervals = _refuse_overlaps(lake, pipeline, topic, start, end)
    before = [i for i in reversed(intervals) if i.end <= start]  # latest first
    after = [i for i in intervals if i.start >= end]  # earliest first
    manifests: dict[str, dict[str, Any]] = {}

    def kafka_offsets(interval: LandedInterval) -> dict[int, dict[str, Any]]:
        if interval.rel_dir not in manifests:
            manifests[interval.rel_dir] = _existing_manifest(lake, interval.rel_dir, topic)
        manifest = manifests[interval.rel_dir]
        if manifest.get("source", {}).get("kind") != "kafka":
            return {}  # file dumps have no broker offsets to chain on
        return {int(p["partition"]): p for p in manifest.get("partitions", [])}

    hints: dict[int, int] = {}
    needs_hint = [p for p in partitions if not any(p in kafka_offsets(i) for i in before)]
    if needs_hint:
        asked = [TopicPartition(topic, p, _ms(start)) for p in needs_hint]
        for tp in consumer.offsets_for_times(asked, timeout=timeout):
            hints[tp.partition] = tp.offset

    plans = []
    for p in partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
        prev = next(((i, kafka_offsets(i)[p]) for i in before if p in kafka_offsets(i)), None)
        nxt = next(((i, kafka_offsets(i)[p]) for i in after if p in kafka_offsets(i)), None)
        cap, stop_at_ts, end_reason_at_cap = high, True, "high_watermark"
        if nxt is not None:
            next_interval, next_part = nxt
            next_start = int(next_part["start_offset"])
            if next_interval.start == end:
                # right before a landed interval: end exactly where it starts, whatever the timestamps
                cap, stop_at_ts = next_start, False
            else:
                cap = min(cap, next_start)
            end_reason_at_cap = "next_interval"
        lost = 0
        if prev is not None:
            prev_interval, prev_part = prev
            begin = int(prev_part["end_offset"])
            if begin > high:
                raise LandError(f"{topic}[{p}]: the landed {prev_interval.rel_dir} ends at offset {begin} but the "
                                f"high watermark is {high}; was the topic re-created?")
            if begin < low:  # retention deleted messages nobody landed: record it, cannot recover them
                lost, begin = low - begin, low
                log.warning("%s[%d]: %d messages were deleted by retention before they were landed", topic, p, lost)
            exact = prev_interval.end == start
            plan = _PartitionPlan(p, low, high, begin, cap, not exact, stop_at_ts,
                                  "previous_interval" if exact else "scan_after_previous_interval",
                                  end_reason_at_cap, prev_interval.rel_dir.rsplit("/", 1)[-1], lost)
        else:
            # the broker's answer is only where the scan for the first message >= start begins
            hint = hints.get(p)
            if hint == -1:  # OFFSET_END: no message with a timestamp >= start yet
                begin, how = high, "offsets_for_times"
            elif hint is not None and low <= hint <= high:
                begin, how = hint, "offsets_for_times"
            else:  # no usable answer: scan the whole retained log
                begin, how = low, "low_watermark"
            plan = _PartitionPlan(p, low, high, begin, cap, True, stop_at_ts, how, end_reason_at_cap)
        plan.start = min(plan.start, plan.cap)
        plans.append(plan)
    return plans


def land_kafka(bootstrap: str, topic: str, lake: Lake, pipeline: str, start: datetime, end: datetime,
               consumer_config: dict[str, Any] | None = None, *, rows_per_file: int = ROWS_PER_FILE,
               batch_rows: int = BATCH_ROWS, timeout: float = 30.0,
               idle_timeout: float = IDLE_TIMEOUT_S) -> dict[str, Any]:
    """Land [start, end) of a Kafka topic; returns the manifest (the existing one if already landed)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    check_name("pipeline", pipeline)
    start, end = _check_interval(start, end)
    rel_dir = lake.raw_dir(pipeline, topic, interval_name(start), interval_name(end))
    existing = _existing_manifest(lake, rel_dir, topic)
    if existing is not None:
        return existing

    config = _consumer_config(bootstrap, pipeline, consumer_config)
    try:
        consumer = Consumer(config)
    except KafkaException as exc:
        raise LandError(f"Kafka consumer settings rejected: {_redact(str(exc), config)}") from None
    output = _Output(lake, rel_dir)
    try:
        try:
            meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        except KafkaException as exc:
            raise LandError(f"Kafka at {bootstrap} did not answer: {exc.args[0].str()}") from None
        if meta is None or meta.error is not None or not meta.partitions:
            reason = meta.error.str() if meta is not None and meta.error is not None else "no partitions"
            raise LandError(f"topic {topic!r}: {reason}")
        partitions = sorted(meta.partitions)
        plans = {p.partition: p for p in _plan_partitions(consumer, lake, pipeline, topic, start, end,
                                                          partitions, timeout)}
        output.clear()
        writers = {p: _RollingWriter(output, f"part-{p:05d}", rows_per_file) for p in plans}
        buffers = {p: _Buffer() for p in plans}

        def finish(plan: _PartitionPlan, end_offset: int, reason: str) -> None:
            plan.end, plan.end_reason, plan.done = end_offset, reason, True
            if plan.first_offset is None:  # nothing in the interval: it starts where it ends
                plan.first_offset = end_offset
            if buffers[plan.partition].offsets:
                writers[plan.partition].write(buffers[plan.partition].take(topic, plan.partition))
            consumer.pause([TopicPartition(topic, plan.partition)])

        to_read = []
        for plan in plans.values():
            if plan.start >= plan.cap:  # nothing to read (plan.start was capped: it equals plan.cap)
                plan.first_offset = plan.end = plan.cap
                plan.end_reason, plan.done = plan.end_reason_at_cap, True
            else:
                if not plan.scan_for_start:
                    plan.first_offset = plan.start
                to_read.append(TopicPartition(topic, plan.partition, plan.start))
        if to_read:
            consumer.assign(to_read)
        end_ms = _ms(end)
        start_ms = _ms(start)
        last_progress = time.monotonic()
        while not all(p.done for p in plans.values()):
            messages = consumer.consume(num_messages=1000, timeout=0.2)
            if messages:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > idle_timeout:
                pending = sorted(p.partition for p in plans.values() if not p.done)
                raise LandError(f"topic {topic!r}: no data from the broker for {idle_timeout:.0f}s "
                                f"(partitions {pending} not at their end)")
            for msg in messages:
                plan = plans.get(msg.partition())
                if plan is None or plan.done:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # end of what is readable now: high watermark, or last stable offset
                        finish(plan, min(plan.cap, msg.offset()), plan.end_reason_at_cap)
                        continue
                    raise LandError(f"topic {topic!r} partition {plan.partition}: {err.str()}")
                offset = msg.offset()
                if offset >= plan.cap:
                    finish(plan, plan.cap, plan.end_reason_at_cap)
                    continue
                ts_type, ts_ms = msg.timestamp()
                has_ts = ts_type != 0  # TIMESTAMP_NOT_AVAILABLE: cannot be placed in time, kept in order
                if plan.stop_at_timestamp and has_ts and ts_ms >= end_ms:
                    finish(plan, offset, "timestamp")
                    continue
                if plan.scan_for_start and plan.first_offset is None:
                    if has_ts and ts_ms < start_ms:
                        plan.skipped_before_start += 1
                        if offset + 1 >= plan.cap:
                            finish(plan, plan.cap, plan.end_reason_at_cap)
                        continue
                    plan.first_offset = offset
                buffer = buffers[plan.partition]
                buffer.add(msg)
                plan.records += 1
                if has_ts:
                    plan.min_ts = ts_ms if plan.min_ts is None else min(plan.min_ts, ts_ms)
                    plan.max_ts = ts_ms if plan.max_ts is None else max(plan.max_ts, ts_ms)
                if len(buffer.offsets) >= batch_rows or buffer.nbytes >= BATCH_BYTES:
                    writers[plan.partition].write(buffer.take(topic, plan.partition))
                if offset + 1 >= plan.cap:
                    finish(plan, plan.cap, plan.end_reason_at_cap)

        files: list[dict[str, Any]] = []
        for p in sorted(plans):
            for entry in writers[p].close():
                files.append({**entry, "partition": p})
        if not files:
            files.append(_write_empty(output))
        partitions_out = []
        for p in sorted(plans):
            plan = plans[p]
            partitions_out.append({
                "partition": p,
                "start_offset": plan.first_offset,
                "end_offset": plan.end,
                "records": plan.records,
                "start_from": plan.start_from,
                "previous_interval": plan.previous_interval,
                "end_reason": plan.end_reason,
                "low_watermark": plan.low,
                "high_watermark": plan.high,
                "skipped_before_start": plan.skipped_before_start,
                "lost_to_retention": plan.lost_to_retention,
                "min_timestamp": _ms_iso(plan.min_ts),
                "max_timestamp": _ms_iso(plan.max_ts),
            })
        manifest = _manifest_base({"kind": "kafka"}, pipeline, topic, start, end, rel_dir)
        manifest.update({"partitions": partitions_out, "files": files, "totals": _totals(partitions_out, files)})
        return _commit(lake, rel_dir, manifest)
    finally:
        consumer.close()
        output.close()


def _ms_iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return iso(datetime.fromtimestamp(ms / 1000, tz=UTC))


# ---- already-dumped topic files ------------------------------------------------------------------
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
    lo = pa.scalar(start, _TS_TYPE)
    hi = pa.scalar(end, _TS_TYPE)
    live: dict[str, _FilesTopic] = {}
    done: dict[str, dict[str, Any]] = {}

    def output_for(topic: str) -> _FilesTopic | None:
        if topic in done:
            return None
        if topic not in live:
            rel_dir = lake.raw_dir(pipeline, topic, interval_name(start), interval_name(end))
            sharing = sorted(t for t, target in live.items() if target.rel_dir == rel_dir)
            sharing += sorted(t for t, manifest in done.items() if manifest.get("path") == rel_dir)
            if sharing:
                # safe_part maps e.g. "a.b" and "a_b" to one folder: refuse rather than mix two topics
                raise LandError(f"topics {sharing[0]!r} and {topic!r} would share the folder {rel_dir}; "
                                "land them in pipelines of their own")
            existing = _existing_manifest(lake, rel_dir, topic)
            if existing is not None:
                done[topic] = existing
                return None
            _refuse_overlaps(lake, pipeline, topic, start, end)
            output = _Output(lake, rel_dir)
            output.clear()
            live[topic] = _FilesTopic(rel_dir, output, _RollingWriter(output, "part", rows_per_file))
        return live[topic]

    try:
        for local, rel_path in _source_files(source_dir):
            default_topic = _default_topic(source_dir, rel_path)
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
                        output_for(topic)
                in_interval = table.filter(pc.and_(pc.greater_equal(table["timestamp"], lo),
                                                   pc.less(table["timestamp"], hi)))
                for topic in pc.unique(in_interval["topic"]).to_pylist():
                    target = live.get(topic)
                    if target is None:
                        continue
                    rows = in_interval.filter(pc.equal(in_interval["topic"], topic))
                    target.writer.write(rows)
                    _count_partitions(target.partitions, rows)
        for topic in sorted(wanted or ()):
            output_for(topic)  # asked for but absent from the files: an empty interval
        for topic, target in sorted(live.items()):
            files = target.writer.close() or [_write_empty(target.output)]
            partitions_out = [
                {"partition": p, **stats}
                for p, stats in sorted(target.partitions.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
            ]
            manifest = _manifest_base({"kind": "files", "path": source_dir}, pipeline, topic, start, end,
                                      target.rel_dir)
            manifest.update({"partitions": partitions_out, "files": files,
                             "totals": _totals(partitions_out, files)})
            done[topic] = _commit(lake, target.rel_dir, manifest)
    finally:
        for target in live.values():
            target.output.close()
    return [done[t] for t in sorted(done)]


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


# ---- command line --------------------------------------------------------------------------------
def _key_values(items: list[str], flag: str) -> list[tuple[str, str]]:
    out = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LandError(f"{flag} expects KEY=VALUE (got a value without '=')")  # value not echoed
        out.append((key.strip(), value))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs land", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--kafka", metavar="BOOTSTRAP", help="Kafka bootstrap servers (host:port[,host:port])")
    source.add_argument("--from-files", metavar="DIR", help="folder (or s3:// prefix) of Parquet topic dumps")
    parser.add_argument("--topic", action="append", default=[],
                        help="topic to land; repeatable (required with --kafka; default with --from-files: all)")
    parser.add_argument("--lake", required=True, help="lake root: a local folder, file://, s3:// or s3a:// URI")
    parser.add_argument("--pipeline", required=True, help="pipeline name (lake sub-folder)")
    parser.add_argument("--start", required=True, help="interval start, ISO-8601 (inclusive)")
    parser.add_argument("--end", required=True, help="interval end, ISO-8601 (exclusive)")
    parser.add_argument("--consumer-config", action="append", default=[], metavar="KEY=VALUE",
                        help="librdkafka consumer setting; repeatable (values are never printed)")
    parser.add_argument("--consumer-config-env", action="append", default=[], metavar="KEY=ENV_VAR",
                        help="librdkafka setting read from an environment variable (for secrets); repeatable")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when every topic landed (or was already landed), 2 for unusable arguments, 1 on failure."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    try:
        start, end = _check_interval(parse_time(args.start), parse_time(args.end))
        check_name("pipeline", args.pipeline)
        lake = Lake.at(args.lake)
        config: dict[str, Any] = dict(_key_values(args.consumer_config, "--consumer-config"))
        for key, var in _key_values(args.consumer_config_env, "--consumer-config-env"):
            if var not in os.environ:
                raise LandError(f"--consumer-config-env {key}: environment variable {var} is not set")
            config[key] = os.environ[var]
        if args.kafka and not args.topic:
            raise LandError("--kafka needs at least one --topic")
        lake.check_usable()
    except (LandError, LakeError) as exc:
        print(f"land: error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.kafka:
            manifests = [land_kafka(args.kafka, topic, lake, args.pipeline, start, end, config)
                         for topic in args.topic]
        else:
            manifests = land_files(args.from_files, args.topic or None, lake, args.pipeline, start, end)
    except (LandError, LakeError) as exc:
        print(f"land: error: {exc}", file=sys.stderr)
        return 1
    for manifest in manifests:
        print(json.dumps({"topic": manifest["topic"], "path": lake.join(manifest["path"]),
                          "records": manifest["totals"]["records"], "files": manifest["totals"]["files"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
