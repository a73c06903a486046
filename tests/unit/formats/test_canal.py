"""The Canal JSON decoder against the real messages in tests/resources/canal and the DTS seed document.

Expected values are those the tools' own test suites expect (tests/resources/canal/SOURCE.md) and
the shapes Alibaba DTS documents (tests/resources/seeds/004_a66593fb03e5fe66.txt, section "Canal Json").
"""
from __future__ import annotations

import json
from datetime import datetime

import pytest

from jobs.formats import DecodeOptions
from jobs.lake.raw import read_raw
from tests.support.decoders import assert_rows_equal, decoded_rows, flink_row_kinds, raw_frame

# Flink CanalJsonSerDeSchemaTest: the 26 rows canal-data.txt, canal-data-with-init.txt and
# canal-data-filter-table.txt (filtered to mydb.product) all decode to
FLINK_EXPECTED = [
    ("+I", 101, "scooter", "Small 2-wheel scooter", 3.14),
    ("+I", 102, "car battery", "12V car battery", 8.1),
    ("+I", 103, "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", 0.8),
    ("+I", 104, "hammer", "12oz carpenter's hammer", 0.75),
    ("+I", 105, "hammer", "14oz carpenter's hammer", 0.875),
    ("+I", 106, "hammer", None, 1.0),
    ("+I", 107, "rocks", "box of assorted rocks", 5.3),
    ("+I", 108, "jacket", "water resistent black wind breaker", 0.1),
    ("+I", 109, "spare tire", "24 inch spare tire", 22.2),
    ("-U", 106, "hammer", None, 1.0),
    ("+U", 106, "hammer", "18oz carpenter hammer", 1.0),
    ("-U", 107, "rocks", "box of assorted rocks", 5.3),
    ("+U", 107, "rocks", "box of assorted rocks", 5.1),
    ("+I", 110, "jacket", "water resistent white wind breaker", 0.2),
    ("+I", 111, "scooter", "Big 2-wheel scooter ", 5.18),
    ("-U", 110, "jacket", "water resistent white wind breaker", 0.2),
    ("+U", 110, "jacket", "new water resistent white wind breaker", 0.5),
    ("-U", 111, "scooter", "Big 2-wheel scooter ", 5.18),
    ("+U", 111, "scooter", "Big 2-wheel scooter ", 5.17),
    ("-D", 111, "scooter", "Big 2-wheel scooter ", 5.17),
    ("-U", 101, "scooter", "Small 2-wheel scooter", 3.14),
    ("+U", 101, "scooter", "Small 2-wheel scooter", 5.17),
    ("-U", 102, "car battery", "12V car battery", 8.1),
    ("+U", 102, "car battery", "12V car battery", 5.17),
    ("-D", 102, "car battery", "12V car battery", 5.17),
    ("-D", 103, "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", 0.8),
]


def decode(raw, options=DecodeOptions()):
    # records of one message keep their order: by row position, a key change's DELETE first
    return decoded_rows(raw, "canal", options,
                        order=lambda r: (r["offset"], r["position"] or "", r["op"] != "DELETE"))[:3]


@pytest.mark.parametrize(
    "path, table, landed",
    [
        ("canal/flink/canal-data.txt", "inventory._.products2", 11),
        ("canal/flink/canal-data-with-init.txt", "inventory._.products2", 11),
        ("canal/flink/canal-data-filter-table.txt", "mydb._.product", 16),
    ],
)
def test_flink_files_decode_to_flink_rows(spark, shared_dir, path, table, landed):
    records, quarantine, counts = decode(read_raw(spark, str(shared_dir / path)))
    assert quarantine == []
    assert counts["balanced"] and counts["total"]["landed"] == landed == counts["total"]["decoded"]
    rows = [r for r in records if r["table_id"] == table]
    assert_rows_equal(flink_row_kinds(rows), FLINK_EXPECTED)
    positions = [r["position"] for r in rows if r["phase"] == "CDC"]
    assert positions == sorted(positions), "string order of positions must be source order"
    # isDdl messages are recorded (Flink skips them), never folded as rows
    ddl = [r for r in records if r["op"] == "DDL"]
    assert ddl and all(r["after"]["ddl"].startswith("CREATE TABLE") and r["key"] is None for r in ddl)


def test_init_is_the_full_load_and_unknown_columns_are_kept(spark, shared_dir):
    records, _, _ = decode(read_raw(spark, str(shared_dir / "canal/flink/canal-data-with-init.txt")))
    rows = [r for r in records if r["table_id"] == "inventory._.products2"]
    assert [(r["op"], r["phase"]) for r in rows[:9]] == [("SNAPSHOT", "FULL_LOAD")] * 9
    assert {r["phase"] for r in rows[9:]} == {"CDC"}
    assert rows[0]["after"]["other"] == "val1"  # a column unknown to Flink's schema stays in the row


