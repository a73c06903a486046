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

One dispatcher, :func:`land_source`, lands a :class:`TopicSource` (what these flags, or a pipeline file's
``source`` block in the DAG's land task, say) and names the folders it landed (:func:`landed_folders`, what
a transform of the interval reads).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from jobs import env
from jobs.errors import mask
from jobs.lake import storage
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
from jobs.model.intervals import interval_name

# what callers import from here (jobs.airflow.tasks, jobs.cli, the tests, bench and scripts)
__all__ = [
    "BATCH_BYTES", "BATCH_ROWS", "CAPTURE_LOOKBACK", "CONNECT_S3", "EVENTHUBS_CAPTURE", "HEADER_TYPE",
    "IDLE_TIMEOUT_S", "KAFKA_ARROW_SCHEMA", "KAFKA_CONFIG_ENV", "MANIFEST", "MANIFEST_VERSION", "ROWS_PER_FILE",
    "LandError", "LandedInterval", "TopicSource", "build_parser", "kafka_consumer_config", "land_connect_s3",
    "land_eventhubs_capture", "land_files", "land_kafka", "land_source", "landed_folders", "landed_intervals",
    "main", "parse_time", "topic_dir",
]


@dataclass(frozen=True)
class TopicSource:
    """Where the topics are: ``kind`` (kafka, files, connect_s3 or eventhubs_capture) and its ``location``
    (Kafka's bootstrap servers, over the connection's; a folder or prefix of the others), the topics (none
    from an export: every topic found), and Kafka's consumer settings (over the connection's)."""

    kind: str
    location: str | None = None
    topics: tuple[str, ...] = ()
    kafka_connection: str | None = None  # an Airflow connection of type kafka
    consumer_config: Mapping[str, Any] = field(default_factory=dict)
    bytearray_separator: bytes = b"\n"  # a Kafka Connect S3 sink's ByteArrayFormat settings
    bytearray_extension: str = ".bin"


def land_source(source: TopicSource, lake: Lake, pipeline: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Land [start, end) of every topic of ``source``: each topic's manifest."""
    source = with_connection(source)
    topics = list(source.topics) or None
    if source.kind == "kafka":
        if not topics:
            raise LandError("landing from Kafka needs at least one topic")
        return [land_kafka(source.location, topic, lake, pipeline, start, end, dict(source.consumer_config))
                for topic in topics]
    if source.kind == "connect_s3":
        return land_connect_s3(source.location, topics, lake, pipeline, start, end,
                               bytearray_separator=source.bytearray_separator,
                               bytearray_extension=source.bytearray_extension)
    if source.kind == "eventhubs_capture":
        return land_eventhubs_capture(source.location, topics, lake, pipeline, start, end)
    return land_files(source.location, topics, lake, pipeline, start, end)


def with_connection(source: TopicSource) -> TopicSource:
    """``source`` with its Kafka connection's bootstrap servers and settings in it, its own over them."""
    if not source.kafka_connection:
        return source
    config = kafka_consumer_config(source.kafka_connection)
    bootstrap = source.location or config.get("bootstrap.servers", "")
    config.pop("bootstrap.servers", None)
    return replace(source, location=bootstrap, kafka_connection=None,
                   consumer_config={**config, **source.consumer_config})


def landed_folders(lake: Lake, pipeline: str, start: datetime, end: datetime,
                   topics: tuple[str, ...] = ()) -> list[str]:
    """The folders landed for [start, end) (a manifest in each), one per topic (of ``topics`` only, when
    given), in name order: what a transform of the interval reads."""
    # a topic's folder name is already safe: it names its own folder again (jobs.model.record.safe_part)
    topics = topics or tuple(storage.list_dirs(lake.join(Lake.raw_pipeline_dir(pipeline))))
    folders = [lake.raw_dir(pipeline, topic, interval_name(start), interval_name(end)) for topic in topics]
    return sorted(lake.join(folder) for folder in folders if lake.exists(f"{folder}/{MANIFEST}"))


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


def _source(args: argparse.Namespace) -> TopicSource:
    """What the flags say of the topics' source (a Kafka connection read now: a bad one is a usage error)."""
    topics = tuple(t.strip() for item in args.topic for t in item.split(",") if t.strip())
    if args.kafka or args.kafka_conn_id:
        config: dict[str, Any] = dict(_key_values(args.consumer_config, "--consumer-config"))
        for key, var in _key_values(args.consumer_config_env, "--consumer-config-env"):
            value = env.named(var)
            if value is None:
                raise LandError(f"--consumer-config-env {key}: environment variable {var} is not set")
            config[key] = value
        if not topics:
            raise LandError("landing from Kafka needs at least one --topic")
        return with_connection(TopicSource("kafka", args.kafka, topics, args.kafka_conn_id, config))
    if args.from_connect_s3:
        try:
            separator = args.bytearray_separator.encode("latin-1").decode("unicode_escape").encode("utf-8")
        except (UnicodeError, ValueError):
            raise LandError("--bytearray-separator: not a valid escape sequence") from None
        return TopicSource("connect_s3", args.from_connect_s3, topics, bytearray_separator=separator,
                           bytearray_extension=args.bytearray_extension)
    if args.from_eventhubs_capture:
        return TopicSource("eventhubs_capture", args.from_eventhubs_capture, topics)
    return TopicSource("files", args.from_files, topics)


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
        source = _source(args)
        lake.check_usable()
    except (LandError, LakeError) as exc:
        print(f"land: error: {mask(str(exc))}", file=sys.stderr)
        return 2
    try:
        manifests = land_source(source, lake, args.pipeline, start, end)
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
