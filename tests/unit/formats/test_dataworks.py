"""The DataWorks decoder on Paimon's real messages (tests/resources/dataworks) and the seed's examples."""
from __future__ import annotations

import json
from datetime import datetime

from jobs.formats import DecodeOptions
from tests.support.decoders import decoded_rows, raw_frame


def decode(spark, values, options=DecodeOptions()):
    return decoded_rows(raw_frame(spark, values), "dataworks", options, order=lambda r: (r["offset"], r["op"]))[:3]


def json_blocks(text: str) -> list[str]:
    """The top-level {...} blocks of a document, as printed (they carry // comments)."""
    blocks, depth, start, i, in_str, esc = [], 0, 0, 0, False, False
    while i < len(text):
        ch = text[i]
        if in_str:
            esc, in_str = (False, in_str) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
            continue
        elif ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                blocks.append(text[start:i + 1])
        i += 1
    return blocks


def test_paimon_samples(spark, shared_dir):
    values = []
    for name in ("event-insert.txt", "event-update-in-one.txt", "event-delete.txt"):
        # Paimon's test keeps only the lines that parse as JSON (the files open with a license comment)
        values += [line for line in (shared_dir / "dataworks/paimon" / name).read_text().splitlines()
                   if line.strip().startswith("{")]
    records, quarantine, counts = decode(spark, values)
    assert quarantine == [] and counts["balanced"]
    assert [r["table_id"] for r in records] == ["bigdata_test._.sync_test_table"] * 3
    insert, update, delete = records
    # sequenceId -1: a full-sync row
    assert (insert["op"], insert["phase"], insert["key"]) == ("SNAPSHOT", "FULL_LOAD", {"id": "2"})
    assert insert["after"] == {"id": "2", "val": "1.100000", "name": "a", "create_time": "2024-11-15 08:58:34.000000"}
    assert (update["op"], update["key"], update["after"]["val"], update["before"]["val"]) == (
        "UPDATE", {"id": "2"}, "2.200000", "1.100000")
    assert (delete["op"], delete["key"]) == ("DELETE", {"id": "1"})
    assert insert["column_types"] == {"id": "bigint", "val": "double", "name": "string", "create_time": "timestamp"}
    assert delete["position"] < update["position"]  # sequenceIds ...000 then ...001


def test_seed_examples(spark, shared_dir):
    blocks = json_blocks((shared_dir / "seeds/001_6ae6608ec27241fb.txt").read_text())
    assert len(blocks) == 7
    records, quarantine, counts = decode(spark, blocks)
    # the overall-format example lists every op in one string: not an operation
    assert [q["reason"] for q in quarantine] == [
        "unknown operation type 'INSERT/UPDATE_BEFOR/UPDATE_AFTER/DELETE/TRANSACTION_BEGIN/TRANSACTION_END/CREATE/"
        "ALTER/ERASE/QUERY/TRUNCATE/RENAME/CINDEX/DINDEX/GTID/XACOMMIT/XAROLLBACK/MHEARTBEAT...'"]
    assert counts["ignored_reasons"] == {"heartbeat": 1}
    assert counts["balanced"] and counts["total"]["decoded"] == 5
    # primaryKey null: keyed by the synthetic row id column
    assert all(r["key"] == {"#alibaba_rds_row_id#": "15"} for r in records)
    assert [r["op"] for r in records] == ["INSERT", "DELETE", "UPDATE", "UPDATE", "DELETE"]
    split_before, split_after = records[1], records[2]
    assert split_before["position"] < split_after["position"]  # one sequenceId, before half first


def test_malformed_and_unknown(spark):
    good_source = {"dataColumn": [{"name": "id", "type": "LONG"}], "primaryKey": ["id"],
                   "source": {"dbName": "d", "tableName": "t"}}
    values = ["{]", json.dumps({"schema": good_source, "payload": {"op": "UPSERT", "after": {"dataColumn": {"id": 1}}}}),
              json.dumps({"schema": good_source, "payload": {"op": "INSERT", "after": None}}),
              json.dumps({"payload": {"op": "TRANSACTION_BEGIN"}}), "{}"]
    records, quarantine, counts = decode(spark, values)
    # a transaction marker belongs to no table: kept as a bracket marker (no id) under _._._
    assert [(r["op"], r["table_id"], r["tx_id"], r["tx_last"]) for r in records] == [("TX_BEGIN", "_._._", None, False)]
    assert [q["reason"] for q in quarantine] == [
        "malformed JSON or not a JSON object", "unknown operation type 'UPSERT'", "'after' is null for op 'INSERT'",
        "not a DataWorks message: no payload.op"]
    assert counts["ignored_reasons"] == {} and counts["balanced"]


def test_a_truncate_statement_under_query_empties_the_table(spark):
    source = {"dataColumn": [{"name": "id", "type": "LONG"}], "primaryKey": ["id"],
              "source": {"dbName": "d", "tableName": "t"}}

    def ddl(op, text, seq):
        return json.dumps({"schema": source, "payload": {"op": op, "sequenceId": str(seq), "ddl": {"text": text}}})

    records, quarantine, counts = decode(spark, [
        ddl("QUERY", "/* dts */ truncate table t", 1), ddl("QUERY", "ANALYZE TABLE t", 2),
        ddl("ALTER", "ALTER TABLE t ADD COLUMN c int", 3), ddl("TRUNCATE", "TRUNCATE TABLE t", 4)])
    assert quarantine == [] and counts["balanced"]
    assert [(r["op"], r["table_id"], r["after"]) for r in records] == [
        ("TRUNCATE", "d._.t", None), ("DDL", "d._.t", {"ddl": "ANALYZE TABLE t"}),
        ("DDL", "d._.t", {"ddl": "ALTER TABLE t ADD COLUMN c int"}), ("TRUNCATE", "d._.t", None)]


def test_an_event_time_or_date_past_what_a_timestamp_holds_fails_nothing(spark):
    """An ``eventTime`` past 9999-12-31 failed the whole decode (long overflow): it is quarantined; a DATE
    value past it is a value the type cannot hold, kept as sent (as other formats keep theirs); a full
    sync's eventTime -1 stays no time."""
    source = {"dataColumn": [{"name": "id", "type": "LONG"}, {"name": "d", "type": "DATE"}], "primaryKey": ["id"],
              "source": {"dbName": "d", "tableName": "t"}}

    def insert(n, event_ms, date_ms):
        payload = {"op": "INSERT", "sequenceId": str(n), "timestamp": {"eventTime": event_ms},
                   "after": {"dataColumn": {"id": n, "d": date_ms}}}
        return json.dumps({"schema": source, "payload": payload})

    records, quarantine, counts = decode(spark, [
        insert(1, 9223372036854775807, 0), insert(2, 253402300800000, 0), insert(3, -1, 9223372036854775807),
        insert(4, 1731662097000, -62135596800001), insert(5, 253402300799999, -62135596800000)])
    assert [(q["offset"], q["reason"]) for q in quarantine] == [
        (0, "'payload.timestamp.eventTime' is not a number of milliseconds since 1970 (epoch)"),
        (1, "'payload.timestamp.eventTime' is not a number of milliseconds since 1970 (epoch)")]
    # the last millisecond of 9999 is a time, decoded (the decode stage keeps no event time past 9999-12-30)
    assert [(r["key"]["id"], r["event_time"], r["after"]["d"]) for r in records] == [
        ("3", None, "9223372036854775807"),
        ("4", datetime(2024, 11, 15, 9, 14, 57), "-62135596800001"),
        ("5", None, "0001-01-01 00:00:00.000000")]
    assert counts["balanced"]
