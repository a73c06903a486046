"""SharePlex ``key`` blocks that also carry a changed column's old value (the update example of the
DTS document, seed 004: ``data`` {CNTR_NO: new}, ``key`` the row's key columns and CNTR_NO's old
value). The messages never name the primary key, so each update's key block looks like a key change;
the table's key is the columns every record names, and an update that keeps those is an update of the
row, whatever else its key block holds: the columns its image does not carry keep their values. The
expected states are written out by hand from the messages."""
from __future__ import annotations

from tests.support.replay import published_rows
from tests.support.shareplex import message, run, write


def test_an_update_whose_key_block_holds_the_changed_columns_old_value_keeps_the_other_columns(spark, tmp_path):
    t = "CL_BIZ1.MIO_LOG"
    key = {"MIO_LOG_ID": "32537893", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None}
    raw = write(tmp_path / "r1.jsonl", [
        message(t, "ins", 14589063118712, {**key, "CNTR_NO": "1171201606syui26", "CG_NO": "G1", "MIO_AMNT": "100"}),
        # the document's update: the changed column's old value in ``key``
        message(t, "upd", 14589063118800, {"CNTR_NO": "1171201606"}, {**key, "CNTR_NO": "1171201606syui26"}),
        message(t, "upd", 14589063118900, {"MIO_AMNT": "200"}, {**key, "MIO_AMNT": "100"}),
    ])
    lake = tmp_path / "lake"
    run(lake, "r1", raw)
    assert published_rows(lake, "p", "MIO_LOG") == [
        {**key, "CNTR_NO": "1171201606", "CG_NO": "G1", "MIO_AMNT": "200"}]


def test_a_later_runs_key_blocks_narrow_the_key_an_earlier_run_learnt(spark, tmp_path):
    t = "O.SP_K"
    lake = tmp_path / "lake"
    run(lake, "r1", write(tmp_path / "r1.jsonl", [
        message(t, "ins", 100, {"ID": "1", "NAME": "a", "CITY": "x", "AMT": "10"}),
        message(t, "ins", 101, {"ID": "2", "NAME": "c", "CITY": "z", "AMT": "20"}),
        message(t, "upd", 102, {"NAME": "b"}, {"ID": "1", "NAME": "a"}),
    ]))
    assert sorted(published_rows(lake, "p", "SP_K"), key=lambda r: r["ID"]) == [
        {"ID": "1", "NAME": "b", "CITY": "x", "AMT": "10"}, {"ID": "2", "NAME": "c", "CITY": "z", "AMT": "20"}]
    # key blocks of ID and the changed column: ID is the key both runs name
    run(lake, "r2", write(tmp_path / "r2.jsonl", [
        message(t, "upd", 103, {"CITY": "y"}, {"ID": "1", "CITY": "x"}),
        message(t, "upd", 104, {"AMT": "21"}, {"ID": "2", "AMT": "20"}),
    ]))
    assert sorted(published_rows(lake, "p", "SP_K"), key=lambda r: r["ID"]) == [
        {"ID": "1", "NAME": "b", "CITY": "y", "AMT": "10"}, {"ID": "2", "NAME": "c", "CITY": "z", "AMT": "21"}]
