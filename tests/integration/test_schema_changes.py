"""Schema changes across runs (Qlik metadata versions): an added column appears (null in older rows), a
dropped column is kept with nulls for new rows and reported, a type change is reported -- promoted where
Iceberg can widen the column, never silently cast away."""
from __future__ import annotations

import json

from jobs.demo.qlik import QlikColumn, QlikTable, change_sequence, headers, json_data, json_metadata
from jobs.iceberg.catalog import load_table, open_catalog, table_columns
from jobs.lake.layout import Lake
from tests.support.decoders import raw_frame
from tests.support.pipeline_runs import jobs_run

V1 = QlikTable("hr", "staff", [QlikColumn("id", "INT4", 1), QlikColumn("salary", "INT4"),
                               QlikColumn("legacy", "STRING"), QlikColumn("code", "STRING")])
V2 = QlikTable("hr", "staff", [QlikColumn("id", "INT4", 1), QlikColumn("salary", "INT8"),
                               QlikColumn("code", "INT4"), QlikColumn("grade", "STRING")], version=2)


def seq(n: int) -> str:
    return change_sequence("2026110112000000", n)


def run(spark, tmp_path, run_id, values) -> dict:
    raw = tmp_path / f"raw-{run_id}"
    raw_frame(spark, values).write.parquet(str(raw))
    assert jobs_run("qlik", raw, tmp_path / "lake", "hr", run_id) == 0
    return json.loads((tmp_path / f"lake/reports/hr/run={run_id}/merge.json").read_text())["tables"]["_.hr.staff"]


def test_added_dropped_and_retyped_columns(spark, tmp_path):
    run(spark, tmp_path, "r1", [
        json_metadata(V1),
        json_data(V1, {"id": 1, "salary": 100, "legacy": "x", "code": "A1"}, headers("INSERT", seq(1))),
    ])
    report = run(spark, tmp_path, "r2", [
        json_metadata(V2),
        json_data(V2, {"id": 2, "salary": 5_000_000_000, "code": 7, "grade": "B"}, headers("INSERT", seq(2))),
    ])
    assert report["added_columns"] == ["grade"]
    assert report["dropped_columns"] == ["legacy"]
    assert {(t["column"], t["published"], t["declared"], t["action"]) for t in report["type_changes"]} == {
        ("salary", "int", "bigint", "promoted"), ("code", "string", "int", "kept published type")}

    table = load_table(open_catalog(Lake.at(str(tmp_path / "lake"))), "hr", "_.hr.staff")
    assert table_columns(table)["salary"] == "bigint"
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["salary"], r["legacy"], r["code"], r["grade"]) for r in rows] == [
        (1, 100, "x", "A1", None),  # older row: the added column is null
        (2, 5_000_000_000, None, "7", "B"),  # new row: the dropped column is null, the wider salary fits
    ]

    # a later run changes only the older row: its bucket's file (written when salary was an int) is
    # read back under the promoted type, the other bucket's file is kept as it is
    report = run(spark, tmp_path, "r3", [
        json_data(V2, {"id": 1, "salary": 6_000_000_000, "code": 8, "grade": "C"}, headers("UPDATE", seq(3))),
    ])
    assert report["buckets_rewritten"] == 1 or report["buckets"] == 1
    table = load_table(open_catalog(Lake.at(str(tmp_path / "lake"))), "hr", "_.hr.staff")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["salary"], r["code"], r["grade"]) for r in rows] == [
        (1, 6_000_000_000, "8", "C"), (2, 5_000_000_000, "7", "B")]


PRICES = QlikTable("shop", "prices", [QlikColumn("id", "INT4", 1),
                                      QlikColumn("amount", "NUMERIC", precision=6, scale=2),
                                      QlikColumn("code", "INT4"), QlikColumn("note", "STRING")])
PRICES_V2 = QlikTable("shop", "prices", [QlikColumn("id", "INT4", 1), QlikColumn("amount", "NUMERIC", precision=6,
                                                                                   scale=2),
                                         QlikColumn("code", "STRING"), QlikColumn("note", "STRING")], version=2)


