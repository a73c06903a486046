"""Row counts from a SQL source with the moment they are true: one consistent snapshot per capture.

Each database has its documented way to name the moment of a snapshot (docs/operations/reconciliation.md,
"SQL sources"):

- PostgreSQL: the counts run in one ``REPEATABLE READ`` transaction, which sees one snapshot, taken at
  its first statement; ``pg_current_wal_lsn()`` (on a standby ``pg_last_wal_replay_lsn()``) read before
  the transaction and after the counts brackets the snapshot's cut in the WAL.
- MariaDB: ``START TRANSACTION WITH CONSISTENT SNAPSHOT``; the status variables
  ``binlog_snapshot_file`` / ``binlog_snapshot_position`` give the binlog position of exactly that
  snapshot. MySQL has no such variables: ``SHOW MASTER STATUS`` (8.4: ``SHOW BINARY LOG STATUS``)
  read before and after brackets it.
- SQL Server: ``SNAPSHOT`` isolation, bracketed by ``sys.fn_cdc_get_max_lsn()`` before and after.
- Oracle: ``CURRENT_SCN`` of ``V$DATABASE``, then every count ``AS OF SCN`` that SCN: exact.
- Otherwise (SQLite, ...) the database names no moment: the counts were true when they were queried, a
  bracket of this machine's clock before and after (an assumed moment, judged within the tolerance).

When the pipeline's format cannot place the database's log position (its messages carry other
positions), the database's clock read before and after brackets the snapshot in source time instead.
Identifiers are quoted by the dialect; the password of a URL never reaches a message.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from jobs.fold import fingerprints as rule
from jobs.model.keys import key_text
from jobs.reconcile import fingerprint
from jobs.reconcile.checkpoints import (
    SOURCE_QUERIED,
    CheckpointError,
    Moment,
    assumed_moment,
    parse_time,
    position_moment,
    time_moment,
)

log = logging.getLogger(__name__)


@dataclass
class SourceSnapshot:
    """What one capture saw: rows (and, for small tables, keys) per table id, and when."""

    dialect: str
    rows: dict[str, int] = field(default_factory=dict)
    keys: dict[str, list[str]] = field(default_factory=dict)
    # each bucket's value fingerprint (jobs.reconcile.fingerprint), for tables read as the lake's columns
    fingerprints: dict[str, list[int]] = field(default_factory=dict)
    # each key's row hash, for small fingerprinted tables (what a value mismatch's keys are found by); for a
    # large one, of the keys in some buckets (row_hash_buckets)
    row_hashes: dict[str, dict[str, str]] = field(default_factory=dict)
    row_hash_buckets: dict[str, tuple[int, ...]] = field(default_factory=dict)
    moment: Moment | None = None
    taken_at: int | None = None  # the source clock at the snapshot (epoch microseconds)
    how: str = ""  # what the database offered for the moment, for the report
    # the source clock read with the moment's high end: every change below it committed by then
    committed_by: int | None = None


@dataclass(frozen=True)
class Table:
    table_id: str
    schema: str | None
    name: str
    key_columns: tuple[str, ...] = ()
    key_rows_limit: int | None = None  # None: the capture's
    # the lake's columns (name -> type) the source has all of: its rows' values are fingerprinted as them
    columns: dict[str, str] | None = None
    # buckets of keys to keep the row hashes of, were the table too large to keep them all (where an
    # earlier checkpoint's values differed: the drill-down's next step)
    buckets: tuple[int, ...] = ()


class _Snapshot:
    """Counting inside an open snapshot: rows, and keys where the table is small; a table read as the lake's
    columns also gets its value fingerprints, from the same scan as its count. Statements are built by
    SQLAlchemy (identifiers quoted, no name read as a parameter), the fingerprints' by jobs.reconcile.fingerprint
    over names quoted by the dialect."""

    def __init__(self, conn, key_rows_limit: int, suffix: str = "", values: bool = True) -> None:
        self._conn, self._limit, self._suffix = conn, key_rows_limit, suffix
        self._values = fingerprint.DIALECTS.get(conn.dialect.name) if values and not suffix else None

    def _select(self, t: Table, *columns):
        import sqlalchemy as sa

        query = sa.select(*columns).select_from(sa.table(t.name, schema=t.schema))
        return query.suffix_with(self._suffix) if self._suffix else query

    def count(self, t: Table, out: SourceSnapshot) -> None:
        import sqlalchemy as sa

        limit = self._limit if t.key_rows_limit is None else t.key_rows_limit
        if t.columns and t.key_columns and self._values is not None:
            self._valued(t, out, limit)
            return
        out.rows[t.table_id] = int(self._conn.execute(self._select(t, sa.func.count())).scalar_one())
        if t.key_columns and out.rows[t.table_id] <= limit:
            result = self._conn.execute(self._select(t, *(sa.column(c) for c in t.key_columns)))
            out.keys[t.table_id] = [key_text(t.key_columns, row) for row in result]

    def _valued(self, t: Table, out: SourceSnapshot, limit: int) -> None:
        """Rows, fingerprints and row hashes, each table read once: every row's hash while there are at most
        ``limit`` (a small table: its fingerprints summed from them), else the fingerprints' aggregate, then
        the row hashes of the buckets to drill into that fit the limit."""
        rows = fingerprint.fetch_all(self._conn, self._statement(t, also=t.key_columns) + f" LIMIT {limit + 1}")
        if len(rows) <= limit:
            sums = [0] * rule.BUCKETS
            for row in rows:
                sums[int(row[-2])] = rule.add(sums[int(row[-2])], int(row[-1]))
            out.rows[t.table_id], out.fingerprints[t.table_id] = len(rows), sums
            out.row_hashes[t.table_id] = _hashes(t, rows)
            out.keys[t.table_id] = list(out.row_hashes[t.table_id])
            return
        out.fingerprints[t.table_id], per_bucket = self._fingerprints(t)
        out.rows[t.table_id] = sum(per_bucket)
        buckets = _within(t.buckets, per_bucket, limit)
        if buckets:
            out.row_hashes[t.table_id] = _hashes(t, fingerprint.fetch_all(
                self._conn, self._statement(t, also=t.key_columns, buckets=buckets)))
            out.row_hash_buckets[t.table_id] = buckets

    def _statement(self, t: Table, also: tuple[str, ...] | None = None, texts: bool = False,
                   buckets: tuple[int, ...] | None = None) -> str:
        """The table's fingerprints per bucket; with ``also``, each row's hash beside those columns (and with
        ``texts``, its columns' canonical texts; with ``buckets``, of the rows in those only)."""
        preparer = self._conn.dialect.identifier_preparer
        name = preparer.quote(t.name)
        if t.schema is not None:
            name = f"{preparer.quote_schema(t.schema)}.{name}"
        if also is None:
            return fingerprint.source_fingerprint_sql(self._values, preparer.quote, name, t.columns, t.key_columns)
        hashes = fingerprint.source_hashes_sql(self._values, preparer.quote, name, t.columns, t.key_columns,
                                               also=also, with_texts=texts)
        return hashes if buckets is None else \
            f"SELECT * FROM ({hashes}) AS k WHERE b IN ({', '.join(str(int(b)) for b in buckets)})"

    def rows_of(self, t: Table, keys: Collection[str],
                buckets: tuple[int, ...]) -> dict[str, tuple[str, dict[str, str | None]]]:
        """Some keys' rows (key -> row hash, column -> canonical text), as the table holds them now; of the
        rows in ``buckets`` (the keys')."""
        if self._values is None or not t.columns or not t.key_columns:
            return {}
        self.prepare()
        names, width, wanted, out = sorted(t.columns), len(t.key_columns), set(keys), {}
        for row in fingerprint.fetch_all(self._conn, self._statement(t, also=t.key_columns, texts=True,
                                                                     buckets=buckets)):
            key = key_text(t.key_columns, row[:width])
            if key in wanted:
                out[key] = (rule.hex_of(int(row[-1])), dict(zip(names, row[width:width + len(names)])))
        return out

    def _fingerprints(self, t: Table) -> tuple[list[int], list[int]]:
        """Each bucket's fingerprint and rows."""
        sums, rows = [0] * rule.BUCKETS, [0] * rule.BUCKETS
        for bucket, count, total in fingerprint.fetch_all(self._conn, self._statement(t)):
            sums[int(bucket)], rows[int(bucket)] = rule.add(int(total)), int(count)
        return sums, rows

    def prepare(self) -> None:
        """What the dialect's fingerprints need of the session (times read in UTC; SQLite's functions)."""
        if self._values is None:
            return
        for statement in self._values.session_setup:
            fingerprint.fetch_all(self._conn, statement)
        if self._conn.dialect.name == "sqlite":
            fingerprint.register_sqlite(self._conn.connection.driver_connection)


def _hashes(t: Table, rows: list[tuple]) -> dict[str, str]:
    """key -> row hash, of rows (key columns..., bucket, hash)."""
    return {key_text(t.key_columns, row[:-2]): rule.hex_of(int(row[-1])) for row in rows}


def _within(wanted: tuple[int, ...], per_bucket: list[int], limit: int) -> tuple[int, ...]:
    """The buckets of ``wanted``, in order, whose rows together stay within ``limit``."""
    chosen, total = [], 0
    for b in wanted:
        if total + per_bucket[b] > limit:
            break
        chosen.append(b)
        total += per_bucket[b]
    return tuple(chosen)


def _time_of(value) -> int:
    """A database's clock reading (a time without an offset is UTC) in epoch microseconds."""
    return parse_time(_iso(value))


def _bracket(fmt: str | None, low: str, high: str, clock: tuple[Any, Any]) -> tuple[Moment, str]:
    """A position bracket where the format places the database's positions, else its clock's."""
    try:
        return position_moment(fmt, low, high), "position"
    except CheckpointError:
        return time_moment(_iso(clock[0]), _iso(clock[1])), "clock"


def _iso(value) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


# ---- one capture per database ------------------------------------------------------------------
# a standby has no WAL of its own to insert into: there, the WAL it has replayed is what its snapshots see
_PG_LSN = ("SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text, "
           "clock_timestamp()")


def _postgresql(conn, tables: list[Table], fmt: str | None, limit: int) -> SourceSnapshot:
    out = SourceSnapshot("postgresql")
    before = conn.exec_driver_sql(_PG_LSN).one()
    conn.commit()
    snap = conn.execution_options(isolation_level="REPEATABLE READ")
    now = snap.exec_driver_sql("SELECT statement_timestamp()").scalar_one()  # the snapshot is taken here
    counting = _Snapshot(snap, limit)
    counting.prepare()
    for t in tables:
        counting.count(t, out)
    after = snap.exec_driver_sql(_PG_LSN).one()
    snap.commit()
    out.moment, kind = _bracket(fmt, before[0], after[0], (before[1], after[1]))
    out.taken_at, out.committed_by = _time_of(now), _time_of(after[1])
    out.how = (f"REPEATABLE READ snapshot, WAL position bracketed by pg_current_wal_lsn() [{before[0]}, {after[0]}]"
               if kind == "position" else "REPEATABLE READ snapshot, bracketed by the server clock")
    return out


def _mysql(conn, tables: list[Table], fmt: str | None, limit: int) -> SourceSnapshot:
    out = SourceSnapshot(conn.dialect.name)
    counting = _Snapshot(conn, limit)
    counting.prepare()  # session settings, before the snapshot
    before = _binlog_status(conn)
    clock_before = conn.exec_driver_sql("SELECT UTC_TIMESTAMP(6)").scalar_one()
    conn.commit()
    conn.exec_driver_sql("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    conn.exec_driver_sql("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
    status = {name.lower(): value for name, value in conn.exec_driver_sql(  # no '%': pyformat drivers' parameter
        "SHOW STATUS WHERE Variable_name IN ('binlog_snapshot_file', 'binlog_snapshot_position')").all()}
    now = conn.exec_driver_sql("SELECT UTC_TIMESTAMP(6)").scalar_one()
    for t in tables:
        counting.count(t, out)
    conn.commit()
    after, clock_after = _binlog_status(conn), conn.exec_driver_sql("SELECT UTC_TIMESTAMP(6)").scalar_one()
    conn.commit()
    out.taken_at, out.committed_by = _time_of(now), _time_of(clock_after)
    exact = status.get("binlog_snapshot_file") and status.get("binlog_snapshot_position")
    if exact:  # MariaDB: the snapshot's own binlog position
        at = f"{status['binlog_snapshot_file']}:{status['binlog_snapshot_position']}"
        before = after = at
    low, high = before or "", after or ""
    clock = (_iso(clock_before), _iso(clock_after))
    if low and high:
        out.moment, kind = _bracket(fmt, low, high, clock)
    else:
        out.moment, kind = time_moment(*clock), "clock"
    out.how = ("consistent snapshot at binlog " + low if exact and kind == "position" else
               f"consistent snapshot, binlog bracketed [{low}, {high}]" if kind == "position" else
               "consistent snapshot, bracketed by the server clock (no binlog position the format can place)")
    return out


def _binlog_status(conn) -> str | None:
    for statement in ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"):
        try:
            row = conn.exec_driver_sql(statement).first()
        except Exception:  # noqa: BLE001 - the other spelling (MySQL 8.4 renamed it; MariaDB has both)
            conn.rollback()
            continue
        return f"{row[0]}:{row[1]}" if row else None
    return None


def _mssql(conn, tables: list[Table], fmt: str | None, limit: int) -> SourceSnapshot:
    out = SourceSnapshot("mssql")
    lsn = "SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 2), SYSUTCDATETIME()"
    before = conn.exec_driver_sql(lsn).one()
    conn.commit()
    snap = conn.execution_options(isolation_level="SNAPSHOT")
    now = snap.exec_driver_sql("SELECT SYSUTCDATETIME()").scalar_one()
    counting = _Snapshot(snap, limit)
    for t in tables:
        counting.count(t, out)
    after = snap.exec_driver_sql(lsn).one()
    snap.commit()
    out.moment, _kind = _bracket(fmt, _mssql_lsn(before[0]), _mssql_lsn(after[0]),
                                 (before[1], after[1]))
    out.taken_at, out.committed_by = _time_of(now), _time_of(after[1])
    out.how = "SNAPSHOT isolation, bracketed by sys.fn_cdc_get_max_lsn()"
    return out


def _mssql_lsn(hex_text: str | None) -> str:
    """binary(10) as hex -> Debezium's ``00000027:00000758:0005``."""
    h = (hex_text or "").rjust(20, "0")
    return f"{h[:8]}:{h[8:16]}:{h[16:20]}".upper()


def _oracle(conn, tables: list[Table], fmt: str | None, limit: int) -> SourceSnapshot:
    out = SourceSnapshot("oracle")
    scn, now = conn.exec_driver_sql("SELECT CURRENT_SCN, SYS_EXTRACT_UTC(SYSTIMESTAMP) FROM V$DATABASE").one()
    counting = _Snapshot(conn, limit, suffix=f" AS OF SCN {int(scn)}")
    for t in tables:
        counting.count(t, out)
    conn.rollback()
    out.moment, _kind = _bracket(fmt, f"scn:{int(scn)}", f"scn:{int(scn)}", (now, now))
    out.taken_at = out.committed_by = _time_of(now)
    out.how = f"flashback query AS OF SCN {int(scn)} (exact)"
    return out


def _no_moment(conn, tables: list[Table], fmt: str | None, limit: int) -> SourceSnapshot:
    """A database without a way to name its snapshot's moment: the counts were true when they were
    queried, between this machine's clock before and after."""
    out = SourceSnapshot(conn.dialect.name, how="no log position or commit clock: the counts are judged as of the "
                         "time they were queried (this machine's clock)")
    before = time.time_ns() // 1000
    # values at a moment the database cannot name are never compared: counted only
    counting = _Snapshot(conn, limit, values=False)
    for t in tables:
        counting.count(t, out)
    conn.rollback()
    out.moment, out.taken_at = assumed_moment(before, time.time_ns() // 1000, SOURCE_QUERIED), before
    return out


CAPTURES: dict[str, Callable[..., SourceSnapshot]] = {
    "postgresql": _postgresql, "mysql": _mysql, "mariadb": _mysql, "mssql": _mssql, "oracle": _oracle,
}


def current_rows(conn, t: Table, keys: Collection[str],
                 buckets: tuple[int, ...]) -> dict[str, tuple[str, dict[str, str | None]]]:
    """Some keys' rows of a table as the source holds them now, each with its row hash: what the columns of a
    value mismatch are shown from (jobs.reconcile.columns; one scan, the rows of the keys' ``buckets`` read)."""
    try:
        return _Snapshot(conn, 0).rows_of(t, keys, buckets)
    finally:
        conn.rollback()


def capture(conn, tables: list[Table], fmt: str | None, key_rows_limit: int) -> SourceSnapshot:
    """Rows of ``tables`` in one snapshot of the connected database, with the snapshot's moment."""
    return CAPTURES.get(conn.dialect.name, _no_moment)(conn, tables, fmt, key_rows_limit)
