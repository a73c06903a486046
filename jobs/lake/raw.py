"""Reading a raw topic snapshot: Parquet in Spark's Kafka source schema, or text files of message values."""
from __future__ import annotations

import glob
import json
import math
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from jobs.lake import storage

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
    ]
)
TEXT_SUFFIXES = (".jsonl", ".json", ".txt", ".jsonl.gz", ".json.gz", ".txt.gz")
# the land stage's folder of one interval of a topic, and the manifest that completes it (jobs.land.command)
INTERVAL_PREFIX = "interval="
MANIFEST = "_manifest.json"


class RawInputError(ValueError):
    """The --raw path is missing or holds nothing readable."""


def _is_message_file(path: Path) -> bool:
    # `_manifest.json`, `_SUCCESS`, `.crc`: bookkeeping of landers and Spark, never messages
    return path.is_file() and path.name.endswith(TEXT_SUFFIXES) and not path.name.startswith(("_", "."))


def _text_files(path: Path) -> list[str]:
    if path.is_file():
        return [str(path)] if path.name.endswith(TEXT_SUFFIXES) else []
    return sorted(str(p) for p in path.rglob("*") if _is_message_file(p))


def _has_parquet(path: Path) -> bool:
    if path.is_file():
        return path.suffix == ".parquet"
    return any(p.suffix == ".parquet" for p in path.rglob("*.parquet"))


# What one task of the decode holds at most: a run's memory is bounded by its tasks, never by the
# interval's size (a 2M-message snapshot in one file was two tasks of a million messages each, which a
# 1 GB heap could not hold).
MESSAGES_PER_TASK = 100_000
# a text line's bytes, for a count of the messages of text files, which are not counted before reading
_TEXT_BYTES_PER_MESSAGE = 256


@dataclass(frozen=True)
class RawSize:
    """How large a run's input is, from the Parquet files' footers and the text files' sizes (nothing read
    but metadata): what the decode's tasks are cut by (:func:`task_split`)."""

    messages: int = 0  # Parquet rows, with text files' lines estimated from their bytes
    parquet_bytes: int = 0
    largest_row_group: int = 0  # Spark never splits a row group: one task reads it whole
    text_bytes: int = 0

    def __add__(self, other: RawSize) -> RawSize:
        return RawSize(self.messages + other.messages, self.parquet_bytes + other.parquet_bytes,
                       max(self.largest_row_group, other.largest_row_group), self.text_bytes + other.text_bytes)


@dataclass(frozen=True)
class TaskSplit:
    """How the decode cuts its input: Parquet splits of about ``max_split_bytes`` (None: Spark's own), or a
    repartition into ``partitions`` after the read where splits cannot be small enough (row groups larger
    than a task, text files: a gzip file is one split)."""

    max_split_bytes: int | None = None
    partitions: int | None = None
    tasks: int = 1  # how many tasks the input makes: the least number of partitions a shuffle of it needs


