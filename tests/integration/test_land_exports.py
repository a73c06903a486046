"""land from exports other tools already wrote: a Kafka Connect S3 sink's objects and Azure Event Hubs
Capture Avro files, from a local folder and from moto's S3.

The samples (tests/resources/kafka_connect_s3/, tests/resources/eventhubs_capture/, their README.md say
which documents define them) are copied to a temporary folder or bucket; the tests add files there to
show how the next landing chains on the previous one.
"""
from __future__ import annotations

import gzip
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import fastavro
import pyarrow.parquet as pq
import pytest

from jobs.lake.layout import Lake
from jobs.land.command import KAFKA_ARROW_SCHEMA, MANIFEST, LandError, land_connect_s3, land_eventhubs_capture, main
from tests.support.servers import KafkaMessage, create_bucket, create_topic, produce, s3_client

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
CONNECT = RESOURCES / "kafka_connect_s3"
CAPTURE = RESOURCES / "eventhubs_capture"
ORDERS, RAW = "shop.public.orders", "shop.raw"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1, T2, T3 = (T0 + timedelta(minutes=m) for m in (5, 10, 15))
PIPELINE = "exports"


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.py", "*.md", "__pycache__"))
    return target


def _upload(endpoint: str, bucket: str, source: Path, prefix: str) -> None:
    create_bucket(endpoint, bucket)
    client = s3_client(endpoint)
    for path in sorted(source.rglob("*")):
        if path.is_file() and path.suffix not in (".py", ".md"):
            client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(source)}", Body=path.read_bytes())


def _rows(lake_root: Path, manifest: dict) -> list[dict]:
    folder = lake_root / manifest["path"]
    rows = []
    for entry in manifest["files"]:
        table = pq.read_table(folder / entry["name"])
        assert table.schema.equals(KAFKA_ARROW_SCHEMA, check_metadata=False)
        rows.extend(table.to_pylist())
    return sorted(rows, key=lambda r: (r["partition"], r["offset"]))


def _parts(manifest: dict) -> dict[int, tuple]:
    return {p["partition"]: (p["start_offset"], p["end_offset"], p["records"]) for p in manifest["partitions"]}


def _lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.split(b"\n")[:-1]


def _sink_file(root: Path, topic: str, partition: int, start: int, lines: list[bytes], ext: str = ".json",
               compress: bool = False) -> Path:
    folder = root / "topics" / topic / f"partition={partition}"
    folder.mkdir(parents=True, exist_ok=True)
    data = b"".join(line + b"\n" for line in lines)
    path = folder / f"{topic}+{partition}+{start:010d}{ext}{'.gz' if compress else ''}"
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


# ---- Kafka Connect S3 sink -----------------------------------------------------------------------
def test_connect_sink_output_lands_with_offsets_keys_and_exact_values(tmp_path: Path) -> None:
    source = _copy(CONNECT, tmp_path / "sink")
    lake = Lake.at(str(tmp_path / "lake"))
    manifests = land_connect_s3(str(source), None, lake, PIPELINE, T0, T1)
    assert [m["topic"] for m in manifests] == [ORDERS, RAW]
    orders, raw = manifests
    assert orders["source"] == {"kind": "connect_s3", "path": str(source)}
    assert _parts(orders) == {0: (0, 5, 5), 1: (0, 2, 2)} and orders["totals"]["records"] == 7
    assert _parts(raw) == {0: (0, 4, 4)} and raw["totals"]["records"] == 4
    assert all(p["start_from"] == "earliest_file" and p["not_json"] == 0 for p in orders["partitions"])

    rows = _rows(tmp_path / "lake", orders)
    p0 = source / "topics" / ORDERS / "partition=0"
    values = _lines(p0 / f"{ORDERS}+0+0000000000.json") + _lines(p0 / f"{ORDERS}+0+0000000003.json.gz")
    keys = _lines(p0 / f"{ORDERS}+0+0000000000.keys.json") + _lines(p0 / f"{ORDERS}+0+0000000003.keys.json.gz")
    landed_p0 = [r for r in rows if r["partition"] == 0]
    assert [r["offset"] for r in landed_p0] == [0, 1, 2, 3, 4]  # start offset of the file + line number
    # the JSON text byte for byte; the sink writes a tombstone as null
    assert [r["value"] for r in landed_p0] == [None if v == b"null" else v for v in values]
    assert landed_p0[3]["value"] is None and "ü".encode() in landed_p0[1]["value"]
    assert [r["key"] for r in landed_p0] == keys
    assert {(r["topic"], r["timestamp"], r["timestampType"], r["headers"]) for r in rows} == \
        {(ORDERS, None, -1, None)}  # the sink keeps no timestamp nor headers

    raw_rows = _rows(tmp_path / "lake", raw)
    assert [(r["offset"], r["value"], r["key"]) for r in raw_rows] == \
        [(0, b"\x00\xff\x01raw-0", None), (1, b"", None), (2, b"plain text 2", None), (3, b"\xde\xad\xbe\xef", None)]


