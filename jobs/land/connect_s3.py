"""land from a Kafka Connect S3 sink's objects (Confluent's connector; ``land_connect_s3``).

The sink keeps no Kafka timestamp, so each landing takes every record written since the previous
landing ended (offsets; see jobs.land.exports). Confluent's S3 sink names every object
``<topic>+<kafkaPartition>+<startOffset><view><ext>[.gz]``, in the partitioner's folders (default
``topics/<topic>/partition=<p>/``; time-based and field partitioners put other folders there: the name
alone is read). ``<view>`` is "" for values, ``.keys`` or ``.headers`` for the files
``store.kafka.keys`` / ``store.kafka.headers`` add beside them.
"""
from __future__ import annotations

import functools
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobs.lake import storage
from jobs.lake.layout import Lake, check_name
from jobs.land.common import (
    BATCH_ROWS,
    ROWS_PER_FILE,
    LandError,
    _check_interval,
    _refuse_shared_folders,
    log,
)
from jobs.land.exports import _ExportPlan, _ExportRecord, _land_export_topic, _read_source

CONNECT_S3 = "connect_s3"

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


def _index_connect_files(prefix: str, bytearray_extension: str, topics: list[str] | None
                         ) -> tuple[dict[str, dict[int, list[_ConnectFile]]], dict[tuple[str, int, int], _ConnectFile]]:
    """The value files by topic and partition, and the key files by (topic, partition, start offset)."""
    by_topic: dict[str, dict[int, list[_ConnectFile]]] = {}
    keys: dict[tuple[str, int, int], _ConnectFile] = {}
    for file in _connect_files(prefix, bytearray_extension, topics):
        if file.view == ".keys":
            keys[(file.topic, file.partition, file.start_offset)] = file
        elif file.view == "":
            by_topic.setdefault(file.topic, {}).setdefault(file.partition, []).append(file)
    return by_topic, keys


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
    by_topic, keys = _index_connect_files(prefix, bytearray_extension, topics)
    wanted = sorted(set(topics)) if topics else sorted(by_topic)
    _refuse_shared_folders(lake, pipeline, wanted, start, end)
    separators = {".json": b"\n", bytearray_extension: bytearray_separator}
    manifests = []
    for topic in wanted:
        partitions = by_topic.get(topic, {})
        read = functools.partial(_read_connect_partition, topic, partitions, keys, separators)
        manifests.append(_land_export_topic(
            CONNECT_S3, {"kind": CONNECT_S3, "path": prefix}, topic, lake, pipeline, start, end,
            sorted(partitions), read, by_time=False, ts_type=-1, contiguous=False,
            rows_per_file=rows_per_file, batch_rows=batch_rows))
    return manifests


def _read_connect_partition(topic: str, partitions: dict[int, list[_ConnectFile]],
                            keys: dict[tuple[str, int, int], _ConnectFile], separators: dict[str, bytes],
                            plan: _ExportPlan, state: dict[str, Any]) -> Iterator[_ExportRecord]:
    """A partition's records in offset order, file by file (a file wholly landed before is not read)."""
    files = sorted(partitions.get(plan.partition, []), key=lambda f: f.start_offset)
    state["lowest"] = files[0].start_offset if files else None  # from the names: no file is read for it
    for i, file in enumerate(files):
        following = files[i + 1].start_offset if i + 1 < len(files) else None
        if i and file.start_offset == files[i - 1].start_offset:
            raise LandError(f"{file.location} and {files[i - 1].location} both start at offset "
                            f"{file.start_offset}; land one format at a time")
        if plan.begin is not None and following is not None and following <= plan.begin:
            continue  # wholly landed before: not even read
        key_file = keys.get((topic, plan.partition, file.start_offset))
        lines, key_lines = _connect_file_lines(file, key_file, following, separators)
        state["file"], state["files"] = file.rel, state["files"] + 1
        yield from _connect_records(file, lines, key_file, key_lines, plan)


def _connect_file_lines(file: _ConnectFile, key_file: _ConnectFile | None, following: int | None,
                        separators: dict[str, bytes]) -> tuple[list[bytes], list[bytes] | None]:
    """A value file's lines, and its key file's if there is one, checked against each other and against
    the offset the next file starts at."""
    lines = _connect_lines(file, separators[file.ext])
    if following is not None and file.start_offset + len(lines) > following:
        raise LandError(f"{file.location}: {len(lines)} records but the next file starts at offset "
                        f"{following}; a value holding the separator splits into several lines "
                        "(set format.bytearray.separator to bytes no value holds)")
    key_lines = _connect_lines(key_file, separators[key_file.ext]) if key_file else None
    if key_file is not None and key_lines is not None and len(key_lines) != len(lines):
        raise LandError(f"{key_file.location}: {len(key_lines)} keys for {len(lines)} values "
                        f"in {file.location}")
    return lines, key_lines


def _connect_records(file: _ConnectFile, lines: list[bytes], key_file: _ConnectFile | None,
                     key_lines: list[bytes] | None, plan: _ExportPlan) -> Iterator[_ExportRecord]:
    for n, line in enumerate(lines):
        value, key = _connect_value(line, file.ext == ".json"), None
        if key_file is not None and key_lines is not None:
            key = _connect_value(key_lines[n], key_file.ext == ".json")
        if file.ext == ".json" and value is not None and not _is_json(value):
            plan.not_json += 1
            log.warning("%s: line %d is not JSON; landed as it is (decode quarantines it)", file.location, n + 1)
        yield _ExportRecord(file.start_offset + n, value, key)


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
