"""Several tables committed at once (jobs.iceberg.commit) on a real SQL catalog, SQLite (the embedded
default), with pyiceberg appends of tiny Arrow tables: every table of a commit moves, or none does, each
table's optimistic check kept. tests/integration/test_commit_postgres.py plays the same scenarios
(tests/support/table_commits.py) on PostgreSQL, and two runs racing there."""
from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from sqlalchemy import event

import jobs.iceberg.commit as commit_module
from jobs.iceberg.commit import TablesCommitFailed, abandon, commit_tables
from tests.support.table_commits import (
    NAMESPACE,
    NOTHING_CHANGED,
    CommitScenarios,
    a_changed_table_moves_nothing,
    another_writer,
    ids,
    make_tables,
    metadata_files,
    pointers,
    staged_append,
    staged_create,
    three_tables_move_together,
)


@pytest.fixture()
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


@pytest.fixture()
def catalog(tmp_path: Path, warehouse: Path):
    warehouse.mkdir()
    catalog = SqlCatalog("cdc", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{warehouse}")
    yield catalog
    catalog.engine.dispose()


class TestOnSqlite(CommitScenarios):
    """The scenarios of tests/support/table_commits.py on this module's catalog."""


@pytest.mark.parametrize("scenario", ["three tables", "a table changed before the swap"])
def test_where_the_row_count_is_unreliable_the_rows_are_locked_instead(catalog, warehouse, monkeypatch, scenario):
    """Dialects without a reliable UPDATE row count: each row selected FOR UPDATE, then changed (as SqlCatalog's
    own commit does); the same outcomes."""
    monkeypatch.setattr(catalog.engine.dialect, "supports_sane_rowcount", False)
    if scenario == "three tables":
        three_tables_move_together(catalog)
    else:
        a_changed_table_moves_nothing(catalog, warehouse, "before the swap")


def test_an_error_before_the_database_commit_moves_nothing_and_cleans_up(catalog, warehouse, monkeypatch):
    """A metadata file that cannot be written (the second table's): raised as it is, with a note that no table
    changed; the first table's new metadata file and every append's manifests are gone."""
    make_tables(catalog, "a", "b")
    files = metadata_files(warehouse)
    txns = [staged_append(catalog, "a", 1), staged_append(catalog, "b", 1)]
    before = pointers(catalog, "a", "b")
    real, written = commit_module.write_metadata, []

    def write_metadata(staged):
        if written:
            raise OSError("disk full")
        written.append(staged.metadata_location)
        real(staged)

    monkeypatch.setattr(commit_module, "write_metadata", write_metadata)
    with pytest.raises(OSError, match="disk full") as failed:
        commit_tables(catalog, txns)
    assert any(NOTHING_CHANGED in note for note in failed.value.__notes__), failed.value.__notes__
    assert pointers(catalog, "a", "b") == before and metadata_files(warehouse) == files and written
    with pytest.raises(RuntimeError, match="cannot be reused"):  # the transactions are spent
        commit_tables(catalog, txns)


def test_a_failed_database_commit_deletes_nothing_and_says_the_outcome_is_unknown(catalog, warehouse):
    """The COMMIT itself fails: whether it landed is not known, so no file it may name is deleted."""
    make_tables(catalog, "a", "b")
    txns = [staged_append(catalog, "a", 1), staged_append(catalog, "b", 1)]
    files = metadata_files(warehouse)

    def lost(conn):
        raise ConnectionError("connection lost during COMMIT")

    event.listen(catalog.engine, "commit", lost)
    with pytest.raises(ConnectionError) as failed:
        commit_tables(catalog, txns)
    assert any("whether it landed is unknown" in note for note in failed.value.__notes__), failed.value.__notes__
    assert metadata_files(warehouse) - files  # the two staged metadata files are kept


def test_one_transaction_per_table(catalog):
    make_tables(catalog, "a")
    with pytest.raises(ValueError, match="one transaction per table: p.a, p.a"):
        commit_tables(catalog, [staged_append(catalog, "a", 1), staged_append(catalog, "a", 2)])


def test_nothing_to_commit(catalog):
    make_tables(catalog, "a")
    before = pointers(catalog, "a")
    assert commit_tables(catalog, []) == []
    [table] = commit_tables(catalog, [catalog.load_table((NAMESPACE, "a")).transaction()])
    assert table.metadata_location == before["a"] == pointers(catalog, "a")["a"]


def test_abandoned_transactions_leave_no_metadata_file(catalog, warehouse):
    make_tables(catalog, "a")
    files = metadata_files(warehouse)
    txns = [staged_append(catalog, "a", 1), staged_create(catalog, "n", 1)]
    assert metadata_files(warehouse) > files
    abandon(txns)
    assert metadata_files(warehouse) == files and not catalog.table_exists((NAMESPACE, "n"))


class _NotSql:
    """A catalog commit_tables does not know (as a REST, Glue or Hive catalog), over a real one."""

    def __init__(self, catalog):
        self._catalog = catalog

    def __getattr__(self, name):
        return getattr(self._catalog, name)


def test_other_catalogs_commit_one_table_at_a_time_in_the_order_given(catalog, warehouse):
    """Not atomic: p.a commits, p.n's create is refused (another writer created it), p.z is not committed and
    its manifests are deleted; the error says which."""
    make_tables(catalog, "a", "z")
    z_files = {f for f in metadata_files(warehouse) if f.startswith("p/z/")}
    txns = [staged_append(catalog, "a", 1), staged_create(catalog, "n", 7), staged_append(catalog, "z", 1)]
    other = another_writer(catalog)
    other.create_table((NAMESPACE, "n"), schema=catalog.load_table((NAMESPACE, "a")).schema())
    with pytest.raises(TablesCommitFailed) as refused:
        commit_tables(_NotSql(catalog), txns)
    assert isinstance(refused.value, CommitFailedException)
    assert (refused.value.table, refused.value.committed) == ((NAMESPACE, "n"), ((NAMESPACE, "a"),))
    assert str(refused.value) == ("p.n: CommitFailedException: Table already exists; this catalog commits one "
                                  "table at a time: committed before it: p.a; not committed: p.n, p.z")
    assert ids(catalog, "a") == [0, 1] and ids(catalog, "z") == [0] and ids(catalog, "n") == []
    # the manifests and manifest lists of the transactions that did not land are deleted (n: the other's alone)
    n_metadata = pointers(catalog, "n")["n"].rsplit("/warehouse/", 1)[1]
    assert {f for f in metadata_files(warehouse) if f.startswith("p/n/")} == {n_metadata}
    assert z_files and {f for f in metadata_files(warehouse) if f.startswith("p/z/")} == z_files
    other.engine.dispose()
