"""land from Kafka: one interval [start, end) of a topic read from a broker (``land_kafka``).

Interval -> offsets, per partition, so that intervals neither overlap nor leave gaps:

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

Kafka settings such as SASL credentials come from ``consumer_config`` (``--consumer-config KEY=VALUE``,
``--consumer-config-env KEY=ENV_VAR``), the JSON object in ``$CDC_KAFKA_CONFIG`` or an Airflow connection
of type kafka (``kafka_consumer_config``, the apache-kafka provider's hook); values are never printed.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from jobs import env
from jobs.lake.layout import Lake, check_name
from jobs.land.common import (
    BATCH_BYTES,
    BATCH_ROWS,
    ROWS_PER_FILE,
    LandedInterval,
    LandError,
    _Chain,
    _check_interval,
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

KAFKA_CONFIG_ENV = "CDC_KAFKA_CONFIG"
# A broker that sends nothing (no message, no end-of-partition) for this long is an error.
IDLE_TIMEOUT_S = 60.0


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
    high_read_at: datetime | None = None  # when ``high`` was asked for: every message before is below it
    # filled while reading
    first_offset: int | None = None
    end: int | None = None
    end_reason: str = ""
    skipped_before_start: int = 0
    records: int = 0
    min_ts: int | None = None
    max_ts: int | None = None
    last_before_ts: int | None = None  # the latest message skipped before the interval
    first_after_ts: int | None = None  # the message the interval ended at
    done: bool = False

    def manifest_entry(self) -> dict[str, Any]:
        return _partition_entry(self, low_watermark=self.low, high_watermark=self.high,
                                high_watermark_read_at=iso(self.high_read_at) if self.high_read_at else None,
                                skipped_before_start=self.skipped_before_start,
                                lost_to_retention=self.lost_to_retention,
                                min_timestamp=_ms_iso(self.min_ts), max_timestamp=_ms_iso(self.max_ts))

    def outside(self) -> dict[str, Any]:
        """The partition's messages before and after the interval (jobs.land.outside): the retained ones
        before its first offset, those up to the high watermark read at the start after its end."""
        first = self.first_offset if self.first_offset is not None else self.start
        end = self.end if self.end is not None else first
        return outside(max(0, first - self.low), max(0, self.high - end), _ms_iso(self.last_before_ts),
                       _ms_iso(self.first_after_ts))


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
        table = _kafka_table(topic, partition, self.keys, self.values, self.offsets, self.timestamps,
                             self.ts_types, self.headers)
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
    env_config = env.get(KAFKA_CONFIG_ENV)
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


# ---- interval -> offsets -------------------------------------------------------------------------
def _plan_partitions(consumer, lake: Lake, pipeline: str, topic: str, start: datetime, end: datetime,
                     partitions: list[int], timeout: float) -> list[_PartitionPlan]:
    from confluent_kafka import TopicPartition

    chain = _Chain(lake, pipeline, topic, start, end, "kafka")  # file dumps have no broker offsets to chain on
    hints = _offset_hints(consumer, topic, start, [p for p in partitions if chain.previous(p) is None], timeout)
    plans = []
    for p in partitions:
        # a high watermark read after the interval's end shows the partition read past it (jobs.reconcile.landed_reach)
        read_at = datetime.now(UTC).replace(microsecond=0)
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
        prev = chain.previous(p)
        ending = _plan_end(chain.next(p), high, end)
        if prev is not None:
            plan = _chained_plan(topic, p, low, high, prev, start, ending)
        else:
            plan = _scanning_plan(p, low, high, hints.get(p), ending)
        plan.start, plan.high_read_at = min(plan.start, plan.cap), read_at
        plans.append(plan)
    return plans


def _offset_hints(consumer, topic: str, start: datetime, partitions: list[int], timeout: float) -> dict[int, int]:
    """The broker's ``offsets_for_times(start)`` of the partitions with no previous interval to chain on."""
    from confluent_kafka import TopicPartition

    hints: dict[int, int] = {}
    if partitions:
        asked = [TopicPartition(topic, p, _ms(start)) for p in partitions]
        for tp in consumer.offsets_for_times(asked, timeout=timeout):
            hints[tp.partition] = tp.offset
    return hints


