"""The Debezium decoder (the JVM-side jvm/src/cdc/DebeziumUdf.java) against the real messages in
tests/resources and the seed documents.

Expected values are those the tools' own test suites expect (tests/resources/debezium/SOURCE.md).
Hand-made edge cases of JSON, types and positions, and generated messages with every JSON type in
every field the decoder reads, are checked for what holds whatever the input (tests/support/fuzz.py
check_batch).
"""
from __future__ import annotations

import base64
import json
import os
import re
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from jobs.decode.stage import decode_messages, release
from jobs.formats import DecodeOptions
from jobs.lake.raw import read_raw
from tests.support.decoders import FLINK_PRODUCT_ROWS, assert_rows_equal, decoded_rows, flink_row_kinds, raw_frame
from tests.support.fuzz import check_batch

PRODUCTS_PK = DecodeOptions(primary_keys={"products": ("id",)})

# Flink DebeziumJsonSerDeSchemaTest: every products file decodes to these 20 row changes
FLINK_EXPECTED = FLINK_PRODUCT_ROWS


def decode(raw, options=DecodeOptions()):
    return decoded_rows(raw, "debezium", options, order=lambda r: r["offset"])[:3]


@pytest.mark.parametrize(
    "path",
    [
        "debezium/flink/debezium-data-schema-include.txt",
        "debezium/flink/debezium-postgres-data-schema-include.txt",
        "debezium/flink/debezium-postgres-data-schema-exclude.txt",
        "debezium/seatunnel/debezium-data.txt",  # Flink's MySQL schema-exclude data
    ],
)
def test_flink_products_files_decode_to_flink_rows(spark, shared_dir, path):
    records, quarantine, counts = decode(read_raw(spark, str(shared_dir / path)), PRODUCTS_PK)
    assert quarantine == []
    assert_rows_equal(flink_row_kinds(records), FLINK_EXPECTED)
    assert counts["total"] == {"landed": 16, "decoded": 16, "quarantined": 0, "ignored": 0, "records": 16}
    phases = [r["phase"] for r in records]
    assert phases[:9] == ["FULL_LOAD"] * 9 and set(phases[9:]) == {"CDC"}
    positions = [r["position"] for r in records[9:]]
    assert positions == sorted(positions), "string order of positions must be source order"


def test_schema_section_types_columns(spark, shared_dir):
    records, _, _ = decode(
        read_raw(spark, str(shared_dir / "debezium/flink/debezium-postgres-data-schema-include.txt"))
    )
    assert records[0]["column_types"] == {"id": "int", "name": "string", "description": "string", "weight": "double"}


def test_default_replica_identity_needs_a_key(spark, shared_dir):
    path = str(shared_dir / "debezium/flink/debezium-postgres-data-replica-identity.txt")
    _, quarantine, counts = decode(read_raw(spark, path))
    reasons = {q["reason"] for q in quarantine}
    # Flink's test expects the REPLICA IDENTITY FULL error for an update without 'before'
    assert any("REPLICA IDENTITY FULL" in r and "tables[].primary_keys in a pipeline file" in r for r in reasons)
    assert counts["balanced"]
    assert all(q["value"] for q in quarantine), "raw bytes are kept"
    # with the key known, the same messages decode: updates carry only the new image
    records, quarantine, _ = decode(read_raw(spark, path), PRODUCTS_PK)
    assert [q["reason"] for q in quarantine] == ["delete has neither a 'before' image nor a message key"]
    updates = [r for r in records if r["op"] == "UPDATE"]
    assert len(updates) == 4 and all(u["before"] is None and u["key"] == {"id": u["after"]["id"]} for u in updates)


def test_seatunnel_error_cases_quarantine_and_tombstones_are_ignored(spark):
    source = '{"connector":"postgresql","db":"d","schema":"s","table":"t","lsn":5}'
    values = ["{]", "{}", '{"op":"u"}', '{"op":"XX","source":' + source + ',"after":{"id":1}}', None, "", "[1,2]"]
    records, quarantine, counts = decode(raw_frame(spark, values))
    assert records == []
    assert [q["reason"] for q in quarantine] == [
        "malformed JSON or not a JSON object",
        "not a Debezium envelope: no op, before, after or source",
        "no source table",
        "unknown operation type 'XX'",
        "malformed JSON or not a JSON object",
    ]
    assert [q["value"] for q in quarantine][0] == b"{]"
    assert counts["total"] == {"landed": 7, "decoded": 0, "quarantined": 5, "ignored": 2, "records": 0}
    assert counts["ignored_reasons"] == {"tombstone": 2}
    assert counts["tables"]["_._.t"]["quarantined"] == 1  # attributed where the table is known
    assert counts["balanced"]


def test_record_shapes_keyless_rows_truncate_and_logical_messages(spark):
    """Without a message key or --primary-keys the whole row is the identity: an update with its old
    row is a delete of it plus an insert of the new one, a delete is keyed by its old row; TRUNCATE and
    logical-decoding messages change no row and carry no images (a message without its `message` block
    keeps nothing else)."""
    src = {"connector": "postgresql", "db": "d", "schema": "s", "table": "t"}

    def msg(op, before, after, lsn, table="t"):
        return json.dumps({"op": op, "before": before, "after": after, "source": {**src, "table": table, "lsn": lsn}})

    old, new = {"id": "1", "v": "a"}, {"id": "1", "v": "b"}
    values = [msg("c", None, old, 10), msg("u", old, new, 11), msg("d", new, None, 12), msg("t", None, None, 13),
              msg("m", None, None, 14, table=""), msg("u", old, new, 15)]
    records, quarantine, counts = decode(raw_frame(spark, values, keys=[None] * 5 + ['{"id": "1"}']))
    assert quarantine == [] and counts["total"]["records"] == 7
    shapes = sorted([(r["offset"], r["op"], r["key"], r["before"], r["after"]) for r in records], key=lambda s: s[:2])
    assert shapes == [
        (0, "INSERT", old, None, old),
        (1, "DELETE", old, old, None),
        (1, "INSERT", new, None, new),
        (2, "DELETE", new, new, None),
        (3, "TRUNCATE", None, None, None),
        (4, "MESSAGE", None, None, None),
        (5, "UPDATE", {"id": "1"}, old, new),  # keyed by the message key: one record
    ]
    assert records[4]["table_id"] == "d.s.t" and records[5]["table_id"] == "d.s._"
    assert all(r["present_columns"] is None for r in records)
    assert len({r["event_id"] for r in records}) == 7


