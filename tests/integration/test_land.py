"""land on real servers: a Tansu broker, moto's S3 and Spark reading the files back.

The topic below is produced with explicit timestamps across three hourly intervals, including a
message exactly on a boundary and late messages (old timestamps produced after newer ones), so the
tests can tell "intervals partition the offsets" from "intervals filter by timestamp".
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
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

from jobs.lake.layout import Lake
from jobs.land.command import KAFKA_ARROW_SCHEMA, LandError, land_files, land_kafka, main
from jobs.model.intervals import iso
from tests.support.pipeline_runs import jobs_run
from tests.support.servers import KafkaMessage, create_bucket, create_topic, produce, s3_client

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1, T2, T3 = (T0 + timedelta(hours=h) for h in (1, 2, 3))
INTERVALS = [(T0, T1), (T1, T2), (T2, T3)]
PIPELINE = "landtest"

SPARK_KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                     StructField("value", BinaryType())]))),
    ]
)


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def minutes(m: float) -> int:
    return ms(T0) + int(m * 60_000)


# (partition, minutes after T0, key, headers) in produce order
PLAN = [
    (0, 0, b"k-a", [("trace", b"\x00\xff"), ("empty", None)]),
    (1, 1, None, []),  # null key, no headers
    (0, 5, b"k-b", [("h", b"1")]),
    (1, 2, b"k-c", [("h", b"2"), ("h", b"3")]),  # repeated header key kept in order
    (0, 30, b"k-d", []),
    (0, 60 - 1 / 60_000, b"k-e", []),  # last millisecond of interval 1
    (1, 58, b"k-f", []),
    (0, 60, b"k-g", []),  # exactly on the boundary: interval 2
    (1, 65, b"k-h", []),
    (0, 61, b"k-i", []),
    (0, 45, b"k-late1", []),  # late: produced after interval-2 messages, so it lands with interval 2
    (1, 100, b"k-j", []),
    (0, 90, b"k-k", []),
    (1, 125, b"k-l", []),  # first of interval 3 on partition 1
    (0, 119, b"k-m", []),
    (1, 130, b"k-n", []),
    (1, 50, b"k-late2", []),  # late: lands with interval 3
    (1, 179, b"k-o", []),
]


def _messages(plan=PLAN) -> list[KafkaMessage]:
    return [
        KafkaMessage(value=f"value-{i}".encode() + bytes([i, 0xFF]), key=key, partition=part,
                     timestamp_ms=minutes(m), headers=headers)
        for i, (part, m, key, headers) in enumerate(plan)
    ]


@pytest.fixture(scope="module")
def topic(kafka_bootstrap: str) -> dict:
    """The produced topic: name, and every message by (partition, offset)."""
    name = "land.orders"
    create_topic(kafka_bootstrap, name, partitions=2)
    messages = _messages()
    offsets = produce(kafka_bootstrap, name, messages)
    return {"name": name, "by_offset": {(m.partition, o): m for m, o in zip(messages, offsets)}}


def expected_intervals(by_offset: dict) -> list[set]:
    """The rule, computed independently: per partition, interval k ends at the first message (in
    offset order) whose timestamp is >= its end; after the last boundary, at the high watermark."""
    out = [set() for _ in INTERVALS]
    for part in {p for p, _ in by_offset}:
        k = 0
        for offset in sorted(o for p, o in by_offset if p == part):
            ts = by_offset[(part, offset)].timestamp_ms
            while k < len(INTERVALS) - 1 and ts >= ms(INTERVALS[k][1]):
                k += 1
            out[k].add((part, offset))
    return out


def read_snapshot(lake: Lake, manifest: dict) -> pa.Table:
    """The rows of a snapshot, through the files its manifest lists (local lake)."""
    tables = [pq.read_table(os.path.join(lake.join(manifest["path"]), f["name"])) for f in manifest["files"]]
    return pa.concat_tables(tables)


def assert_rows_equal_produced(rows: pa.Table, by_offset: dict, topic_name: str) -> None:
    for row in rows.to_pylist():
        sent = by_offset[(row["partition"], row["offset"])]
        assert row["topic"] == topic_name
        assert row["key"] == sent.key
        assert row["value"] == sent.value
        assert ms(row["timestamp"]) == sent.timestamp_ms
        assert row["timestampType"] == 0  # CreateTime, as Spark's Kafka source numbers it
        expected_headers = [{"key": k, "value": v} for k, v in sent.headers] or None
        assert row["headers"] == expected_headers


def assert_manifest_matches_files(lake: Lake, manifest: dict, rows: pa.Table) -> None:
    folder = Path(lake.join(manifest["path"]))
    on_disk = sorted(p.name for p in folder.iterdir())
    assert on_disk == sorted([f["name"] for f in manifest["files"]] + ["_manifest.json"])
    for entry in manifest["files"]:
        data = (folder / entry["name"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert len(data) == entry["bytes"]
        assert pq.ParquetFile(folder / entry["name"]).metadata.num_rows == entry["records"]
    assert manifest["totals"]["records"] == rows.num_rows == sum(f["records"] for f in manifest["files"])
    for part in manifest["partitions"]:
        in_part = [r for r in rows.column("partition").to_pylist() if r == part["partition"]]
        assert part["records"] == len(in_part)


@pytest.fixture(scope="module")
def landed(topic: dict, kafka_bootstrap: str, tmp_path_factory) -> dict:
    lake = Lake.at(str(tmp_path_factory.mktemp("lake")))
    manifests = [land_kafka(kafka_bootstrap, topic["name"], lake, PIPELINE, s, e, batch_rows=2, rows_per_file=3)
                 for s, e in INTERVALS]
    return {"lake": lake, "manifests": manifests}


def test_intervals_partition_the_offsets_without_gap_or_overlap(topic: dict, landed: dict) -> None:
    lake, manifests = landed["lake"], landed["manifests"]
    expected = expected_intervals(topic["by_offset"])
    seen: set = set()
    for manifest, want in zip(manifests, expected):
        rows = read_snapshot(lake, manifest)
        got = list(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist()))
        assert len(got) == len(set(got)), "a message landed twice in one interval"
        assert set(got) == want
        assert not seen & set(got), "intervals overlap"
        seen |= set(got)
        assert_rows_equal_produced(rows, topic["by_offset"], topic["name"])
        assert_manifest_matches_files(lake, manifest, rows)
    assert seen == set(topic["by_offset"]), "a produced message is in no interval"

    # offsets chain exactly: each interval starts where the previous one ended
    for part in (0, 1):
        ranges = [next(p for p in m["partitions"] if p["partition"] == part) for m in manifests]
        assert ranges[0]["start_offset"] == 0
        for before, after in zip(ranges, ranges[1:]):
            assert after["start_offset"] == before["end_offset"]
            assert after["start_from"] == "previous_interval"
        high = max(o for p, o in topic["by_offset"] if p == part) + 1
        assert ranges[-1]["end_offset"] == high
        for r in ranges:
            assert r["records"] == r["end_offset"] - r["start_offset"]
    # partition 1 ends interval 2 at a message of interval 3; partition 0 has none: high watermark
    p0, p1 = manifests[1]["partitions"]
    assert (p0["end_reason"], p1["end_reason"]) == ("high_watermark", "timestamp")
    # small batches and files were asked for: the interval is split over several files
    assert len(manifests[0]["files"]) > 2 and all(f["records"] <= 3 for f in manifests[0]["files"])
    assert manifests[0]["interval"] == {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z"}
    assert manifests[0]["path"] == "raw/landtest/land_orders/interval=20260101T000000Z_20260101T010000Z"


def test_late_messages_land_in_the_next_interval_not_lost(topic: dict, landed: dict) -> None:
    rows2 = read_snapshot(landed["lake"], landed["manifests"][1]).to_pylist()
    rows3 = read_snapshot(landed["lake"], landed["manifests"][2]).to_pylist()
    assert [r["key"] for r in rows2 if r["key"] == b"k-late1"] == [b"k-late1"]
    assert [r["key"] for r in rows3 if r["key"] == b"k-late2"] == [b"k-late2"]
    assert any(r["key"] == b"k-g" for r in rows2)  # the boundary message belongs to the later interval


def test_spark_reads_the_snapshot_with_its_kafka_source_schema(spark, landed: dict, topic: dict) -> None:
    lake = landed["lake"]
    folders = [lake.join(m["path"]) for m in landed["manifests"]]
    df = spark.read.parquet(*folders)
    assert df.schema == SPARK_KAFKA_SCHEMA
    assert df.count() == len(topic["by_offset"])
    first = df.where("partition = 0 AND offset = 0").collect()[0]
    assert first["timestamp"].replace(tzinfo=None) == T0.replace(tzinfo=None)  # session time zone is UTC
    assert [(h["key"], bytes(h["value"]) if h["value"] is not None else None) for h in first["headers"]] == \
        [("trace", b"\x00\xff"), ("empty", None)]


def test_relanding_returns_the_manifest_and_rewrites_nothing(kafka_bootstrap: str, tmp_path: Path) -> None:
    name = "land.reland"
    create_topic(kafka_bootstrap, name, partitions=2)
    produce(kafka_bootstrap, name, _messages(PLAN[:8]))
    lake = Lake.at(str(tmp_path))
    first = land_kafka(kafka_bootstrap, name, lake, PIPELINE, T0, T1)
    folder = Path(lake.join(first["path"]))
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()}
    # a late message for interval 1 arrives after it was landed: the snapshot must not change
    produce(kafka_bootstrap, name, [KafkaMessage(b"late", key=b"late", partition=0, timestamp_ms=minutes(10))])
    again = land_kafka(kafka_bootstrap, name, lake, PIPELINE, T0, T1)
    assert again == first
    after = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()}
    assert after == before
    # ...and the late message is in the next interval instead
    second = land_kafka(kafka_bootstrap, name, lake, PIPELINE, T1, T2)
    assert b"late" in read_snapshot(lake, second).column("key").to_pylist()


def test_out_of_order_landing_still_partitions_the_offsets(topic: dict, kafka_bootstrap: str, tmp_path: Path) -> None:
    """Interval 2 first (no manifest: scan from the broker's offsets_for_times hint, which Tansu
    answers with 0), then interval 1 (ends exactly where 2 starts), then 3 (chains on 2)."""
    lake = Lake.at(str(tmp_path))
    m2 = land_kafka(kafka_bootstrap, topic["name"], lake, PIPELINE, T1, T2)
    m1 = land_kafka(kafka_bootstrap, topic["name"], lake, PIPELINE, T0, T1)
    m3 = land_kafka(kafka_bootstrap, topic["name"], lake, PIPELINE, T2, T3)
    expected = expected_intervals(topic["by_offset"])
    for manifest, want in zip((m1, m2, m3), expected):
        rows = read_snapshot(lake, manifest)
        assert set(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist())) == want
    assert all(p["skipped_before_start"] > 0 for p in m2["partitions"])
    assert all(p["end_reason"] == "next_interval" for p in m1["partitions"])
    assert all(p["start_from"] == "previous_interval" for p in m3["partitions"])


def test_overlapping_interval_is_refused(topic: dict, kafka_bootstrap: str, landed: dict) -> None:
    with pytest.raises(LandError, match="overlaps"):
        land_kafka(kafka_bootstrap, topic["name"], landed["lake"], PIPELINE, T0, T0 + timedelta(minutes=90))


def test_interval_before_any_message_is_empty_but_readable(topic: dict, kafka_bootstrap: str, tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path))
    manifest = land_kafka(kafka_bootstrap, topic["name"], lake, PIPELINE, T0 - timedelta(hours=1), T0)
    assert manifest["totals"]["records"] == 0
    assert [(p["start_offset"], p["end_offset"]) for p in manifest["partitions"]] == [(0, 0), (0, 0)]
    rows = read_snapshot(lake, manifest)
    assert rows.num_rows == 0 and rows.schema == KAFKA_ARROW_SCHEMA


def test_a_kafka_landing_records_the_messages_outside_its_interval(topic: dict, kafka_bootstrap: str, landed: dict,
                                                                    tmp_path: Path) -> None:
    # every message of the topic is before, in or after each landed interval
    for manifest in landed["manifests"]:
        outside = manifest["outside"]
        assert outside["before"] + manifest["totals"]["records"] + outside["after"] == len(PLAN), outside
    first, last = landed["manifests"][0]["outside"], landed["manifests"][-1]["outside"]
    assert first["before"] == 0 and last["after"] == 0
    # an interval before any message lands nothing; the topic holds all its messages after it
    empty = land_kafka(kafka_bootstrap, topic["name"], Lake.at(str(tmp_path)), PIPELINE, T0 - timedelta(hours=1), T0)
    assert empty["totals"]["records"] == 0
    assert empty["outside"] == {"before": 0, "after": len(PLAN), "last_before": None, "first_after": iso(T0),
                                "earliest": None, "latest": None}


def test_unknown_topic_is_a_clear_error(kafka_bootstrap: str, tmp_path: Path) -> None:
    with pytest.raises(LandError, match="no.such.topic"):
        land_kafka(kafka_bootstrap, "no.such.topic", Lake.at(str(tmp_path)), PIPELINE, T0, T1,
                   {"allow.auto.create.topics": False})
    assert not any(Path(tmp_path).rglob("_manifest.json"))


def test_land_to_s3(topic: dict, kafka_bootstrap: str, s3_lake_env: str, landed: dict) -> None:
    create_bucket(s3_lake_env, "land-bucket")
    lake = Lake.at("s3://land-bucket/lake")
    m1 = land_kafka(kafka_bootstrap, topic["name"], lake, PIPELINE, T0, T1)
    m2 = land_kafka(kafka_bootstrap, topic["name"], lake, PIPELINE, T1, T2)  # chains via an S3 listing
    client = s3_client(s3_lake_env)
    for manifest, local in zip((m1, m2), landed["manifests"]):
        assert [(p["start_offset"], p["end_offset"]) for p in manifest["partitions"]] == \
            [(p["start_offset"], p["end_offset"]) for p in local["partitions"]]
        prefix = f"lake/{manifest['path']}/"
        keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket="land-bucket", Prefix=prefix)["Contents"])
        assert keys == sorted([prefix + f["name"] for f in manifest["files"]] + [prefix + "_manifest.json"])
        stored = json.loads(client.get_object(Bucket="land-bucket", Key=prefix + "_manifest.json")["Body"].read())
        assert stored == manifest
        tables = []
        for entry in manifest["files"]:
            data = client.get_object(Bucket="land-bucket", Key=prefix + entry["name"])["Body"].read()
            assert hashlib.sha256(data).hexdigest() == entry["sha256"]
            tables.append(pq.read_table(io.BytesIO(data)))
        rows = pa.concat_tables(tables)
        assert rows.schema == KAFKA_ARROW_SCHEMA
        assert rows.num_rows == manifest["totals"]["records"] == local["totals"]["records"]
        assert_rows_equal_produced(rows, topic["by_offset"], topic["name"])
    assert land_kafka(kafka_bootstrap, topic["name"], lake, PIPELINE, T0, T1) == m1


# ---- land_files ------------------------------------------------------------------------------------
def _dump(tmp: Path, seed: int = 3) -> list[dict]:
    """Two topics as Parquet dumps (several files, small row groups), timestamps shuffled across and
    beyond the three intervals. Returns every row written."""
    rng = random.Random(seed)
    rows_all = []
    for topic_name in ("shop.public.orders", "shop.public.customers"):
        next_offset = {0: 0, 1: 0, 2: 0}
        for file_no in range(2):
            rows = []
            for _ in range(25):
                part = rng.randrange(3)
                ts = T0 + timedelta(seconds=rng.randrange(-1800, 3 * 3600 + 1800))
                rows.append({"key": f"k{rng.randrange(9)}".encode(), "value": os.urandom(6), "topic": topic_name,
                             "partition": part, "offset": next_offset[part], "timestamp": ts, "timestampType": 0,
                             "headers": [{"key": "f", "value": str(file_no).encode()}] if rng.random() < .5 else None})
                next_offset[part] += 1
            rows.append({**rows[0], "offset": 10_000 + file_no, "timestamp": T1})  # exactly on a boundary
            path = tmp / topic_name / f"part-{file_no:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(rows, schema=KAFKA_ARROW_SCHEMA), path, row_group_size=7)
            rows_all += rows
    return rows_all


def test_land_files_partitions_messages_by_timestamp(tmp_path: Path) -> None:
    rows = _dump(tmp_path / "dumps")
    lake = Lake.at(str(tmp_path / "lake"))
    seen = []
    for start, end in INTERVALS:
        manifests = land_files(str(tmp_path / "dumps"), None, lake, PIPELINE, start, end, batch_rows=5, rows_per_file=8)
        assert [m["topic"] for m in manifests] == ["shop.public.customers", "shop.public.orders"]
        for manifest in manifests:
            landed_rows = read_snapshot(lake, manifest)
            assert landed_rows.schema == KAFKA_ARROW_SCHEMA
            got = sorted((r["partition"], r["offset"]) for r in landed_rows.to_pylist())
            want = sorted((r["partition"], r["offset"]) for r in rows
                          if r["topic"] == manifest["topic"] and start <= r["timestamp"] < end)
            assert got == want and got
            by_id = {(r["partition"], r["offset"]): r for r in rows if r["topic"] == manifest["topic"]}
            for r in landed_rows.to_pylist():
                assert {**r, "timestamp": r["timestamp"]} == by_id[(r["partition"], r["offset"])]
            assert_manifest_matches_files(lake, manifest, landed_rows)
            # files roll every 8 rows, however the input's batches and row groups fall
            assert [f["records"] for f in manifest["files"]] == [8] * (len(got) // 8) + ([len(got) % 8] if len(got) % 8 else [])
            for part in manifest["partitions"]:
                offsets = [o for p, o in got if p == part["partition"]]
                assert (part["start_offset"], part["end_offset"]) == (min(offsets), max(offsets) + 1)
            seen += [(manifest["topic"], *key) for key in got]
    in_any = [(r["topic"], r["partition"], r["offset"]) for r in rows if T0 <= r["timestamp"] < T3]
    assert sorted(seen) == sorted(in_any)  # each message in exactly one interval, none outside them

    # re-landing returns the committed manifests untouched; an asked-for topic without data is empty
    manifest_file = Path(lake.join(manifests[0]["path"])) / "_manifest.json"
    mtime = manifest_file.stat().st_mtime_ns
    again = land_files(str(tmp_path / "dumps"), ["shop.public.customers", "shop.public.none"], lake, PIPELINE, T2, T3)
    assert again[0] == manifests[0] and manifest_file.stat().st_mtime_ns == mtime
    assert again[1]["topic"] == "shop.public.none" and again[1]["totals"]["records"] == 0


def test_land_files_records_what_the_source_holds_outside_the_interval(tmp_path: Path) -> None:
    rows = _dump(tmp_path / "dumps")
    lake = Lake.at(str(tmp_path / "lake"))
    for start, end in [(T0 - timedelta(days=1), T0 - timedelta(hours=12)), (T1, T2)]:  # before the data, amid it
        for manifest in land_files(str(tmp_path / "dumps"), None, lake, PIPELINE, start, end):
            times = [r["timestamp"] for r in rows if r["topic"] == manifest["topic"]]
            before, after = [t for t in times if t < start], [t for t in times if t >= end]
            assert manifest["outside"] == {
                "before": len(before), "after": len(after), "last_before": iso(max(before)) if before else None,
                "first_after": iso(min(after)), "earliest": iso(min(times)), "latest": iso(max(times))}
            assert len(before) + manifest["totals"]["records"] + len(after) == len(times)


def test_cli_says_when_an_interval_lands_nothing_but_the_source_holds_messages_outside_it(tmp_path: Path,
                                                                                           capsys) -> None:
    rows = _dump(tmp_path / "dumps")
    code = main(["--from-files", str(tmp_path / "dumps"), "--lake", str(tmp_path / "lake"), "--pipeline", PIPELINE,
                 "--start", "2025-12-30T00:00:00Z", "--end", "2025-12-31T00:00:00Z"])  # a day before the data
    captured = capsys.readouterr()
    assert code == 0
    printed = [json.loads(line) for line in captured.out.splitlines()]
    assert [p["records"] for p in printed] == [0, 0]
    assert sum(p["outside"]["after"] for p in printed) == len(rows)
    first = iso(min(r["timestamp"] for r in rows))
    assert captured.err.strip() == (
        f"land: warning: 0 messages in [2025-12-30T00:00:00Z, 2025-12-31T00:00:00Z) but the source holds "
        f"{len(rows)} after it (the first at {first}): is this the interval you meant?")


def test_land_files_kafka_connect_layout_without_lineage_columns(tmp_path: Path) -> None:
    """A sink that kept only value + timestamp: the topic comes from topics/<topic>/partition=N/."""
    src = tmp_path / "topics"
    path = src / "events" / "partition=0" / "events+0+0000000000.parquet"
    path.parent.mkdir(parents=True)
    naive = pa.timestamp("ms")  # naive milliseconds, taken as UTC
    pq.write_table(pa.table({"value": [b"a", b"b", b"c"],
                             "timestamp": pa.array([ms(T0), ms(T1) - 1, ms(T1)], pa.int64()).cast(naive)}), path)
    (src / "events" / "_SUCCESS.parquet").write_bytes(b"not parquet: bookkeeping is skipped")
    lake = Lake.at(str(tmp_path / "lake"))
    [manifest] = land_files(str(src), None, lake, PIPELINE, T0, T1)
    rows = read_snapshot(lake, manifest)
    assert rows.schema == KAFKA_ARROW_SCHEMA
    assert rows.column("value").to_pylist() == [b"a", b"b"]
    assert set(rows.column("topic").to_pylist()) == {"events"}
    assert rows.column("timestamp").to_pylist()[1] == T1 - timedelta(milliseconds=1)


def test_land_files_from_s3_source(tmp_path: Path, s3_lake_env: str) -> None:
    rows = _dump(tmp_path / "dumps")
    create_bucket(s3_lake_env, "dumps-bucket")
    client = s3_client(s3_lake_env)
    for path in (tmp_path / "dumps").rglob("*.parquet"):
        client.upload_file(str(path), "dumps-bucket", f"export/{path.relative_to(tmp_path / 'dumps').as_posix()}")
    lake = Lake.at(str(tmp_path / "lake"))
    manifests = land_files("s3://dumps-bucket/export", ["shop.public.orders"], lake, PIPELINE, T1, T2)
    assert [m["topic"] for m in manifests] == ["shop.public.orders"]
    want = sum(1 for r in rows if r["topic"] == "shop.public.orders" and T1 <= r["timestamp"] < T2)
    assert manifests[0]["totals"]["records"] == read_snapshot(lake, manifests[0]).num_rows == want


def test_land_files_refuses_topics_sharing_a_folder_and_overlapping_intervals(tmp_path: Path) -> None:
    """"a.b" and "a_b" are one folder name: landing both would leave one topic's files; and an interval
    across a landed one would land its messages twice."""
    src = tmp_path / "dumps"
    for name in ("shop.a.b", "shop.a_b"):
        rows = [{"key": b"k", "value": name.encode(), "topic": name, "partition": 0, "offset": 0,
                 "timestamp": T0 + timedelta(minutes=10), "timestampType": 0, "headers": None}]
        (src / name).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=KAFKA_ARROW_SCHEMA), src / name / "part-0.parquet")
    lake = Lake.at(str(tmp_path / "lake"))
    with pytest.raises(LandError, match="would share the folder"):
        land_files(str(src), None, lake, PIPELINE, T0, T1)
    [manifest] = land_files(str(src), ["shop.a.b"], lake, PIPELINE, T0, T1)
    assert read_snapshot(lake, manifest).column("value").to_pylist() == [b"shop.a.b"]
    with pytest.raises(LandError, match="already holds topic 'shop.a.b'"):
        land_files(str(src), ["shop.a_b"], lake, PIPELINE, T0, T1)
    with pytest.raises(LandError, match="overlaps"):
        land_files(str(src), ["shop.a.b"], lake, PIPELINE, T0 + timedelta(minutes=30), T1 + timedelta(minutes=30))


def test_kafka_landing_never_chains_on_another_topics_offsets(topic: dict, kafka_bootstrap: str,
                                                               tmp_path: Path) -> None:
    """"land_orders" shares the folder of "land.orders": its next interval must not start where the
    other topic's interval ended."""
    lake = Lake.at(str(tmp_path))
    land_kafka(kafka_bootstrap, topic["name"], lake, PIPELINE, T0, T1)
    other = "land_orders"
    create_topic(kafka_bootstrap, other, partitions=1)
    produce(kafka_bootstrap, other, [KafkaMessage(b"x", partition=0, timestamp_ms=minutes(70))])
    with pytest.raises(LandError, match="already holds topic 'land.orders', not 'land_orders'"):
        land_kafka(kafka_bootstrap, other, lake, PIPELINE, T1, T2)


