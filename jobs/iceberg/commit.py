"""A run's tables committed together: several staged pyiceberg transactions, one commit.

pyiceberg 0.12 commits one table at a time, whatever the catalog: between two tables' commits a reader sees
one table at this run and another at the run before. :func:`commit_tables` commits the staged transactions
of several tables (appends, overwrites, row deltas, schema and property updates of existing tables, and new
tables' create transactions) at once where the catalog can:

- **SQL catalog** (pyiceberg's ``SqlCatalog``: the embedded SQLite, production PostgreSQL): all or nothing,
  in one database transaction. Each table keeps its optimistic check, in two halves, as pyiceberg's own
  ``commit_table`` does it: (1) the transaction's requirements (the snapshot of ``main`` it started from,
  the schema and spec it changed, the table's UUID; a new table: that none exists) validated against the
  table as the catalog has it now, and its next metadata file written (invisible: no pointer names it);
  (2) then, in one database transaction, tables in (namespace, name) order, each table's pointer moved by a
  compare-and-swap (``UPDATE iceberg_tables SET metadata_location = <new> WHERE ... AND
  metadata_location = <the one (1) read>``: no row, another writer committed in between) or a new table's
  row inserted (the primary key refuses a concurrent create), and one ``COMMIT``. Readers, who read the
  pointers, see every table before or every table after. SQLite: the first ``UPDATE`` takes the database's
  write lock (the transaction reads nothing before it, so there is no lock to upgrade); PostgreSQL (READ
  COMMITTED): each ``UPDATE`` locks its row, and a row another transaction changed meanwhile no longer
  matches once that one commits; the one order of tables keeps two runs from deadlocking.
- **Any other catalog**: one table after the other, in the order given, by pyiceberg's own
  ``commit_transaction`` (with its retries): NOT atomic. A failure leaves the tables before it committed
  (:attr:`TablesCommitFailed.committed`), the others not. What the other catalogs could give: a REST
  catalog's ``POST /v1/{prefix}/transactions/commit`` (the spec's optional multi-table commit: a list of
  each table's identifier, requirements and updates, applied atomically, where the server implements it
  and lists it in ``GET /v1/config``) -- pyiceberg 0.12 has no client call for it; Glue: ``UpdateTable``
  per table with the ``VersionId`` check, no multi-table atomicity (Lake Formation's governed-table
  transactions are not Iceberg's); Hive Metastore: per table, under an HMS table lock, no multi-table
  atomicity; Nessie commits several tables in one commit (from Iceberg Java, not pyiceberg).

What the one commit gives up: pyiceberg's automatic retry of a table whose check failed (re-planning its
snapshot over the other writer's). A conflict fails the whole commit, nothing of it landed
(:class:`TablesCommitFailed`, naming the table), and the staged metadata files, manifests and manifest
lists are deleted; the data files the caller wrote stay where they are, reached by no snapshot.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationException,
)
from pyiceberg.table import Table
from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from jobs.iceberg.row_delta import (
    close_committed,
    delete_old_metadata,
    discard_staged,
    new_table_row,
    sql_catalog_rows,
    stage_metadata,
    staged_commit,
    write_metadata,
)

# what says a table's check failed (the catalog refused the commit; nothing of it landed)
_REFUSED = (CommitFailedException, ValidationException, TableAlreadyExistsError)


class TablesCommitFailed(CommitFailedException):
    """A table's optimistic check failed: ``table`` (its identifier) changed since the transaction read it, or
    a table it creates exists. On a SQL catalog no table of the commit changed (``committed`` is empty); on
    another, ``committed`` names the tables committed before it, one by one."""

    def __init__(self, message: str, table: tuple[str, ...], committed: Sequence[tuple[str, ...]] = ()):
        super().__init__(message)
        self.table = tuple(table)
        self.committed = tuple(tuple(t) for t in committed)


@dataclass
class _Pending:
    """One transaction on its way: what it commits, and (once staged) the table it moves from and to."""

    transaction: object
    identifier: tuple[str, ...]
    requirements: tuple
    updates: tuple
    current: Table | None = None  # the table as the catalog had it at staging; None: a new table
    staged: object = None  # the StagedTable: its next metadata and metadata file
    written: bool = False  # whether its metadata file was written

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, name): the one order every commit moves tables in."""
        return (Catalog.namespace_to_string(Catalog.namespace_from(self.identifier)),
                Catalog.table_name_from(self.identifier))

    @property
    def label(self) -> str:
        return ".".join(self.identifier)


