"""DTS Avro through a whole ``jobs run``: the published state typed from the records' own types (the
decoder's own tests: tests/unit/formats/test_dts_avro.py)."""
from __future__ import annotations

import json
from decimal import Decimal

from jobs.iceberg.catalog import load_table, open_catalog
from jobs.lake.layout import Lake
from tests.support.decoders import raw_frame
from tests.support.dts_avro import NS, chars, dts, integer
from tests.support.pipeline_runs import jobs_run


def test_end_to_end_run_types_the_state(spark, tmp_path):
    fields = [{"name": "id", "dataTypeNumber": 3}, {"name": "amount", "dataTypeNumber": 246},
              {"name": "note", "dataTypeNumber": 253}]

    def row(i, amount, note):
        # DTS gives a Decimal the precision and scale of its value, not of its column
        digits = Decimal(amount).as_tuple()
        value = {"value": amount, "precision": len(digits.digits), "scale": -digits.exponent}
        return [integer(i), (NS + "Decimal", value), chars(note)]

    values = [
        dts("INIT", after=row(1, "1.5", "a"), rid=1, pos="", fields=fields, pk=("id",)),
        dts("INIT", after=row(2, "2.50", "b"), rid=2, pos="", fields=fields, pk=("id",)),
        dts("INSERT", after=row(3, "3.50", "c"), rid=3, pos="10@1", fields=fields, pk=("id",)),
        dts("UPDATE", before=row(1, "1.5", "a"), after=row(1, "123456.78", "a2"), rid=4, pos="20@1", fields=fields,
            pk=("id",)),
        dts("DELETE", before=row(2, "2.50", "b"), rid=5, pos="30@1", fields=fields, pk=("id",)),
        # a key change 3 -> 4 whose note DTS did not capture (EmptyObject NONE): the note moves with the row
        dts("UPDATE", before=row(3, "3.50", "c"), after=[*row(4, "11", "")[:2], "NONE"], rid=6, pos="40@1",
            fields=fields, pk=("id",)),
        b"not avro",
    ]
    raw = tmp_path / "raw"
    raw_frame(spark, values).write.parquet(str(raw))
    lake = tmp_path / "lake"
    assert jobs_run("dts_avro", raw, lake, "p", "r1") == 0
    table = load_table(open_catalog(Lake.at(str(lake))), "p", "mydb._.t1")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    # each value exact in one column, whatever precision and scale it came with
    assert [(r["id"], r["amount"], r["note"]) for r in rows] == [(1, Decimal("123456.78"), "a2"), (4, Decimal("11"), "c")]
    report = json.loads((lake / "reports/p/run=r1/decode.json").read_text())
    assert report["total"] == {"landed": 7, "decoded": 6, "quarantined": 1, "ignored": 0, "records": 7}