def test_a_landing_without_its_manifest_is_never_decoded(spark, tmp_path: Path) -> None:
    """A landing that failed leaves complete Parquet files and no manifest: the raw reader refuses the
    folder (a run would publish part of the interval as all of it, and its re-run nothing more); with
    its manifest, only the files it lists are read (not a failed attempt's leftovers)."""
    from jobs.lake.raw import RawInputError, read_raw

    rows = _dump(tmp_path / "dumps")
    lake = Lake.at(str(tmp_path / "lake"))
    [manifest] = land_files(str(tmp_path / "dumps"), ["shop.public.orders"], lake, PIPELINE, T0, T1)
    folder = Path(lake.join(manifest["path"]))
    want = sum(1 for r in rows if r["topic"] == "shop.public.orders" and T0 <= r["timestamp"] < T1)
    stray = pa.Table.from_pylist([rows[0]], schema=KAFKA_ARROW_SCHEMA)
    pq.write_table(stray, folder / "part-99999.parquet")  # a file of an earlier, failed attempt
    everything = str(tmp_path / "lake" / "raw" / PIPELINE)
    for raw in (str(folder), f"{folder.parent.parent}/*/{folder.name}", everything):
        assert read_raw(spark, raw).count() == want
    (folder / "_manifest.json").unlink()
    for raw in (str(folder), f"{folder.parent.parent}/*/{folder.name}", everything):
        with pytest.raises(RawInputError, match="landing did not finish"):
            read_raw(spark, raw).count()
    code = jobs_run("debezium", folder, tmp_path / "lake", PIPELINE, "r1")
    assert code == 2
    assert not (tmp_path / "lake" / "changes").exists()