def test_all_types_with_logical_types(spark, shared_dir):
    records, quarantine, _ = decode(read_raw(spark, str(shared_dir / "debezium/seatunnel/debezium_data.txt")))
    assert quarantine == [] and len(records) == 3
    by_id = {int(r["after"]["id"]): r for r in records}
    first = by_id[1]["after"]
    assert first["f_date"] == "2022-04-27"
    assert first["f_datetime"] == "2022-04-27 14:30:00.000000"
    assert first["f_timestamp"] == "2023-04-27 03:08:40.000000"
    assert first["f_time"] == "14:30:00.000000"
    assert (first["f_numeric"], first["f_decimal"], first["f_bigint_unsigned"]) == ("123", "789", "987654321")
    assert (first["f_smallint"], first["f_tinyint"], first["f_tinyint_unsigned"]) == ("12345", "-128", "255")
    assert first["f_json"] == '{"key": "value"}' and first["f_enum"] == "enum2" and first["f_year"] == "2022"
    assert float(first["f_real"]) == 12.345 and float(by_id[2]["after"]["f_real"]) == 112.345
    types = by_id[1]["column_types"]
    assert types["f_date"] == "date" and types["f_datetime"] == "timestamp" and types["f_numeric"] == "decimal(10,0)"
    assert types["f_binary"] == "binary" and types["f_smallint"] == "smallint"
    assert all(r["op"] == "SNAPSHOT" and r["table_id"] == "mysql_cdc._.mysql_cdc_e2e_source_table" for r in records)


def _schema_envelope(after_fields, payload):
    schema = {"type": "struct", "fields": [
        {"type": "struct", "fields": after_fields, "optional": True, "field": "after"},
        {"type": "string", "field": "op"},
    ]}
    return json.dumps({"schema": schema, "payload": payload})


