"""A quiet source judged through the landing's evidence, on a real Kafka-protocol broker (Tansu).

Only applied changes move the lake's reach: a count as of a moment after the source's last change stayed
``behind`` forever. A Kafka landing that read every partition past its interval's end (a message at or
after the end, or a high watermark read after the end) holds every change up to that end minus the
capture delay (jobs.reconcile.landed_reach)."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from jobs.demo.simulator import INVENTORY_TABLES, SourceSimulator
from jobs.lake.layout import Lake
from jobs.land.command import land_kafka
from jobs.model.intervals import iso
from jobs.reconcile.checkpoints import format_time, parse_time
from jobs.reconcile.landed_reach import landing_reach
from tests.support.pipeline_runs import jobs_run
from tests.support.servers import KafkaMessage, create_topic, produce

DELAY_S = 900


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def test_a_kafka_landing_after_its_end_is_evidence_and_one_before_it_is_not(kafka_bootstrap, tmp_path):
    topic = "reach.quiet"
    create_topic(kafka_bootstrap, topic, partitions=2)
    end = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    start = end - timedelta(days=1)
    # partition 0 changed in the interval, partition 1 only before it: both quiet since
    produce(kafka_bootstrap, topic, [KafkaMessage(b"in", b"k0", 0, _ms(end - timedelta(hours=1))),
                                     KafkaMessage(b"before", b"k1", 1, _ms(start - timedelta(hours=1)))])
    lake = Lake.at(str(tmp_path / "lake"))

    landed = land_kafka(kafka_bootstrap, topic, lake, "reach", start, end)

    assert [p["end_reason"] for p in landed["partitions"]] == ["high_watermark", "high_watermark"]
    assert all(parse_time(p["high_watermark_read_at"]) >= parse_time(iso(end)) for p in landed["partitions"])
    reach = landing_reach([landed], DELAY_S)
    assert reach.through == parse_time(iso(end)) - DELAY_S * 1_000_000 - 1, reach

    # the next interval, landed before its end: its high watermarks say nothing of what may come
    ahead = land_kafka(kafka_bootstrap, topic, lake, "reach", end, end + timedelta(hours=1))
    reach = landing_reach([ahead], DELAY_S)
    assert reach.through is None and "before the interval's end" in reach.why_not


def test_a_run_of_a_quiet_source_judges_a_count_after_its_last_change(spark, kafka_bootstrap, tmp_path):
    """The whole run: a Debezium stream landed from Kafka after its day, decoded and published; the
    source's count as of an hour after its last change is judged by this run, not left behind."""
    sim = SourceSimulator(3, list(INVENTORY_TABLES[:2]), "postgresql", n_partitions=2)
    sim.snapshot()
    sim.random_ops(30, max_tx_size=2)
    records = sim.to_kafka_records()
    for topic in sorted({r["topic"] for r in records}):
        create_topic(kafka_bootstrap, topic, partitions=2)
        produce(kafka_bootstrap, topic, [KafkaMessage(r["value"], r["key"], r["partition"], _ms(r["timestamp"]))
                                         for r in records if r["topic"] == topic])
    last = sim.commit_log[-1]
    day = datetime.fromtimestamp(last.time_us / 1e6, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    assert max(r["timestamp"] for r in records) < day + timedelta(hours=23), "the stream fits in its day"
    lake = Lake.at(str(tmp_path / "lake"))
    folders = [lake.join(land_kafka(kafka_bootstrap, t, lake, "quiet", day, day + timedelta(days=1))["path"])
               for t in sorted({r["topic"] for r in records})]
    counts = tmp_path / "counts.json"
    as_of = format_time(last.time_us + 3600 * 1_000_000)  # an hour after the last change
    counts.write_text(json.dumps({t: {"rows": n, "as_of": as_of} for t, n in sim.source_counts().items()}))

    run_id = f"{day:%Y%m%dT%H%M%SZ}_{day + timedelta(days=1):%Y%m%dT%H%M%SZ}"
    raws = [arg for folder in folders for arg in ("--raw", folder)]
    assert jobs_run("debezium", raws[1], tmp_path / "lake", "quiet", run_id, *raws[2:], "--source-counts",
                    str(counts)) == 0

    report = json.loads((tmp_path / f"lake/reports/quiet/run={run_id}/reconciliation.json").read_text())
    assert report["landing"]["why_not"] is None and report["landing"]["capture_delay_s"] == DELAY_S
    assert [(r["status"], r["source_rows"]) for r in report["tables"]] == [
        ("match", n) for _t, n in sorted(sim.source_counts().items())], report["tables"]
