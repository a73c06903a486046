"""Schema changes across runs (Qlik metadata versions): an added column appears (null in older rows), a
dropped column is kept with nulls for new rows and reported, a type change is reported -- promoted where
Iceberg can widen the column, never silently cast away."""
from __future__ import annotations

import json

from jobs import cli, publish
from jobs.lake import Lake
from scripts.qlik_messages import QlikColumn, QlikTable, change_sequence, headers, json_data, json_metadata
from tests.unit.decoder_support import raw_frame

V1 = QlikTable("hr", "staff", [QlikColumn("id", "INT4", 1), QlikColumn("salary", "INT4"),
                               QlikColumn("legacy", "STRING"), QlikColumn("code", "STRING")])
V2 = QlikTable("hr", "staff", [QlikColumn("id", "INT4", 1), QlikColumn("salary", "INT8"),
                               QlikColumn("code", "INT4"), QlikColumn("grade", "STRING")], version=2)


def seq(n: int) -> str:
    return change_sequence("2026110112000000", n)


def run(spark, tmp_path, run_id, values) -> dict:
    raw = tmp_path / f"raw-{run_id}"
    raw_frame(spark, values).write.parquet(str(raw))
    assert cli.main(["run", "--format", "qlik", "--raw", str(raw), "--lake", str(tmp_path / "lake"),
                     "--pipeline", "hr", "--run-id", run_id]) == 0
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

    table = publish.load_table(publish.open_catalog(Lake.at(str(tmp_path / "lake"))), "hr", "_.hr.staff")
    assert publish.table_columns(table)["salary"] == "bigint"
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
    table = publish.load_table(publish.open_catalog(Lake.at(str(tmp_path / "lake"))), "hr", "_.hr.staff")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["salary"], r["code"], r["grade"]) for r in rows] == [
        (1, 6_000_000_000, "8", "C"), (2, 5_000_000_000, "7", "B")]