def test_connect_next_landing_takes_only_what_the_sink_wrote_since(tmp_path: Path) -> None:
    source = _copy(CONNECT, tmp_path / "sink")
    lake = Lake.at(str(tmp_path / "lake"))
    first = land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T0, T1)[0]
    manifest_file = tmp_path / "lake" / first["path"] / MANIFEST
    before = manifest_file.stat().st_mtime_ns

    # the sink goes on: partition 0 from offset 5 (compacted: offsets 7, 8 missing), partition 2 appears
    _sink_file(source, ORDERS, 0, 5, [b'{"op":"c","n":5}', b'{"op":"c","n":6}'])
    _sink_file(source, ORDERS, 0, 9, [b'{"op":"c","n":9}'], compress=True)
    _sink_file(source, ORDERS, 2, 0, [b'{"op":"c","n":"p2"}'])
    second = land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T1, T2)[0]
    assert _parts(second) == {0: (5, 10, 3), 1: (2, 2, 0), 2: (0, 1, 1)}
    by_partition = {p["partition"]: p for p in second["partitions"]}
    assert by_partition[0]["start_from"] == "previous_interval"
    assert by_partition[0]["previous_interval"] == "interval=20260101T000000Z_20260101T000500Z"
    assert by_partition[0]["files_read"] == 2  # the landed files are not read again
    assert by_partition[2]["start_from"] == "earliest_file"
    assert [(r["partition"], r["offset"]) for r in _rows(tmp_path / "lake", second)] == [(0, 5), (0, 6), (0, 9), (2, 0)]

    # landing an interval again returns its manifest and rewrites nothing, whatever the sink wrote since
    _sink_file(source, ORDERS, 0, 10, [b'{"op":"c","n":10}'])
    assert land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T0, T1) == [first]
    assert land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T1, T2) == [second]
    assert manifest_file.stat().st_mtime_ns == before
    with pytest.raises(LandError, match="overlaps the landed"):
        land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T0 + timedelta(minutes=1), T1 + timedelta(minutes=1))
    # an interval landed out of order stops where the next landed one starts: nothing twice
    third = land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T3, T3 + timedelta(minutes=5))[0]
    assert _parts(third)[0] == (10, 11, 1)


def test_connect_landing_of_nothing_new_records_what_was_written_before(tmp_path: Path) -> None:
    source = _copy(CONNECT, tmp_path / "sink")
    lake = Lake.at(str(tmp_path / "lake"))
    first = land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T0, T1)[0]
    assert first["outside"] == {"before": 0, "after": 0, "last_before": None, "first_after": None,
                                "earliest": None, "latest": None}
    quiet = land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T1, T2)[0]  # the sink wrote nothing since
    assert quiet["totals"]["records"] == 0
    assert quiet["outside"]["before"] == first["totals"]["records"] and quiet["outside"]["after"] == 0


def test_connect_backfill_before_a_landed_interval_takes_nothing_twice(tmp_path: Path) -> None:
    source = _copy(CONNECT, tmp_path / "sink")
    lake = Lake.at(str(tmp_path / "lake"))
    later = land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T1, T2)[0]
    assert later["totals"]["records"] == 7
    earlier = land_connect_s3(str(source), [ORDERS], lake, PIPELINE, T0, T1)[0]
    assert earlier["totals"]["records"] == 0
    assert {p["end_reason"] for p in earlier["partitions"]} == {"next_interval"}
    assert len(earlier["files"]) == 1 and earlier["files"][0]["name"] == "part-empty.parquet"


