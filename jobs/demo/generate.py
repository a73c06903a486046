"""Generate the bundled demo: Debezium topics (Parquet dumps) plus the source database they came from.

    python jobs/demo/generate.py --out demo/topics --source-db demo/source.db [--messages N] [--seed S]

A PostgreSQL-shaped shop (``customers``, ``orders`` with a ``decimal(10,2)`` amount, ``order_lines``
with a composite key) is populated, snapshotted at 2026-11-01T00:00:00Z and then changed for two
days: inserts, updates on hot keys, deletes (with tombstones), primary-key changes, interleaved
transactions, a few redelivered messages and three malformed ones. Same seed, same output.

Each topic becomes ``<out>/<topic>/part-00000.parquet`` in Spark's Kafka source schema; the source
database (tables named ``customers``, ``orders``, ``order_lines``) is saved beside
``source_counts.json``: its row counts at the end of each day with the moment they are true, what
the demo reconciles against. One summary line is printed.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jobs.demo.simulator import SourceSimulator, TableSpec, write_parquet

DEMO_START = datetime(2026, 11, 1, tzinfo=UTC)
DEMO_SPAN = timedelta(days=2)
DEMO_SERVER = "shop"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

DEMO_TABLES = (
    # REPLICA IDENTITY DEFAULT, as most PostgreSQL tables are: updates carry no before image,
    # deletes only the key
    TableSpec("shop", "public", "customers",
              [("id", "int"), ("name", "text"), ("email", "text"), ("country", "text"),
               ("is_active", "boolean"), ("created_at", "timestamp")],
              ["id"], replica_identity="default"),
    TableSpec("shop", "public", "orders",
              [("id", "bigint"), ("customer_id", "int"), ("amount", "decimal(10,2)"), ("status", "text"),
               ("order_date", "date"), ("updated_at", "timestamp")],
              ["id"], replica_identity="full"),
    TableSpec("shop", "public", "order_lines",
              [("order_id", "bigint"), ("line_no", "int"), ("sku", "text"), ("quantity", "int"),
               ("unit_price", "decimal(10,2)"), ("weight_kg", "double")],
              ["order_id", "line_no"], replica_identity="full"),
)

# messages per CDC operation: deletes add a tombstone, primary-key changes add a delete, a
# tombstone and a create; with the default mix that is about 1.28 messages per operation
_MESSAGES_PER_OP = 1.28


def build_demo(seed: int = 7, messages: int = 3000) -> SourceSimulator:
    """The demo's simulator after all of its operations (deterministic for a seed)."""
    if messages < 200:
        raise ValueError("--messages must be at least 200")
    sim = SourceSimulator(seed, list(DEMO_TABLES), "postgresql", server=DEMO_SERVER, n_partitions=3,
                          start=DEMO_START)
    # a third of the messages are the initial snapshot
    snapshot_rows = messages // 3
    sim.populate("customers", snapshot_rows * 2 // 10)
    sim.populate("orders", snapshot_rows * 3 // 10)
    sim.populate("order_lines", snapshot_rows - snapshot_rows * 2 // 10 - snapshot_rows * 3 // 10)
    sim.snapshot()

    cdc_ops = max(40, round((messages - len(sim.events) - 3 - messages // 100) / _MESSAGES_PER_OP))
    # spread the operations over ~95% of the two days so that every Kafka timestamp stays inside
    sim.op_interval_ms = (DEMO_SPAN.total_seconds() * 1000 * 0.95) / cdc_ops
    quarter = cdc_ops // 4
    sim.random_ops(quarter, max_tx_size=3, concurrency=2)
    sim.garbage(1, kinds=["broken_json"])
    sim.random_ops(quarter, max_tx_size=3, concurrency=2)
    sim.redeliver(0.004)  # a connector restart re-sends a few messages
    sim.garbage(1, kinds=["unknown_op"])
    sim.random_ops(quarter, max_tx_size=3, concurrency=2)
    sim.garbage(1, kinds=["update_without_after"])
    sim.random_ops(cdc_ops - 3 * quarter, max_tx_size=3, concurrency=2)
    sim.redeliver(0.002)
    return sim


def write_demo(sim: SourceSimulator, out: Path, source_db: Path) -> dict[str, int]:
    """Write one Parquet file per topic under ``out`` and the source database; returns rows per topic."""
    by_topic: dict[str, list[dict]] = {topic: [] for topic in sim.topics()}
    for record in sim.iter_kafka_records(with_schema=False):
        by_topic[record["topic"]].append(record)
    written = {}
    for topic, records in by_topic.items():
        folder = out / topic
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("part-*.parquet"):  # a re-run replaces the previous dump
            stale.unlink()
        written[topic] = write_parquet(folder / "part-00000.parquet", records)
    sim.save_sqlite(source_db)
    write_checkpoints(sim, source_db.with_name("source_counts.json"))
    return written


def write_checkpoints(sim: SourceSimulator, path: Path) -> None:
    """The source's row counts at the end of each demo day, as a counts file of checkpoints: counted
    right after the day's last commit, at that commit's time (Debezium's ``source.ts_ms`` resolution)."""
    checkpoints: dict[str, list[dict]] = {table: [] for table in sim.tables}
    for day in range(1, DEMO_SPAN.days + 1):
        day_end = (DEMO_START + timedelta(days=day) - _EPOCH) // timedelta(microseconds=1)
        last = [point for point in sim.commit_log if point.time_us < day_end][-1]
        as_of = datetime.fromtimestamp(last.time_us // 1000 / 1000, UTC).isoformat(timespec="milliseconds")
        for table in sim.tables:
            checkpoints[table].append({"rows": last.counts[table], "as_of": as_of.replace("+00:00", "Z")})
    path.write_text(json.dumps(checkpoints, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for the topic dumps")
    parser.add_argument("--source-db", required=True, type=Path, help="SQLite file for the source database")
    parser.add_argument("--messages", type=int, default=3000, help="about how many messages (default 3000)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    sim = build_demo(args.seed, args.messages)
    written = write_demo(sim, args.out, args.source_db)
    stats = sim.stats()
    records = sim.events
    first = min(e.kafka_ts_ms for e in records)
    last = max(e.kafka_ts_ms for e in records)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    span = (datetime.fromtimestamp(first / 1000, UTC).strftime(fmt),
            datetime.fromtimestamp(last / 1000, UTC).strftime(fmt))
    counts = ", ".join(f"{t}={n}" for t, n in sim.source_counts().items())
    print(
        f"demo: {sum(written.values())} messages in {len(written)} topics "
        f"({stats.get('op_r', 0)} snapshot, {stats.get('op_c', 0)} c, {stats.get('op_u', 0)} u, "
        f"{stats.get('op_d', 0)} d, {stats.get('tombstone', 0)} tombstones, "
        f"{stats.get('redelivery', 0)} redelivered, {sim.garbage_count} malformed) "
        f"{span[0]}..{span[1]} -> {args.out}; source {args.source_db}: {counts}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