def test_decimal_bytes_variable_scale_and_timestamps(spark):
    fields = [
        {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "field": "price",
         "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
        {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "field": "neg",
         "parameters": {"scale": "3"}},
        {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "field": "looks_numeric",
         "parameters": {"scale": "2"}},
        {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "field": "vsd"},
        {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "ts"},
        {"type": "int64", "name": "io.debezium.time.NanoTimestamp", "field": "ns"},
        {"type": "int32", "name": "io.debezium.time.Date", "field": "d"},
        {"type": "int64", "name": "io.debezium.time.MicroTime", "field": "t_micro"},
        {"type": "int64", "name": "io.debezium.time.MicroTime", "field": "t_end"},
        {"type": "int32", "name": "io.debezium.time.Time", "field": "t_milli_end"},
        {"type": "int64", "name": "io.debezium.time.NanoTime", "field": "t_nano_end"},
    ]
    source = {"connector": "postgresql", "db": "d", "schema": "s", "table": "t", "lsn": 10}
    after = {
        "price": "MDk=",  # 0x3039 = 12345 -> 123.45
        "neg": "/s8=",  # 0xFECF = -305 -> -0.305
        "looks_numeric": "0E00",  # base64 that reads as a number: 0xD04D34 = -3125964 -> -31259.64
        "vsd": {"scale": 1, "value": "AQ=="},  # 1 -> 0.1
        "ts": 1734544849000000, "ns": 1734382927000000000, "d": 20073,
        # PostgreSQL's time '24:00:00' is a whole day: it reads as such, not as midnight
        "t_micro": 52200123456, "t_end": 86400000000, "t_milli_end": 86400000, "t_nano_end": 86400000000000,
    }
    value = _schema_envelope(fields, {"op": "c", "after": after, "source": source})
    records, quarantine, _ = decode(raw_frame(spark, [value], keys=['{"price": 1}']))
    assert quarantine == []
    a = records[0]["after"]
    assert (a["price"], a["neg"], a["vsd"], a["looks_numeric"]) == ("123.45", "-0.305", "0.1", "-31259.64")
    assert a["ts"] == "2024-12-18 18:00:49.000000"
    assert a["ns"] == "2024-12-16 21:02:07.000000"
    assert a["d"] == "2024-12-16"
    assert (a["t_micro"], a["t_end"], a["t_milli_end"], a["t_nano_end"]) == (
        "14:30:00.123456", "24:00:00.000000", "24:00:00.000000", "24:00:00.000000")
    assert records[0]["column_types"]["price"] == "decimal(10,2)"


def test_connector_positions_order_as_strings(spark):
    def msg(source, op="u"):
        return json.dumps({"op": op, "after": {"id": 1}, "before": {"id": 1}, "source": {
            "db": "d", "schema": "s", "table": "t", **source}})

    pg = [  # commit lsn first: lsn alone is not monotonic across overlapping transactions
        {"connector": "postgresql", "lsn": 900, "sequence": '["100","900"]'},
        {"connector": "postgresql", "lsn": 150, "sequence": '["200","150"]'},
        {"connector": "postgresql", "lsn": 10000000000, "sequence": '["9000000000","10000000000"]'},
        {"connector": "postgresql", "lsn": -9223372036854775808},  # unsigned 2^63 as a Java long
    ]
    sqlserver = [
        {"connector": "sqlserver", "commit_lsn": "00000027:00000758:0005", "change_lsn": "00000027:00000758:0003",
         "event_serial_no": "1"},
        {"connector": "sqlserver", "commit_lsn": "00000027:00000758:0005", "change_lsn": "00000027:00000758:0003",
         "event_serial_no": "2"},
        {"connector": "sqlserver", "commit_lsn": "0000002a:00000010:0001", "change_lsn": "0000002a:00000010:0001",
         "event_serial_no": "1"},
    ]
    mysql = [
        {"connector": "mysql", "file": "mysql-bin.000009", "pos": 99999, "row": 0},
        {"connector": "mysql", "file": "mysql-bin.000010", "pos": 4, "row": 0},
        {"connector": "mysql", "file": "mysql-bin.000010", "pos": 4, "row": 1},
        {"connector": "mysql", "file": "mysql-bin.000010", "pos": 120, "row": 0},
    ]
    for sources in (pg, sqlserver, mysql):
        records, quarantine, _ = decode(
            raw_frame(spark, [msg(s) for s in sources], keys=['{"id": 1}'] * len(sources))
        )
        assert quarantine == []
        positions = [r["position"] for r in records]
        assert None not in positions and positions == sorted(positions) and len(set(positions)) == len(positions)


def test_key_values_are_converted_like_the_row(spark):
    # the key message encodes a Decimal, Date or MicroTimestamp key column as the row does: read raw,
    # two keys would both be null (rows merged) or a date the year 20073 (a delete missing its row)
    fields = [
        {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "field": "id",
         "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
        {"type": "int32", "name": "io.debezium.time.Date", "field": "day"},
        {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "ts"},
        {"type": "string", "field": "v"},
    ]
    source = {"connector": "postgresql", "db": "d", "schema": "s", "table": "t", "lsn": 10}
    rows = [{"id": "MDk=", "day": 20073, "ts": 1734544849000000, "v": "a"},
            {"id": "MDo=", "day": 20074, "ts": 1734544850000000, "v": "b"}]
    values = [_schema_envelope(fields, {"op": "c", "after": rows[0], "source": source}),
              _schema_envelope(fields, {"op": "c", "after": rows[1], "source": {**source, "lsn": 11}}),
              json.dumps({"schema": {"type": "struct", "fields": [
                  {"type": "struct", "fields": fields, "optional": True, "field": "before"}]},
                  "payload": {"op": "d", "before": rows[0], "after": None, "source": {**source, "lsn": 12}}})]
    keys = [json.dumps({"schema": {"type": "struct"}, "payload": {k: r[k] for k in ("id", "day", "ts")}})
            for r in rows + rows[:1]]
    records, quarantine, _ = decode(raw_frame(spark, values, keys=keys))
    assert quarantine == []
    assert [r["key"] for r in records] == [
        {"id": "123.45", "day": "2024-12-16", "ts": "2024-12-18 18:00:49.000000"},
        {"id": "123.46", "day": "2024-12-17", "ts": "2024-12-18 18:00:50.000000"},
        {"id": "123.45", "day": "2024-12-16", "ts": "2024-12-18 18:00:49.000000"},  # the delete's, from before
    ]


def test_key_messages_headers_snapshot_markers_and_unavailable_values(spark):
    src = {"connector": "postgresql", "db": "d", "schema": "s", "table": "t", "lsn": 7}
    values = [
        json.dumps({"op": "r", "after": {"id": 1, "v": "a"}, "source": {**src, "snapshot": "first"}}),
        json.dumps({"op": "r", "after": {"id": 2, "v": "b"}, "source": {**src, "snapshot": "incremental"}}),
        json.dumps({"op": "u", "after": {"id": 1, "v": "__debezium_unavailable_value", "w": "x"},
                    "source": {**src, "lsn": 8}}),
        json.dumps({"op": "t", "source": {**src, "lsn": 9}}),
        json.dumps({"status": "BEGIN", "id": "571", "event_count": None}),
    ]
    keys = ['{"id": 1}', '{"schema": {"type": "struct"}, "payload": {"id": 2}}', '{"id": 1}', None, None]
    records, quarantine, counts = decode(raw_frame(spark, values, keys=keys))
    assert quarantine == []
    assert [(r["op"], r["phase"]) for r in records] == [
        ("SNAPSHOT", "FULL_LOAD"), ("SNAPSHOT", "CDC"), ("UPDATE", "CDC"), ("TRUNCATE", "CDC"), ("TX_BEGIN", "CDC")]
    assert records[1]["key"] == {"id": "2"}
    assert records[2]["after"] == {"id": "1", "w": "x"} and sorted(records[2]["present_columns"]) == ["id", "w"]
    # the transaction topic's BEGIN: a marker of transaction 571, not its end
    assert (records[4]["tx_id"], records[4]["tx_last"], records[4]["table_id"]) == ("571", False, "_._._")
    assert counts["ignored_reasons"] == {}


def test_unchanged_toast_values_of_every_column_type_leave_the_image(spark):
    """The PostgreSQL connector renders its placeholder by column type (UnchangedToastedPlaceholder):
    bytea as its bytes (base64 or hex), arrays as one-element arrays or the bytes as numbers, hstore
    as a map. None of them is a value: the column is left out and present_columns says so."""
    placeholder = "__debezium_unavailable_value"
    b64 = base64.b64encode(placeholder.encode()).decode()
    unchanged = {"body": placeholder, "blob": b64, "blob_hex": placeholder.encode().hex(), "tags": [placeholder],
                 "blobs": [b64], "ids": ["b68a35a7-17ad-35b3-af2a-ae46edb4545a"],
                 "nums": list(placeholder.encode()), "attrs": {placeholder: placeholder}}
    # values that only resemble a placeholder stay
    kept = {"id": 1, "note": placeholder + "!", "pair": [placeholder, "x"], "attrs2": {placeholder: "x"}}
    source = {"connector": "postgresql", "db": "d", "schema": "s", "table": "t", "lsn": 8}
    value = json.dumps({"op": "u", "after": {**kept, **unchanged}, "source": source})
    records, quarantine, _ = decode(raw_frame(spark, [value], keys=['{"id": 1}']))
    assert quarantine == []
    assert sorted(records[0]["after"]) == sorted(kept)
    assert sorted(records[0]["present_columns"]) == sorted(kept)


def test_schema_change_events_are_ddl_records(spark):
    """The schema change topic's events (no op: a source block, the statement and the changed tables)
    are recorded as DDL of their table, bare or beside the converter's schema section."""
    table_changes = [{"type": "ALTER", "id": '"testDB"."dbo"."customers"',
                      "table": {"primaryKeyColumnNames": ["id"], "columns": [{"name": "id", "typeName": "int"}]}}]
    source = {"version": "2.5.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1730000000000,
              "snapshot": "false", "db": "testDB", "schema": "dbo", "table": "customers", "change_lsn": None,
              "commit_lsn": "0000002b:00000020:0001", "event_serial_no": None}
    event = {"source": source, "ts_ms": 1730000000100, "databaseName": "testDB", "schemaName": "dbo",
             "ddl": "ALTER TABLE dbo.customers ADD phone varchar(20)", "tableChanges": table_changes}
    mysql = {"source": {"connector": "mysql", "db": "inventory", "table": None, "file": "mysql-bin.000003",
                        "pos": 154, "ts_ms": 1730000000000},
             "databaseName": "inventory", "ddl": "CREATE DATABASE inventory", "tableChanges": []}
    values = [json.dumps(event), json.dumps({"schema": {"type": "struct", "fields": []}, "payload": mysql})]
    records, quarantine, counts = decode(raw_frame(spark, values, keys=['{"databaseName": "testDB"}', None]))
    assert quarantine == [] and counts["balanced"]
    assert [(r["op"], r["table_id"]) for r in records] == [("DDL", "testDB.dbo.customers"), ("DDL", "inventory._._")]
    assert records[0]["after"]["ddl"] == event["ddl"]
    assert json.loads(records[0]["after"]["table_changes"]) == table_changes
    assert records[0]["position"].startswith("0000002B:00000020:0001")
    assert records[1]["after"] == {"ddl": "CREATE DATABASE inventory", "table_changes": "[]"}


def test_unwrapped_records_from_extract_new_record_state(spark, shared_dir):
    text = (shared_dir / "debezium/debezium-repo/serde-unwrapped.json").read_text()
    deleted = json.dumps({"id": 1004, "__deleted": "true", "__op": "d"})
    records, quarantine, _ = decode(
        raw_frame(spark, [json.dumps(json.loads(text)), deleted], keys=['{"id": 1004}'] * 2,
                  topic="server1.inventory.customers"),
    )
    assert quarantine == []
    assert records[0]["after"] == {"id": "1004", "first_name": "Anne", "last_name": "Kretchmar",
                                   "email": "annek@noanswer.org"}
    assert records[0]["table_id"] == "_.inventory.customers" and records[0]["op"] == "INSERT"
    assert records[1]["op"] == "DELETE" and records[1]["key"] == {"id": "1004"}


def test_unwrapped_rows_with_columns_named_like_the_envelopes_fields(spark):
    """A logs table's `message`, a `source` or an `op` column of the row itself: the envelope parse
    reads them as malformed or as an unknown op, yet the value is a flat row, not a broken envelope."""
    values = [json.dumps({"id": 1, "level": "WARN", "message": "disk full", "__op": "c"}),
              json.dumps({"id": 2, "source": "web", "op": "buy", "before": "x"}),
              json.dumps({"id": 1, "message": "gone", "__deleted": "true", "__op": "d"}),
              # an envelope whose source is no object stays malformed, as does broken text
              json.dumps({"op": "c", "source": "oops", "after": {"id": 1}}), "{]"]
    records, quarantine, counts = decode(raw_frame(spark, values, keys=['{"id": 1}', '{"id": 2}', '{"id": 1}',
                                                                        '{"id": 1}', None],
                                                   topic="server1.public.logs"))
    assert [(r["op"], r["key"], r["after"]) for r in records] == [
        ("INSERT", {"id": "1"}, {"id": "1", "level": "WARN", "message": "disk full"}),
        ("INSERT", {"id": "2"}, {"id": "2", "source": "web", "op": "buy", "before": "x"}),
        ("DELETE", {"id": "1"}, None),
    ]
    assert records[2]["before"] == {"id": "1", "message": "gone"}
    assert {r["table_id"] for r in records} == {"_.public.logs"}
    assert [q["reason"] for q in quarantine] == ["malformed JSON or not a JSON object"] * 2
    assert counts["balanced"]


def test_unwrapped_records_with_the_converters_schema_section(spark):
    # ExtractNewRecordState with schemas.enable=true: the flat row is the payload beside its schema,
    # whose fields are the row's columns (logical types too)
    schema = {"type": "struct", "name": "server1.inventory.customers.Value", "fields": [
        {"type": "int32", "field": "id"},
        {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "field": "credit",
         "parameters": {"scale": "2"}},
        {"type": "int32", "name": "io.debezium.time.Date", "field": "since", "optional": True},
        {"type": "string", "field": "__deleted", "optional": True},
    ]}
    values = [json.dumps({"schema": schema, "payload": {"id": 7, "credit": "MDk=", "since": 20073,
                                                        "__deleted": "false"}}),
              json.dumps({"schema": schema, "payload": {"id": 7, "credit": "MDk=", "since": 20073,
                                                        "__deleted": "true", "__op": "d"}})]
    records, quarantine, _ = decode(raw_frame(spark, values, keys=['{"id": 7}'] * 2,
                                              topic="server1.inventory.customers"))
    assert quarantine == []
    assert [(r["op"], r["key"]) for r in records] == [("INSERT", {"id": "7"}), ("DELETE", {"id": "7"})]
    assert records[0]["after"] == {"id": "7", "credit": "123.45", "since": "2024-12-16"}
    assert records[0]["column_types"] == {"id": "int", "credit": "decimal(38,2)", "since": "date"}
    assert records[1]["before"] == records[0]["after"] and records[1]["after"] is None


@pytest.mark.parametrize(
    "name, field, expected",
    [
        ("serde-with-schema.json", "after", ("Anne", "c")),
        ("serde-without-schema.json", "after", ("Anne", "c")),
        ("serde-update.json", "before", ("Anne-Marie", "u")),
        ("serde-unknown-property.json", "before", ("Anne-Marie", "u")),
    ],
)
def test_debezium_serde_fixtures(spark, shared_dir, name, field, expected):
    # pretty-printed single envelopes: one message value each
    value = json.dumps(json.loads((shared_dir / "debezium/debezium-repo" / name).read_text()))
    records, quarantine, _ = decode(raw_frame(spark, [value], keys=['{"id": 1004}']))
    assert quarantine == []
    (record,) = records
    image = record[field]
    assert (image["id"], image["last_name"], image["email"]) == ("1004", "Kretchmar", "annek@noanswer.org")
    assert image["first_name"] == expected[0]
    assert record["op"] == {"c": "INSERT", "u": "UPDATE"}[expected[1]]


def _seed_json_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith('{"schema"')]


def test_seed_002_postgres_examples(spark, shared_dir):
    lines = _seed_json_lines((shared_dir / "seeds/002_e03e39008dc43f1c.txt").read_text())
    assert len(lines) == 8
    # the document elides schemas as `{ ... }`; decode the payloads as it means them
    values = [re.sub(r'^\{"schema": \{ \.\.\. \},', "{", line) for line in lines]
    keys = [None, '{"id": 1}', None, None, None, '{"id": 1}']
    records, quarantine, counts = decode(raw_frame(spark, values[2:], keys=keys))
    # as printed, the create example lacks a comma after "sequence" and one message example lacks
    # one between ts_ms and message: broken JSON goes to quarantine with its bytes
    assert [q["reason"] for q in quarantine] == ["malformed JSON or not a JSON object"] * 2
    assert [q["offset"] for q in quarantine] == [0, 4]
    ops = [(r["op"], r["table_id"]) for r in records]
    assert ops == [("UPDATE", "postgres.public.customers"), ("TRUNCATE", "postgres.public.customers"),
                   ("MESSAGE", "postgres._._"), ("DELETE", "postgres.public.customers")]
    update = records[0]
    assert update["before"] == {"id": "1"} and update["after"]["first_name"] == "Anne Marie"
    assert update["tx_id"] == "556" and update["position"] == "00000000000024023128.00000000000024023128"
    assert records[3]["key"] == {"id": "1"} and records[3]["after"] is None
    # the logical-decoding message keeps its prefix and content (bytes, base64 as sent)
    assert (records[2]["key"], records[2]["before"], records[2]["after"]) == (
        None, None, {"prefix": "foo", "content": "Ymfy"})
    assert counts["balanced"]
    # the placeholder `{"schema": {...},...}` and the key example (trailing comma) are not JSON either
    _, quarantine, _ = decode(raw_frame(spark, values[:2]))
    assert [q["reason"] for q in quarantine] == ["malformed JSON or not a JSON object"] * 2


def test_seed_003_sqlserver_create_example(spark, shared_dir):
    text = (shared_dir / "seeds/003_25eac51771b90504.txt").read_text()
    start = text.index('{\n  "schema"')
    document, _ = json.JSONDecoder().raw_decode(text[start:])
    records, quarantine, _ = decode(raw_frame(spark, [json.dumps(document)], keys=['{"id": 1005}']))
    assert quarantine == []
    (r,) = records
    assert r["op"] == "INSERT" and r["phase"] == "CDC" and r["table_id"] == "testDB.dbo.customers"
    assert r["after"] == {"id": "1005", "first_name": "john", "last_name": "doe", "email": "john.doe@example.org"}
    assert r["position"] == "00000027:00000758:0005.00000027:00000758:0003.00000000000000000001"
    assert r["column_types"]["id"] == "int"
    assert r["event_time"] == datetime(2019, 6, 5, 10, 11, 8, 470000)


@pytest.mark.parametrize("name", ["debezium-mysql.txt", "debezium-postgresql.txt", "debezium-sqlserver.txt",
                                  "debezium-oracle.txt"])
def test_seatunnel_typed_connector_samples_decode(spark, shared_dir, name):
    records, quarantine, _ = decode(read_raw(spark, str(shared_dir / "debezium/seatunnel" / name)))
    assert quarantine == [] and len(records) == 1
    r = records[0]
    assert r["op"] == "SNAPSHOT" and r["phase"] == "FULL_LOAD" or r["op"] == "SNAPSHOT"
    assert r["after"]["id" if "oracle" not in name else "F1"] == "1"
    if "oracle" in name:
        # VariableScaleDecimal without a schema section stays its JSON text
        assert json.loads(r["after"]["F2"]) == {"scale": 0, "value": "AQ=="}
    if "postgresql" in name:
        # the sample's lsn -9223372036854776000 is a long rounded by a JSON writer; as unsigned 64-bit:
        assert r["position"] == "09223372036854775616.09223372036854775616"


def test_a_key_changes_create_without_its_toast_value_carries_the_old_key(spark):
    """Only a create whose image lacks an unchanged TOAST value needs the old key's row: its before image is
    the ``__debezium.oldkey`` header (bare or with its schema). A full create keeps no before image."""
    src = {"connector": "postgresql", "db": "d", "schema": "s", "table": "t", "lsn": 9}
    partial = json.dumps({"op": "c", "after": {"id": 2, "body": "__debezium_unavailable_value"}, "source": src})
    full = json.dumps({"op": "c", "after": {"id": 3, "body": "b"}, "source": src})
    old_keys = ['{"id": 1}', '{"schema": {"type": "struct"}, "payload": {"id": 1}}', '{"id": 1}']
    headers = {i: [{"key": "__debezium.oldkey", "value": k.encode()}] for i, k in enumerate(old_keys)}
    records, quarantine, _ = decode(raw_frame(spark, [partial, partial, full], keys=['{"id": 2}'] * 2 + ['{"id": 3}'],
                                              headers=headers))
    assert quarantine == []
    assert [(r["op"], r["key"], r["before"], r["present_columns"]) for r in records] == [
        ("INSERT", {"id": "2"}, {"id": "1"}, ["id"]), ("INSERT", {"id": "2"}, {"id": "1"}, ["id"]),
        ("INSERT", {"id": "3"}, None, None)]


def test_a_column_repeated_in_a_row_image_takes_its_last_value(spark):
    """A JSON key repeated inside one row image (``{"a": 1, "a": 2}``) is one column holding the last
    value, in the first one's place (as spark.sql.mapKeyDedupPolicy=LAST_WIN builds maps)."""
    value = _env("u", before={"id": 1}, after={"id": 1}).replace('"after": {"id": 1}', '"after": {"id": 1, "a": 1, "a": 2}')
    decoded = decode_messages(raw_frame(spark, [value], keys=['{"id": 1}']), "debezium", DecodeOptions())
    (record,) = decoded.changes.select(F.map_entries("after").alias("entries")).collect()
    release(decoded.materialized)
    assert [tuple(e) for e in record["entries"]] == [("id", "1"), ("a", "2")]


# ---- edge cases: what holds whatever the input --------------------------------------------------------
KEYED = DecodeOptions(primary_keys={"products": ("id",), "d.s.t": ("id",), "t": ("id", "v")})
# a logical-decoding message (op m) without a source block is decoded as a MESSAGE record with no table
# id, where docs/formats/debezium.md keeps it under <db>._._ (test_a_logical_message_without_a_source_block)


SOURCE = {"connector": "postgresql", "db": "d", "schema": "s", "table": "t", "lsn": 7, "ts_ms": 1730000000000}


def _env(op="c", before=None, after=None, source=SOURCE, **extra) -> str:
    return json.dumps({"op": op, "before": before, "after": after, "source": source, **extra})


def _decimal_field(name, scale="2", precision=None):
    params = {"scale": scale, **({"connect.decimal.precision": precision} if precision else {})}
    return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "field": name, "parameters": params}