def test_connect_malformed_input_is_landed_or_named(tmp_path: Path) -> None:
    source = tmp_path / "sink"
    lake = Lake.at(str(tmp_path / "lake"))
    lines = [b'{"ok":1}', b"not json {", b'{"ok":2}']
    _sink_file(source, "t", 0, 0, lines)
    manifest = land_connect_s3(str(source), None, lake, PIPELINE, T0, T1)[0]
    # a line that is not JSON keeps its bytes (decode quarantines it with its reason) and is counted
    assert [r["value"] for r in _rows(tmp_path / "lake", manifest)] == lines
    assert manifest["partitions"][0]["not_json"] == 1 and manifest["totals"]["records"] == 3

    bad = _sink_file(source, "t", 0, 3, [b'{"ok":3}'])
    bad.rename(bad.with_name(bad.name + ".gz"))  # named .gz, not gzip
    with pytest.raises(LandError, match=r"t\+0\+0000000003\.json\.gz: not a readable gzip file"):
        land_connect_s3(str(source), None, lake, PIPELINE, T1, T2)
    assert not (tmp_path / "lake" / "raw" / PIPELINE / "t" / "interval=20260101T000500Z_20260101T001000Z"
                / MANIFEST).exists()
    bad.with_name(bad.name + ".gz").unlink()

    # a ByteArrayFormat value holding the separator looks like two records: refused, naming the file
    _sink_file(source, "b", 0, 0, [b"one", b"two\nstill two"], ext=".bin")
    _sink_file(source, "b", 0, 2, [b"three"], ext=".bin")
    with pytest.raises(LandError, match=r"b\+0\+0000000000\.bin: 3 records but the next file starts at offset 2"):
        land_connect_s3(str(source), ["b"], lake, PIPELINE, T1, T2)

    # a format land cannot read is named rather than skipped
    _sink_file(source, "a", 0, 0, [b"x"], ext=".avro")
    with pytest.raises(LandError, match=r"a\+0\+0000000000\.avro: format '\.avro' is not supported"):
        land_connect_s3(str(source), ["a"], lake, PIPELINE, T1, T2)


def test_connect_cli_with_a_separator_of_its_own(tmp_path: Path, capsys) -> None:
    source = tmp_path / "sink"
    folder = source / "topics" / "rs" / "partition=0"
    folder.mkdir(parents=True)
    (folder / "rs+0+0000000000.bin").write_bytes(b"a\nb\x1ec\x1e")  # format.bytearray.separator=\u001e
    code = main(["--from-connect-s3", str(source), "--lake", str(tmp_path / "lake"), "--pipeline", PIPELINE,
                 "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T00:05:00Z", "--topics", "rs,other",
                 "--bytearray-separator", "\\x1e"])
    assert code == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(p["topic"], p["records"]) for p in printed] == [("other", 0), ("rs", 2)]
    manifest = json.loads((Path(printed[1]["path"]) / MANIFEST).read_text())
    assert [r["value"] for r in _rows(tmp_path / "lake", manifest)] == [b"a\nb", b"c"]


def test_connect_sink_output_on_s3(tmp_path: Path, s3_lake_env: str) -> None:
    _upload(s3_lake_env, "connect-sink", CONNECT, "kafka-connect")
    lake = Lake.at(str(tmp_path / "lake"))
    manifests = land_connect_s3("s3://connect-sink/kafka-connect", None, lake, PIPELINE, T0, T1)
    assert [(m["topic"], _parts(m)) for m in manifests] == \
        [(ORDERS, {0: (0, 5, 5), 1: (0, 2, 2)}), (RAW, {0: (0, 4, 4)})]
    local = land_connect_s3(str(CONNECT), None, Lake.at(str(tmp_path / "lake2")), PIPELINE, T0, T1)
    for on_s3, here in zip(manifests, local, strict=True):
        assert _rows(tmp_path / "lake", on_s3) == _rows(tmp_path / "lake2", here)
    assert land_connect_s3("s3://connect-sink/kafka-connect", None, lake, PIPELINE, T0, T1) == manifests


