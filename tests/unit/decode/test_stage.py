"""The decode stage as a whole: counts balance per message, the quarantine lands in the lake, the change
records are handed to the fold in memory, profiled for the change suite, and written as the lake layout
says (Parquet, a folder per table) only when kept."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from jobs.formats import DecodeOptions
from jobs.lake.layout import Lake
from jobs.model.record import QUARANTINE_SCHEMA
from jobs.model.reports import DecodeReport, MessageCounts
from jobs.stages import RunContext, read_changes, run_decode
from tests.support.decoders import raw_frame

SOURCE = {"connector": "postgresql", "db": "shop", "schema": "public", "table": "items"}


def _event(op, before, after, lsn):
    return json.dumps({"before": before, "after": after, "source": {**SOURCE, "lsn": lsn}, "op": op, "ts_ms": lsn})


def test_decode_stage_balances_counts_and_writes_records_and_quarantine(spark, tmp_path):
    values = [
        _event("c", None, {"id": "1", "name": "same", "note": "same"}, 10),  # keyed insert: one record
        # a keyless update: the whole row is the identity, so it is two records (delete + insert)
        _event("u", {"id": "2", "name": "same", "note": "old"}, {"id": "2", "name": "same", "note": "same"}, 20),
        "{not json",  # quarantined, with its bytes
        None,  # a tombstone: ignored
    ]
    keys = ['{"id": "1"}', None, None, '{"id": "1"}']
    raw_dir = tmp_path / "raw"
    raw_frame(spark, values, keys=keys).write.parquet(str(raw_dir))
    ctx = RunContext(Lake.at(str(tmp_path / "lake")), "p", "r1")

    decoded = run_decode(spark, ctx, "debezium", str(raw_dir), DecodeOptions(), keep_changes=True)

    report = ctx.read_report(DecodeReport)
    assert decoded.report == report  # the report handed to the fold is the one written
    assert report.total == MessageCounts.of(landed=4, decoded=2, quarantined=1, ignored=1, records=3)
    assert report.balanced
    # each table's messages name the topics they came from (what its columns' lineage reads)
    assert {t: c.topics for t, c in report.tables.items() if c.decoded} == {"shop.public.items": ("t",)}
    in_memory = decoded.changes.collect()
    decoded.release()
    assert sorted((r["op"], r["offset"]) for r in in_memory) == [("DELETE", 1), ("INSERT", 0), ("INSERT", 1)]
    # the kept copy is the same records
    by_id = lambda rows: sorted((r.asDict(recursive=True) for r in rows), key=lambda r: r["event_id"])  # noqa: E731
    assert by_id(read_changes(spark, ctx).collect()) == by_id(in_memory)
    assert report.changes_kept == Lake.changes_dir("p", "r1")
    # the change suite's profile: per op and phase, the records and the nulls of table id and format
    assert list(report.record_profile) == [
        {"values": {"op": "DELETE", "phase": "CDC"}, "records": 1, "nulls": {"table_id": 0, "format": 0}},
        {"values": {"op": "INSERT", "phase": "CDC"}, "records": 2, "nulls": {"table_id": 0, "format": 0}}]

    quarantine = spark.read.parquet(ctx.lake.spark_path(Lake.quarantine_dir("p", "r1"))).collect()
    assert [(q["offset"], bytes(q["value"])) for q in quarantine] == [(2, b"{not json")]

    table_dir = tmp_path / "lake" / Lake.changes_dir("p", "r1") / "table=shop.public.items"
    files = sorted(table_dir.glob("*.parquet"))
    assert files and sum(pq.ParquetFile(f).metadata.num_rows for f in files) == 3
    # dictionary encoding kept for the repetitive columns (op, column names), not for row values, which
    # are mostly unique in real data (here they repeat, so Parquet would have chosen a dictionary)
    meta = pq.ParquetFile(files[0]).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert any("DICTIONARY" in e for e in encodings["op"])
    assert any("DICTIONARY" in e for e in encodings["after.key_value.key"])
    assert not any("DICTIONARY" in e for e in encodings["after.key_value.value"])
    # zstd, not Spark's default snappy (about half the bytes for every later stage to read)
    assert {meta.column(i).compression for i in range(meta.num_columns)} == {"ZSTD"}


def _held_rdds(spark) -> set[int]:
    return {info.id() for info in spark.sparkContext._jsc.sc().getRDDStorageInfo()}


def test_decode_stage_without_quarantine_writes_an_empty_one_keeps_no_records_and_holds_nothing_after(
        spark, tmp_path):
    raw_dir = tmp_path / "raw"
    raw_frame(spark, [_event("c", None, {"id": "1"}, 10), _event("c", None, {"id": "2"}, 11)],
              keys=['{"id": "1"}', '{"id": "2"}']).write.parquet(str(raw_dir))
    ctx = RunContext(Lake.at(str(tmp_path / "lake")), "p", "r1")
    held_before = _held_rdds(spark)

    decoded = run_decode(spark, ctx, "debezium", str(raw_dir), DecodeOptions())

    report = decoded.report
    assert report.total.quarantined == 0 and report.total.records == 2
    quarantine = spark.read.parquet(ctx.lake.spark_path(Lake.quarantine_dir("p", "r1")))
    assert quarantine.count() == 0
    assert quarantine.schema == QUARANTINE_SCHEMA
    # the records are held for the fold (a cache), not written to the lake
    assert decoded.changes.count() == 2 and not (tmp_path / "lake" / "changes").exists()
    assert report.changes_kept is None
    with pytest.raises(FileNotFoundError, match="python -m jobs decode` writes them"):
        read_changes(spark, ctx)
    # the decoded frame was computed once and held while its parts were taken; the cache goes on release
    decoded.release()
    assert _held_rdds(spark) <= held_before
