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
    CommitScenarios,
    racing_runs,
)


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


class TestOnPostgresql(CommitScenarios):
    """The scenarios of tests/support/table_commits.py on this module's catalog."""


def test_two_runs_naming_the_same_tables_in_opposite_orders_do_not_deadlock(catalog):
    """Both lock p.a's row first, whatever their order: the second waits, then finds p.a moved and is refused
    (TablesCommitFailed, not PostgreSQL's deadlock error)."""
    racing_runs(catalog, ["b", "a"], ["a", "b"])
