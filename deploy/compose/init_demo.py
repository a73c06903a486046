"""The one-shot init services of docker-compose.yml: fill the stack's servers from the demo that the
``demo-init`` service generated (jobs/demo/generate.py).

    python deploy/compose/init_demo.py kafka --topics DIR --bootstrap HOST:PORT
    python deploy/compose/init_demo.py source-db --source-db FILE --url SQLALCHEMY_URL
    python deploy/compose/init_demo.py bucket --endpoint URL --name BUCKET

- ``kafka``: produces every Parquet topic dump under ``--topics`` (``<topic>/*.parquet``, Spark's Kafka
  schema) into the broker, keeping keys, partitions, timestamps and headers. A topic that already
  exists is left as it is (a restarted stack would otherwise hold every message twice).
- ``source-db``: copies the tables of the demo's SQLite source database into the reconciliation
  source (schema ``public``), replacing them.
- ``bucket``: creates an S3 bucket (MinIO) if missing, waiting for the server to answer; credentials
  from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).

Each prints one line per thing it did and exits non-zero when it could not.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def produce_topics(topics_dir: Path, bootstrap: str) -> list[str]:
    """Produce the dumps under ``topics_dir``; returns the topics created (and so produced)."""
    import pyarrow.parquet as pq
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    files = sorted(topics_dir.glob("*/*.parquet"))
    if not files:
        raise SystemExit(f"kafka-init: no topic dumps under {topics_dir} (did demo-init run?)")
    order = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
    dumps = [pq.read_table(f).sort_by(order) for f in files]
    partitions: dict[str, int] = {}
    for dump in dumps:
        for topic, partition in zip(dump["topic"].to_pylist(), dump["partition"].to_pylist()):
            partitions[topic] = max(partitions.get(topic, 0), partition + 1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [NewTopic(t, num_partitions=n, replication_factor=1) for t, n in sorted(partitions.items())]
    created = set()
    for topic, future in admin.create_topics(wanted).items():
        try:
            future.result()
            created.add(topic)
        except KafkaException as exc:  # a re-run: the topic is already there with its messages
            print(f"kafka-init: {topic} not produced again: {exc}")
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for dump in dumps:
        for row in dump.to_pylist():
            if row["topic"] in created:
                producer.produce(row["topic"], value=row["value"], key=row["key"], partition=row["partition"],
                                 timestamp=int(row["timestamp"].timestamp() * 1000),
                                 headers=[(h["key"], h["value"]) for h in row["headers"] or []])
                producer.poll(0)
    if producer.flush(60) != 0:
        raise SystemExit("kafka-init: messages left undelivered")
    print(f"kafka-init: produced {sorted(created)}")
    return sorted(created)


def copy_source_db(source_db: Path, url: str) -> dict[str, int]:
    """Copy every table of the SQLite ``source_db`` into schema ``public`` of ``url``; rows per table."""
    import sqlite3

    import pandas as pd
    from sqlalchemy import create_engine

    if not source_db.is_file():
        raise SystemExit(f"source-init: no source database {source_db} (did demo-init run?)")
    source = sqlite3.connect(str(source_db))
    target = create_engine(url)
    schema = None if target.dialect.name == "sqlite" else "public"  # SQLite: a local try of this function
    copied = {}
    try:
        names = [n for (n,) in source.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for name in names:
            quoted = '"{}"'.format(name.replace('"', '""'))
            rows = pd.read_sql_query(f"SELECT * FROM {quoted}", source)
            rows.to_sql(name, target, schema=schema, if_exists="replace", index=False)
            copied[name] = len(rows)
            print(f"source-init: {schema or 'main'}.{name}: {len(rows)} rows")
    finally:
        source.close()
        target.dispose()
    return copied


def ensure_bucket(endpoint: str, name: str, wait_s: int = 60) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint)
    for _ in range(wait_s):
        try:
            existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
            break
        except Exception:  # noqa: BLE001 - not answering yet
            time.sleep(1)
    else:
        raise SystemExit(f"minio-init: {endpoint} did not answer in {wait_s}s")
    if name not in existing:
        s3.create_bucket(Bucket=name)
    print(f"minio-init: bucket {name} ready")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    kafka = commands.add_parser("kafka", help="produce the demo topics into a broker")
    kafka.add_argument("--topics", required=True, type=Path, help="folder of <topic>/*.parquet dumps")
    kafka.add_argument("--bootstrap", required=True, help="bootstrap servers, e.g. kafka:9092")
    source = commands.add_parser("source-db", help="copy the demo's source database into a SQL server")
    source.add_argument("--source-db", required=True, type=Path, help="the SQLite file make_demo.py wrote")
    source.add_argument("--url", required=True, help="SQLAlchemy URL of the target database")
    bucket = commands.add_parser("bucket", help="create an S3 bucket if missing")
    bucket.add_argument("--endpoint", required=True, help="S3 endpoint URL, e.g. http://minio:9000")
    bucket.add_argument("--name", required=True, help="the bucket")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "kafka":
        produce_topics(args.topics, args.bootstrap)
    elif args.command == "source-db":
        copy_source_db(args.source_db, args.url)
    else:
        ensure_bucket(args.endpoint, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