def commit_tables(catalog, transactions: Sequence) -> list[Table]:
    """Commit the staged, not yet committed pyiceberg transactions of several tables of ``catalog`` (each
    ``table.transaction()`` or ``catalog.create_table_transaction(...)`` with its updates and snapshots
    staged, one per table); returns each one's committed table, in the order given.

    On a ``SqlCatalog``: all in one database transaction, every table's check kept (the module's
    docstring); a table whose check fails raises :class:`TablesCommitFailed` naming it, and no table of the
    commit changed. An error before the database's ``COMMIT`` (a lock timeout, a metadata file that could not
    be written) changes no table either and is raised as it is, with a note saying so; an error during the
    ``COMMIT`` itself is raised with a note that the outcome is unknown (nothing is deleted then). On any
    other catalog: one by one in the order given, NOT atomic (:attr:`TablesCommitFailed.committed`).

    The transactions are spent either way: committed ones are empty, failed ones cannot be committed again."""
    pending = [_Pending(t, *staged_commit(t)) for t in transactions]
    if len({p.identifier for p in pending}) < len(pending):
        raise ValueError(f"one transaction per table: {_names(sorted(pending, key=lambda p: p.key))}")
    if not isinstance(catalog, SqlCatalog):
        return _one_by_one(pending)
    return _all_at_once(catalog, pending)


def abandon(transactions: Sequence) -> None:
    """Give up staged transactions without committing them (a run failing before its commit): the
    manifests and manifest lists they wrote deleted, each marked failed."""
    for transaction in transactions:
        discard_staged(transaction)


# ---- any catalog: one table after the other ---------------------------------------------------------
def _one_by_one(pending: list[_Pending]) -> list[Table]:
    tables: list[Table] = []
    for i, p in enumerate(pending):
        try:
            tables.append(p.transaction.commit_transaction())  # pyiceberg cleans up its own failure
        except _REFUSED as exc:  # refused: it did not land (a create's manifests are left to us to delete)
            abandon([q.transaction for q in pending[i:]])
            done = [q.identifier for q in pending[:i]]
            raise TablesCommitFailed(
                f"{p.label}: {_cause(exc)}; this catalog commits one table at a time: committed before it: "
                f"{_names(done) or 'no table'}; not committed: {_names(pending[i:])}",
                p.identifier, done) from exc
        except BaseException as exc:
            abandon([q.transaction for q in pending[i + 1:]])
            exc.add_note(f"committing {p.label} (one table at a time): {_names(pending[:i]) or 'no table'} "
                         f"committed before it; {_names(pending[i + 1:]) or 'no table'} after it not committed")
            raise
    return tables


# ---- a SQL catalog: one database transaction ---------------------------------------------------------
class _Refused(Exception):
    """``pending``'s check failed (the cause says how): nothing of the commit may land."""

    def __init__(self, pending: _Pending):
        super().__init__(pending.label)
        self.pending = pending


def _all_at_once(catalog, pending: list[_Pending]) -> list[Table]:
    moving = sorted((p for p in pending if p.updates), key=lambda p: p.key)
    committing: list[bool] = []  # set once the database's COMMIT is sent: its outcome is the commit's
    try:
        for p in pending:
            if not p.updates:  # commits nothing (pyiceberg validates its snapshot producers, if any)
                _checked(p, p.transaction.commit_transaction)
        for p in moving:
            _stage(catalog, p)
        _swap(catalog, moving, committing)
    except _Refused as refused:
        _clean_up(pending)
        p, exc = refused.pending, refused.__cause__
        raise TablesCommitFailed(f"{p.label}: {_cause(exc)}: no table of this commit changed "
                                 f"({_names(moving)})", p.identifier) from exc
    except BaseException as exc:
        if committing:
            exc.add_note(f"the database's COMMIT of {_names(moving)} failed: whether it landed is unknown; "
                         "nothing was deleted (reload the tables to see)")
            raise
        _clean_up(pending)
        exc.add_note(f"no table of this commit changed ({_names(moving)})")
        raise
    for p in moving:
        if p.current is not None:
            try:
                delete_old_metadata(p.staged, p.current.metadata)
            except Exception as exc:  # noqa: BLE001 - cleanup only, as pyiceberg's own after a commit
                warnings.warn(f"Failed to delete old metadata after commit: {exc}", stacklevel=2)
    tables = []
    for p in pending:
        if p.updates:
            close_committed(p.transaction)
            tables.append(Table(p.identifier, p.staged.metadata, p.staged.metadata_location, p.staged.io, catalog))
        else:
            tables.append(catalog.load_table(p.identifier))
    return tables


