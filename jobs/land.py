"""land: one data interval [start, end) of a topic -> an immutable raw snapshot in the lake.

    python -m jobs land --kafka BOOTSTRAP --topic T [--topic T2 ...] --lake L --pipeline P \\
        --start 2026-11-01T00:00:00Z --end 2026-11-02T00:00:00Z [--consumer-config KEY=VALUE ...]
    python -m jobs land --from-files DIR [--topic T ...] --lake L --pipeline P --start ... --end ...
    python -m jobs land --kafka-conn-id CONN_ID --topic T ...          (settings from an Airflow connection)
    python -m jobs land --from-connect-s3 PREFIX [--topic T ...] ...   (a Kafka Connect S3 sink's objects)
    python -m jobs land --from-eventhubs-capture PREFIX [--topic EVENT_HUB ...] ...   (Event Hubs Capture)

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
``--consumer-config-env KEY=ENV_VAR``, the JSON object in ``$CDC_KAFKA_CONFIG`` or an Airflow connection
of type kafka (``--kafka-conn-id``, the apache-kafka provider's hook); values are never printed.

Exports other tools wrote are chained on positions the same way (see ``land_connect_s3`` and
``land_eventhubs_capture``): a Kafka Connect S3 sink keeps no timestamp, so each landing takes every
record written since the previous landing ended (offsets); Event Hubs Capture keeps the enqueued time,
so an interval ends at the first event enqueued at or after ``end`` (sequence numbers as offsets).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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


# ---- exports other tools already wrote: Kafka Connect S3 sink, Event Hubs Capture ----------------
# Both are read partition by partition in position order (Kafka offsets, Event Hubs sequence numbers)
# and chained on the previous landing's end positions like Kafka is, so that intervals neither
# overlap nor leave gaps: a landing starts where the latest landed interval (of the same source
# kind) ending at or before ``start`` ended, and stops where an interval already landed after it
# starts.
CONNECT_S3 = "connect_s3"
EVENTHUBS_CAPTURE = "eventhubs_capture"
# Capture writes a file per partition and time window (at most 15 minutes): a record enqueued at or
# after ``start`` is in a file whose window starts no earlier than start - window. Files older than
# start - lookback are not read unless a previous landing is chained on (which says where to resume).
CAPTURE_LOOKBACK = timedelta(hours=1)


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

    def manifest_entry(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "start_offset": self.first_offset,
            "end_offset": self.end,
            "records": self.records,
            "start_from": self.start_from,
            "previous_interval": self.previous_interval,
            "end_reason": self.end_reason,
            "skipped_before_start": self.skipped_before_start,
            "already_landed": self.already_landed,
            "duplicates_skipped": self.duplicates_skipped,
            "gap_before": self.gap_before,
            "files_read": self.files_read,
            "last_file": self.last_file,
            "not_json": self.not_json,
            "min_timestamp": _us_iso(self.min_ts),
            "max_timestamp": _us_iso(self.max_ts),
        }


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
        rs, n = self.records, len(self.records)
        table = pa.Table.from_arrays(
            [
                pa.array([r.key for r in rs], pa.binary()),
                pa.array([r.value for r in rs], pa.binary()),
                pa.array([self.topic] * n, pa.string()),
                pa.array([self.partition] * n, pa.int32()),
                pa.array([r.offset for r in rs], pa.int64()),
                pa.array([r.ts_us for r in rs], _TS_TYPE),
                pa.array([self.ts_type if r.ts_us is not None else -1 for r in rs], pa.int32()),
                pa.array([r.headers for r in rs], KAFKA_ARROW_SCHEMA.field("headers").type),
            ],
            schema=KAFKA_ARROW_SCHEMA,
        )
        self.records, self.nbytes = [], 0
        return table


def _export_plans(lake: Lake, pipeline: str, topic: str, start: datetime, end: datetime, kind: str,
                  partitions: list[int], *, by_time: bool) -> dict[int, _ExportPlan]:
    """Per partition: chained on the landed intervals of the same kind (their manifests' offsets)."""
    intervals = _refuse_overlaps(lake, pipeline, topic, start, end)
    parts: dict[str, dict[int, dict[str, Any]]] = {}

    def positions(interval: LandedInterval) -> dict[int, dict[str, Any]]:
        if interval.rel_dir not in parts:
            manifest = _existing_manifest(lake, interval.rel_dir, topic) or {}
            same = manifest.get("source", {}).get("kind") == kind
            parts[interval.rel_dir] = {int(p["partition"]): p for p in manifest.get("partitions", [])
                                       if same and p.get("partition") is not None}
        return parts[interval.rel_dir]

    before = [i for i in reversed(intervals) if i.end <= start]
    after = [i for i in intervals if i.start >= end]
    plans = {}
    for p in partitions:
        prev = next(((i, positions(i)[p]) for i in before
                     if positions(i).get(p, {}).get("end_offset") is not None), None)
        nxt = next(((i, positions(i)[p]) for i in after
                    if positions(i).get(p, {}).get("start_offset") is not None), None)
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
                       end: datetime, partitions: list[int], read, *, by_time: bool, ts_type: int,
                       contiguous: bool, rows_per_file: int, batch_rows: int) -> dict[str, Any]:
    """Land one topic of an export. ``read(plan, state)`` yields a partition's records in position order,
    setting ``state["file"]`` to the file it is reading. ``contiguous``: positions have no gaps (Event
    Hubs sequence numbers), so a jump past where the previous interval ended is reported."""
    rel_dir = lake.raw_dir(pipeline, topic, interval_name(start), interval_name(end))
    existing = _existing_manifest(lake, rel_dir, topic)
    if existing is not None:
        return existing
    plans = _export_plans(lake, pipeline, topic, start, end, kind, partitions, by_time=by_time)
    start_us, end_us = _ms(start) * 1000, _ms(end) * 1000
    output = _Output(lake, rel_dir)
    try:
        output.clear()
        files: list[dict[str, Any]] = []
        for p in sorted(plans):
            plan = plans[p]
            writer = _RollingWriter(output, f"part-{p:05d}", rows_per_file)
            rows = _ExportRows(topic, p, ts_type)
            state: dict[str, Any] = {"file": None, "files": 0}

            def finish(end_offset: int | None, reason: str, plan: _ExportPlan = plan) -> None:
                plan.end, plan.end_reason = end_offset, reason

            records = read(plan, state)
            try:
                for record in records:
                    offset, ts = record.offset, record.ts_us
                    if plan.last_seen is not None and offset <= plan.last_seen:
                        plan.duplicates_skipped += 1  # a position read twice (overlapping files)
                        continue
                    if plan.begin is not None and offset < plan.begin:
                        plan.already_landed += 1
                        continue
                    if plan.cap is not None and offset >= plan.cap:
                        finish(plan.cap, plan.end_reason_at_cap)
                        break
                    if contiguous and plan.last_seen is None and plan.begin is not None and offset > plan.begin:
                        plan.gap_before = offset - plan.begin
                        log.warning("%s[%d]: positions %d..%d were never landed and are not in the files read "
                                    "(removed, or older than the files read)", topic, p, plan.begin, offset - 1)
                    plan.last_seen = offset
                    if plan.stop_at_timestamp and ts is not None and ts >= end_us:
                        finish(offset, "timestamp")
                        break
                    if plan.scan_for_start and plan.first_offset is None and ts is not None and ts < start_us:
                        plan.skipped_before_start += 1
                        continue
                    if plan.first_offset is None:
                        plan.first_offset = offset
                    rows.add(record)
                    plan.records += 1
                    if ts is not None:
                        plan.min_ts = ts if plan.min_ts is None else min(plan.min_ts, ts)
                        plan.max_ts = ts if plan.max_ts is None else max(plan.max_ts, ts)
                    if len(rows.records) >= batch_rows or rows.nbytes >= BATCH_BYTES:
                        writer.write(rows.take())
            finally:
                records.close()  # removes a downloaded file
            if plan.end is None:  # every file read: the end is what the files hold now
                seen_end = plan.last_seen + 1 if plan.last_seen is not None else None
                candidates = [o for o in (seen_end, plan.begin) if o is not None]
                finish(max(candidates) if candidates else None, "end_of_files")
            if plan.first_offset is None:
                plan.first_offset = plan.end
            plan.files_read = state["files"]
            plan.last_file = state["file"] or plan.resume_file
            if rows.records:
                writer.write(rows.take())
            files.extend({**entry, "partition": p} for entry in writer.close())
        if not files:
            files.append(_write_empty(output))
        partitions_out = [plans[p].manifest_entry() for p in sorted(plans)]
        manifest = _manifest_base(source, pipeline, topic, start, end, rel_dir)
        manifest.update({"partitions": partitions_out, "files": files, "totals": _totals(partitions_out, files)})
        return _commit(lake, rel_dir, manifest)
    finally:
        output.close()


