"""Maxwell JSON through a whole ``jobs run``: bootstrap, inserts, updates with a key change, deletes, a
redelivery and garbage, landed with Maxwell's message keys and published to Iceberg (the decoder's own
tests: tests/unit/formats/test_maxwell.py)."""
from __future__ import annotations

import json
from datetime import UTC, datetime

from jobs.lake.raw import KAFKA_SCHEMA
from tests.support.maxwell import maxwell_message as _mx
from tests.support.pipeline_runs import jobs_run, published_rows


def test_stream_folds_to_expected_state(spark, tmp_path):
    """Bootstrap, inserts, updates incl. a key change, deletes, a redelivery and garbage, landed as
    Kafka-schema Parquet with Maxwell's message keys, run through the CLI and published to Iceberg."""
    def key(i):
        return json.dumps({"database": "shop", "table": "items", "pk.id": i})

    update_key_change = _mx("update", {"id": 20, "v": "b"}, old={"id": 2}, position="binlog.000003:300", commit=True)
    messages = [
        (None, _mx("bootstrap-start", None)),
        (key(1), _mx("bootstrap-insert", {"id": 1, "v": "a"})),
        (key(2), _mx("bootstrap-insert", {"id": 2, "v": "b"})),
        (key(3), _mx("bootstrap-insert", {"id": 3, "v": "c"})),
        (None, _mx("bootstrap-complete", None)),
        (key(4), _mx("insert", {"id": 4, "v": "d"}, position="binlog.000003:100", xoffset=0)),
        (key(5), _mx("insert", {"id": 5, "v": "e"}, position="binlog.000003:100", commit=True)),
        (key(1), _mx("update", {"id": 1, "v": "a2"}, old={"v": "a"}, position="binlog.000003:200", commit=True)),
        (key(20), update_key_change),
        (key(3), _mx("delete", {"id": 3, "v": "c"}, position="binlog.000004:4", xoffset=0)),
        (key(5), _mx("delete", {"id": 5, "v": "e"}, position="binlog.000004:4", commit=True)),
        (key(20), update_key_change),  # redelivered
        (None, "garbage {"),
    ]
    rows = [(k and k.encode(), v.encode(), "maxwell", 0, i, datetime(2026, 11, 1, tzinfo=UTC), 0, None)
            for i, (k, v) in enumerate(messages)]
    raw = tmp_path / "raw"
    spark.createDataFrame(rows, KAFKA_SCHEMA).coalesce(1).write.parquet(str(raw))
    lake = tmp_path / "lake"
    assert jobs_run("maxwell", raw, lake, "mx", "r1") == 0
    state = published_rows(lake, "mx", "shop._.items", ["id", "v"], key=lambda r: int(r["id"]))
    assert state == [{"id": "1", "v": "a2"}, {"id": "4", "v": "d"}, {"id": "20", "v": "b"}]
    decode_report = json.loads((lake / "reports/mx/run=r1/decode.json").read_text())
    assert decode_report["total"]["quarantined"] == 1 and decode_report["total"]["ignored"] == 2
    assert decode_report["balanced"]