def _with_schema(fields, payload) -> str:
    schema = {"type": "struct", "fields": [{"type": "struct", "fields": fields, "optional": True, "field": "after"},
                                           {"type": "struct", "fields": fields, "optional": True, "field": "before"}]}
    return json.dumps({"schema": schema, "payload": payload})


def _b64(n: int, width: int) -> str:
    return base64.b64encode(n.to_bytes(width, "big", signed=True)).decode()


EDGE_VALUES = [
    # JSON as Spark reads it: numbers through a double, nested values as compact JSON, duplicates
    '{"op":"c","after":{"id":1,"a":1.50,"b":1e5,"c":12345678901234567890,"d":-0,"e":-0.0,"f":true,"g":null,'
    '"h":[1,2.50,{"x":null}],"i":"s\\u00e9","j":1.0E-7,"k":123456789.123456789,"l":NaN,"m":-Infinity},'
    '"source":{"connector":"postgresql","db":"d","schema":"s","table":"t","lsn":8}}',
    '{"op":"c","op":"u","before":{"id":1},"after":{"id":1,"a":1},"source":{"connector":"postgresql",'
    '"db":"d","schema":"s","table":"t","lsn":9},"after":{"id":1,"a":2}}',
    "{'op':'c','after':{'id':'1'},'source':{'connector':'postgresql','db':'d','schema':'s','table':'t','lsn':1}}",
    '{"op":"c","after":{"id":1},"source":{"connector":"postgresql","table":"t","lsn":1}} trailing',
    # wrong JSON types: the parse keeps what it read, the message is malformed
    '{"op":"c","ts_ms":"x","after":{"id":"1"},"source":{"table":"t"}}',
    '{"op":"c","after":"str","source":{"table":"t"}}',
    '{"op":"c","after":{"id":1},"after":"str","source":{"table":"t","lsn":3,"connector":"postgresql"}}',
    '{"op":"c","transaction":{"id":"t1","total_order":"z"},"after":{"id":1},"source":{"table":"t"}}',
    '{"payload":{"op":5,"ts_ms":1.5,"after":{"id":1},"source":{"table":"t"}},"schema":{"fields":[]}}',
    '{"payload":"text","schema":null}',
    '{"op":"c","after":{"id":1}, xx', "  ", "null", "5", "[1,2]", '"text"', "{}",
    b'{"op":"c","after":{"id":1},"source":{"connector":"postgresql","db":"d","schema":"s","table":"t","lsn":1}}'
 + b"\xff",
    b'{"op":"c","after":{"id":"1","v":"\xff\xfe"},"source":{"connector":"postgresql","table":"t","lsn":2}}',
    # flat rows (ExtractNewRecordState), heartbeats, transaction metadata, logical messages
    '{"id":3,"name":"x","__deleted":"TRUE","__op":"u","__db":"inv","__table":"items"}',
    '{"id":4,"__op":"r"}', '{"__op":"c","__table":"x"}', '{"ts_ms":1730000000000}',
    '{"schema":{"type":"struct","fields":[{"type":"int32","field":"id"},{"type":"int32","name":'
    '"io.debezium.time.Date","field":"day"}]},"payload":{"id":5,"day":20000}}',
    '{"schema":{"type":"struct"},"payload":null}',
    '{"status":"BEGIN","id":"571:1","ts_ms":1730000000000,"event_count":null}',
    '{"status":"END","id":"571:1","ts_ms":1730000000001,"event_count":2,"data_collections":[]}',
    '{"status":"END","ts_ms":1}', '{"status":"BEGIN","id":"x","event_count":"many"}',
    '{"op":"m","source":{"connector":"postgresql","db":"d","table":"","lsn":5},"message":{"prefix":"p",'
    '"content":"YQ=="}}',
    '{"op":"m","source":{"connector":"postgresql","db":"d","lsn":5}}', '{"op":"m"}',
    # ops, snapshots, phases
    _env("r", after={"id": 1}, source={**SOURCE, "snapshot": True}),
    _env("r", after={"id": 2}, source={**SOURCE, "snapshot": "LAST"}),
    _env("r", after={"id": 3}, source={**SOURCE, "snapshot": "last_in_data_collection"}),
    _env("c", after={"id": 4}, source={**SOURCE, "snapshot": "first"}),
    _env("r", after={"id": 5}, source={**SOURCE, "snapshot": "incremental"}),
    _env("r", after={"id": 6}, source={**SOURCE, "snapshot": "false"}),
    _env("r", after={"id": 7}, source={k: v for k, v in SOURCE.items() if k != "snapshot"}),
    _env("u", after=None), _env("d"), _env("u", after={"id": 1}), _env("t"), _env("X", after={"id": 1}),
    _env(None, after={"id": 1}), _env("c", after={"id": 1}, source={"connector": "postgresql"}),
    _env("d", before={"id": 8, "v": "x"}), _env("u", before={"id": 8, "v": "x"}, after={"id": 8, "v": "y"}),
    _env("c", after={"id": 9, "v": "__debezium_unavailable_value", "w": None}),
    _env("c", after={"id": 9}, transaction={"id": "tx9", "total_order": 3, "data_collection_order": 1}),
    _env("c", after={"id": 9}, source={**SOURCE, "txId": 77, "ts_ms": "bad"}, ts_ms=1730000000123),
    _env("c", after={"id": 9}, source={**SOURCE, "ts_ms": None}, ts_ms=None),
    _env("c", after={"id": 9}, source={**SOURCE, "db": "販売", "schema": "Order Details", "table": "a.b/../c"}),
    _env("c", after={"id": 9}, source={**SOURCE, "db": "d" * 150, "schema": "s" * 90, "table": "t" * 70}),
    # schema change events
    json.dumps({"source": {**SOURCE, "table": "t"}, "ddl": "ALTER TABLE t ADD c int",
                "tableChanges": [{"type": "ALTER", "id": "t", "table": {"columns": [{"name": "c", "scale": 1.50}]}}]}),
    json.dumps({"schema": {"type": "struct", "fields": []}, "payload": {
        "source": {"connector": "mysql", "db": "inv", "table": None, "file": "b.000003", "pos": 154},
        "ddl": "CREATE DATABASE inv", "tableChanges": []}}),
    # positions of every connector, awkward ones included
    _env("u", before={"id": 1}, after={"id": 1}, source={**SOURCE, "lsn": -9223372036854775808,
                                                         "sequence": '[null,"-5"]'}),
    _env("u", before={"id": 1}, after={"id": 1}, source={**SOURCE, "lsn": "abc", "sequence": ' [ "12", "x"]'}),
    _env("u", before={"id": 1}, after={"id": 1}, source={**SOURCE, "lsn": 123456789012345678901234,
                                                         "sequence": '["1.5"]'}),
    _env("u", before={"id": 1}, after={"id": 1}, source={**SOURCE, "connector": "PostgreSQL", "lsn": " 42 "}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "sqlserver", "db": "d", "table": "t",
                                                         "commit_lsn": "0000002a:00000010:0001", "change_lsn": None,
                                                         "event_serial_no": 2}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "mysql", "db": "d", "table": "t",
                                                         "file": "binlog", "pos": 4, "row": 1}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "mysql", "db": "d", "table": "t",
                                                         "file": "mysql-bin.000012", "pos": "1e3"}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "oracle", "db": "d", "table": "t",
                                                         "scn": "9", "commit_scn": None}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "db2", "db": "d", "table": "t"}),
    # the schema section's types and conversions
    _with_schema([_decimal_field("a"), _decimal_field("b", "0"), _decimal_field("c", "3", "5"),
                  _decimal_field("d", "-1"), _decimal_field("e", " 2 "), _decimal_field("f", "x"),
                  _decimal_field("g", 2.7), {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal",
                                            "field": "v"}, {"type": "int64", "field": "n"}],
                 {"op": "c", "source": SOURCE, "after": {
                     "a": _b64(-1, 1), "b": _b64(123456789, 8), "c": "12.5", "d": _b64(-305, 2), "e": "MDk=",
                     "f": "MDk=", "g": "", "v": {"scale": "2", "value": _b64(-12345, 4)}, "n": 5}}),
    _with_schema([_decimal_field("a"), {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal",
                                        "field": "v"}],
                 {"op": "c", "source": SOURCE, "after": {"a": "12", "v": {"value": "AQ=="}}}),
    _with_schema([_decimal_field("a"), _decimal_field("b"), {"type": "struct", "name":
                                                             "io.debezium.data.VariableScaleDecimal", "field": "v"}],
                 {"op": "c", "source": SOURCE, "after": {"a": "0E00", "b": "-1.5e3", "v": "not a struct"}}),
    _with_schema([{"type": "int64", "name": n, "field": "x"} for n in ("io.debezium.time.Timestamp",)]
                 + [{"type": "int32", "name": "io.debezium.time.Date", "field": "d"},
                    {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "mt"},
                    {"type": "int64", "name": "io.debezium.time.NanoTimestamp", "field": "nt"},
                    {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "field": "z1"},
                    {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "field": "z2"},
                    {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "field": "z3"},
                    {"type": "int32", "name": "io.debezium.time.Time", "field": "t1"},
                    {"type": "int64", "name": "io.debezium.time.MicroTime", "field": "t2"},
                    {"type": "int64", "name": "io.debezium.time.NanoTime", "field": "t3"},
                    {"type": "int32", "name": "io.debezium.time.Year", "field": "y"},
                    {"type": "string", "name": "io.debezium.data.Json", "field": "j"},
                    {"type": "array", "field": "arr"}, {"type": "weird", "field": "w"},
                    {"type": "boolean", "field": "flag"}, {"type": "bytes", "field": "raw"}],
                 {"op": "c", "source": SOURCE, "after": {
                     "x": -62135596800001, "d": -719163, "mt": 253402300799999999, "nt": -1,
                     "z1": "2021-01-01T10:00:00.123456789+02:00", "z2": "2021-01-01", "z3": "garbage",
                     "t1": -1, "t2": 86400000000, "t3": 52200123456789, "y": 2024, "j": '{"a": 1}', "arr": [1, 2],
                     "w": "w", "flag": True, "raw": "AAE="}}),
    _with_schema([{"type": "int64", "name": "io.debezium.time.Timestamp", "field": "x"},
                  {"type": "int32", "name": "io.debezium.time.Date", "field": "d"}],
                 {"op": "c", "source": SOURCE, "after": {"x": "1.5", "d": " 12 "}}),
    json.dumps({"schema": "not a document", "payload": {"op": "c", "source": SOURCE, "after": {"id": 1}}}),
    json.dumps({"schema": {"fields": "oops"}, "payload": {"op": "c", "source": SOURCE, "after": {"id": 1}}}),
    json.dumps({"schema": {"type": "struct", "fields": [{"field": "after", "fields": [{"field": "id",
                "type": "INT64"}, {"field": "", "type": "int8"}, {"field": "p", "name":
                "org.apache.kafka.connect.data.Decimal", "parameters": None}]}]},
                "op": "c", "source": SOURCE, "after": {"id": 1, "p": "AQ=="}}),
]


