"""Reconciliation against real PostgreSQL and MariaDB servers that keep changing while they are counted.

A writer changes ``accounts`` in small transactions while the reconcile capture counts the source
several times (each count with the moment the database names for its snapshot: a WAL bracket of
``pg_current_wal_lsn()``, MariaDB's exact ``binlog_snapshot_position``). The servers' own change logs
(a ``test_decoding`` slot, the ROW binlog) become Debezium messages positioned with their LSNs and
binlog positions and reach the lake in two runs. Every checkpoint is ``match`` or ``behind``, never
``mismatch``; the delete of a ``vault`` row left out of the lake's input (a lost delete) is a
``mismatch`` naming the key.
"""
from __future__ import annotations

import random
import threading
import time

import pytest
import sqlalchemy as sa

from jobs.demo.simulator import write_parquet
from jobs.iceberg.catalog import state_summary
from jobs.lake.layout import Lake
from jobs.model.record import make_table_id
from jobs.reconcile.checkpoints import BEHIND, MATCH, MISMATCH
from jobs.reconcile.stage import ReconcileOptions, reconcile_run, source_checkpoints
from jobs.stages import lake_keys, lake_row_hashes
from tests.support.databases import (
    PASSWORD,
    binlog_changes,
    debezium_records,
    mariadb_server,
    pg_changes,
    postgres_server,
)
from tests.support.pipeline_runs import jobs_run

COLUMNS = {"accounts": ["id", "balance"], "vault": ["id", "note"]}
KEYS = {"accounts": ["id"], "vault": ["id"]}
LOST_KEY = 3


class Writer(threading.Thread):
    """Inserts, updates and deletes ``accounts`` rows in transactions of one to three statements."""

    def __init__(self, url: str, seconds: float) -> None:
        super().__init__(daemon=True)
        self.url, self.seconds, self.transactions, self.error = url, seconds, 0, None

    def run(self) -> None:
        rng, next_id = random.Random(5), 1000
        engine = sa.create_engine(self.url)
        try:
            with engine.connect() as conn:
                deadline = time.monotonic() + self.seconds
                while time.monotonic() < deadline:
                    for _ in range(rng.randint(1, 3)):
                        kind = rng.choice("iud")
                        if kind == "i":
                            conn.exec_driver_sql(f"INSERT INTO accounts VALUES ({next_id}, {rng.randint(0, 99)})")
                            next_id += 1
                        elif kind == "u":
                            conn.exec_driver_sql(f"UPDATE accounts SET balance = balance + 1 WHERE id = "
                                                 f"{rng.randint(1, next_id)}")
                        else:
                            conn.exec_driver_sql(f"DELETE FROM accounts WHERE id = {rng.randint(1, next_id)}")
                    conn.commit()
                    self.transactions += 1
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            engine.dispose()


def _run(url: str, table_ids: dict[str, str], read_changes, tmp_path):
    """The workload, the captures during it, the two runs and the verdicts of each run's reconcile."""
    engine = sa.create_engine(url)
    state = {tid: {"state_rows": 0, "snapshot_id": None, "key_columns": ["id"]} for tid in table_ids.values()}
    options = ReconcileOptions(fmt="debezium")
    with engine.connect() as conn:
        conn.exec_driver_sql(f"INSERT INTO accounts VALUES {', '.join(f'({i}, {i})' for i in range(1, 61))}")
        conn.exec_driver_sql(f"INSERT INTO vault VALUES {', '.join(f'({i}, {chr(39)}n{i}{chr(39)})' for i in range(1, 11))}")
        conn.commit()
        writer = Writer(url, seconds=4)
        writer.start()
        captured = []
        while writer.is_alive():
            time.sleep(0.5)
            captured += source_checkpoints(url, state, "run0", options)[0]
        writer.join()
        assert writer.error is None and writer.transactions > 50
        conn.exec_driver_sql(f"DELETE FROM vault WHERE id = {LOST_KEY}")
        conn.commit()
        after_delete, how = source_checkpoints(url, state, "run0", options)
        captured += after_delete
        for i in range(3):  # later transactions: the lake's reach passes the last capture
            conn.exec_driver_sql(f"INSERT INTO accounts VALUES ({-1 - i}, 0)")
            conn.commit()
        changes = read_changes(conn)
    engine.dispose()
    assert PASSWORD not in how

    records = debezium_records(changes, KEYS)
    half = len(records) // 2
    lost = [r for r in records[half:] if b'"op": "d"' in r["value"] and b'"table": "vault"' in r["value"]]
    assert len(lost) == 1
    lake = tmp_path / "lake"
    verdicts = []
    for i, part in enumerate([records[:half], [r for r in records[half:] if r is not lost[0]]]):
        raw = tmp_path / f"raw{i}"
        write_parquet(raw / "part-0.parquet", part)
        assert jobs_run("debezium", raw, lake, "src", f"run{i}") == 0
        lake_ = Lake.at(str(lake))
        now = state_summary(lake_, "src")
        rows = reconcile_run(lake_, "src", f"run{i}", captured if i == 0 else [], now, options,
                             keys_now=lake_keys(lake_, "src", now, lambda _table: 10_000))
        # each verdict as reconciliation.json writes it
        verdicts.append([v.to_json() for r in rows for v in (*r.checkpoints, *r.pending)])
    return captured, after_delete, verdicts, how


