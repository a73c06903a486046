"""The SharePlex JSON decoder against the DTS seed document's examples and a Flink-style product stream.

No captured SharePlex message is public (tests/resources/shareplex/SOURCE.md): the examples are those
of Alibaba DTS's documentation (tests/resources/seeds/004_a66593fb03e5fe66.txt, "Shareplex Json"), and the
product stream replays, as SharePlex would write it, the 26 row changes that Flink's
SharePlexJsonSerDerTest expects from its (unpublished) shareplex-data.txt.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from jobs import publish
from jobs.decode import decode_counts, decode_messages
from jobs.decoders import DecodeOptions
from jobs.lake import Lake
from tests.support.decoders import raw_frame, with_exact_numbers
from tests.support.pipeline_runs import jobs_run
from tests.support.shareplex import seed_examples

REPO = Path(__file__).resolve().parents[2]
MALFORMED = "malformed JSON, not a JSON object, or a field of the wrong JSON type"


def decode(spark, values, options=DecodeOptions()):
    decoded = decode_messages(raw_frame(spark, values), "shareplex", options)
    # a key change's DELETE comes before its UPDATE inside one message
    records = sorted((r.asDict(recursive=True) for r in decoded.changes.collect()),
                     key=lambda r: (r["offset"], r["op"] != "DELETE"))
    quarantine = [r.asDict() for r in decoded.quarantine.orderBy("offset").collect()]
    return records, quarantine, decode_counts(decoded.outcomes)


def test_seed_examples(spark, shared_dir):
    ex = seed_examples(shared_dir)
    # as printed, the update elides meta fields ("….") and the delete has a trailing comma: not JSON
    repaired_update = ex["update"].replace("\u2026.\n", "")
    repaired_delete = re.sub(r'"del",\s*}', '"del"}', ex["delete"])
    delete_with_table = repaired_delete.replace('"op": "del"', '"op": "del", "table": "CL_BIZ1.MIO_LOG"')
    values = [ex["insert"], ex["update"], ex["delete"], repaired_update, repaired_delete, delete_with_table]
    records, quarantine, counts = decode(spark, values)

    assert [(q["offset"], q["reason"]) for q in quarantine] == [
        (1, MALFORMED), (2, MALFORMED), (4, "no source table ('meta.table')")]
    assert quarantine[0]["value"] == ex["update"].encode()
    assert counts["balanced"] and counts["total"]["landed"] == 6

    ins = records[0]
    assert (ins["op"], ins["phase"], ins["table_id"]) == ("INSERT", "CDC", "_.CL_BIZ1.MIO_LOG")
    assert ins["after"] == {"MIO_LOG_ID": "32539737"} and ins["key"] == ins["after"]  # whole row: no key known
    assert ins["position"] == "00000014589063118712.0000000001"
    assert (ins["tx_id"], ins["tx_seq"], ins["tx_last"]) == ("7.0.411499", 1, False)  # idx 1/11
    assert ins["event_time"] == datetime(2017, 6, 16, 14, 24, 34) and ins["column_types"] is None

    # without --primary-keys the key is every column of `key`; CNTR_NO changes, so the key changes
    old = {"MIO_LOG_ID": "32537893", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None,
           "CNTR_NO": "1171201606syui26"}
    new = {**old, "CNTR_NO": "1171201606"}
    upd = [r for r in records if r["offset"] == 3]
    assert [(r["op"], r["key"]) for r in upd] == [("DELETE", old), ("UPDATE", new)]
    assert upd[1]["after"] == new and upd[1]["before"] == old
    assert sorted(upd[1]["present_columns"]) == sorted(new)
    assert upd[0]["position"] is None and upd[0]["event_id"] != upd[1]["event_id"]

    row = {"MIO_LOG_ID": "32539739", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None,
           "CG_NO": None}
    dele = [r for r in records if r["offset"] == 5]
    assert [(r["op"], r["key"], r["before"], r["after"]) for r in dele] == [("DELETE", row, row, None)]

    # with the table's primary key configured, the update is a partial UPDATE of one key
    records, quarantine, _ = decode(spark, [repaired_update, delete_with_table, ex["insert"]],
                                    DecodeOptions(primary_keys={"MIO_LOG": ("MIO_LOG_ID",)}))
    assert quarantine == []
    assert [(r["op"], r["key"]) for r in records] == [
        ("UPDATE", {"MIO_LOG_ID": "32537893"}), ("DELETE", {"MIO_LOG_ID": "32539739"}),
        ("INSERT", {"MIO_LOG_ID": "32539737"})]
    assert records[0]["after"] == new and sorted(records[0]["present_columns"]) == sorted(new)


def _sp(op, table="test.product", data=None, key=None, scn=None, seq=1, size=1, trans="1.0.1", time=None):
    meta = {"time": time or "2017-06-16T14:24:34", "userid": 84, "op": op, "scn": scn, "rowid": "AAATGpAAIAAItcIAAA",
            "trans": trans, "seq": seq, "size": size, "table": table, "idx": f"{seq}/{size}",
            "posttime": "2017-06-16T14:33:52"}
    msg = {"meta": {k: v for k, v in meta.items() if v is not None}}
    if data is not None:
        msg["data"] = data
    if key is not None:
        msg["key"] = key
    return json.dumps(msg)


def test_numbers_keep_their_digits(spark):
    """A number sent as a JSON number keeps its digits (read into a string through a double it would not:
    12345678901234567890.12 -> 1.2345678901234567E19); strings stay as sent."""
    text = _sp("upd", data={"AMOUNT": "@BIG@", "RATE": "@FINE@", "NOTE": "1.50"}, key={"ID": "@INT@"}, scn="100")
    records, quarantine, _ = decode(spark, [with_exact_numbers(text)])
    assert quarantine == []
    assert records[0]["key"] == {"ID": "123456789012345678901234567890"}
    assert records[0]["after"] == {"ID": "123456789012345678901234567890", "AMOUNT": "12345678901234567890.12",
                                   "RATE": "0.1234567890123456789", "NOTE": "1.50"}


def test_ops_positions_transactions_and_malformed(spark):
    values = [
        _sp("INSERT", data={"id": 1, "v": "a"}, scn="900", seq=2, size=2, trans="5.1.7"),
        _sp("UPD", data={"v": "b"}, key={"id": 1}, scn="1000", seq=1, size=3),
        _sp("truncate", table="test.other", scn="1000", seq=3, size=3),
        _sp("DELETE", data={"id": 1, "v": "b"}, key={"id": 1}, scn="1000", seq=2, size=3),
        _sp("drop column", data={"c": None}, scn="1001"),
        _sp("UPDATE BEFORE", data={"v": "a"}, key={"id": 1}),
        None, "[1, 2]", '{"data": {"id": 1}}', _sp(None, data={"id": 1}), _sp("merge", data={"id": 1}),
        _sp("ins", table="", data={"id": 1}), _sp("ins"), _sp("upd", data={"v": "x"}),
        _sp("del"), '{"meta": {"op": "ins", "table": "a.b"}, "data": "not an object"}',
    ]
    records, quarantine, counts = decode(spark, values)
    assert [(r["op"], r["table_id"], r["key"]) for r in records] == [
        ("INSERT", "_.test.product", {"id": "1", "v": "a"}),
        ("UPDATE", "_.test.product", {"id": "1"}),
        ("TRUNCATE", "_.test.other", None),
        ("DELETE", "_.test.product", {"id": "1"}),
        ("DDL", "_.test.product", None),
    ]
    ins, upd, trunc, dele, _ = records
    assert ins["tx_last"] is True and (ins["tx_id"], ins["tx_seq"]) == ("5.1.7", 2)
    assert (upd["tx_seq"], upd["tx_last"], trunc["tx_last"]) == (1, False, True)
    assert upd["after"] == {"id": "1", "v": "b"} and upd["before"] == {"id": "1"}
    assert ins["position"] < upd["position"] < dele["position"] < trunc["position"], "scn, then seq"
    assert records[4]["after"] == {"ddl": "drop column", "columns": '{"c":null}'}
    assert [q["reason"] for q in quarantine] == [
        MALFORMED,
        "not a SharePlex message: no 'meta'",
        "missing 'meta.op'",
        "unknown operation type 'merge'",
        "no source table ('meta.table')",
        "'data' is null for an insert",
        "update has no 'key' (the before image's key columns): give --primary-keys",
        "delete has neither 'data' nor 'key'",
        MALFORMED,
    ]
    assert quarantine[0]["value"] == b"[1, 2]"
    assert counts["ignored_reasons"] == {
        "tombstone": 1, "update before image (its UPDATE AFTER carries the change)": 1}
    assert counts["balanced"] and counts["total"]["landed"] == 16


# The 26 row changes Flink's SharePlexJsonSerDerTest expects (SOURCE.md), as SharePlex writes them:
# inserts carry the row, updates only the changed columns (+ the key's old values), deletes the row.
ROWS = {
    101: ("scooter", "Small 2-wheel scooter", 3.14), 102: ("car battery", "12V car battery", 8.1),
    103: ("12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", 0.8),
    104: ("hammer", "12oz carpenter's hammer", 0.75), 105: ("hammer", "14oz carpenter's hammer", 0.875),
    106: ("hammer", "16oz carpenter's hammer", 1.0), 107: ("rocks", "box of assorted rocks", 5.3),
    108: ("jacket", "water resistent black wind breaker", 0.1), 109: ("spare tire", "24 inch spare tire", 22.2),
    110: ("jacket", "water resistent white wind breaker", 0.2), 111: ("scooter", "Big 2-wheel scooter ", 5.18),
}
STEPS = (
    [("ins", i) for i in range(101, 110)]
    + [("upd", 106, {"description": "18oz carpenter hammer"}), ("upd", 107, {"weight": 5.1}),
       ("ins", 110), ("ins", 111),
       ("upd", 110, {"description": "new water resistent white wind breaker", "weight": 0.5}),
       ("upd", 111, {"weight": 5.17}), ("del", 111), ("upd", 101, {"weight": 5.17}),
       ("upd", 102, {"weight": 5.17}), ("del", 102), ("del", 103)]
)


def product_stream() -> list[str]:
    rows = {i: dict(zip(("name", "description", "weight"), v)) for i, v in ROWS.items()}
    out = []
    for n, (op, ident, *change) in enumerate(STEPS, start=1):
        scn = str(14589063118700 + n)
        if op == "ins":
            out.append(_sp("ins", data={"id": ident, **rows[ident]}, scn=scn))
        elif op == "upd":
            rows[ident].update(change[0])
            out.append(_sp("upd", data=change[0], key={"id": ident}, scn=scn))
        else:
            out.append(_sp("del", data={"id": ident, **rows.pop(ident)}, scn=scn))
    return out


def test_flink_product_stream_decodes_to_its_row_changes(spark):
    records, quarantine, counts = decode(spark, product_stream())
    assert quarantine == [] and counts["total"]["records"] == 20
    # Flink's metadata test: first line is row 101, op "ins", table "test.product"
    first = records[0]
    assert first["table_id"] == "_.test.product" and first["after"] == {
        "id": "101", "name": "scooter", "description": "Small 2-wheel scooter", "weight": "3.14"}
    assert first["event_time"] == datetime(2017, 6, 16, 14, 24, 34)
    kinds = [(r["op"], int(r["key"]["id"])) for r in records]
    assert kinds == [("INSERT" if s[0] == "ins" else "UPDATE" if s[0] == "upd" else "DELETE", s[1]) for s in STEPS]
    assert records[9]["after"] == {"id": "106", "description": "18oz carpenter hammer"}
    assert sorted(records[9]["present_columns"]) == ["description", "id"]
    assert len({r["event_id"] for r in records}) == 20


def _fold_with_key_change(tmp_path):
    """The product stream + a key change + a redelivery + garbage, through the CLI into Iceberg."""
    stream = product_stream()
    key_change = _sp("upd", data={"id": 204, "name": "hammer2"}, key={"id": 104}, scn="14589063118800")
    lines = stream[:12] + [stream[11]] + stream[12:] + [
        key_change,
        "garbage {",
        _sp("upd", data={"weight": 0.8}, key={"id": 204}, scn="14589063118801"),
        key_change,  # redelivered
    ]
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "shareplex.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lake = tmp_path / "lake"
    assert jobs_run("shareplex", raw, lake, "sp", "r1") == 0
    table = publish.load_table(publish.open_catalog(Lake.at(str(lake))), "sp", "_.test.product")
    cols = ["id", "name", "description", "weight"]
    state = sorted(table.scan().to_arrow().select(cols).to_pylist(), key=lambda r: int(r["id"]))
    expected = {101: ("scooter", "Small 2-wheel scooter", "5.17"),
                105: ("hammer", "14oz carpenter's hammer", "0.875"),
                106: ("hammer", "18oz carpenter hammer", "1"),  # sent as the JSON number 1.0: its value
                107: ("rocks", "box of assorted rocks", "5.1"),
                108: ("jacket", "water resistent black wind breaker", "0.1"),
                109: ("spare tire", "24 inch spare tire", "22.2"),
                110: ("jacket", "new water resistent white wind breaker", "0.5"),
                204: ("hammer2", None, "0.8")}
    report = json.loads((lake / "reports/sp/run=r1/decode.json").read_text())
    assert report["total"]["quarantined"] == 1 and report["total"]["landed"] == len(lines)
    assert report["balanced"]
    return state, expected, cols


def test_stream_folds_to_expected_state(spark, tmp_path):
    state, expected, cols = _fold_with_key_change(tmp_path)
    unmoved = [dict(zip(cols, (str(i), *v))) for i, v in expected.items() if i != 204]
    assert [r for r in state if r["id"] != "204"] == unmoved
    assert [r["id"] for r in state if r["id"] == "104"] == []  # the old key is gone


def test_key_change_keeps_the_unchanged_columns(spark, tmp_path):
    state, _, _ = _fold_with_key_change(tmp_path)
    (moved,) = [r for r in state if r["id"] == "204"]
    assert moved == {"id": "204", "name": "hammer2", "description": "12oz carpenter's hammer", "weight": "0.8"}


def test_registered_and_importable_without_a_spark_session():
    """The CLI's --help and Airflow's DAG parsing import every decoder before any session exists."""
    probe = "from jobs.decoders import available_formats; print(' '.join(available_formats()))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "shareplex" in done.stdout.split()


def test_an_update_sent_as_before_and_after_images(spark, tmp_path):
    """DTS lists UPDATE BEFORE and UPDATE AFTER among SharePlex's ops: one update as its two images, the
    BEFORE at seq n, the AFTER at n + 1 of the transaction, neither with a ``key`` block. The AFTER updates
    the row the BEFORE names: a key change removes the old key's row (with --primary-keys and without:
    then the whole row is the key). A redelivered BEFORE counts once; an AFTER without its BEFORE still
    needs --primary-keys."""
    t = "O.SP_BA"
    row = {"ID": 2, "NAME": "b", "CITY": "x"}
    values = [
        _sp("ins", table=t, data={"ID": 1, "NAME": "a", "CITY": "y"}, scn="100", trans="1.0.1"),
        _sp("ins", table=t, data=row, scn="100", seq=1, trans="1.0.2"),
        _sp("UPDATE BEFORE", table=t, data=row, scn="200", seq=1, size=4, trans="1.0.3"),
        _sp("UPDATE AFTER", table=t, data={**row, "ID": 20}, scn="200", seq=2, size=4, trans="1.0.3"),
        _sp("UPDATE BEFORE", table=t, data=row, scn="200", seq=1, size=4, trans="1.0.3"),  # redelivered
        _sp("UPDATE BEFORE", table=t, data={"ID": 1, "NAME": "a", "CITY": "y"}, scn="200", seq=3, size=4,
            trans="1.0.3"),
        _sp("UPDATE AFTER", table=t, data={"ID": 1, "NAME": "a2", "CITY": "y"}, scn="200", seq=4, size=4,
            trans="1.0.3"),
        _sp("UPDATE AFTER", table=t, data={"ID": 7, "NAME": "z"}, scn="300", trans="1.0.4"),  # no BEFORE
    ]
    records, quarantine, counts = decode(spark, values, DecodeOptions(primary_keys={"SP_BA": ("ID",)}))
    assert quarantine == []
    assert [(r["op"], r["key"]) for r in records if r["offset"] in (3, 6)] == [
        ("DELETE", {"ID": "2"}), ("UPDATE", {"ID": "20"}), ("UPDATE", {"ID": "1"})]
    assert counts["ignored_reasons"] == {"update before image (its UPDATE AFTER carries the change)": 3}
    _, quarantine, _ = decode(spark, values)
    assert [(q["offset"], q["reason"]) for q in quarantine] == [
        (7, "update has no 'key' (the before image's key columns): give --primary-keys")]
    # the op in any case, as everywhere else
    mixed = [values[1], values[2].replace("UPDATE BEFORE", "Update Before"),
             values[3].replace("UPDATE AFTER", "Update After")]
    records, _, _ = decode(spark, mixed, DecodeOptions(primary_keys={"SP_BA": ("ID",)}))
    assert [(r["op"], r["key"]) for r in records if r["offset"] == 2] == [
        ("DELETE", {"ID": "2"}), ("UPDATE", {"ID": "20"})]

    for args in ([], ["--primary-keys", "SP_BA=ID"]):
        lake = tmp_path / f"lake{len(args)}"
        raw = tmp_path / "sp_ba.jsonl"
        raw.write_text("\n".join(values[:-1]) + "\n", encoding="utf-8")
        assert jobs_run("shareplex", raw, lake, "sp", "r1", *args) == 0
        table = publish.load_table(publish.open_catalog(Lake.at(str(lake))), "sp", "_.O.SP_BA")
        state = sorted(table.scan().to_arrow().select(["ID", "NAME", "CITY"]).to_pylist(), key=lambda r: r["ID"])
        assert state == [{"ID": "1", "NAME": "a2", "CITY": "y"}, {"ID": "20", "NAME": "b", "CITY": "x"}], args
