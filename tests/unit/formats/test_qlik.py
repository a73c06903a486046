"""The Qlik Replicate decoder against the real messages in tests/resources/qlik and the seed document.

The two real messages (attunity-json-converter's Data.json / Metadata.json) imply one full-load row of
employees.salaries keyed (emp_no, from_date) by primaryKeyPosition (SOURCE.md). CDC messages, Avro
messages and schema versions are built by jobs/demo/qlik.py as the seed document describes them.
"""
from __future__ import annotations

import json

import pytest

from jobs.demo.qlik import (
    QlikColumn,
    QlikTable,
    avro_data,
    headers,
    json_data,
    json_metadata,
)
from jobs.formats import DecodeOptions
from tests.support.decoders import decoded_rows, raw_frame
from tests.support.qlik import ORDERS, ROW, cdc_messages, seq


def decode(spark, values, options=DecodeOptions(), fmt="qlik"):
    return decoded_rows(raw_frame(spark, values), fmt, options)


def test_real_sample_decodes_to_one_full_load_row_keyed_by_primary_key_position(spark, shared_dir):
    folder = shared_dir / "qlik/attunity-json-converter"
    # pretty-printed files: one message each, sent as one value
    values = [(folder / "Data.json").read_text(), (folder / "Metadata.json").read_text()]
    records, quarantine, counts, remembered = decode(spark, values)
    assert quarantine == []
    (r,) = records
    assert (r["op"], r["phase"], r["table_id"]) == ("SNAPSHOT", "FULL_LOAD", "_.employees.salaries")
    assert r["key"] == {"emp_no": "14472", "from_date": "1993-11-25"}
    assert r["after"] == {"emp_no": "14472", "salary": "49592", "from_date": "1993-11-25", "to_date": "1994-11-25"}
    assert r["column_types"] == {"emp_no": "int", "salary": "int", "from_date": "date", "to_date": "date"}
    assert r["position"] is None  # REFRESH rows carry no changeSequence
    assert counts["ignored_reasons"] == {"Qlik metadata message": 1}
    assert counts["tables"]["_.employees.salaries"]["landed"] == 2
    assert len(remembered) == 1 and json.loads(remembered[0])["schemaId"] == "8FB9D3C10EA4B25751DF9CC8318F0A02"


@pytest.mark.parametrize("avro", [False, True], ids=["json", "avro"])
def test_cdc_ops_key_change_column_mask_and_transactions(spark, avro):
    records, quarantine, counts, _ = decode(spark, cdc_messages(avro))
    assert quarantine == []
    assert [(r["op"], r["key"]) for r in records] == [
        ("INSERT", {"id": "1", "region": "EU"}),
        ("UPDATE", {"id": "1", "region": "EU"}),
        ("DELETE", {"id": "1", "region": "EU"}),
        ("INSERT", {"id": "1", "region": "US"}),
        ("UPDATE", {"id": "1", "region": "US"}),
        ("DELETE", {"id": "1", "region": "US"}),
    ]
    first = records[0]
    assert first["after"] == {"id": "1", "region": "EU", "amount": "10.50", "note": "first", "placed": "2026-11-01",
                              "paid": "false", "blob": "AP8="}
    assert (first["tx_id"], first["tx_seq"], first["tx_last"]) == ("AA", 1, False)
    assert records[1]["tx_last"] is True and records[1]["before"]["amount"] == "10.50"
    masked = records[4]
    assert "note" not in masked["after"] and "note" not in masked["present_columns"]
    assert masked["after"]["amount"] == "12.00"
    positions = [r["position"] for r in records]
    assert positions == sorted(positions) and len(positions[0]) == 35
    assert first["column_types"]["amount"] == "decimal(10,2)" and first["column_types"]["blob"] == "binary"
    assert counts["total"] == {"landed": 6, "decoded": 5, "quarantined": 0, "ignored": 1, "records": 6}


def test_a_value_its_type_cannot_hold_is_kept_as_sent_and_early_years_keep_four_digits(spark):
    from datetime import datetime

    from jobs.formats.qlik.decoder import _jsonable

    values = [json_metadata(ORDERS), json_data(ORDERS, {**ROW, "placed": "0000-00-00"}, headers("INSERT", seq(1)))]
    records, quarantine, _, _ = decode(spark, values)
    assert quarantine == []
    # the change record keeps it; the state, typed date, counts it (merge.json unconverted_values)
    assert records[0]["after"]["placed"] == "0000-00-00" and records[0]["column_types"]["placed"] == "date"
    # Avro timestamps of years before 1000 (strftime's %Y would write "1-01-01")
    assert _jsonable(datetime(1, 1, 1, 0, 0, 0, 123000)) == "0001-01-01 00:00:00.123000"