def test_hand_made_edge_cases_keep_the_fuzz_properties(spark):
    """JSON as parsers read it, wrong JSON types, flat rows, heartbeats, transaction metadata, logical
    messages, every op and snapshot marker, schema changes, every connector's positions and the schema
    section's types and conversions at their edges, with odd keys and old-key headers: each message has
    one outcome, a quarantined one keeps its bytes, the counts balance, records are well formed."""
    values = [v if isinstance(v, bytes) else v.encode() for v in EDGE_VALUES]
    keys = ['{"id": 1}' if i % 3 == 0 else None if i % 3 == 1 else '{"schema":{},"payload":{"id":"9"}}'
            for i in range(len(values))]
    old_key = [{"key": "__debezium.oldkey", "value": b'{"id": 0}'}]
    headers = {i: old_key for i in range(len(values)) if i % 2 == 0}
    for options in (DecodeOptions(), KEYED):
        check_batch(spark, "debezium", values, keys=keys, headers=headers, topic="server1.inventory.items",
                    options=options)
    outcomes = check_batch(spark, "debezium", ['{"ts_ms": 1}', '{"x": 1}', "{}"], topic="__debezium-heartbeat.server1")
    assert [outcomes[i]["reason"] for i in range(3)] == ["heartbeat", "heartbeat", "heartbeat"]
    update = _env("u", before={"id": 1, "v": "a"}, after={"id": 1, "v": "b"})
    check_batch(spark, "debezium", [update] * 5, topic="t", keys=[
        '"1"', "[1]", '{"schema": null, "payload": {"id": 2}}', '{"payload": "{\\"id\\": 3}", "schema": 1}', "{bad"])


