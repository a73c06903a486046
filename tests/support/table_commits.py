"""Several tables committed at once (jobs.iceberg.commit.commit_tables) on a real SQL catalog: the tables, the
staged appends of tiny Arrow tables (no Spark), what each table points at and holds, and the scenarios
tests/unit/iceberg/test_commit.py plays on SQLite and tests/integration/test_commit_postgres.py on
PostgreSQL, each module collecting them as a subclass of :class:`CommitScenarios` with its own ``catalog`` and
``warehouse`` fixtures.

    catalog = SqlCatalog("c", uri=..., warehouse=...)
    make_tables(catalog, "a", "b", "c")                     # p.a, p.b, p.c: one row each
    commit_tables(catalog, [staged_append(catalog, "a", 1), staged_append(catalog, "b", 1)])
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import event

from jobs.iceberg.commit import TablesCommitFailed, commit_tables

NAMESPACE = "p"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
NOTHING_CHANGED = "no table of this commit changed"


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def make_tables(catalog, *names: str) -> None:
    """Tables ``p.<name>``, each holding the row 0."""
    if not catalog.namespace_exists(NAMESPACE):
        catalog.create_namespace(NAMESPACE)
    for name in names:
        catalog.create_table((NAMESPACE, name), schema=SCHEMA).append(rows(0))


def staged_append(catalog, name: str, *ids: int):
    """A transaction of one append to ``p.<name>``: its data file, manifests and manifest list written, nothing
    committed."""
    txn = catalog.load_table((NAMESPACE, name)).transaction()
    txn.append(rows(*ids))
    return txn


def staged_create(catalog, name: str, *ids: int):
    """A create transaction of ``p.<name>`` with one append staged in it."""
    txn = catalog.create_table_transaction((NAMESPACE, name), schema=SCHEMA)
    txn.append(rows(*ids))
    return txn


def pointers(catalog, *names: str) -> dict[str, str | None]:
    """Each table's metadata location as the catalog has it (None: no such table)."""
    return {n: catalog.load_table((NAMESPACE, n)).metadata_location if catalog.table_exists((NAMESPACE, n)) else None
            for n in names}


def ids(catalog, name: str) -> list[int]:
    return sorted(catalog.load_table((NAMESPACE, name)).scan().to_arrow()["id"].to_pylist())


def metadata_files(warehouse: Path) -> set[str]:
    """Every metadata JSON, manifest and manifest list in the warehouse (the files a commit writes beside the
    data files)."""
    return {str(p.relative_to(warehouse)) for p in warehouse.rglob("*") if p.is_file() and p.parent.name == "metadata"}


def another_writer(catalog: SqlCatalog) -> SqlCatalog:
    """The same catalog opened again (its own engine), as another process would."""
    return SqlCatalog(catalog.name, **catalog.properties)


def on_first_swap(catalog: SqlCatalog, action: Callable[[], None]) -> None:
    """Run ``action`` once, right before the first UPDATE or INSERT of an ``iceberg_tables`` row through this
    catalog's engine: after a commit staged its tables, before it moves any."""
    done = []

    def before(conn, cursor, statement, parameters, context, executemany):
        if not done and statement.lstrip().upper().startswith(("UPDATE ICEBERG_TABLES", "INSERT INTO ICEBERG_TABLES")):
            done.append(1)
            action()

    event.listen(catalog.engine, "before_cursor_execute", before)


def swap_statements(catalog: SqlCatalog, names: tuple[str, ...]) -> list[str]:
    """A log, filled as they run, of this catalog's engine's writes of ``iceberg_tables`` rows (``UPDATE a``,
    ``INSERT n``) and its COMMITs."""
    log: list[str] = []

    def before(conn, cursor, statement, parameters, context, executemany):
        verb = statement.lstrip().split()[0].upper()
        if verb in ("UPDATE", "INSERT") and "iceberg_tables" in statement.lower():
            values = parameters.values() if isinstance(parameters, dict) else parameters
            log.append(" ".join([verb, *[v for v in values if v in names]]))

    event.listen(catalog.engine, "before_cursor_execute", before)
    event.listen(catalog.engine, "commit", lambda conn: log.append("COMMIT"))
    return log