def test_metadata_of_the_first_message(spark, shared_dir):
    """Flink testDeserializationWithMetadata: database, table, types, pk names, event time."""
    records, _, _ = decode(read_raw(spark, str(shared_dir / "canal/flink/canal-data.txt")))
    first = records[:9]
    assert [r["key"] for r in first] == [{"id": str(i)} for i in range(101, 110)]
    assert first[0]["table_id"] == "inventory._.products2"
    assert first[0]["column_types"] == {"id": "int", "name": "string", "description": "string", "weight": "float"}
    assert first[0]["event_time"] == datetime(2020, 5, 13, 12, 38, 35)  # es 1589373515000 (session time zone UTC)
    assert len({r["event_id"] for r in first}) == 9, "rows of one message have distinct event ids"
    filtered, _, _ = decode(read_raw(spark, str(shared_dir / "canal/flink/canal-data-filter-table.txt")))
    product = [r for r in filtered if r["table_id"] == "mydb._.product"]
    assert product[0]["column_types"]["id"] == "int" and product[0]["key"] == {"id": "101"}
    assert product[0]["event_time"] == datetime(2020, 9, 1, 7, 8, 52)  # es 1598944132000
    orders = [r for r in filtered if r["table_id"] == "mydb._.orders" and r["op"] != "DDL"]
    assert orders[0]["key"] == {"order_number": "10001"} and orders[0]["column_types"]["order_date"] == "date"


def test_seatunnel_real_canal_output(spark, shared_dir):
    records, quarantine, counts = decode(read_raw(spark, str(shared_dir / "canal/seatunnel/canal_data.txt")))
    assert quarantine == [] and counts["balanced"] and counts["total"]["decoded"] == 7
    rows = [r for r in records if r["op"] != "DDL"]
    got = [(kind, ident, weight) for kind, ident, _, _, weight in flink_row_kinds(rows)]
    assert got == [("+I", i, w) for i, w in zip(range(1101, 1110),
                                                           (3.14, 8.1, 0.8, 0.75, 0.875, 1.0, 5.3, 0.1, 22.2))] + [
        ("-U", 1101, 3.14), ("+U", 1101, 4.56), ("-U", 1107, 5.3), ("+U", 1107, 7.88), ("-D", 1109, 22.2)]
    assert rows[0]["column_types"]["weight"] == "string"  # VARCHAR(512) in this table
    ddl = [r for r in records if r["op"] == "DDL"]
    assert [r["table_id"] for r in ddl] == ["canal_hvygfc._._", "canal_hvygfc._.products", "canal_hvygfc._.products"]


def _dts(type_, data=None, old=None, es=1600161894000, id_=58, table="tablename", **extra):
    msg = {"data": data, "old": old, "database": "dbname", "es": es, "id": id_, "isDdl": False,
           "mysqlType": {"id": "bigint", "shipping_type": "varchar"}, "pkNames": ["id"], "sql": "",
           "sqlType": {"id": -5, "shipping_type": 12}, "table": table, "ts": es + 771, "type": type_}
    msg.update(extra)
    return json.dumps(msg)


def test_dts_seed_examples(spark):
    """Both DELETE shapes of the seed (before / after 2022-03-20), INIT, the commented DDL example."""
    pre_2022 = _dts("DELETE", old=[{"id": "500000287", "shipping_type": "aaa"}])
    post_2022 = _dts("DELETE", data=[{"id": "500000287", "shipping_type": None}], id_=59)
    ddl = """{
"database":"dbname", // The name of the database for synchronization or migration.
"es":1600161894000, // The time when the source data was written to the binary log.
"id":58, // The offset in the DTS cache.
"isDdl":true, // Specifies whether to synchronize or migrate DDL statements.
"sql":"eg:createxxx", // The DDL statement from the binary log.
"table":"tablename", // The name of the table for synchronization or migration.
"ts":1600161894771, // The time when DTS wrote the data to the destination.
"type":"DDL"
}"""  # as printed in the seed, comments and line breaks included
    init = _dts("INIT", data=[{"id": "1", "shipping_type": "x"}], es=1600000000000, id_=1)
    truncate = json.dumps({"database": "dbname", "table": "tablename", "isDdl": True, "type": "QUERY",
                           "sql": "/* dts */ truncate table `tablename`", "es": 1600161895000, "id": 60})
    records, quarantine, counts = decode(raw_frame(spark, [pre_2022, post_2022, ddl, init, truncate]))
    assert quarantine == [] and counts["balanced"]
    deletes = [r for r in records if r["op"] == "DELETE"]
    assert [(d["key"], d["before"]["shipping_type"], d["after"]) for d in deletes] == [
        ({"id": "500000287"}, "aaa", None), ({"id": "500000287"}, None, None)]
    assert deletes[0]["column_types"] == {"id": "bigint", "shipping_type": "string"}
    assert deletes[0]["position"] < deletes[1]["position"]
    by_op = {r["op"]: r for r in records}
    assert by_op["DDL"]["after"] == {"ddl": "eg:createxxx"} and by_op["DDL"]["table_id"] == "dbname._.tablename"
    assert (by_op["SNAPSHOT"]["phase"], by_op["SNAPSHOT"]["key"]) == ("FULL_LOAD", {"id": "1"})
    assert by_op["TRUNCATE"]["table_id"] == "dbname._.tablename" and by_op["TRUNCATE"]["position"] > deletes[1]["position"]