# ---- Event Hubs Capture --------------------------------------------------------------------------
def _capture_schema() -> dict:
    with open(CAPTURE / "cdcns/orders/0/2026/01/01/00/00/00.avro", "rb") as fh:
        return fastavro.reader(fh).writer_schema


def _capture_file(root: Path, partition: int, window: str, events: list[dict], hub: str = "orders") -> Path:
    path = root / "cdcns" / hub / str(partition) / f"{window}.avro"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        fastavro.writer(out, _capture_schema(), events)
    return path


def _event(seq: int, enqueued: str, body: bytes | None = b"{}") -> dict:
    return {"SequenceNumber": seq, "Offset": str(seq * 100), "EnqueuedTimeUtc": enqueued,
            "SystemProperties": {}, "Properties": {}, "Body": body}


def _us(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC)


def test_capture_lands_by_enqueued_time(tmp_path: Path) -> None:
    source = _copy(CAPTURE, tmp_path / "capture")
    lake = Lake.at(str(tmp_path / "lake"))
    first = land_eventhubs_capture(str(source), None, lake, PIPELINE, T0, T1)
    assert [m["topic"] for m in first] == ["orders"]
    first = first[0]
    assert first["source"] == {"kind": "eventhubs_capture", "path": str(source), "namespace": "cdcns"}
    assert _parts(first) == {0: (0, 3, 3), 1: (0, 1, 1)}
    p0 = {p["partition"]: p for p in first["partitions"]}[0]
    assert (p0["end_reason"], p0["min_timestamp"], p0["max_timestamp"]) == \
        ("timestamp", "2026-01-01T00:00:10Z", "2026-01-01T00:04:59Z")

    rows = _rows(tmp_path / "lake", first)
    assert [(r["partition"], r["offset"]) for r in rows] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert [r["timestamp"] for r in rows] == [_us(datetime(2026, 1, 1, 0, 0, 10)), _us(datetime(2026, 1, 1, 0, 2)),
                                              _us(datetime(2026, 1, 1, 0, 4, 59)), _us(datetime(2026, 1, 1, 0, 1))]
    assert {(r["topic"], r["timestampType"]) for r in rows} == {("orders", 1)}  # enqueued: log-append time
    assert rows[0]["value"] == b'{"op":"c","after":{"id":1}}' and rows[0]["key"] == b"order-1"
    assert rows[0]["headers"] == [{"key": "source", "value": b"shop"}, {"key": "attempt", "value": b"2"}]
    assert rows[1]["value"] == b"\x00\xff binary body" and rows[1]["key"] is None
    assert rows[1]["headers"] == [{"key": "blob", "value": b"\x01\x02"}, {"key": "ratio", "value": b"0.5"}]
    assert rows[2]["value"] is None and rows[2]["headers"] is None

    second = land_eventhubs_capture(str(source), ["orders"], lake, PIPELINE, T1, T2)[0]
    assert _parts(second) == {0: (3, 5, 2), 1: (1, 1, 0)}  # 00:05:00 exactly: the second interval
    assert {p["start_from"] for p in second["partitions"]} == {"previous_interval"}
    assert [r["timestamp"] for r in _rows(tmp_path / "lake", second)] == \
        [_us(datetime(2026, 1, 1, 0, 5)), _us(datetime(2026, 1, 1, 0, 7, 30))]