def _checked(p: _Pending, step):
    """``step()``; a refusal of the catalog's (a failed requirement, a validation) as ``p``'s."""
    try:
        return step()
    except _REFUSED as exc:
        raise _Refused(p) from exc


def _stage(catalog, p: _Pending) -> None:
    """The first half of the table's check: its requirements against the table as the catalog has it now;
    its next metadata file written."""
    try:
        p.current = catalog.load_table(p.identifier)
    except NoSuchTableError:
        p.current = None
    p.staged = _checked(p, lambda: stage_metadata(catalog, p.current, p.identifier, p.requirements, p.updates))
    write_metadata(p.staged)
    p.written = True


def _swap(catalog, moving: list[_Pending], committing: list[bool]) -> None:
    """The second half of every table's check, and their commit: in one database transaction, each table's
    pointer moved from the metadata its staging read to its new one (a new table's row inserted). An error
    before the COMMIT rolls it all back (closing the session does)."""
    engine, rows = sql_catalog_rows(catalog)
    with Session(engine) as session:
        for p in moving:
            namespace, name = p.key
            if p.current is None:
                try:
                    session.execute(insert(rows).values(
                        **new_table_row(catalog, namespace, name, p.staged.metadata_location)))
                except IntegrityError as exc:  # the primary key: a table of that name was created meanwhile
                    raise _Refused(p) from TableAlreadyExistsError(
                        f"created by another writer since this commit read it ({exc.orig})")
            elif not _compare_and_swap(session, engine, rows, catalog.name, namespace, name,
                                       p.current.metadata_location, p.staged.metadata_location):
                raise _Refused(p) from CommitFailedException("committed by another writer since this commit read it")
        committing.append(True)
        session.commit()


def _compare_and_swap(session, engine, rows, catalog_name: str, namespace: str, name: str, expected: str,
                      new: str) -> bool:
    """Whether the table's row pointed at ``expected`` and now points at ``new`` (as SqlCatalog.commit_table:
    an UPDATE's row count, or, where the dialect's is unreliable, the row locked FOR UPDATE)."""
    where = (rows.catalog_name == catalog_name, rows.table_namespace == namespace, rows.table_name == name,
             rows.metadata_location == expected)
    if engine.dialect.supports_sane_rowcount:
        result = session.execute(update(rows).where(*where).values(metadata_location=new,
                                                                    previous_metadata_location=expected))
        return result.rowcount == 1
    row = session.execute(select(rows).where(*where).with_for_update(of=rows)).scalar_one_or_none()
    if row is None:
        return False
    row.metadata_location, row.previous_metadata_location = new, expected
    session.flush()
    return True


def _clean_up(pending: list[_Pending]) -> None:
    """Nothing of the commit landed: the new metadata files it wrote and every transaction's manifests and
    manifest lists deleted, each transaction marked failed."""
    for p in pending:
        if p.written:
            try:
                p.staged.io.delete(p.staged.metadata_location)
            except Exception as exc:  # noqa: BLE001 - an orphan metadata file harms no reader
                warnings.warn(f"Failed to delete staged metadata {p.staged.metadata_location}: {exc}", stacklevel=3)
        discard_staged(p.transaction)


def _cause(exc: BaseException) -> str:
    """The first line of what the catalog said, with what it was."""
    line = next((s.strip() for s in str(exc).splitlines() if s.strip()), "")
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _names(items) -> str:
    return ", ".join(".".join(i.identifier if isinstance(i, _Pending) else i) for i in items)