def test_each_data_message_decodes_with_its_own_schema_version(spark):
    v1 = QlikTable("hr", "staff", [QlikColumn("id", "INT4", 1), QlikColumn("salary", "INT4")])
    v2 = QlikTable("hr", "staff", [QlikColumn("id", "INT4", 1), QlikColumn("salary", "NUMERIC", precision=12, scale=2),
                                   QlikColumn("grade", "STRING")], version=2)
    assert v1.schema_id != v2.schema_id
    values = [json_metadata(v2), json_metadata(v1),
              json_data(v1, {"id": 1, "salary": 100}, headers("INSERT", seq(1))),
              json_data(v2, {"id": 1, "salary": "100.50", "grade": "B"}, headers("UPDATE", seq(2))),
              # bare data message naming its schema through externalSchemaId
              json_data(v1, {"id": 2, "salary": 7}, {**headers("INSERT", seq(3)), "externalSchemaId": v1.schema_id},
                        envelope=False)]
    records, quarantine, _, _ = decode(spark, values)
    assert quarantine == []
    assert [(r["after"], r["column_types"]) for r in records] == [
        ({"id": "1", "salary": "100"}, {"id": "int", "salary": "int"}),
        ({"id": "1", "salary": "100.50", "grade": "B"}, {"id": "int", "salary": "decimal(12,2)", "grade": "string"}),
        ({"id": "2", "salary": "7"}, {"id": "int", "salary": "int"}),
    ]


def test_a_table_without_primary_key_is_keyed_by_its_whole_row(spark):
    log = QlikTable("ops", "log", [QlikColumn("at", "STRING"), QlikColumn("msg", "STRING")])  # no key column
    first, second = {"at": "t1", "msg": "a"}, {"at": "t1", "msg": "b"}
    values = [
        json_metadata(log),
        json_data(log, first, headers("REFRESH")),
        json_data(log, second, headers("INSERT", seq(1))),
        json_data(log, {**second, "msg": "c"}, headers("UPDATE", seq(2)), before=second),
        json_data(log, first, headers("DELETE", seq(3))),
        # unusable without a key: an UPDATE without beforeData, a row image missing a column
        json_data(log, {**first, "msg": "x"}, headers("UPDATE", seq(4))),
        json_data(log, {"at": "t2", "msg": None}, headers("INSERT", seq(5), column_mask=log.mask(["at"]))),
    ]
    records, quarantine, counts, _ = decode(spark, values)
    assert [(r["op"], r["key"]) for r in records] == [
        ("SNAPSHOT", first), ("INSERT", second),
        ("DELETE", second), ("INSERT", {**second, "msg": "c"}),  # the update: old row out, new row in
        ("DELETE", first),
    ]
    assert [q["offset"] for q in quarantine] == [5, 6]
    assert [q["reason"] for q in quarantine] == [
        "no key (no primaryKeyPosition): an UPDATE without beforeData cannot say which row it changes; give "
        "--primary-keys (tables[].primary_keys in a pipeline file)",
        "no key (no primaryKeyPosition) and a row image without every column (columnMask): the whole row cannot "
        "key it; give --primary-keys (tables[].primary_keys in a pipeline file)"]
    assert counts["total"]["quarantined"] == 2
    # with --primary-keys the same messages are keyed by it
    keyed, quarantine, _, _ = decode(spark, values[:5], DecodeOptions(primary_keys={"log": ("at",)}))
    assert quarantine == [] and {tuple(r["key"].items()) for r in keyed} == {(("at", "t1"),)}


@pytest.mark.parametrize("value, reason", [
    ("{]", "malformed JSON"),
    ('{"magic": "atMSG", "type": "XX", "message": {}}', "unknown envelope type 'XX'"),
    (json_data(ORDERS, ROW, headers("INSERT", seq(1))), "no metadata message for schemaId"),
    (json_data(ORDERS, ROW, headers("MERGE", seq(1))), "unknown operation 'MERGE'"),
    (json_data(ORDERS, ROW, headers("INSERT", seq(1)), envelope=False), "names no table"),
    ('{"hello": 1}', "not a Qlik Replicate message"),
])
def test_malformed_messages_are_quarantined_with_a_reason(spark, value, reason):
    # ORDERS' metadata is not in this snapshot, so only the unknown-operation case knows the table
    values = [value] if "MERGE" not in value else [json_metadata(ORDERS), value]
    records, quarantine, counts, _ = decode(spark, values)
    assert records == []
    assert len(quarantine) == 1 and reason in quarantine[0]["reason"]
    assert bytes(quarantine[0]["value"]).decode() == value
    assert counts["balanced"]


def test_avro_garbage_and_unknown_schema_are_quarantined(spark):
    other = QlikTable("sales", "other", [QlikColumn("id", "INT4", 1)])
    values = [b"atMSG\x04DTgarbage", avro_data(other, {"id": 1}, headers("INSERT", seq(1)))]
    records, quarantine, counts, _ = decode(spark, values)
    assert records == []
    assert quarantine[0]["reason"].startswith("not a Replicate Avro envelope (")
    assert quarantine[1]["reason"] == f"no metadata message for schemaId {other.schema_id}"
    assert counts["total"]["quarantined"] == 2
