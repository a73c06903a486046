"""A run's metrics, from the reports it wrote, for the dashboards operators already have (docs/operations/metrics.md).

``run_metrics`` is pure: the names, values and tags one run gives. They leave through Airflow's own metrics path
in a DAG's tasks (``AirflowStats``: StatsD or OpenTelemetry, as configured in Airflow) or, from the command line,
to a StatsD server given by ``--statsd-host`` (``UdpStatsd``: DogStatsD datagrams, tags after ``|#``).
Sending never fails a run: a metric lost is logged, the run's outcome stands.
"""
from __future__ import annotations

import logging
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jobs.model.reports import RunReports

log = logging.getLogger(__name__)

PREFIX = "cdc"
COUNT, GAUGE = "c", "g"
OUTCOMES = ("landed", "decoded", "quarantined", "ignored")
DEFAULT_STATSD_PORT = 8125


@dataclass(frozen=True)
class Metric:
    name: str  # below the prefix: messages.landed, rows.published ...
    value: float
    kind: str  # COUNT (added up across runs) or GAUGE (the latest value)
    tags: Mapping[str, str] = field(default_factory=dict)


def run_metrics(pipeline: str, reports: RunReports, timings_s: Mapping[str, float]) -> list[Metric]:
    """What one run did, per pipeline and table: messages by outcome, rows published, seconds per stage,
    checkpoint verdicts and the lag of the oldest checkpoint the lake has not reached."""
    out = [Metric("stage.seconds", round(float(seconds), 3), GAUGE, {"pipeline": pipeline, "stage": stage})
           for stage, seconds in sorted(timings_s.items())]
    decode = reports.decode
    for table, counts in sorted((decode.tables if decode else {}).items()):
        tags = {"pipeline": pipeline, "table": table}
        out += [Metric(f"messages.{outcome}", getattr(counts, outcome), COUNT, tags) for outcome in OUTCOMES]
    for row in reports.reconciliation.tables if reports.reconciliation else ():
        tags = {"pipeline": pipeline, "table": row.table}
        if row.in_state:
            out.append(Metric("rows.published", row.state_rows, GAUGE, tags))
        verdicts: dict[str, int] = {}
        for cp in (*row.checkpoints, *row.pending):
            verdicts[cp.verdict] = verdicts.get(cp.verdict, 0) + 1
        out += [Metric("checkpoints", n, COUNT, {**tags, "verdict": v}) for v, n in sorted(verdicts.items())]
        lags = [cp.lag.seconds for cp in row.pending if cp.lag is not None and cp.lag.seconds is not None]
        out.append(Metric("checkpoint.lag_seconds", max(lags, default=0.0), GAUGE, tags))
    return out


def land_metrics(pipeline: str, topics: Iterable[str], totals: Iterable[Mapping[str, int]]) -> list[Metric]:
    """What one landing brought, per pipeline and topic: messages, bytes and files (a landing's manifests)."""
    out = []
    for topic, total in zip(topics, totals):
        tags = {"pipeline": pipeline, "topic": topic}
        out += [Metric(f"land.{what}", int(total.get(key, 0)), COUNT, tags)
                for what, key in (("messages", "records"), ("bytes", "bytes"), ("files", "files"))]
    return out


# ---- where they go --------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-/]")


def dogstatsd_line(metric: Metric, prefix: str = PREFIX) -> str:
    """``prefix.name:value|kind|#tag:value,...``; a tag's characters outside [A-Za-z0-9_.-/] become ``_``
    (a table id taken from messages never breaks the datagram's syntax)."""
    value = int(metric.value) if float(metric.value).is_integer() else metric.value
    tags = ",".join(f"{_UNSAFE.sub('_', k)}:{_UNSAFE.sub('_', str(v))}" for k, v in sorted(metric.tags.items()))
    return f"{prefix}.{metric.name}:{value}|{metric.kind}" + (f"|#{tags}" if tags else "")


class UdpStatsd:
    """A StatsD server at ``host[:port]``, over UDP: one datagram per metric."""

    def __init__(self, address: str, prefix: str = PREFIX) -> None:
        host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
        self.host, self.port, self.prefix = host, int(port or DEFAULT_STATSD_PORT), prefix

    def send(self, metrics: Iterable[Metric]) -> int:
        sent = 0
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for metric in metrics:
                sock.sendto(dogstatsd_line(metric, self.prefix).encode(), (self.host, self.port))
                sent += 1
        return sent


class AirflowStats:
    """Airflow's metrics client in a task (airflow.sdk.observability.stats): what Airflow is configured with
    (StatsD, with tags where its InfluxDB or Datadog form is on; OpenTelemetry) receives them."""

    def __init__(self, prefix: str = PREFIX) -> None:
        self.prefix = prefix

    def send(self, metrics: Iterable[Metric]) -> int:
        from airflow.sdk.observability import stats

        sent = 0
        for metric in metrics:
            name, tags = f"{self.prefix}.{metric.name}", {k: str(v) for k, v in metric.tags.items()}
            if metric.kind == COUNT:
                stats.incr(name, count=int(metric.value), tags=tags)
            else:
                stats.gauge(name, metric.value, tags=tags)
            sent += 1
        return sent


def send_safely(sink, metrics: list[Metric]) -> None:
    """Send, and log rather than raise when the metrics system cannot be reached."""
    try:
        sink.send(metrics)
    except (OSError, ValueError) as exc:
        log.warning("the run's %d metrics were not sent: %s", len(metrics), exc)
