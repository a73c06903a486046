"""Qlik Replicate through whole ``jobs run``s: metadata seen in an earlier run is remembered and the
published state is exact (the decoder's own tests: tests/unit/formats/test_qlik.py)."""
from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

from jobs.demo.qlik import avro_data, headers
from jobs.iceberg.catalog import load_table, open_catalog
from jobs.lake.layout import Lake
from tests.support.decoders import raw_frame
from tests.support.pipeline_runs import jobs_run
from tests.support.qlik import ORDERS, ROW, cdc_messages, seq


def run(raw_dir, lake, run_id, values, spark):
    raw_frame(spark, values).write.parquet(str(raw_dir))
    return jobs_run("qlik", raw_dir, lake, "q", run_id)


def test_metadata_seen_in_an_earlier_run_is_remembered_and_the_state_is_exact(spark, tmp_path):
    lake = tmp_path / "lake"
    messages = cdc_messages(avro=True)
    # run 1: the metadata and a full load; run 2: CDC data only (its metadata came in run 1)
    refresh = avro_data(ORDERS, {**ROW, "id": 2}, headers("REFRESH"))
    assert run(tmp_path / "r1", lake, "r1", [messages[1], refresh], spark) == 0
    assert list((lake / "decoder-memory/q").iterdir())[0].name == "run=r1.json"
    # the key-change chain without the final delete: (1, US) ends with amount 12.00 and note kept
    assert run(tmp_path / "r2", lake, "r2", [messages[0], *messages[2:5]], spark) == 0
    report = json.loads((lake / "reports/q/run=r2/decode.json").read_text())
    assert report["total"]["quarantined"] == 0
    table = load_table(open_catalog(Lake.at(str(lake))), "q", "_.sales.orders")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["region"], r["amount"], r["note"], r["placed"], r["paid"], r["blob"]) for r in rows] == [
        (1, "US", Decimal("12.00"), "first", date(2026, 11, 1), False, b"\x00\xff"),
        (2, "EU", Decimal("10.50"), "first", date(2026, 11, 1), False, b"\x00\xff"),
    ]
    # run 3: a key change that does not replicate note: the row moves to its new key with its note
    before = {**ROW, "amount": "12.00", "region": "US"}
    masked_move = avro_data(ORDERS, {**before, "region": "APAC", "note": None, "amount": "13.00"},
                            headers("UPDATE", seq(6), column_mask=ORDERS.mask(
                                ["id", "region", "amount", "placed", "paid", "blob"])), before=before)
    assert run(tmp_path / "r3", lake, "r3", [masked_move], spark) == 0
    table = load_table(open_catalog(Lake.at(str(lake))), "q", "_.sales.orders")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["region"], r["amount"], r["note"]) for r in rows] == [
        (1, "APAC", Decimal("13.00"), "first"), (2, "EU", Decimal("10.50"), "first")]
