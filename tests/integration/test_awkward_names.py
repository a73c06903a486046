"""Names from messages that the pipeline's own machinery also uses: key columns named like the fold's
internal columns (``s``, ``e``, ``events``, ``partition``, ``event_id``), table names whose safe
forms are alike (non-ASCII names reduce to underscores), table names whose parts hold the ``__`` that
joins them into an Iceberg name, a table name longer than a folder name may be, and column names that
differ only in case. Each is an ordinary table; the expected states are written out by hand from the
messages."""
from __future__ import annotations

from pathlib import Path

from jobs.iceberg import catalog as iceberg_catalog
from jobs.iceberg.catalog import open_catalog
from jobs.lake.layout import Lake
from jobs.model import record as canonical
from jobs.model.properties import TABLE_ID_PROP
from tests.support.pipeline_runs import jobs_run
from tests.support.replay import published_rows
from tests.support.shareplex import message, run, write


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
    catalog = open_catalog(Lake.at(str(lake)))
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


def _states(lake: Path) -> dict[str, list[dict]]:
    """Each Iceberg table of the pipeline: the table id it holds -> its rows (without _cdc_ columns)."""
    catalog = open_catalog(Lake.at(str(lake)))
    out = {}
    for ident in catalog.list_tables("p"):
        table = catalog.load_table(ident)
        out[table.properties[TABLE_ID_PROP]] = sorted(
            ({k: v for k, v in r.items() if not k.startswith("_cdc_")} for r in table.scan().to_arrow().to_pylist()),
            key=str)
    return out


def test_table_names_holding_the_iceberg_names_separator_stay_apart(spark, tmp_path):
    """``A__B.T`` and ``A.B__T`` join into one Iceberg name, as does a source table ``ORDERS__history``
    with the history table of ``ORDERS``; a 300-character table name is longer than a folder name."""
    lake = tmp_path / "lake"
    long_name = "L" * 300
    raw = write(tmp_path / "r1.jsonl", [
        message("A__B.T", "ins", 100, {"id": "1", "v": "ab"}),
        message("A.B__T", "ins", 101, {"id": "1", "v": "a"}),
        message("A.B__T", "ins", 102, {"id": "2", "v": "a"}),
        message("O.ORDERS", "ins", 103, {"id": "1", "v": "order"}),
        message("O.ORDERS__history", "ins", 104, {"id": "7", "v": "a source table"}),
        message(f"O.{long_name}", "ins", 105, {"id": "1", "v": "long"}),
    ])
    assert jobs_run("shareplex", raw, lake, "p", "r1", "--history") == 0
    states = _states(lake)
    long_id = canonical.make_table_id(None, "O", long_name)
    assert len(long_id) < 100
    assert {t: [{k: r[k] for k in ("id", "v")} for r in rows_] for t, rows_ in states.items()} == {
        "_.A__B.T": [{"id": "1", "v": "ab"}], "_.A__B.T.history": [{"id": "1", "v": "ab"}],
        "_.A.B__T": [{"id": "1", "v": "a"}, {"id": "2", "v": "a"}],
        "_.A.B__T.history": [{"id": "1", "v": "a"}, {"id": "2", "v": "a"}],
        "_.O.ORDERS": [{"id": "1", "v": "order"}], "_.O.ORDERS.history": [{"id": "1", "v": "order"}],
        "_.O.ORDERS__history": [{"id": "7", "v": "a source table"}],
        "_.O.ORDERS__history.history": [{"id": "7", "v": "a source table"}],
        long_id: [{"id": "1", "v": "long"}], f"{long_id}.history": [{"id": "1", "v": "long"}],
    }


def test_a_table_published_under_its_joined_name_is_still_found(spark, tmp_path, monkeypatch):
    """A lake whose tables were named by the plain ``__`` join (before names were made one-to-one) keeps
    its tables: a later run finds ``A__B.T``'s table under the old name, through the table id it holds;
    and ``ORDERS__history``, published under the name the history table of ``ORDERS`` now has, keeps
    it: that history table takes its hashed name."""
    lake = tmp_path / "lake"
    with monkeypatch.context() as patched:
        patched.setattr(iceberg_catalog, "iceberg_table_name", canonical.joined_table_name)
        run(lake, "r1", write(tmp_path / "r1.jsonl", [
            message("A__B.T", "ins", 100, {"id": "1", "v": "a"}),
            message("O.ORDERS__history", "ins", 101, {"id": "7", "v": "a source table"})]))
    catalog = open_catalog(Lake.at(str(lake)))
    legacy = {"___A__B__T", "___O__ORDERS__history"}
    assert {i[-1] for i in catalog.list_tables("p")} == legacy
    raw = write(tmp_path / "r2.jsonl", [
        message("A__B.T", "upd", 200, {"v": "b"}, {"id": "1"}),
        message("O.ORDERS__history", "upd", 201, {"v": "still a source table"}, {"id": "7"}),
        message("O.ORDERS", "ins", 202, {"id": "1", "v": "order"})])
    assert jobs_run("shareplex", raw, lake, "p", "r2", "--history") == 0
    names = {i[-1] for i in catalog.list_tables("p")}
    assert legacy < names and canonical.hashed_table_name("_.O.ORDERS.history") in names
    states = {t: [{k: r[k] for k in ("id", "v")} for r in rows_] for t, rows_ in _states(lake).items()}
    assert states["_.A__B.T"] == [{"id": "1", "v": "b"}]
    assert states["_.O.ORDERS__history"] == [{"id": "7", "v": "still a source table"}]
    assert states["_.O.ORDERS"] == states["_.O.ORDERS.history"] == [{"id": "1", "v": "order"}]
