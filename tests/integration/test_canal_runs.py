"""Canal JSON through a whole ``jobs run``: a full load, a multi-row update with a key change, both delete
shapes, a redelivery and garbage, published to Iceberg (the decoder's own tests: tests/unit/formats/test_canal.py)."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

from tests.support.pipeline_runs import published_rows, run_lines


def test_stream_folds_to_expected_state(spark, tmp_path):
    """Full load, multi-row update with a key change, both delete shapes, a redelivery and garbage,
    run through the CLI and published to Iceberg."""
    types = {"id": "int(11)", "v": "varchar(20)", "amount": "decimal(10,2)", "at": "datetime", "ok": "tinyint(1)"}

    def msg(type_, es, data=None, old=None):
        return json.dumps({"data": data, "old": old, "database": "shop", "table": "items", "type": type_,
                           "es": es, "id": es // 1000, "isDdl": False, "pkNames": ["id"], "mysqlType": types,
                           "ts": es + 5, "sql": ""})

    def row(i, v, ok="1"):
        return {"id": str(i), "v": v, "amount": "1.50", "at": "2024-11-15 08:58:34", "ok": ok}

    update = msg("UPDATE", 3000, data=[row(1, "a2"), row(20, "b")], old=[{"v": "a"}, {"id": "2"}])
    stream = [
        msg("INIT", 1000, data=[row(1, "a"), row(2, "b"), row(3, "c")]),
        msg("INSERT", 2000, data=[row(4, "d", ok="0"), row(5, "e")]),
        update,
        msg("DELETE", 4000, old=[row(3, "c")]),  # DTS before 2022-03-20: the row in `old`
        msg("DELETE", 5000, data=[row(5, "e")]),
        update,  # redelivered
        "garbage {",
    ]
    lake = run_lines(tmp_path, "canal", stream, "cn")
    rows = published_rows(lake, "cn", "shop._.items", ["id", "v", "amount", "at", "ok"], key=lambda r: r["id"])
    at = datetime(2024, 11, 15, 8, 58, 34, tzinfo=UTC)
    common = {"amount": Decimal("1.50"), "at": at}
    assert rows == [{"id": 1, "v": "a2", **common, "ok": True}, {"id": 4, "v": "d", **common, "ok": False},
                    {"id": 20, "v": "b", **common, "ok": True}]
    decode_report = json.loads((lake / "reports/cn/run=r1/decode.json").read_text())
    assert decode_report["total"]["quarantined"] == 1 and decode_report["balanced"]