def _plan_end(nxt: tuple[LandedInterval, dict[str, Any]] | None, high: int,
              end: datetime) -> tuple[int, bool, str]:
    """(cap, stop_at_timestamp, end_reason_at_cap) of a partition whose high watermark is ``high``,
    given the interval landed after this one that has it, if any."""
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
    return cap, stop_at_ts, end_reason_at_cap


def _chained_plan(topic: str, p: int, low: int, high: int, prev: tuple[LandedInterval, dict[str, Any]],
                  start: datetime, ending: tuple[int, bool, str]) -> _PartitionPlan:
    """A partition read from where the previous landed interval ``prev`` ended."""
    cap, stop_at_ts, end_reason_at_cap = ending
    prev_interval, prev_part = prev
    begin = int(prev_part["end_offset"])
    if begin > high:
        raise LandError(f"{topic}[{p}]: the landed {prev_interval.rel_dir} ends at offset {begin} but the "
                        f"high watermark is {high}; was the topic re-created?")
    lost = 0
    if begin < low:  # retention deleted messages nobody landed: record it, cannot recover them
        lost, begin = low - begin, low
        log.warning("%s[%d]: %d messages were deleted by retention before they were landed", topic, p, lost)
    exact = prev_interval.end == start
    return _PartitionPlan(p, low, high, begin, cap, not exact, stop_at_ts,
                          "previous_interval" if exact else "scan_after_previous_interval",
                          end_reason_at_cap, prev_interval.rel_dir.rsplit("/", 1)[-1], lost)


def _scanning_plan(p: int, low: int, high: int, hint: int | None, ending: tuple[int, bool, str]) -> _PartitionPlan:
    """A partition with no previous interval: the broker's answer is only where the scan for the first
    message >= start begins."""
    cap, stop_at_ts, end_reason_at_cap = ending
    if hint == -1:  # OFFSET_END: no message with a timestamp >= start yet
        begin, how = high, "offsets_for_times"
    elif hint is not None and low <= hint <= high:
        begin, how = hint, "offsets_for_times"
    else:  # no usable answer: scan the whole retained log
        begin, how = low, "low_watermark"
    return _PartitionPlan(p, low, high, begin, cap, True, stop_at_ts, how, end_reason_at_cap)


# ---- reading ---------------------------------------------------------------------------------------
def land_kafka(bootstrap: str, topic: str, lake: Lake, pipeline: str, start: datetime, end: datetime,
               consumer_config: dict[str, Any] | None = None, *, rows_per_file: int = ROWS_PER_FILE,
               batch_rows: int = BATCH_ROWS, timeout: float = 30.0,
               idle_timeout: float = IDLE_TIMEOUT_S) -> dict[str, Any]:
    """Land [start, end) of a Kafka topic; returns the manifest (the existing one if already landed)."""
    from confluent_kafka import Consumer, KafkaException

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
        partitions = _topic_partitions(consumer, bootstrap, topic, timeout)
        plans = {p.partition: p for p in _plan_partitions(consumer, lake, pipeline, topic, start, end,
                                                          partitions, timeout)}
        output.clear()
        reader = _TopicReader(consumer, topic, plans, output, rows_per_file, batch_rows)
        reader.read(start, end, idle_timeout)
        files = reader.close() or [_write_empty(output)]
        partitions_out = [plans[p].manifest_entry() for p in sorted(plans)]
        return _commit_partitions(lake, rel_dir, {"kind": "kafka"}, pipeline, topic, start, end, partitions_out,
                                  files, combine(plan.outside() for plan in plans.values()))
    finally:
        consumer.close()
        output.close()


def _topic_partitions(consumer, bootstrap: str, topic: str, timeout: float) -> list[int]:
    from confluent_kafka import KafkaException

    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
    except KafkaException as exc:
        raise LandError(f"Kafka at {bootstrap} did not answer: {exc.args[0].str()}") from None
    if meta is None or meta.error is not None or not meta.partitions:
        reason = meta.error.str() if meta is not None and meta.error is not None else "no partitions"
        raise LandError(f"topic {topic!r}: {reason}")
    return sorted(meta.partitions)


