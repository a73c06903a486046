"""SharePlex JSON through whole ``jobs run``s: the product stream with a key change, a redelivery and
garbage, and an update sent as its before and after images, published to Iceberg (the decoder's own
tests: tests/unit/formats/test_shareplex.py)."""
from __future__ import annotations

import json

from jobs.formats import DecodeOptions
from tests.support.pipeline_runs import jobs_run, published_rows, run_lines
from tests.support.shareplex import decode, product_stream
from tests.support.shareplex import sp_message as _sp


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
    lake = run_lines(tmp_path, "shareplex", lines, "sp")
    cols = ["id", "name", "description", "weight"]
    state = published_rows(lake, "sp", "_.test.product", cols, key=lambda r: int(r["id"]))
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
        (7, "update has no 'key' (the before image's key columns): give --primary-keys (tables[].primary_keys in a pipeline file)")]
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
        state = published_rows(lake, "sp", "_.O.SP_BA", ["ID", "NAME", "CITY"], key=lambda r: r["ID"])
        assert state == [{"ID": "1", "NAME": "a2", "CITY": "y"}, {"ID": "20", "NAME": "b", "CITY": "x"}], args
