"""A PostgreSQL primary-key change whose row holds an unchanged TOAST value (seed 002): Debezium sends it
as a DELETE of the old key (header ``__debezium.newkey``) and a CREATE of the new key (header
``__debezium.oldkey``), both at the UPDATE's LSN, and PostgreSQL leaves the unchanged TOAST value out of
the new row (``__debezium_unavailable_value``). The row under the new key keeps that value: the old
key's row moves to the new key. The two messages have different keys, so they may land in different
partitions. Expected states are written out by hand from the messages."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from jobs.lake.raw import KAFKA_SCHEMA
from tests.support.pipeline_runs import jobs_run
from tests.support.replay import published_rows

SOURCE = {"version": "2.7.0.Final", "connector": "postgresql", "name": "pg", "db": "shop", "schema": "public",
          "table": "docs", "snapshot": "false", "txId": 600}
UNAVAILABLE = "__debezium_unavailable_value"


def event(op: str, lsn: int, before: dict | None, after: dict | None) -> str:
    source = {**SOURCE, "lsn": lsn, "sequence": json.dumps([str(lsn - 50), str(lsn)]), "ts_ms": 1730000000000 + lsn}
    return json.dumps({"before": before, "after": after, "source": source, "op": op, "ts_ms": 1730000000000 + lsn})


def key(i: int) -> str:
    return json.dumps({"id": i})


def land(spark, path: Path, messages: list[tuple], first_offset: int) -> Path:
    """``messages``: (partition, key, value, headers) in the order the topic got them."""
    at = datetime(2026, 11, 1, tzinfo=UTC)
    rows = [(k.encode(), v.encode(), "pg.public.docs", part, first_offset + i, at, 0,
             [{"key": hk, "value": hv.encode()} for hk, hv in (headers or {}).items()] or None)
            for i, (part, k, v, headers) in enumerate(messages)]
    spark.createDataFrame(rows, KAFKA_SCHEMA).coalesce(1).write.parquet(str(path))
    return path


def run(lake: Path, run_id: str, raw: Path) -> None:
    assert jobs_run("debezium", raw, lake, "p", run_id) == 0


def key_change(lsn: int, old: int, new: int, row: dict, old_key_header: str | None = None) -> list[tuple]:
    """The delete of ``old`` (partition 0) and the create of ``new`` (partition 1) without the TOAST value."""
    return [
        (0, key(old), event("d", lsn, {"id": old, "n": None, "body": None}, None), {"__debezium.newkey": key(new)}),
        (1, key(new), event("c", lsn, None, {**row, "id": new, "body": UNAVAILABLE}),
         {"__debezium.oldkey": old_key_header or key(old)}),
    ]


def test_a_key_change_keeps_the_unchanged_toast_value_in_the_same_run_and_across_runs(spark, tmp_path):
    big = "x" * 3000
    lake = tmp_path / "lake"
    run(lake, "r1", land(spark, tmp_path / "r1", [
        (0, key(1), event("c", 100, None, {"id": 1, "n": 1, "body": big}), None),
        (0, key(3), event("c", 110, None, {"id": 3, "n": 3, "body": "third"}), None),
        # the key change in the run that created the row
        *key_change(200, 3, 4, {"n": 3}),
    ], 0))
    assert sorted(published_rows(lake, "p", "docs"), key=lambda r: r["id"]) == [
        {"id": "1", "n": "1", "body": big}, {"id": "4", "n": "3", "body": "third"}]

    # a key change of a row an earlier run published; the old key's header beside its schema section
    enveloped = json.dumps({"schema": {"type": "struct", "fields": [{"type": "int32", "field": "id"}]},
                            "payload": {"id": 1}})
    run(lake, "r2", land(spark, tmp_path / "r2", [
        *key_change(300, 1, 2, {"n": 1}, enveloped),
        (1, key(2), event("u", 400, None, {"id": 2, "n": 5, "body": UNAVAILABLE}), None),
    ], 10))
    assert sorted(published_rows(lake, "p", "docs"), key=lambda r: r["id"]) == [
        {"id": "2", "n": "5", "body": big}, {"id": "4", "n": "3", "body": "third"}]