def _assert_verdicts(captured, after_delete, verdicts, vault_id: str) -> None:
    # the source clock read with each bracket's high end: what a landing's reach in time is held to
    assert all(c.committed_by is not None and c.committed_by >= c.taken_at for c in captured)
    first, second = verdicts
    assert len(first) == len(captured)
    assert {v["verdict"] for v in first} <= {MATCH, BEHIND}
    assert any(v["verdict"] == MATCH for v in first) and any(v["verdict"] == BEHIND for v in first)
    # the second run judges every pending checkpoint; only the count taken after the lost delete is wrong
    assert len(second) == sum(v["verdict"] == BEHIND for v in first)
    lost_moment = after_delete[0].moment.text
    for v in second:
        if v["table"] == vault_id and v["moment"] == lost_moment:
            assert v["verdict"] == MISMATCH, v
            assert v["key_diff"] == {"missing_in_lake": [], "extra_in_lake": [f'{{"id":"{LOST_KEY}"}}']}
        else:
            assert v["verdict"] == MATCH, v


@pytest.fixture(scope="module")
def postgres():
    with postgres_server() as url:
        yield url


def test_postgres_counted_while_it_changes(postgres, tmp_path):
    engine = sa.create_engine(postgres)
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE accounts (id int PRIMARY KEY, balance int)")
        conn.exec_driver_sql("CREATE TABLE vault (id int PRIMARY KEY, note text)")
        conn.commit()
        conn.exec_driver_sql("SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')")
        conn.commit()
    engine.dispose()
    ids = {t: make_table_id("shop", "public", t) for t in COLUMNS}
    captured, after_delete, verdicts, how = _run(postgres, ids, lambda conn: pg_changes(conn, "cdc"), tmp_path)
    assert "pg_current_wal_lsn()" in how
    assert all(not c.moment.exact for c in captured)  # a WAL bracket
    _assert_verdicts(captured, [c for c in after_delete if c.table_id == ids["vault"]], verdicts, ids["vault"])


def test_mariadb_counted_while_it_changes(tmp_path):
    with mariadb_server() as server:
        engine = sa.create_engine(server.url)
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE TABLE accounts (id int PRIMARY KEY, balance int)")
            conn.exec_driver_sql("CREATE TABLE vault (id int PRIMARY KEY, note text)")
            conn.commit()
        engine.dispose()
        ids = {t: make_table_id("shop", None, t) for t in COLUMNS}
        captured, after_delete, verdicts, how = _run(
            server.url, ids, lambda conn: binlog_changes(server.datadir, COLUMNS), tmp_path)
    assert how.startswith("consistent snapshot at binlog mysql-bin.")
    assert all(c.moment.exact for c in captured)  # MariaDB names the snapshot's binlog position
    _assert_verdicts(captured, [c for c in after_delete if c.table_id == ids["vault"]], verdicts, ids["vault"])