# ---- command line ----------------------------------------------------------------------------------
def test_cli_lands_and_prints_one_line_per_topic(topic: dict, kafka_bootstrap: str, tmp_path: Path, capsys) -> None:
    code = main(["--kafka", kafka_bootstrap, "--topic", topic["name"], "--lake", str(tmp_path),
                 "--pipeline", PIPELINE, "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T01:00:00+00:00",
                 "--consumer-config", "client.id=land-cli-test"])
    out = capsys.readouterr().out
    assert code == 0
    summary = json.loads(out.strip())
    assert summary["topic"] == topic["name"]
    assert summary["records"] == len(expected_intervals(topic["by_offset"])[0])
    assert Path(summary["path"], "_manifest.json").is_file()


def test_cli_never_prints_consumer_settings(kafka_bootstrap: str, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("LAND_TEST_SECRET", "TOPSECRET-FROM-ENV")
    code = main(["--kafka", kafka_bootstrap, "--topic", "x", "--lake", str(tmp_path), "--pipeline", PIPELINE,
                 "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T01:00:00Z",
                 "--consumer-config", "security.protocol=TOPSECRET-ARG",
                 "--consumer-config-env", "sasl.password=LAND_TEST_SECRET"])
    captured = capsys.readouterr()
    assert code == 1
    assert "security.protocol" in captured.err  # the error names the setting...
    assert "TOPSECRET" not in captured.err + captured.out  # ...never its value


@pytest.mark.parametrize("argv", [
    ["--from-files", "x", "--lake", "l", "--pipeline", "p", "--start", "yesterday", "--end", "2026-01-01"],
    ["--from-files", "x", "--lake", "l", "--pipeline", "p", "--start", "2026-01-02", "--end", "2026-01-01"],
    ["--kafka", "h:1", "--lake", "l", "--pipeline", "p", "--start", "2026-01-01", "--end", "2026-01-02"],
    ["--lake", "l", "--pipeline", "p", "--start", "2026-01-01", "--end", "2026-01-02"],
])
def test_cli_unusable_arguments_exit_2(argv: list[str], tmp_path: Path, capsys) -> None:
    argv = [str(tmp_path / a) if a == "l" else a for a in argv]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip()
