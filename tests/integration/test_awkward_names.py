"""Names from messages that the pipeline's own machinery also uses: key columns named like the fold's
internal columns (``s``, ``e``, ``events``, ``partition``, ``event_id``), table names whose safe
forms are alike (non-ASCII names reduce to underscores), and column names that differ only in case.
Each is an ordinary table; the expected states are written out by hand from the messages."""
from __future__ import annotations

from pathlib import Path

import pytest

from jobs import publish
from jobs.lake import Lake
from tests.integration.test_key_blocks import message, run, write
from tests.integration.test_workload_replay import published_rows

pytestmark = pytest.mark.integration


def rows(lake: Path, table: str) -> list[dict]:
    return sorted(published_rows(lake, "p", table), key=lambda r: r["s"])


def test_key_columns_named_like_the_folds_own_columns(spark, tmp_path):
    t = "O.ODD"
    lake = tmp_path / "lake"
    key1 = {"s": "1", "partition": "p1", "event_id": "e1"}
    run(lake, "r1", write(tmp_path / "r1.jsonl", [
        message(t, "ins", 100, {**key1, "e": "a", "events": "x"}),
        message(t, "ins", 101, {"s": "2", "partition": "p1", "event_id": "e1", "e": "b", "events": "y"}),
        message(t, "upd", 102, {"events": "x2"}, key1),
        # a key change carrying only the changed column: the row moves with its other columns
        message(t, "upd", 103, {"s": "3"}, key1),
    ]))
    assert rows(lake, "ODD") == [
        {"s": "2", "partition": "p1", "event_id": "e1", "e": "b", "events": "y"},
        {"s": "3", "partition": "p1", "event_id": "e1", "e": "a", "events": "x2"}]


def test_tables_whose_names_reduce_to_the_same_safe_form_stay_apart(spark, tmp_path):
    lake = tmp_path / "lake"
    run(lake, "r1", write(tmp_path / "r1.jsonl", [
        message("販売.顧客", "ins", 100, {"id": "1", "名前": "山田"}),
        message("販売.注文", "ins", 101, {"id": "1", "金額": "5.00"}),
        message("販売.注文", "del", 102, {"id": "1", "金額": "5.00"}),
        message("dbo.Order Details", "ins", 103, {"id": "1", "qty": "10"}),
        message("dbo.Order_Details", "ins", 104, {"id": "1", "qty": "99"}),
    ]))
    catalog = publish.open_catalog(Lake.at(str(lake)))
    tables = catalog.list_tables("p")
    assert len(tables) == 4
    states = [[{k: v for k, v in r.items() if not k.startswith("_cdc_")}
               for r in catalog.load_table(ident).scan().to_arrow().to_pylist()] for ident in tables]
    assert sorted(map(str, states)) == sorted(map(str, [
        [{"id": "1", "名前": "山田"}], [], [{"id": "1", "qty": "10"}], [{"id": "1", "qty": "99"}]]))


def test_columns_whose_names_differ_only_in_case_are_two_columns(spark, tmp_path):
    lake = tmp_path / "lake"
    run(lake, "r1", write(tmp_path / "r1.jsonl", [
        message("O.CASES", "ins", 100, {"id": "1", "Name": "mixed", "NAME": "upper"}),
        message("O.CASES", "upd", 101, {"NAME": "upper2"}, {"id": "1"}),
        message("O.OTHER", "ins", 102, {"id": "1", "v": "ok"}),
    ]))
    assert published_rows(lake, "p", "CASES") == [{"id": "1", "Name": "mixed", "NAME": "upper2"}]
    assert published_rows(lake, "p", "OTHER") == [{"id": "1", "v": "ok"}]