def task_split(size: RawSize, per_task: int = MESSAGES_PER_TASK) -> TaskSplit:
    """Splits of at most ``per_task`` messages each (pure: tests and docs reason on it without Spark)."""
    if size.messages <= per_task:
        return TaskSplit()
    tasks = math.ceil(size.messages / per_task)
    if size.text_bytes or size.largest_row_group > per_task:
        return TaskSplit(partitions=tasks, tasks=tasks)
    return TaskSplit(max_split_bytes=max(1, size.parquet_bytes // tasks), tasks=tasks)


def raw_size(raws: str | list[str]) -> RawSize:
    """The size of the raw snapshots ``read_raw`` reads (the Parquet footers and the text files' sizes)."""
    total = RawSize()
    for raw in _paths(raws):
        parquet, texts = input_files(raw)
        total += _parquet_size(parquet) + RawSize(messages=0, text_bytes=sum(_bytes(t) for t in texts))
    if total.text_bytes:
        total += RawSize(messages=total.text_bytes // _TEXT_BYTES_PER_MESSAGE)
    return total


def _parquet_size(files: list[str]) -> RawSize:
    import pyarrow as pa
    import pyarrow.parquet as pq

    total = RawSize()
    for uri in files:
        filesystem, path = storage.file_system(uri)
        with filesystem.open_input_file(path) as stream:
            try:
                meta = pq.read_metadata(stream)
            except pa.ArrowInvalid as exc:  # pyarrow's message names no file
                raise RawInputError(f"--raw {uri} is not a Parquet file that can be read: {exc}") from None
            largest = max((meta.row_group(i).num_rows for i in range(meta.num_row_groups)), default=0)
            total += RawSize(meta.num_rows, stream.size(), largest)
    return total


def _bytes(location: str) -> int:
    filesystem, path = storage.file_system(location)
    return filesystem.get_file_info(path).size or 0


def _paths(raws: str | list[str]) -> list[str]:
    return [p for raw in ([raws] if isinstance(raws, str) else raws) for p in expand(raw)]


def read_raw(spark: SparkSession, raws: str | list[str], split: TaskSplit | None = None) -> DataFrame:
    """A DataFrame in Spark's Kafka source schema, whatever form the snapshots were landed in; with
    ``split``, repartitioned where it says (its Parquet split size is the session's, set by the caller
    around the queries that read it: Spark cuts files when a query runs, not when it is defined)."""
    frames = [_read_one(spark, raw) for raw in _paths(raws)]
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    if split is not None and split.partitions:
        out = out.repartition(split.partitions)
    return out


def expand(raw: str) -> list[str]:
    """A local glob (e.g. every topic's folder of one interval) -> its matches; anything else as is."""
    if "://" in raw or not any(ch in raw for ch in "*?["):
        return [raw]
    matches = sorted(glob.glob(raw))
    if not matches:
        raise RawInputError(f"--raw {raw}: the pattern matches nothing")
    return matches


def input_files(raw: str) -> tuple[list[str], list[str]]:
    """The Parquet files (URIs) and text files (local paths) of one ``--raw`` path, listed without Spark;
    RawInputError when it holds neither (jobs.cli refuses such a --raw before any stage starts)."""
    if raw.startswith(("s3://", "s3a://")):
        files = parquet_files("s3://" + raw.split("://", 1)[1])
        if not files:
            raise RawInputError(f"--raw {raw}: no Parquet files found")
        return files, []
    path = Path(raw.removeprefix("file://"))
    if not path.exists():
        raise RawInputError(f"--raw {raw}: no such file or directory")
    parquet: list[str] = []
    if path.is_file() and path.suffix == ".parquet":
        parquet = [storage.uri(str(path.resolve()))]
    elif _has_parquet(path):
        parquet = parquet_files(str(path.resolve()))
    texts = _text_files(path)
    if not (parquet or texts):
        raise RawInputError(
            f"--raw {raw}: no Parquet (Kafka source schema) or text files ({', '.join(TEXT_SUFFIXES)}) found"
        )
    return parquet, texts


def _read_one(spark: SparkSession, raw: str) -> DataFrame:
    parquet, texts = input_files(raw)
    frames: list[DataFrame] = []
    if parquet:
        frames.append(read_kafka_parquet(spark, [_spark_path(f) for f in parquet]))
    if texts:
        frames.append(read_text_messages(spark, texts))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def _spark_path(uri: str) -> str:
    """A file's URI as Spark reads it: s3a:// for S3, a plain path for a local file."""
    if storage.is_s3(uri):
        return "s3a://" + uri.split("://", 1)[1]
    return uri.removeprefix("file://")


def parquet_files(folder: str) -> list[str]:
    """The Parquet files of a folder (a local path or an ``s3://`` URI), at any depth, as URIs; but a
    landed interval (a folder ``interval=...``, see jobs.land.command) gives only the files its manifest lists,
    and one without a manifest is refused: its landing did not finish, and its files (complete Parquet
    files, each) hold an unknown part of the interval."""
    from jobs.lake.storage import file_uris as list_files

    found = list_files(folder)
    present = set(found)
    root = storage.uri(folder)  # in the form list_files names the files
    selected: list[str] = []
    manifests: dict[str, set[str]] = {}
    for uri in found:
        if not uri.endswith(".parquet"):
            continue
        interval = _interval_folder(uri, root)
        if interval is None:
            selected.append(uri)
            continue
        if interval not in manifests:
            manifests[interval] = _listed_files(interval, present)
        if uri.rsplit("/", 1)[-1] in manifests[interval]:
            selected.append(uri)
    return selected


def _interval_folder(uri: str, root: str) -> str | None:
    """The landed interval folder ``uri`` lies in: the deepest ``interval=...`` folder of its path,
    ``root`` (the folder given) or one below it; else None."""
    parts = uri.split("/")[:-1]
    top = root.count("/")  # the index of root's own name among the parts
    for depth in range(len(parts), top, -1):
        if parts[depth - 1].startswith(INTERVAL_PREFIX):
            return "/".join(parts[:depth])
    return None


def _listed_files(interval: str, present: set[str]) -> set[str]:
    """The names of the files a landed interval's manifest lists (each must exist)."""
    manifest_uri = f"{interval}/{MANIFEST}"
    if manifest_uri not in present:
        raise RawInputError(f"{interval} has no {MANIFEST}: its landing did not finish (or is still running); "
                            "land the interval again before decoding it")
    manifest = json.loads(storage.read_text(manifest_uri))
    names = {f["name"] for f in manifest.get("files", [])}
    missing = sorted(n for n in names if f"{interval}/{n}" not in present)
    if missing:
        raise RawInputError(f"{interval}: {MANIFEST} lists {', '.join(missing[:3])}, missing from the folder")
    return names


def read_kafka_parquet(spark: SparkSession, files: list[str]) -> DataFrame:
    df = spark.read.parquet(*files)
    missing = [f.name for f in KAFKA_SCHEMA.fields if f.name not in df.columns]
    if "value" in missing:
        where = files[0] if len(files) == 1 else f"{files[0]} (and {len(files) - 1} more)"
        raise RawInputError(f"--raw {where}: Parquet has no 'value' column; expected Spark's Kafka source schema")
    # Kafka Connect S3 sinks and hand-made dumps may lack lineage columns: fill them with nulls
    return df.select(
        *[
            (F.col(f.name) if f.name in df.columns else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in KAFKA_SCHEMA.fields
        ]
    )


def read_text_messages(spark: SparkSession, files: list[str]) -> DataFrame:
    """One message value per line; the file's name stands in for the topic, the line order for the offset."""
    lines = spark.read.text(files).withColumn("_file", F.input_file_name())
    # monotonically_increasing_id is ordered inside a file split and stable for the same files
    return lines.where(F.length("value") > 0).select(
        F.lit(None).cast(BinaryType()).alias("key"),
        F.encode("value", "UTF-8").alias("value"),
        F.regexp_extract("_file", r"([^/]+?)(\.jsonl|\.json|\.txt)(\.gz)?$", 1).alias("topic"),
        F.lit(0).cast(IntegerType()).alias("partition"),
        F.monotonically_increasing_id().alias("offset"),
        F.lit(None).cast(TimestampType()).alias("timestamp"),
        F.lit(None).cast(IntegerType()).alias("timestampType"),
        F.lit(None).cast(KAFKA_SCHEMA["headers"].dataType).alias("headers"),
    )