# ---- the scenarios ---------------------------------------------------------------------------------
def three_tables_move_together(catalog) -> None:
    """Three tables' appends, given in any order: one database transaction moves the three pointers, in
    (namespace, name) order, and commits once; each transaction's table comes back, in the order given."""
    make_tables(catalog, "a", "b", "c")
    before = pointers(catalog, "a", "b", "c")
    txns = [staged_append(catalog, "c", 1), staged_append(catalog, "a", 1), staged_append(catalog, "b", 1)]
    log = swap_statements(catalog, ("a", "b", "c"))
    committed = commit_tables(catalog, txns)
    assert log == ["UPDATE a", "UPDATE b", "UPDATE c", "COMMIT"]
    assert [t.name() for t in committed] == [(NAMESPACE, "c"), (NAMESPACE, "a"), (NAMESPACE, "b")]
    after = pointers(catalog, "a", "b", "c")
    assert all(after[n] != before[n] for n in after)
    assert [t.metadata_location for t in committed] == [after["c"], after["a"], after["b"]]
    assert {n: ids(catalog, n) for n in after} == {"a": [0, 1], "b": [0, 1], "c": [0, 1]}
    # each returned table is the committed one: its new snapshot, readable
    assert [t.scan().to_arrow().num_rows for t in committed] == [2, 2, 2]
    # the transactions are spent: committing one again commits nothing
    txns[0].commit_transaction()
    assert pointers(catalog, "a", "b", "c") == after


def a_changed_table_moves_nothing(catalog, warehouse: Path, when: str) -> None:
    """Another writer commits to p.b after this commit's transactions read it, ``when`` "before staging"
    (commit_tables' requirement check finds it) or "before the swap" (its compare-and-swap does): the commit
    is refused naming p.b, no table of it moved (a and c as they were, b the other writer's), and the metadata
    files it wrote are gone."""
    make_tables(catalog, "a", "b", "c")
    other = another_writer(catalog)
    files_before = metadata_files(warehouse)
    txns = [staged_append(catalog, n, 1) for n in ("a", "b", "c")]
    assert metadata_files(warehouse) > files_before  # the appends' manifests and manifest lists
    others_files: set[str] = set()

    def other_commits_b():
        files = metadata_files(warehouse)
        other.load_table((NAMESPACE, "b")).append(rows(99))
        others_files.update(metadata_files(warehouse) - files)

    if when == "before staging":
        other_commits_b()
    else:
        on_first_swap(catalog, other_commits_b)
    before = pointers(catalog, "a", "b", "c")
    with pytest.raises(TablesCommitFailed) as refused:
        commit_tables(catalog, txns)
    message = str(refused.value)
    assert refused.value.table == (NAMESPACE, "b") and refused.value.committed == ()
    why = "Requirement failed: branch main has changed" if when == "before staging" else \
        "committed by another writer since this commit read it"
    assert message.startswith(f"p.b: CommitFailedException: {why}") and NOTHING_CHANGED in message, message
    after = pointers(catalog, "a", "b", "c")
    assert after["a"] == before["a"] and after["c"] == before["c"]
    assert after["b"] == other.load_table((NAMESPACE, "b")).metadata_location
    assert {n: ids(catalog, n) for n in after} == {"a": [0], "b": [0, 99], "c": [0]}
    # the new metadata files this commit wrote, and the manifests and manifest lists its appends wrote, are gone
    assert metadata_files(warehouse) == files_before | others_files
    other.engine.dispose()


def a_new_table_and_an_append(catalog) -> None:
    """A table created and another appended to, in one commit: an INSERT and an UPDATE, one COMMIT."""
    make_tables(catalog, "a")
    log = swap_statements(catalog, ("a", "n"))
    created, appended = commit_tables(catalog, [staged_create(catalog, "n", 7), staged_append(catalog, "a", 1)])
    assert log == ["UPDATE a", "INSERT n", "COMMIT"]
    assert (created.name(), appended.name()) == ((NAMESPACE, "n"), (NAMESPACE, "a"))
    assert ids(catalog, "n") == [7] and ids(catalog, "a") == [0, 1]