def _refuse_shared_folders(lake: Lake, pipeline: str, topics: list[str], start: datetime, end: datetime) -> None:
    folders: dict[str, str] = {}
    for topic in sorted(topics):
        rel_dir = lake.raw_dir(pipeline, topic, interval_name(start), interval_name(end))
        if rel_dir in folders:
            # safe_part maps e.g. "a.b" and "a_b" to one folder: refuse rather than mix two topics
            raise LandError(f"topics {folders[rel_dir]!r} and {topic!r} would share the folder {rel_dir}; "
                            "land them in pipelines of their own")
        folders[rel_dir] = topic


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


# ---- Kafka Connect S3 sink -----------------------------------------------------------------------
# Confluent's S3 sink names every object <topic>+<kafkaPartition>+<startOffset><view><ext>[.gz], in
# the partitioner's folders (default topics/<topic>/partition=<p>/; time-based and field partitioners
# put other folders there: the name alone is read). <view> is "" for values, ".keys" or ".headers"
# for the files store.kafka.keys / store.kafka.headers add beside them.
_CONNECT_NAME = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)\+(?P<partition>\d+)\+(?P<offset>\d+)"
                           r"(?P<view>\.keys|\.headers)?(?P<ext>\.[^/]+?)(?P<gz>\.gz)?$")