# ---- values ---------------------------------------------------------------------------------------
def _values_run(url: str, table_id: str, read_changes, tmp_path) -> None:
    """Value fingerprints captured in the same snapshots as the counts, while a writer changes the table:
    no false mismatch; an update left out of the lake's input is a value mismatch though every count
    matches."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        conn.exec_driver_sql(f"INSERT INTO accounts VALUES {', '.join(f'({i}, {i})' for i in range(1, 61))}")
        conn.commit()
        # the lake's columns as the run publishes them (asserted below): Debezium without a schema
        columns = {"id": "string", "balance": "string"}
        state = {table_id: {"state_rows": 0, "snapshot_id": None, "key_columns": ["id"], "columns": columns}}
        options = ReconcileOptions(fmt="debezium")
        writer = Writer(url, seconds=3)
        writer.start()
        captured = []
        while writer.is_alive():
            time.sleep(0.5)
            captured += [c for c in source_checkpoints(url, state, "run1", options)[0] if c.table_id == table_id]
        writer.join()
        assert writer.error is None
        lost_id = conn.exec_driver_sql("SELECT min(id) FROM accounts").scalar_one()
        conn.exec_driver_sql(f"UPDATE accounts SET balance = 999999 WHERE id = {lost_id}")
        conn.commit()
        after_update = [c for c in source_checkpoints(url, state, "run1", options)[0] if c.table_id == table_id]
        for i in range(3):  # later transactions: the lake's reach passes the last capture
            conn.exec_driver_sql(f"INSERT INTO accounts VALUES ({-1 - i}, 0)")
            conn.commit()
        changes = read_changes(conn)
    engine.dispose()
    assert all(c.fingerprints is not None for c in captured + after_update)

    records = debezium_records(changes, KEYS)
    lost = [r for r in records if b"999999" in r["value"]]
    assert len(lost) == 1
    lake = tmp_path / "lake"
    raw = tmp_path / "raw"
    write_parquet(raw / "part-0.parquet", [r for r in records if r is not lost[0]])
    assert jobs_run("debezium", raw, lake, "src", "run1") == 0
    lake_ = Lake.at(str(lake))
    now = state_summary(lake_, "src")
    assert now[table_id]["columns"] == columns
    rows = reconcile_run(lake_, "src", "run1", captured + after_update, now, options,
                         hashes_now=lake_row_hashes(lake_, "src", now, lambda _table: 10_000))
    verdicts = {v.moment: v for r in rows for v in r.checkpoints}
    assert len(verdicts) == len(captured) + 1
    for cp in captured:
        verdict = verdicts[cp.moment.text]
        assert verdict.verdict == MATCH and "not compared" not in (verdict.reason or ""), verdict
    wrong = verdicts[after_update[0].moment.text]
    assert wrong.verdict == MISMATCH
    assert wrong.source_rows in (wrong.lake_rows if isinstance(wrong.lake_rows, list) else [wrong.lake_rows])
    assert wrong.value_diff.differing == 1 and "the values do not" in wrong.reason
    # the key the lost update was of: the only one whose row differs at the moment
    assert wrong.value_diff.keys.differ == (f'{{"id":"{lost_id}"}}',)
    assert wrong.value_diff.keys.missing_in_lake == () == wrong.value_diff.keys.extra_in_lake


def test_postgres_values_while_it_changes_and_a_lost_update(tmp_path):
    with postgres_server() as url:  # a server of its own: the counts' tests own the module's tables
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE TABLE accounts (id int PRIMARY KEY, balance int)")
            conn.commit()
            conn.exec_driver_sql("SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')")
            conn.commit()
        engine.dispose()
        _values_run(url, make_table_id("shop", "public", "accounts"), lambda conn: pg_changes(conn, "cdc"), tmp_path)


def test_mariadb_values_while_it_changes_and_a_lost_update(tmp_path):
    with mariadb_server() as server:
        engine = sa.create_engine(server.url)
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE TABLE accounts (id int PRIMARY KEY, balance int)")
            conn.commit()
        engine.dispose()
        _values_run(server.url, make_table_id("shop", None, "accounts"),
                    lambda conn: binlog_changes(server.datadir, {"accounts": ["id", "balance"]}), tmp_path)