def test_types_and_values(spark):
    msg = {
        "data": [{"ok": "1", "amount": "12.50", "at": "2024-11-15 08:58:34", "d": "2024-11-15", "big": "18446744073709551615",
                  "blob": "\u00ff\u0001", "note": "text", "zero": "0000-00-00 00:00:00", "n": "7", "f": "2.5"}],
        "mysqlType": {"ok": "tinyint(1)", "amount": "decimal(10,2)", "at": "datetime(3)", "d": "date",
                      "big": "bigint(20) unsigned", "blob": "blob", "note": "text", "zero": "timestamp"},
        "sqlType": {"n": 4, "f": 8},
        "database": "db", "table": "t", "type": "INSERT", "es": 1, "id": 1, "pkNames": None, "isDdl": False,
    }
    records, quarantine, _ = decode(raw_frame(spark, [json.dumps(msg)]))
    assert quarantine == []
    (r,) = records
    assert r["column_types"] == {"ok": "boolean", "amount": "decimal(10,2)", "at": "timestamp", "d": "date",
                                 "big": "decimal(20,0)", "blob": "binary", "note": "string", "zero": "timestamp"}
    a = r["after"]
    assert (a["ok"], a["amount"], a["at"], a["d"]) == ("true", "12.50", "2024-11-15 08:58:34.000000", "2024-11-15")
    # a zero date is kept as sent: the state cannot hold it and counts it (unconverted_values)
    assert (a["big"], a["blob"], a["note"], a["zero"]) == ("18446744073709551615", "/wE=", "text", "0000-00-00 00:00:00")
    assert r["key"] == a, "no pkNames and no --primary-keys: the whole row is the key"
    # a tinyint(1) holding neither 0 nor 1, an impossible date: kept as sent, not made true or null
    odd = {**msg, "data": [{**msg["data"][0], "ok": "2", "d": "2020-02-30", "at": "0000-00-00 00:00:00"}]}
    a = decode(raw_frame(spark, [json.dumps(odd)]))[0][0]["after"]
    assert (a["ok"], a["d"], a["at"]) == ("2", "2020-02-30", "0000-00-00 00:00:00")
    # sqlType (java.sql.Types) types the columns when mysqlType is missing
    del msg["mysqlType"]
    records, _, _ = decode(raw_frame(spark, [json.dumps(msg)]))
    assert {k: records[0]["column_types"][k] for k in ("n", "f")} == {"n": "int", "f": "double"}