@dataclass(frozen=True)
class _ConnectFile:
    location: str
    rel: str
    topic: str
    partition: int
    start_offset: int
    view: str  # "", ".keys", ".headers"
    ext: str
    gzip: bool


def _connect_files(prefix: str, bytearray_extension: str, topics: list[str] | None) -> list[_ConnectFile]:
    if not storage.exists(prefix):
        raise LandError(f"{prefix}: no such file or directory")
    found = []
    for entry in storage.list_files(prefix):
        name = entry.rel.rsplit("/", 1)[-1]
        match = _CONNECT_NAME.match(name)
        if match is None or any(part.startswith((".", "_")) for part in entry.rel.split("/")):
            continue  # not a file the sink wrote (or a writer's bookkeeping)
        if topics and match["topic"] not in topics:
            continue
        ext = match["ext"]
        if ext not in (".json", bytearray_extension):
            raise LandError(f"{prefix.rstrip('/')}/{entry.rel}: format {ext!r} is not supported (JsonFormat .json and "
                            f"ByteArrayFormat {bytearray_extension} are; --from-files reads Parquet topic dumps)")
        found.append(_ConnectFile(f"{prefix.rstrip('/')}/{entry.rel}", entry.rel, match["topic"],
                                  int(match["partition"]), int(match["offset"]), match["view"] or "", ext,
                                  bool(match["gz"])))
    return found


def _connect_lines(file: _ConnectFile, separator: bytes) -> list[bytes]:
    data = _read_source(file.location)
    if file.gzip:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise LandError(f"{file.location}: not a readable gzip file ({exc}); nothing was landed") from None
    if not data:
        return []
    lines = data.split(separator)
    if lines[-1] == b"":
        lines.pop()  # every record is followed by the separator
    return lines