def a_table_created_meanwhile_moves_nothing(catalog, when: str) -> None:
    """Another writer creates p.n, which this commit creates too, ``when`` "before staging" (the create's
    requirement finds it) or "before the swap" (the row's primary key refuses it): refused naming p.n; the
    append to p.a of the same commit did not land."""
    make_tables(catalog, "a")
    other = another_writer(catalog)
    txns = [staged_append(catalog, "a", 1), staged_create(catalog, "n", 7)]

    def other_creates_n():
        other.create_table((NAMESPACE, "n"), schema=SCHEMA)

    if when == "before staging":
        other_creates_n()
    else:
        on_first_swap(catalog, other_creates_n)
    before = pointers(catalog, "a")
    with pytest.raises(TablesCommitFailed) as refused:
        commit_tables(catalog, txns)
    assert refused.value.table == (NAMESPACE, "n"), str(refused.value)
    why = "CommitFailedException: Table already exists" if when == "before staging" else \
        "TableAlreadyExistsError: created by another writer since this commit read it"
    assert str(refused.value).startswith(f"p.n: {why}") and NOTHING_CHANGED in str(refused.value), str(refused.value)
    assert pointers(catalog, "a") == before and ids(catalog, "a") == [0]
    assert ids(catalog, "n") == []  # the other writer's empty table
    other.engine.dispose()


def racing_runs(catalog, first: list[str], second: list[str]) -> dict[str, object]:
    """Two runs, each its own catalog (engine, connections), each staging an append to every table it names;
    their swaps started together (both staged before either moves a table). Exactly one lands whole, the
    other moves nothing and is refused naming a table both touch. Returns each run's outcome."""
    make_tables(catalog, *sorted(set(first) | set(second)))
    runs = {"first": (another_writer(catalog), first, 1), "second": (another_writer(catalog), second, 2)}
    staged = {run: [staged_append(cat, n, value) for n in names] for run, (cat, names, value) in runs.items()}
    barrier = threading.Barrier(2, timeout=60)
    for cat, _, _ in runs.values():
        on_first_swap(cat, barrier.wait)
    before = pointers(catalog, *sorted(set(first) | set(second)))
    outcomes: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            commit_tables(runs[name][0], staged[name])
            outcomes[name] = "committed"
        except Exception as exc:  # noqa: BLE001 - the outcome, looked at below
            outcomes[name] = exc

    threads = [threading.Thread(target=run, args=(name,)) for name in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for cat, _, _ in runs.values():
        cat.engine.dispose()
    winners = [n for n, o in outcomes.items() if o == "committed"]
    assert len(winners) == 1 and len(outcomes) == 2, outcomes
    [loser] = set(runs) - set(winners)
    refused = outcomes[loser]
    assert isinstance(refused, TablesCommitFailed), repr(refused)
    # refused by the compare-and-swap (both had staged: both passed their requirements)
    assert refused.table[-1] in set(first) & set(second), str(refused)
    assert f"CommitFailedException: committed by another writer since this commit read it: {NOTHING_CHANGED}" \
        in str(refused), str(refused)
    after = pointers(catalog, *before)
    won, won_value = runs[winners[0]][1], runs[winners[0]][2]
    assert {n for n in before if after[n] != before[n]} == set(won)
    assert {n: ids(catalog, n) for n in before} == {n: [0, won_value] if n in won else [0] for n in before}
    return outcomes


WHEN = ["before staging", "before the swap"]


class CommitScenarios:
    """The scenarios every SQL catalog plays (a module's ``Test...`` subclass collects them with its fixtures)."""

    def test_three_tables_move_in_one_database_transaction(self, catalog):
        three_tables_move_together(catalog)

    @pytest.mark.parametrize("when", WHEN)
    def test_a_table_another_writer_changed_moves_no_table_of_the_commit(self, catalog, warehouse, when):
        a_changed_table_moves_nothing(catalog, warehouse, when)

    def test_a_new_table_and_an_append_to_another_commit_together(self, catalog):
        a_new_table_and_an_append(catalog)

    @pytest.mark.parametrize("when", WHEN)
    def test_a_table_created_meanwhile_moves_no_table_of_the_commit(self, catalog, when):
        a_table_created_meanwhile_moves_nothing(catalog, when)

    def test_two_runs_racing_over_overlapping_tables_one_lands_whole(self, catalog):
        racing_runs(catalog, ["a", "b"], ["b", "c"])