def test_values_the_typed_state_cannot_hold_are_counted_and_alerted(spark, tmp_path):
    """A value that does not fit its column's type is published as null (a decimal past its precision,
    text in a column whose published type was kept), a decimal with more fraction digits than the
    scale is published rounded: merge.json counts both per column with an example, and they are alert
    reasons. Values that fit are not counted (trailing zeros past the scale lose nothing)."""
    from jobs.alert.stage import alert_reasons
    from jobs.model.reports import FoldReport, RunReports, UnconvertedValues

    raw = tmp_path / "raw-p1"
    raw_frame(spark, [
        json_metadata(PRICES),
        json_data(PRICES, {"id": 1, "amount": "12.50", "code": 1, "note": "ok"}, headers("INSERT", seq(1))),
        json_data(PRICES, {"id": 2, "amount": "12.3400", "code": 2, "note": "ok"}, headers("INSERT", seq(2))),
        json_data(PRICES, {"id": 3, "amount": "1.239", "code": 3, "note": "rounded"}, headers("INSERT", seq(3))),
        json_data(PRICES, {"id": 4, "amount": "123456.1", "code": 4, "note": "too big"}, headers("INSERT", seq(4))),
        # only the row's last version is published: its earlier value is no loss
        json_data(PRICES, {"id": 5, "amount": "99999999", "code": 5, "note": "fixed"}, headers("INSERT", seq(5))),
        json_data(PRICES, {"id": 5, "amount": "9.99", "code": 5, "note": "fixed"}, headers("UPDATE", seq(6)),
                  before={"id": 5, "amount": "99999999", "code": 5, "note": "fixed"}),
    ]).write.parquet(str(raw))
    lake = str(tmp_path / "lake")
    assert jobs_run("qlik", raw, lake, "shop", "p1") == 0
    merge = json.loads((tmp_path / "lake/reports/shop/run=p1/merge.json").read_text())
    assert merge["tables"]["_.shop.prices"]["unconverted_values"] == {
        "amount": {"type": "decimal(6,2)", "nulled": 1, "rounded": 1, "example": "1.239"}}
    table = load_table(open_catalog(Lake.at(lake)), "shop", "_.shop.prices")
    amounts = {r["id"]: r["amount"] for r in table.scan().to_arrow().to_pylist()}
    assert {k: None if v is None else str(v) for k, v in amounts.items()} == {
        1: "12.50", 2: "12.34", 3: "1.24", 4: None, 5: "9.99"}

    # a later run declares `code` as text: the published int is kept, and text becomes null
    raw = tmp_path / "raw-p2"
    raw_frame(spark, [
        json_metadata(PRICES_V2),
        json_data(PRICES_V2, {"id": 1, "amount": "1.00", "code": "A7", "note": "text code"},
                  headers("UPDATE", seq(7)), before={"id": 1, "amount": "12.50", "code": "1", "note": "ok"}),
        json_data(PRICES_V2, {"id": 6, "amount": "2.00", "code": "6", "note": "digits"}, headers("INSERT", seq(8))),
    ]).write.parquet(str(raw))
    assert jobs_run("qlik", raw, lake, "shop", "p2") == 0
    merge = json.loads((tmp_path / "lake/reports/shop/run=p2/merge.json").read_text())
    report = merge["tables"]["_.shop.prices"]
    assert [(t["column"], t["action"]) for t in report["type_changes"]] == [("code", "kept published type")]
    assert report["unconverted_values"] == {"code": {"type": "int", "nulled": 1, "rounded": 0, "example": "A7"}}
    assert alert_reasons(RunReports(fold=FoldReport.from_json(merge)), 0.0) == (
        UnconvertedValues(table="_.shop.prices", column="code", type="int", nulled=1, rounded=0),)
    alert = json.loads((tmp_path / "lake/reports/shop/run=p2/alert.json").read_text())
    assert [r["kind"] for r in alert["reasons"]] == ["unconverted"]