def test_a_logical_message_without_a_source_block_is_quarantined(spark):
    """Debezium always sends a logical-decoding message with its source block (the table ``<db>._._``); one
    without it names no table, and is quarantined as every other message without one is."""
    outcomes = check_batch(spark, "debezium", ['{"op":"m"}', '{"op":"m","message":{"prefix":"p","content":"YQ=="}}'])
    assert [(o["status"], o["reason"]) for o in outcomes.values()] == [("quarantined", "no source table")] * 2


# ---- generated messages: every JSON type in every field the decoders read ----------------------------
def _json_values(draw_text):
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                        st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(
                            ["", "x", "1", "-5", " 12 ", "1.5", "1e3", "true", "__debezium_unavailable_value",
                             "MDk=", "/s8=", "2021-01-01T10:00:00Z", "[\"1\",\"2\"]", "é", "a.b", "mysql-bin.000007"]))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(draw_text, inner, max_size=3)), max_leaves=4)


COLUMNS = st.sampled_from(["id", "v", "name", "__op", "__deleted", "__table", "ts_ms", "op", "source", "a"])
LOGICAL = st.sampled_from([None, "org.apache.kafka.connect.data.Decimal", "io.debezium.data.VariableScaleDecimal",
                           "io.debezium.time.Date", "io.debezium.time.Timestamp", "io.debezium.time.MicroTimestamp",
                           "io.debezium.time.NanoTimestamp", "io.debezium.time.ZonedTimestamp", "io.debezium.time.Time",
                           "io.debezium.time.MicroTime", "io.debezium.time.NanoTime", "io.debezium.time.Year"])


