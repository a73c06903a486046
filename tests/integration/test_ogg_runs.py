"""Oracle GoldenGate JSON through a whole ``jobs run``: Flink's messages, key changes (one compressed), a
delete, a redelivery and garbage, published to Iceberg (the decoder's own tests: tests/unit/formats/test_ogg.py)."""
from __future__ import annotations

import json

from tests.support.ogg import ogg_message as _ogg
from tests.support.pipeline_runs import published_rows, run_lines


def test_stream_folds_to_expected_state(spark, shared_dir, tmp_path):
    """Flink's 16 messages + key changes (one compressed), a compressed update, a delete, a redelivery and garbage,
    through the CLI into Iceberg."""
    lines = (shared_dir / "ogg/flink/ogg-data.txt").read_text(encoding="utf-8").splitlines()
    pk = ("id",)
    key_change = _ogg("U", table="OGG.TBL_TEST", pks=pk, pos="00000000000000000000200",
                      before={"id": 104, "name": "hammer", "description": "12oz carpenter's hammer", "weight": 0.75},
                      after={"id": 204, "name": "hammer", "description": "12oz carpenter's hammer", "weight": 0.75})
    lines += [
        key_change,
        _ogg("U", table="OGG.TBL_TEST", pks=pk, pos="00000000000000000000201", after={"id": 105, "weight": 0.9}),
        # a compressed key change: the old key and the changed columns only; the rest of the row moves
        _ogg("U", table="OGG.TBL_TEST", pks=pk, pos="00000000000000000000203", before={"id": 106},
             after={"id": 206, "weight": 1.5}),
        "garbage {",
        _ogg("D", table="OGG.TBL_TEST", pks=pk, pos="00000000000000000000202",
             before={"id": 109, "name": "spare tire", "description": "24 inch spare tire", "weight": 22.2}),
        key_change,  # redelivered
    ]
    lake = run_lines(tmp_path, "ogg", lines, "og")
    cols = ["id", "name", "description", "weight"]
    state = published_rows(lake, "og", "_.OGG.TBL_TEST", cols, key=lambda r: int(r["id"]))
    expected = {
        101: ("scooter", "Small 2-wheel scooter", "3.140000104904175"),
        102: ("car battery", "12V car battery", "8.100000381469727"),
        103: ("12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", "0.800000011920929"),
        105: ("hammer", "14oz carpenter's hammer", "0.9"),
        107: ("rocks", "box of assorted rocks", "5.099999904632568"),
        108: ("jacket", "water resistent black wind breaker", "0.10000000149011612"),
        110: ("jacket", "new water resistent white wind breaker", "0.5"),
        204: ("hammer", "12oz carpenter's hammer", "0.75"),
        206: ("hammer", "18oz carpenter hammer", "1.5"),
    }
    assert state == [dict(zip(cols, (str(i), *v))) for i, v in expected.items()]
    report = json.loads((lake / "reports/og/run=r1/decode.json").read_text())
    assert report["total"]["quarantined"] == 1 and report["total"]["landed"] == len(lines)
    assert report["balanced"]
