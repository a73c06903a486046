"""The decode stage as a whole: counts balance per message, records and quarantine land in the lake,
and the change records are written as the lake layout says (Parquet, a folder per table)."""
from __future__ import annotations

import json

import pyarrow.parquet as pq

from jobs.canonical import QUARANTINE_SCHEMA
from jobs.decoders import DecodeOptions
from jobs.lake import Lake
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

    returned = run_decode(spark, ctx, "debezium", str(raw_dir), DecodeOptions())

    report = ctx.read_report("decode.json")
    assert returned == report
    assert report["total"] == {"landed": 4, "decoded": 2, "quarantined": 1, "ignored": 1, "records": 3}
    assert report["balanced"]
    changes = read_changes(spark, ctx).collect()
    assert sorted((r["op"], r["offset"]) for r in changes) == [("DELETE", 1), ("INSERT", 0), ("INSERT", 1)]

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


def test_decode_stage_without_quarantine_writes_an_empty_one_and_holds_nothing_after(spark, tmp_path):
    raw_dir = tmp_path / "raw"
    raw_frame(spark, [_event("c", None, {"id": "1"}, 10), _event("c", None, {"id": "2"}, 11)],
              keys=['{"id": "1"}', '{"id": "2"}']).write.parquet(str(raw_dir))
    ctx = RunContext(Lake.at(str(tmp_path / "lake")), "p", "r1")
    held_before = _held_rdds(spark)

    report = run_decode(spark, ctx, "debezium", str(raw_dir), DecodeOptions())

    assert report["total"]["quarantined"] == 0 and report["total"]["records"] == 2
    quarantine = spark.read.parquet(ctx.lake.spark_path(Lake.quarantine_dir("p", "r1")))
    assert quarantine.count() == 0
    assert quarantine.schema == QUARANTINE_SCHEMA
    # the decoded frame was computed once and held while written; its blocks are gone with the stage
    assert _held_rdds(spark) <= held_before
    assert len(read_changes(spark, ctx).collect()) == 2