class _TopicReader:
    """Reads every planned partition of a topic up to its end into Parquet files (part-<partition>-*)."""

    def __init__(self, consumer, topic: str, plans: dict[int, _PartitionPlan], output: _Output,
                 rows_per_file: int, batch_rows: int):
        from confluent_kafka import KafkaError, TopicPartition

        self._partition_eof, self._topic_partition = KafkaError._PARTITION_EOF, TopicPartition
        self.consumer, self.topic, self.plans, self.batch_rows = consumer, topic, plans, batch_rows
        self.writers = {p: _RollingWriter(output, f"part-{p:05d}", rows_per_file) for p in plans}
        self.buffers = {p: _Buffer() for p in plans}

    def read(self, start: datetime, end: datetime, idle_timeout: float) -> None:
        self._assign()
        end_ms = _ms(end)
        start_ms = _ms(start)
        last_progress = time.monotonic()
        while not all(p.done for p in self.plans.values()):
            messages = self.consumer.consume(num_messages=1000, timeout=0.2)
            if messages:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > idle_timeout:
                pending = sorted(p.partition for p in self.plans.values() if not p.done)
                raise LandError(f"topic {self.topic!r}: no data from the broker for {idle_timeout:.0f}s "
                                f"(partitions {pending} not at their end)")
            for msg in messages:
                self._take(msg, start_ms, end_ms)

    def close(self) -> list[dict[str, Any]]:
        """The files written, partition by partition."""
        files: list[dict[str, Any]] = []
        for p in sorted(self.plans):
            for entry in self.writers[p].close():
                files.append({**entry, "partition": p})
        return files

    def _assign(self) -> None:
        to_read = []
        for plan in self.plans.values():
            if plan.start >= plan.cap:  # nothing to read (plan.start was capped: it equals plan.cap)
                plan.first_offset = plan.end = plan.cap
                plan.end_reason, plan.done = plan.end_reason_at_cap, True
            else:
                if not plan.scan_for_start:
                    plan.first_offset = plan.start
                to_read.append(self._topic_partition(self.topic, plan.partition, plan.start))
        if to_read:
            self.consumer.assign(to_read)

    def _finish(self, plan: _PartitionPlan, end_offset: int, reason: str) -> None:
        plan.end, plan.end_reason, plan.done = end_offset, reason, True
        if plan.first_offset is None:  # nothing in the interval: it starts where it ends
            plan.first_offset = end_offset
        if self.buffers[plan.partition].offsets:
            self.writers[plan.partition].write(self.buffers[plan.partition].take(self.topic, plan.partition))
        self.consumer.pause([self._topic_partition(self.topic, plan.partition)])

    def _take(self, msg, start_ms: int, end_ms: int) -> None:
        """One message: the end of its partition, skipped (before the interval), or landed."""
        plan = self.plans.get(msg.partition())
        if plan is None or plan.done:
            return
        err = msg.error()
        if err is not None:
            if err.code() == self._partition_eof:
                # end of what is readable now: high watermark, or last stable offset
                self._finish(plan, min(plan.cap, msg.offset()), plan.end_reason_at_cap)
                return
            raise LandError(f"topic {self.topic!r} partition {plan.partition}: {err.str()}")
        offset = msg.offset()
        if offset >= plan.cap:
            self._finish(plan, plan.cap, plan.end_reason_at_cap)
            return
        ts_type, ts_ms = msg.timestamp()
        has_ts = ts_type != 0  # TIMESTAMP_NOT_AVAILABLE: cannot be placed in time, kept in order
        if plan.stop_at_timestamp and has_ts and ts_ms >= end_ms:
            plan.first_after_ts = ts_ms
            self._finish(plan, offset, "timestamp")
            return
        if plan.scan_for_start and plan.first_offset is None:
            if has_ts and ts_ms < start_ms:
                plan.skipped_before_start += 1
                plan.last_before_ts = max(ts_ms, plan.last_before_ts or ts_ms)
                if offset + 1 >= plan.cap:
                    self._finish(plan, plan.cap, plan.end_reason_at_cap)
                return
            plan.first_offset = offset
        self._land(plan, msg, offset, ts_ms if has_ts else None)

    def _land(self, plan: _PartitionPlan, msg, offset: int, ts_ms: int | None) -> None:
        buffer = self.buffers[plan.partition]
        buffer.add(msg)
        plan.records += 1
        if ts_ms is not None:
            _note_time(plan, ts_ms)
        if len(buffer.offsets) >= self.batch_rows or buffer.nbytes >= BATCH_BYTES:
            self.writers[plan.partition].write(buffer.take(self.topic, plan.partition))
        if offset + 1 >= plan.cap:
            self._finish(plan, plan.cap, plan.end_reason_at_cap)


def _ms_iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return iso(datetime.fromtimestamp(ms / 1000, tz=UTC))


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