@st.composite
def debezium_messages(draw):
    """A Debezium-like message: an envelope whose fields are mostly of their type and sometimes not,
    with or without a schema section, bare or beside its schema, or a flat row; and its Kafka key."""
    values = _json_values(COLUMNS)
    image = st.one_of(st.none(), st.dictionaries(COLUMNS, values, max_size=4), values)
    source = st.fixed_dictionaries({}, optional={
        "connector": st.sampled_from(["postgresql", "sqlserver", "mysql", "oracle", "PostgreSQL", "x"]),
        "db": st.sampled_from(["d", "販売", "", "a.b"]), "schema": st.sampled_from(["s", "Order Details"]),
        "table": st.sampled_from(["t", "items", ""]), "snapshot": st.sampled_from(["true", "last", "incremental", True,
                                                                                  "false", "LAST"]),
        "ts_ms": st.one_of(st.integers(-2**40, 2**45), values), "lsn": st.one_of(st.integers(-2**63, 2**64), values),
        "sequence": st.sampled_from(['["100","200"]', '[null,"5"]', "x", ' [ "7"']), "txId": values,
        "commit_lsn": st.sampled_from(["0000002a:00000010:0001", "abc", None]), "change_lsn": values,
        "event_serial_no": values, "file": st.sampled_from(["mysql-bin.000003", "binlog", "12"]), "pos": values,
        "row": values, "scn": values, "commit_scn": values})
    envelope = draw(st.fixed_dictionaries({}, optional={
        "op": st.one_of(st.sampled_from(["r", "c", "u", "d", "t", "m", "X"]), values),
        "before": image, "after": image, "source": st.one_of(source, values), "ts_ms": values,
        "transaction": st.one_of(st.fixed_dictionaries({}, optional={"id": values, "total_order": values}), values),
        "message": st.one_of(st.fixed_dictionaries({}, optional={"prefix": values, "content": values}), values),
        "status": st.sampled_from(["BEGIN", "END", "begin"]), "id": values, "event_count": values,
        "ddl": values, "tableChanges": values}))
    fields = draw(st.lists(st.fixed_dictionaries(
        {"field": COLUMNS, "type": st.sampled_from(["int32", "int64", "string", "bytes", "struct", "float64"])},
        optional={"name": LOGICAL, "parameters": st.fixed_dictionaries({}, optional={
            "scale": st.sampled_from(["2", "0", 3, "x"]), "connect.decimal.precision": st.sampled_from(["5", "40"])})}),
        max_size=4))
    schema = {"type": "struct", "fields": [{"field": draw(st.sampled_from(["after", "before", "other"])),
                                            "type": "struct", "fields": fields}]}
    shape = draw(st.sampled_from(["bare", "with schema", "payload only", "flat"]))
    if shape == "with schema":
        document = {"schema": schema, "payload": envelope}
    elif shape == "payload only":
        document = {"payload": envelope}
    elif shape == "flat":
        document = draw(st.dictionaries(COLUMNS, values, max_size=5))
    else:
        document = envelope
    key = draw(st.one_of(st.none(), st.just('{"id": 1}'), st.builds(json.dumps, st.dictionaries(COLUMNS, values,
                                                                                               max_size=2))))
    return json.dumps(document), key


# one example of 300 messages by default (each example costs two Spark decodes); CDC_PROPERTY_EXAMPLES
# raises it (make test-properties)
@pytest.mark.slow
@settings(max_examples=max(1, int(os.environ.get("CDC_PROPERTY_EXAMPLES", "3")) // 3), deadline=None,
          database=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(messages=st.lists(debezium_messages(), min_size=300, max_size=300))
def test_generated_messages_keep_the_fuzz_properties(spark, messages):
    """Generated messages, every JSON type in every field the decoder reads: each has one outcome, a
    quarantined one keeps its bytes, the counts balance, records are well formed."""
    values = [v for v, _ in messages]
    keys = [k for _, k in messages]
    for options in (DecodeOptions(), KEYED):
        check_batch(spark, "debezium", values, keys=keys, topic="server1.inventory.items", options=options)
