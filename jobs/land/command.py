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

Intervals neither overlap nor leave gaps: each source chains an interval on the positions the
landed intervals before and after it recorded (jobs/land/, one module per source):

- Kafka (jobs.land.kafka), per partition: from the end offset of the latest landed interval ending
  at or before ``start`` (else from the first message whose timestamp is >= ``start``) up to the first
  message whose timestamp is >= ``end``, the high watermark read at the start of the run, or the start
  of an interval already landed right after. Messages that arrive later with older timestamps
  therefore land in the next interval: late, never lost, never twice.
- Parquet topic dumps (jobs.land.files): the messages whose timestamp is in [start, end).
- Exports other tools wrote (jobs.land.exports): a Kafka Connect S3 sink (jobs.land.connect_s3)
  keeps no timestamp, so each landing takes every record written since the previous landing ended
  (offsets); Event Hubs Capture (jobs.land.eventhubs_capture) keeps the enqueued time, so an
  interval ends at the first event enqueued at or after ``end`` (sequence numbers as offsets).

Each topic's manifest also says what the source holds outside the interval (jobs.land.outside); when
the interval lands nothing while the source holds messages outside it, a warning line on stderr says so.

Kafka settings such as SASL credentials come from ``--consumer-config KEY=VALUE``,
``--consumer-config-env KEY=ENV_VAR``, the JSON object in ``$CDC_KAFKA_CONFIG`` or an Airflow connection
of type kafka (``--kafka-conn-id``, the apache-kafka provider's hook); values are never printed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from jobs.errors import mask
from jobs.lake.layout import Lake, LakeError, check_name
from jobs.land.common import (
    BATCH_BYTES,
    BATCH_ROWS,
    HEADER_TYPE,
    KAFKA_ARROW_SCHEMA,
    MANIFEST,
    MANIFEST_VERSION,
    ROWS_PER_FILE,
    LandedInterval,
    LandError,
    _check_interval,
    landed_intervals,
    parse_time,
    topic_dir,
)
from jobs.land.connect_s3 import CONNECT_S3, land_connect_s3
from jobs.land.eventhubs_capture import CAPTURE_LOOKBACK, EVENTHUBS_CAPTURE, land_eventhubs_capture
from jobs.land.files import land_files
from jobs.land.kafka import IDLE_TIMEOUT_S, KAFKA_CONFIG_ENV, kafka_consumer_config, land_kafka
from jobs.land.outside import combine, quiet_interval_warning

# what callers import from here (jobs.airflow.tasks, jobs.cli, the tests, bench and scripts)
__all__ = [
    "BATCH_BYTES", "BATCH_ROWS", "CAPTURE_LOOKBACK", "CONNECT_S3", "EVENTHUBS_CAPTURE", "HEADER_TYPE",
    "IDLE_TIMEOUT_S", "KAFKA_ARROW_SCHEMA", "KAFKA_CONFIG_ENV", "MANIFEST", "MANIFEST_VERSION", "ROWS_PER_FILE",
    "LandError", "LandedInterval", "build_parser", "kafka_consumer_config", "land_connect_s3",
    "land_eventhubs_capture", "land_files", "land_kafka", "landed_intervals", "main", "parse_time", "topic_dir",
]


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


def _kafka_settings(args: argparse.Namespace) -> tuple[str | None, dict[str, Any]]:
    """The bootstrap servers (None when not landing from Kafka) and the consumer settings the flags give."""
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
    return bootstrap, config


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
        bootstrap, config = _kafka_settings(args)
        if bootstrap and not topics:
            raise LandError("landing from Kafka needs at least one --topic")
        try:
            separator = args.bytearray_separator.encode("latin-1").decode("unicode_escape").encode("utf-8")
        except (UnicodeError, ValueError):
            raise LandError("--bytearray-separator: not a valid escape sequence") from None
        lake.check_usable()
    except (LandError, LakeError) as exc:
        print(f"land: error: {mask(str(exc))}", file=sys.stderr)
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
        print(f"land: error: {mask(str(exc))}", file=sys.stderr)
        return 1
    for manifest in manifests:
        print(json.dumps({"topic": manifest["topic"], "path": lake.join(manifest["path"]),
                          "records": manifest["totals"]["records"], "files": manifest["totals"]["files"],
                          "outside": manifest.get("outside")}))
    warning = quiet_interval_warning(start, end, sum(m["totals"]["records"] for m in manifests),
                                     combine(m.get("outside") for m in manifests))
    if warning:
        print(f"land: warning: {warning}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
