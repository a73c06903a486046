"""Several tables committed at once (jobs.iceberg.commit) on pyiceberg's SQL catalog over a real PostgreSQL
(tests/support/databases.py's server, production's catalog database): the scenarios of
tests/unit/iceberg/test_commit.py (tests/support/table_commits.py), and two runs racing over the same
tables, each from its own connections, their swaps started together: one lands whole, the other moves
nothing -- also when they name their tables in opposite orders (one order of row locks: no deadlock)."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from tests.support.databases import postgres_server
from tests.support.table_commits import (
    a_changed_table_moves_nothing,
    a_new_table_and_an_append,
    a_table_created_meanwhile_moves_nothing,
    racing_runs,
    three_tables_move_together,
)

WHEN = ["before staging", "before the swap"]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture()
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


@pytest.fixture()
def catalog(postgres_url: str, warehouse: Path) -> Iterator[SqlCatalog]:
    """A catalog of its own in the server's database (tests keep apart by catalog name)."""
    warehouse.mkdir()
    catalog = SqlCatalog(f"c{uuid.uuid4().hex[:12]}", uri=postgres_url, warehouse=f"file://{warehouse}")
    assert catalog.engine.dialect.name == "postgresql"
    yield catalog
    catalog.engine.dispose()


def test_three_tables_move_in_one_database_transaction(catalog):
    three_tables_move_together(catalog)


@pytest.mark.parametrize("when", WHEN)
def test_a_table_another_writer_changed_moves_no_table_of_the_commit(catalog, warehouse, when):
    a_changed_table_moves_nothing(catalog, warehouse, when)


def test_a_new_table_and_an_append_to_another_commit_together(catalog):
    a_new_table_and_an_append(catalog)


@pytest.mark.parametrize("when", WHEN)
def test_a_table_created_meanwhile_moves_no_table_of_the_commit(catalog, when):
    a_table_created_meanwhile_moves_nothing(catalog, when)


def test_two_runs_racing_over_overlapping_tables_one_lands_whole(catalog):
    racing_runs(catalog, ["a", "b"], ["b", "c"])


def test_two_runs_naming_the_same_tables_in_opposite_orders_do_not_deadlock(catalog):
    """Both lock p.a's row first, whatever their order: the second waits, then finds p.a moved and is refused
    (TablesCommitFailed, not PostgreSQL's deadlock error)."""
    racing_runs(catalog, ["b", "a"], ["a", "b"])