def test_capture_late_events_land_in_the_next_interval_and_relanding_is_a_noop(tmp_path: Path) -> None:
    source = _copy(CAPTURE, tmp_path / "capture")
    lake = Lake.at(str(tmp_path / "lake"))
    land_eventhubs_capture(str(source), None, lake, PIPELINE, T0, T1)
    second = land_eventhubs_capture(str(source), None, lake, PIPELINE, T1, T2)[0]
    manifest_file = tmp_path / "lake" / second["path"] / MANIFEST
    before = manifest_file.stat().st_mtime_ns

    # partition 1's capture was late: an event enqueued in [T1, T2) is written after that landing, in
    # the window of 00:10, beside one enqueued in [T2, T3)
    _capture_file(source, 1, "2026/01/01/00/10/00", [_event(1, "1/1/2026 12:09:59 AM", b"late"),
                                                     _event(2, "1/1/2026 12:11:00 AM", b"on time")])
    assert land_eventhubs_capture(str(source), None, lake, PIPELINE, T1, T2) == [second]
    assert manifest_file.stat().st_mtime_ns == before
    third = land_eventhubs_capture(str(source), None, lake, PIPELINE, T2, T3)[0]
    assert _parts(third) == {0: (5, 5, 0), 1: (1, 3, 2)}  # late, never lost, never twice
    assert [r["value"] for r in _rows(tmp_path / "lake", third)] == [b"late", b"on time"]
    with pytest.raises(LandError, match="overlaps the landed"):
        land_eventhubs_capture(str(source), None, lake, PIPELINE, T0, T2)


def test_capture_first_landing_starts_at_the_interval_and_reads_no_old_window(tmp_path: Path) -> None:
    source = _copy(CAPTURE, tmp_path / "capture")
    lake = Lake.at(str(tmp_path / "lake"))
    _capture_file(source, 1, "2025/12/31/20/00/00", [_event(0, "12/31/2025 8:00:00 PM")])  # seq 0 again: old
    manifest = land_eventhubs_capture(str(source), None, lake, PIPELINE, T1, T2)[0]
    parts = {p["partition"]: p for p in manifest["partitions"]}
    assert (parts[0]["skipped_before_start"], parts[0]["start_offset"], parts[0]["records"]) == (3, 3, 2)
    assert parts[1]["files_read"] == 2  # the window of 20:00 is older than start - lookback: not read


def test_capture_landing_records_the_events_outside_its_interval(tmp_path: Path) -> None:
    source = _copy(CAPTURE, tmp_path / "capture")
    lake = Lake.at(str(tmp_path / "lake"))
    # ten minutes before the first event: nothing lands, each partition stops at its first event
    early = land_eventhubs_capture(str(source), None, lake, PIPELINE, T0 - timedelta(minutes=10), T0)[0]
    assert early["totals"]["records"] == 0
    assert early["outside"] == {"before": 0, "after": None, "last_before": None, "first_after": "2026-01-01T00:00:10Z",
                                "earliest": None, "latest": None}  # how many follow is not read
    # after every event: they were all read before the interval, and none follows
    late = land_eventhubs_capture(str(source), None, lake, PIPELINE, T3, T3 + timedelta(minutes=5))[0]
    events = sum(1 for path in source.rglob("*.avro") for _ in fastavro.reader(path.open("rb")))
    assert late["totals"]["records"] == 0
    assert late["outside"] == {"before": events, "after": 0, "last_before": "2026-01-01T00:07:30Z", "first_after": None,
                               "earliest": None, "latest": None}


def test_capture_damaged_files_fail_naming_the_file(tmp_path: Path) -> None:
    source = _copy(CAPTURE, tmp_path / "capture")
    lake = Lake.at(str(tmp_path / "lake"))
    damaged = source / "cdcns/orders/0/2026/01/01/00/05/00.avro"
    damaged.write_bytes(damaged.read_bytes()[:-30])  # cut short, as an interrupted copy leaves it
    with pytest.raises(LandError, match=r"cdcns/orders/0/2026/01/01/00/05/00\.avro: not a readable Avro file"):
        land_eventhubs_capture(str(source), None, lake, PIPELINE, T1, T2)
    folder = tmp_path / "lake" / "raw" / PIPELINE / "orders" / "interval=20260101T000500Z_20260101T001000Z"
    assert not (folder / MANIFEST).exists()  # nothing committed: the interval is landed again once repaired

    shutil.copy(CAPTURE / "cdcns/orders/0/2026/01/01/00/05/00.avro", damaged)
    assert land_eventhubs_capture(str(source), None, lake, PIPELINE, T1, T2)[0]["totals"]["records"] == 2

    _capture_file(source, 0, "2026/01/01/00/15/00", [_event(5, "yesterday")])
    with pytest.raises(LandError, match=r"00/15/00\.avro \(SequenceNumber 5\): EnqueuedTimeUtc 'yesterday'"):
        land_eventhubs_capture(str(source), None, lake, PIPELINE, T3, T3 + timedelta(minutes=5))
    (source / "cdcns/orders/0/2026/01/01/00/15/00.avro").write_bytes(b"Obj\x01 not avro")
    with pytest.raises(LandError, match=r"00/15/00\.avro: not a readable Avro file"):
        land_eventhubs_capture(str(source), None, lake, PIPELINE, T3, T3 + timedelta(minutes=5))