def land_connect_s3(prefix: str, topics: list[str] | None, lake: Lake, pipeline: str, start: datetime,
                    end: datetime, *, bytearray_separator: bytes = b"\n", bytearray_extension: str = ".bin",
                    rows_per_file: int = ROWS_PER_FILE, batch_rows: int = BATCH_ROWS) -> list[dict[str, Any]]:
    """Land a Kafka Connect S3 sink's output (Confluent's connector: JsonFormat ``.json`` or ByteArrayFormat
    ``.bin``, optionally ``.gz``) found below ``prefix`` (a local folder or an ``s3://`` prefix).

    The sink keeps no Kafka timestamp, so the interval is a landing run, not a filter: each partition
    lands every record past the end offset of the latest landed interval (of this source) ending at or
    before ``start`` (the first landing: from the earliest file), up to the start offset of an interval
    already landed after this one, else to the end of the files present now. A record's offset is its
    file's start offset plus its line number. Values are the lines' bytes (a JsonFormat line is the
    value's JSON text; ``null`` is a tombstone); keys come from ``.keys`` files where the sink wrote
    them; ``.headers`` files are not read. A line of a ``.json`` file that is not JSON is landed as it
    is (decode quarantines it with its bytes) and counted (``not_json``). Returns the manifests in
    topic order; ``topics`` None lands every topic found.
    """
    check_name("pipeline", pipeline)
    start, end = _check_interval(start, end)
    if not bytearray_separator:
        raise LandError("the ByteArrayFormat separator must not be empty")
    by_topic: dict[str, dict[int, list[_ConnectFile]]] = {}
    keys: dict[tuple[str, int, int], _ConnectFile] = {}
    for file in _connect_files(prefix, bytearray_extension, topics):
        if file.view == ".keys":
            keys[(file.topic, file.partition, file.start_offset)] = file
        elif file.view == "":
            by_topic.setdefault(file.topic, {}).setdefault(file.partition, []).append(file)
    wanted = sorted(set(topics)) if topics else sorted(by_topic)
    _refuse_shared_folders(lake, pipeline, wanted, start, end)
    separators = {".json": b"\n", bytearray_extension: bytearray_separator}

    def reader(topic: str):
        partitions = by_topic.get(topic, {})

        def read(plan: _ExportPlan, state: dict[str, Any]) -> Iterator[_ExportRecord]:
            files = sorted(partitions.get(plan.partition, []), key=lambda f: f.start_offset)
            for i, file in enumerate(files):
                following = files[i + 1].start_offset if i + 1 < len(files) else None
                if i and file.start_offset == files[i - 1].start_offset:
                    raise LandError(f"{file.location} and {files[i - 1].location} both start at offset "
                                    f"{file.start_offset}; land one format at a time")
                if plan.begin is not None and following is not None and following <= plan.begin:
                    continue  # wholly landed before: not even read
                lines = _connect_lines(file, separators[file.ext])
                if following is not None and file.start_offset + len(lines) > following:
                    raise LandError(f"{file.location}: {len(lines)} records but the next file starts at offset "
                                    f"{following}; a value holding the separator splits into several lines "
                                    "(set format.bytearray.separator to bytes no value holds)")
                key_file = keys.get((topic, plan.partition, file.start_offset))
                key_lines = _connect_lines(key_file, separators[key_file.ext]) if key_file else None
                if key_lines is not None and len(key_lines) != len(lines):
                    raise LandError(f"{key_file.location}: {len(key_lines)} keys for {len(lines)} values "
                                    f"in {file.location}")
                state["file"], state["files"] = file.rel, state["files"] + 1
                for n, line in enumerate(lines):
                    value, key = _connect_value(line, file.ext == ".json"), None
                    if key_lines is not None:
                        key = _connect_value(key_lines[n], key_file.ext == ".json")
                    if file.ext == ".json" and value is not None and not _is_json(value):
                        plan.not_json += 1
                        log.warning("%s: line %d is not JSON; landed as it is (decode quarantines it)",
                                    file.location, n + 1)
                    yield _ExportRecord(file.start_offset + n, value, key)
        return read

    manifests = []
    for topic in wanted:
        manifests.append(_land_export_topic(
            CONNECT_S3, {"kind": CONNECT_S3, "path": prefix}, topic, lake, pipeline, start, end,
            sorted(by_topic.get(topic, {})), reader(topic), by_time=False, ts_type=-1, contiguous=False,
            rows_per_file=rows_per_file, batch_rows=batch_rows))
    return manifests


def _connect_value(line: bytes, is_json: bool) -> bytes | None:
    if not is_json:
        return line
    line = line[:-1] if line.endswith(b"\r") else line  # System.lineSeparator() on Windows
    return None if line.strip() == b"null" else line  # JsonFormat writes a null value (tombstone) as null


def _is_json(value: bytes) -> bool:
    try:
        json.loads(value)
        return True
    except (ValueError, UnicodeDecodeError):
        return False


