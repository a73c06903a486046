"""Reading raw snapshots: a run's decode is cut into tasks of a bounded number of messages, whatever the
files' sizes (jobs.lake.raw.task_split), so its memory does not grow with the interval."""
from __future__ import annotations

import gzip

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.lake.raw import RawSize, TaskSplit, raw_size, read_raw, task_split
from jobs.land.command import KAFKA_ARROW_SCHEMA
from jobs.stages import input_tasks


def _messages(n: int, start: int = 0) -> pa.Table:
    values = [f'{{"id": {i}}}'.encode() for i in range(start, start + n)]
    return pa.table({
        "key": pa.array([b"k"] * n), "value": pa.array(values), "topic": pa.array(["t"] * n),
        "partition": pa.array([0] * n, pa.int32()), "offset": pa.array(range(start, start + n), pa.int64()),
        "timestamp": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * n, pa.int32()),
        "headers": pa.nulls(n, KAFKA_ARROW_SCHEMA.field("headers").type),
    }).cast(KAFKA_ARROW_SCHEMA)


def _parquet(path, rows: int, row_group: int) -> None:
    pq.write_table(_messages(rows), str(path), row_group_size=row_group)


def test_a_small_input_is_left_as_spark_reads_it():
    assert task_split(RawSize(messages=1000, parquet_bytes=10_000, largest_row_group=1000), per_task=1000) == TaskSplit()


def test_parquet_of_small_row_groups_is_split_by_bytes_into_tasks_of_at_most_the_bound():
    split = task_split(RawSize(messages=2_000_000, parquet_bytes=170_000_000, largest_row_group=100_000))
    assert split == TaskSplit(max_split_bytes=8_500_000, tasks=20)


def test_row_groups_larger_than_a_task_and_text_files_are_repartitioned_after_the_read():
    one_group = RawSize(messages=2_000_000, parquet_bytes=170_000_000, largest_row_group=2_000_000)
    assert task_split(one_group) == TaskSplit(partitions=20, tasks=20)
    texts = RawSize(messages=300_000, text_bytes=300_000 * 256)
    assert task_split(texts) == TaskSplit(partitions=3, tasks=3)


def test_the_size_comes_from_the_footers_and_the_text_files(tmp_path):
    _parquet(tmp_path / "a.parquet", 5000, 1000)
    _parquet(tmp_path / "b.parquet", 3000, 3000)
    with gzip.open(tmp_path / "t.jsonl.gz", "wt") as out:
        out.write('{"id": 1}\n' * 10)
    size = raw_size(str(tmp_path))
    text_bytes = (tmp_path / "t.jsonl.gz").stat().st_size
    assert size.largest_row_group == 3000 and size.text_bytes == text_bytes
    assert size.messages == 8000 + text_bytes // 256
    assert size.parquet_bytes == sum((tmp_path / f).stat().st_size for f in ("a.parquet", "b.parquet"))


def test_one_file_of_many_messages_is_read_by_as_many_tasks_as_the_bound_asks(spark, tmp_path):
    _parquet(tmp_path / "one.parquet", 20_000, 1000)
    split = task_split(raw_size(str(tmp_path)), per_task=2000)
    assert split.tasks == 10 and split.max_split_bytes
    with input_tasks(spark, split):
        raw = read_raw(spark, str(tmp_path), split)
        assert raw.rdd.getNumPartitions() >= 10
        assert raw.count() == 20_000
    assert read_raw(spark, str(tmp_path)).rdd.getNumPartitions() < 10  # as Spark would read it alone


def test_one_row_group_larger_than_a_task_is_repartitioned(spark, tmp_path):
    _parquet(tmp_path / "one.parquet", 6000, 6000)
    split = task_split(raw_size(str(tmp_path)), per_task=2000)
    assert split.partitions == 3
    raw = read_raw(spark, str(tmp_path), split)
    assert raw.rdd.getNumPartitions() == 3
    assert sorted(r["offset"] for r in raw.select("offset").collect()) == list(range(6000))