def test_capture_time_formats_and_cli(tmp_path: Path, capsys) -> None:
    source = tmp_path / "capture"
    _capture_file(source, 0, "2026/01/01/12/00/00", [_event(0, "1/1/2026 12:00:00 PM"),  # noon
                                                     _event(1, "1/1/2026 1:30:05 PM"),
                                                     _event(2, "2026-01-01T13:45:00.1234567Z")], hub="hub2")
    code = main(["--from-eventhubs-capture", str(source), "--lake", str(tmp_path / "lake"), "--pipeline", PIPELINE,
                 "--start", "2026-01-01T12:00:00Z", "--end", "2026-01-01T14:00:00Z"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["topic"], printed["records"]) == ("hub2", 3)
    manifest = json.loads((Path(printed["path"]) / MANIFEST).read_text())
    assert [r["timestamp"] for r in _rows(tmp_path / "lake", manifest)] == \
        [_us(datetime(2026, 1, 1, 12)), _us(datetime(2026, 1, 1, 13, 30, 5)),
         _us(datetime(2026, 1, 1, 13, 45, 0, 123456))]


def test_capture_on_s3(tmp_path: Path, s3_lake_env: str) -> None:
    _upload(s3_lake_env, "capture-container", CAPTURE, "archive")
    lake = Lake.at("s3://capture-container/lake")
    manifest = land_eventhubs_capture("s3://capture-container/archive", None, lake, PIPELINE, T0, T1)[0]
    assert _parts(manifest) == {0: (0, 3, 3), 1: (0, 1, 1)}
    client = s3_client(s3_lake_env)
    landed = client.get_object(Bucket="capture-container", Key=f"lake/{manifest['path']}/{MANIFEST}")
    assert json.loads(landed["Body"].read()) == manifest
    target = tmp_path / "part.parquet"
    first_file = next(f["name"] for f in manifest["files"] if f["partition"] == 0)
    target.write_bytes(client.get_object(Bucket="capture-container",
                                         Key=f"lake/{manifest['path']}/{first_file}")["Body"].read())
    assert [r["offset"] for r in pq.read_table(target).to_pylist()] == [0, 1, 2]
    assert land_eventhubs_capture("s3://capture-container/archive", None, lake, PIPELINE, T0, T1) == [manifest]


# ---- Kafka with its settings from an Airflow connection ------------------------------------------
def test_kafka_landing_with_settings_from_an_airflow_connection(kafka_bootstrap: str, tmp_path: Path, capsys,
                                                                 monkeypatch) -> None:
    topic = "land-exports-airflow-conn"
    create_topic(kafka_bootstrap, topic)
    produce(kafka_bootstrap, topic, [KafkaMessage(b"v%d" % i, timestamp_ms=int((T0 + timedelta(minutes=i))
                                                                                .timestamp() * 1000))
                                     for i in range(3)])
    monkeypatch.setenv("AIRFLOW_CONN_LAND_KAFKA", json.dumps(
        {"conn_type": "kafka", "extra": {"bootstrap.servers": kafka_bootstrap, "client.id": "land-from-conn"}}))
    code = main(["--kafka-conn-id", "land_kafka", "--topic", topic, "--lake", str(tmp_path / "lake"),
                 "--pipeline", PIPELINE, "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T00:02:00Z"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    manifest = json.loads((Path(printed["path"]) / MANIFEST).read_text())
    assert manifest["source"] == {"kind": "kafka"}  # nothing of the connection in the manifest
    assert _parts(manifest) == {0: (0, 2, 2)}
    assert [r["value"] for r in _rows(tmp_path / "lake", manifest)] == [b"v0", b"v1"]