def test_key_change_and_keyless_update(spark):
    keyed = json.dumps({
        "data": [{"id": "2", "v": "b"}, {"id": "5", "v": "x"}], "old": [{"id": "1"}, {"v": "y"}],
        "database": "db", "table": "t", "type": "UPDATE", "es": 10, "id": 3, "pkNames": ["id"], "isDdl": False,
        "mysqlType": {"id": "int", "v": "varchar(10)"}})
    keyless = json.dumps({
        "data": [{"a": "1", "b": "new"}], "old": [{"b": "old"}],
        "database": "db", "table": "nokey", "type": "UPDATE", "es": 11, "id": 4, "pkNames": None, "isDdl": False})
    records, quarantine, counts = decode(raw_frame(spark, [keyed, keyless]))
    assert quarantine == [] and counts["total"]["records"] == 5
    assert [(r["op"], r["key"], r["before"], r["after"]) for r in records] == [
        ("DELETE", {"id": "1"}, {"id": "1", "v": "b"}, None),
        ("INSERT", {"id": "2"}, None, {"id": "2", "v": "b"}),
        ("UPDATE", {"id": "5"}, {"id": "5", "v": "y"}, {"id": "5", "v": "x"}),
        ("DELETE", {"a": "1", "b": "old"}, {"a": "1", "b": "old"}, None),
        ("INSERT", {"a": "1", "b": "new"}, None, {"a": "1", "b": "new"}),
    ]
    # the rows of a message share its position (a batch's messages share it too: the offset orders them)
    assert records[0]["position"] == records[1]["position"] == records[2]["position"] < records[3]["position"]
    # --primary-keys wins over pkNames
    records, _, _ = decode(raw_frame(spark, [keyed]), DecodeOptions(primary_keys={"t": ("v",)}))
    assert sorted((r["op"], r["key"]["v"]) for r in records) == [("DELETE", "y"), ("INSERT", "x"), ("UPDATE", "b")]
    # ... and so does a glob over whole table ids (jobs.model.table_rules), below a rule naming the table
    globbed, _, _ = decode(raw_frame(spark, [keyed]), DecodeOptions(primary_keys={"db.*": ("v",)}))
    assert globbed == records
    named, _, _ = decode(raw_frame(spark, [keyed]), DecodeOptions(primary_keys={"*": ("v",), "t": ("id",)}))
    assert all(set(r["key"]) == {"id"} for r in named)
    # of two globs naming the table, the first listed wins (jobs.model.table_rules), as on the JVM side
    first, _, _ = decode(raw_frame(spark, [keyed]), DecodeOptions(primary_keys={"db.*": ("id",), "*": ("v",)}))
    assert all(set(r["key"]) == {"id"} for r in first)


def test_malformed_messages_are_quarantined_with_their_bytes(spark):
    row = '"database":"db","table":"t","es":1,"id":1,"pkNames":["id"]'
    values = [
        "not json", "{}", '{"type":"MERGE",' + row + ',"data":[{"id":"1"}]}',
        '{"type":"INSERT","database":"db","data":[{"id":"1"}]}', '{"type":"INSERT",' + row + ',"data":[]}',
        '{"type":"UPDATE","database":"db","table":"t","es":1,"data":[{"id":"1"}],"old":null}',
        '{"type":"INSERT",' + row + ',"data":{"id":"1"}}', None, "",
        # the seed's pre-2022-03-20 DELETE as printed: the row in `old` lacks the key column
        '{"type":"DELETE",' + row + ',"data":null,"old":[{"shipping_type":"aaa"}]}',
    ]
    records, quarantine, counts = decode(raw_frame(spark, values))
    assert records == []
    assert [q["reason"] for q in quarantine] == [
        "malformed JSON or not a JSON object",
        "not a Canal message: no 'type'",
        "unknown operation type 'MERGE'",
        "no database/table",
        "'data' is empty for type INSERT",
        "update of a table without pkNames has no 'old' image: give --primary-keys (tables[].primary_keys in a pipeline file)",
        "malformed JSON or not a JSON object",
        "a row lacks a key column named in pkNames",
    ]
    assert [q["value"] for q in quarantine][0] == b"not json"
    assert counts["total"] == {"landed": 10, "decoded": 0, "quarantined": 8, "ignored": 2, "records": 0}
    assert counts["ignored_reasons"] == {"tombstone": 2} and counts["balanced"]


def test_a_binlog_time_that_is_no_time_is_quarantined(spark):
    """``es`` (the binlog's time, ms) is the event time and orders the message: one past what a timestamp
    holds failed the whole decode (long overflow), one that is not a number published a change without its
    time; each is quarantined, as Maxwell's ``ts`` is."""
    row = '"database":"db","table":"t","id":1,"pkNames":["id"],"type":"INSERT","data":[{"id":"%d"}]'
    values = ["{" + row % 1 + ',"es":9223372036854775807}', "{" + row % 2 + ',"es":253402300800000}',
              "{" + row % 3 + ',"es":-1}', "{" + row % 4 + ',"es":"soon"}', "{" + row % 5 + ',"es":1.5}',
              "{" + row % 6 + ',"es":253402300799999}', "{" + row % 7 + ',"es":1589373515000}', "{" + row % 8 + "}"]
    records, quarantine, counts = decode(raw_frame(spark, values))
    assert [(q["offset"], q["reason"]) for q in quarantine] == [
        (i, "'es' is not a number of milliseconds since 1970 (epoch)") for i in range(5)]
    # the last millisecond of 9999 is a time, decoded (the decode stage keeps no event time past 9999-12-30)
    assert [r["key"]["id"] for r in records] == ["6", "7", "8"]
    assert (records[1]["event_time"], records[2]["event_time"]) == (datetime(2020, 5, 13, 12, 38, 35), None)
    assert counts["balanced"]
