"""DataWorks JSON through a whole ``jobs run``: split and merged updates, a key change, deletes, a redelivery
and garbage, folded into Iceberg (the decoder's own tests: tests/unit/formats/test_dataworks.py)."""
from __future__ import annotations

import json
from datetime import UTC, datetime

from tests.support.pipeline_runs import published_rows, run_lines


def test_stream_folds_to_expected_state(spark, tmp_path):
    """Split and merged updates, a key change, deletes, a redelivery and garbage, folded into Iceberg."""
    def msg(op, seq, before=None, after=None):
        return json.dumps({
            "schema": {"dataColumn": [{"name": "id", "type": "LONG"}, {"name": "v", "type": "STRING"},
                                      {"name": "at", "type": "DATE"}, {"name": "ok", "type": "BOOLEAN"}],
                       "primaryKey": ["id"], "source": {"dbType": "MySQL", "dbName": "shop", "tableName": "items"}},
            "payload": {"before": before and {"dataColumn": before}, "after": after and {"dataColumn": after},
                        "sequenceId": seq, "op": op, "timestamp": {"eventTime": 1731662097000}, "ddl": None},
            "version": "0.0.1"})

    def row(i, v):
        return {"id": i, "v": v, "at": 1731661114000, "ok": i % 2 == 0}

    stream = [
        msg("INSERT", "-1", after=row(1, "a")), msg("INSERT", "-1", after=row(2, "b")),
        msg("INSERT", "-1", after=row(3, "c")),
        msg("UPDATE_BEFOR", "100", before=row(1, "a")), msg("UPDATE_AFTER", "100", after=row(1, "a2")),
        msg("UPDATE_AFTER", "101", before=row(2, "b"), after=row(20, "b")),  # key change, merged form
        msg("DELETE", "102", before=row(3, "c")),
        msg("INSERT", "103", after=row(4, "d")),
        msg("UPDATE_AFTER", "100", after=row(1, "a2")),  # redelivered
        "not json at all",
    ]
    lake = run_lines(tmp_path, "dataworks", stream, "dw")
    rows = published_rows(lake, "dw", "shop._.items", ["id", "v", "at", "ok"], key=lambda r: r["id"])
    at = datetime(2024, 11, 15, 8, 58, 34, tzinfo=UTC)
    assert rows == [{"id": 1, "v": "a2", "at": at, "ok": False}, {"id": 4, "v": "d", "at": at, "ok": True},
                    {"id": 20, "v": "b", "at": at, "ok": True}]
    decode_report = json.loads((lake / "reports/dw/run=r1/decode.json").read_text())
    assert decode_report["total"]["quarantined"] == 1 and decode_report["balanced"]