# ---- Azure Event Hubs Capture --------------------------------------------------------------------
# Default archive name format {Namespace}/{EventHub}/{PartitionId}/{Year}/{Month}/{Day}/{Hour}/
# {Minute}/{Second}.avro (a container or folder may come before it); records of the documented schema
# (Microsoft.ServiceBus.Messaging.EventData): SequenceNumber long, Offset string, EnqueuedTimeUtc
# string, SystemProperties and Properties map<long|double|string|bytes>, Body bytes or null.
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
    by_topic: dict[str, dict[int, list[_CaptureFile]]] = {}
    namespaces: dict[str, str] = {}
    for file in _capture_files(prefix):
        seen = namespaces.setdefault(file.eventhub, file.namespace)
        if seen != file.namespace and (topics is None or file.eventhub in topics):
            raise LandError(f"event hub {file.eventhub!r} is captured below {prefix} for namespaces {seen!r} and "
                            f"{file.namespace!r}; land each namespace from its own prefix")
        by_topic.setdefault(file.eventhub, {}).setdefault(file.partition, []).append(file)
    wanted = sorted(set(topics)) if topics else sorted(by_topic)
    _refuse_shared_folders(lake, pipeline, wanted, start, end)
    earliest = start - lookback
    earliest_window = (earliest.year, earliest.month, earliest.day, earliest.hour, earliest.minute, earliest.second)
    tmp = tempfile.mkdtemp(prefix="cdc-land-src-")

    def reader(topic: str):
        partitions = by_topic.get(topic, {})

        def read(plan: _ExportPlan, state: dict[str, Any]) -> Iterator[_ExportRecord]:
            files = sorted(partitions.get(plan.partition, []), key=lambda f: f.window)
            resume = next((f.window for f in files if f.rel == plan.resume_file), None)
            for file in files:
                if resume is not None and file.window < resume:
                    continue  # read up to there by the landing this one chains on
                if resume is None and plan.begin is None and file.window < earliest_window:
                    continue  # holds no event enqueued at or after start - lookback
                state["file"], state["files"] = file.rel, state["files"] + 1
                for record in _capture_records(file, tmp):
                    where = f"{file.location} (SequenceNumber {record.get('SequenceNumber')})"
                    properties = record.get("Properties") or {}
                    system = record.get("SystemProperties") or {}
                    headers = [{"key": str(k), "value": _property_bytes(v)} for k, v in properties.items()]
                    yield _ExportRecord(int(record["SequenceNumber"]), record.get("Body"),
                                        _property_bytes(system.get(_PARTITION_KEY)),
                                        _enqueued_us(record.get("EnqueuedTimeUtc"), where), headers or None)
        return read

    try:
        manifests = []
        for topic in wanted:
            source = {"kind": EVENTHUBS_CAPTURE, "path": prefix, "namespace": namespaces.get(topic)}
            manifests.append(_land_export_topic(
                EVENTHUBS_CAPTURE, source, topic, lake, pipeline, start, end, sorted(by_topic.get(topic, {})),
                reader(topic), by_time=True, ts_type=1, contiguous=True, rows_per_file=rows_per_file,
                batch_rows=batch_rows))
        return manifests
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- Kafka settings from an Airflow connection ---------------------------------------------------
def kafka_consumer_config(conn_id: str) -> dict[str, Any]:
    """The librdkafka settings of an Airflow connection of type ``kafka`` (the apache-kafka provider's
    KafkaBaseHook: the connection's extra is the config dict; callbacks named there are resolved as the
    provider allows). A login or password set on the connection becomes ``sasl.username`` /
    ``sasl.password`` unless the extra names them. For Azure Event Hubs' Kafka endpoint the extra holds
    ``bootstrap.servers`` ``<ns>.servicebus.windows.net:9093``, ``security.protocol`` SASL_SSL,
    ``sasl.mechanism`` PLAIN, ``sasl.username`` ``$ConnectionString`` and the connection string as the
    password. Values are never logged nor put in an error message."""
    try:
        from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook
    except ImportError:
        raise LandError("Kafka settings from an Airflow connection need the package "
                        "apache-airflow-providers-apache-kafka") from None
    hook = KafkaBaseHook(kafka_config_id=conn_id)
    try:
        conn = hook.get_connection(conn_id)
    except Exception as exc:  # noqa: BLE001 - AirflowNotFoundException, or a secrets backend failing
        raise LandError(f"Airflow connection {conn_id!r}: {type(exc).__name__}") from None
    build = getattr(hook, "_build_config", None)  # the provider's own assembly, as its hooks connect
    try:
        config = dict(build()) if callable(build) else dict(conn.extra_dejson)
    except ValueError as exc:  # no bootstrap.servers, or a callback not allowed
        raise LandError(f"Airflow connection {conn_id!r}: {exc}") from None
    if conn.login and "sasl.username" not in config:
        config["sasl.username"] = conn.login
    if conn.password and "sasl.password" not in config:
        config["sasl.password"] = conn.password
    if not config.get("bootstrap.servers"):
        raise LandError(f"Airflow connection {conn_id!r}: its extra has no bootstrap.servers")
    return config


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
    source.add_argument("--kafka-conn-id", metavar="CONN_ID",
                        help="Kafka from an Airflow connection of type kafka (apache-kafka provider): bootstrap "
                             "servers and settings (SASL/SSL, Event Hubs' Kafka endpoint) from its extra")
    source.add_argument("--from-files", metavar="DIR", help="folder (or s3:// prefix) of Parquet topic dumps")
    source.add_argument("--from-connect-s3", metavar="PREFIX",
                        help="folder (or s3:// prefix) a Kafka Connect S3 sink writes to (JsonFormat or "
                             "ByteArrayFormat, optionally gzip): lands every record since the previous landing")
    source.add_argument("--from-eventhubs-capture", metavar="PREFIX",
                        help="folder (or s3:// prefix) of Azure Event Hubs Capture Avro files (default archive "
                             "name format); the topic is the event hub")
    parser.add_argument("--topic", "--topics", action="append", default=[],
                        help="topic (event hub) to land; repeatable or comma-separated (required with Kafka; "
                             "default from files: every topic found)")
    parser.add_argument("--bytearray-separator", default="\\n", metavar="SEP",
                        help="--from-connect-s3: the sink's format.bytearray.separator, escapes like \\n allowed "
                             "(default \\n)")
    parser.add_argument("--bytearray-extension", default=".bin", metavar="EXT",
                        help="--from-connect-s3: the sink's format.bytearray.extension (default .bin)")
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
        topics = [t.strip() for item in args.topic for t in item.split(",") if t.strip()]
        config: dict[str, Any] = dict(_key_values(args.consumer_config, "--consumer-config"))
        for key, var in _key_values(args.consumer_config_env, "--consumer-config-env"):
            if var not in os.environ:
                raise LandError(f"--consumer-config-env {key}: environment variable {var} is not set")
            config[key] = os.environ[var]
        bootstrap = args.kafka
        if args.kafka_conn_id:
            from_conn = kafka_consumer_config(args.kafka_conn_id)
            bootstrap = from_conn.pop("bootstrap.servers")
            config = {**from_conn, **config}  # --consumer-config overrides the connection
        if bootstrap and not topics:
            raise LandError("landing from Kafka needs at least one --topic")
        try:
            separator = args.bytearray_separator.encode("latin-1").decode("unicode_escape").encode("utf-8")
        except (UnicodeError, ValueError):
            raise LandError("--bytearray-separator: not a valid escape sequence") from None
        lake.check_usable()
    except (LandError, LakeError) as exc:
        print(f"land: error: {exc}", file=sys.stderr)
        return 2
    try:
        if bootstrap:
            manifests = [land_kafka(bootstrap, topic, lake, args.pipeline, start, end, config) for topic in topics]
        elif args.from_connect_s3:
            manifests = land_connect_s3(args.from_connect_s3, topics or None, lake, args.pipeline, start, end,
                                        bytearray_separator=separator,
                                        bytearray_extension=args.bytearray_extension)
        elif args.from_eventhubs_capture:
            manifests = land_eventhubs_capture(args.from_eventhubs_capture, topics or None, lake, args.pipeline,
                                               start, end)
        else:
            manifests = land_files(args.from_files, topics or None, lake, args.pipeline, start, end)
    except (LandError, LakeError) as exc:
        print(f"land: error: {exc}", file=sys.stderr)
        return 1
    for manifest in manifests:
        print(json.dumps({"topic": manifest["topic"], "path": lake.join(manifest["path"]),
                          "records": manifest["totals"]["records"], "files": manifest["totals"]["files"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
