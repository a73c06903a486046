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

import json
import random
import threading
import time
from dataclasses import replace

import pytest
import sqlalchemy as sa

from jobs.demo.simulator import write_parquet
from jobs.iceberg.catalog import state_summary
from jobs.lake.layout import Lake
from jobs.model.record import make_table_id
from jobs.reconcile.checkpoints import BEHIND, MATCH, MISMATCH
from jobs.reconcile.stage import JudgedRows, ReconcileOptions, drill_buckets, reconcile_run, source_checkpoints
from jobs.stages import LakeRowsNow, lake_keys
from tests.support.databases import (
    PASSWORD,
    binlog_changes,
    debezium_records,
    mariadb_server,
    pg_changes,
    pg_tables_with_slot,
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
        pg_tables_with_slot(conn, "CREATE TABLE accounts (id int PRIMARY KEY, balance int)",
                            "CREATE TABLE vault (id int PRIMARY KEY, note text)")
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
        lost_id, kept = conn.exec_driver_sql("SELECT id, balance FROM accounts ORDER BY id LIMIT 1").one()
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
    lake_rows = LakeRowsNow(lake_, "src", now, lambda _table: 10_000)
    rows = reconcile_run(lake_, "src", "run1", captured + after_update, now, options, hashes_now=lake_rows.hashes,
                         rows_now=JudgedRows(url, now, lake_rows.texts, options))
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
    # and its column, with the value the source had at the moment beside the lake's
    [row] = wrong.value_diff.rows
    assert row.key == f'{{"id":"{lost_id}"}}' and [c.to_json() for c in row.columns] == [
        {"column": "balance", "source": "999999", "lake": str(kept), "within_tolerance": False}]


def test_postgres_values_while_it_changes_and_a_lost_update(tmp_path):
    with postgres_server() as url:  # a server of its own: the counts' tests own the module's tables
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            pg_tables_with_slot(conn, "CREATE TABLE accounts (id int PRIMARY KEY, balance int)")
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


def _edit_by_hand(lake: Lake, table_id: str, key_id: str, values: dict[str, str]) -> None:
    """What an engineer's UPDATE of one row does to a state table: a commit of its own, outside the pipeline."""
    import pyarrow as pa
    from pyiceberg.expressions import EqualTo

    from jobs.iceberg.catalog import load_table, open_catalog

    table = load_table(open_catalog(lake), "src", table_id)
    row = table.scan(row_filter=EqualTo("id", key_id)).to_arrow()
    assert row.num_rows == 1
    for name, value in values.items():
        i = row.schema.get_field_index(name)
        row = row.set_column(i, row.schema.field(i), pa.array([value], row.schema.field(i).type))
    table.overwrite(row, overwrite_filter=EqualTo("id", key_id))


def test_postgres_values_written_by_hand_into_the_lake_are_found_masked_or_tolerated(tmp_path):
    """A value changed in the lake by hand is a value mismatch naming its key and column with both values
    (masked for a sensitive column); a difference within a column's declared tolerance is no mismatch."""
    with postgres_server() as url:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            pg_tables_with_slot(conn, "CREATE TABLE prices (id int PRIMARY KEY, price double precision)",
                                "CREATE TABLE people (id int PRIMARY KEY, secret text)")
            for table, value in (("prices", "{i} * 1.5"), ("people", "'s' || {i}")):
                conn.exec_driver_sql(f"INSERT INTO {table} SELECT i, {value.format(i='i')} "
                                     "FROM generate_series(1, 10) AS i")
            conn.commit()
            first = pg_changes(conn, "cdc")
            ids = {t: make_table_id("shop", "public", t) for t in ("prices", "people")}
            lake, keys = Lake.at(str(tmp_path / "lake")), {"prices": ["id"], "people": ["id"]}
            write_parquet(tmp_path / "raw1" / "part-0.parquet", debezium_records(first, keys))
            assert jobs_run("debezium", tmp_path / "raw1", tmp_path / "lake", "src", "run1") == 0
            _edit_by_hand(lake, ids["prices"], "3", {"price": "4.5000000001"})  # the source has 4.5
            _edit_by_hand(lake, ids["people"], "5", {"secret": "leaked"})  # the source has s5
            # the next run brings changes of both tables: it starts from their edited states
            conn.exec_driver_sql("INSERT INTO prices VALUES (11, 16.5)")
            conn.exec_driver_sql("INSERT INTO people VALUES (11, 's11')")
            conn.commit()
            now = state_summary(lake, "src")
            captured = source_checkpoints(url, now, "run2", ReconcileOptions(fmt="debezium"))[0]
            for i in range(12, 15):  # later transactions: the lake's reach passes the capture
                conn.exec_driver_sql(f"INSERT INTO prices VALUES ({i}, 18)")
                conn.commit()
            write_parquet(tmp_path / "raw2" / "part-0.parquet", debezium_records(pg_changes(conn, "cdc"), keys))
        engine.dispose()
        assert jobs_run("debezium", tmp_path / "raw2", tmp_path / "lake", "src", "run2") == 0

        def judged(**rules) -> dict:
            options = ReconcileOptions(fmt="debezium", **rules)
            state = state_summary(lake, "src")
            lake_rows = LakeRowsNow(lake, "src", state, lambda _table: 10_000)
            rows = reconcile_run(lake, "src", "run2", captured, state, options, hashes_now=lake_rows.hashes,
                                 rows_now=JudgedRows(url, state, lake_rows.texts, options))
            return {r.table: r.checkpoints[0] for r in rows}

        strict = judged()
        price, person = strict[ids["prices"]], strict[ids["people"]]
        assert price.verdict == MISMATCH == person.verdict
        assert price.source_rows == price.lake_rows == 11  # the counts agree
        assert price.value_diff.keys.differ == ('{"id":"3"}',)
        assert [c.to_json() for c in price.value_diff.rows[0].columns] == [
            {"column": "price", "source": "4.5", "lake": "4.5000000001", "within_tolerance": False}]
        assert [c.to_json() for c in person.value_diff.rows[0].columns] == [
            {"column": "secret", "source": "s5", "lake": "leaked", "within_tolerance": False}]

        declared = judged(table_value_tolerances=(("prices", (("price", 1e-6),)),),
                          table_sensitive_columns=(("people", ("secret",)),))
        assert declared[ids["prices"]].verdict == MATCH
        assert "within the declared tolerance" in declared[ids["prices"]].reason
        masked = declared[ids["people"]]
        assert masked.verdict == MISMATCH and masked.value_diff.keys.differ == ('{"id":"5"}',)
        assert [c.to_json() for c in masked.value_diff.rows[0].columns] == [
            {"column": "secret", "source": "(masked)", "lake": "(masked)", "within_tolerance": False}]
        assert "leaked" not in json.dumps([v.to_json() for v in declared.values()])


def test_postgres_a_large_tables_value_mismatch_is_drilled_into_at_the_next_capture(tmp_path):
    """A table over its key limit keeps no row hashes: its value mismatch names buckets. The next capture keeps
    the row hashes of those buckets' keys, and its verdict names the key and the column with both values."""
    with postgres_server() as url:
        engine = sa.create_engine(url)
        table_id, lake, keys = make_table_id("shop", "public", "accounts"), Lake.at(str(tmp_path / "lake")), KEYS
        options = ReconcileOptions(fmt="debezium", table_key_rows_limits=(("accounts", 5),))

        def run(conn, n: int, captured) -> dict:
            for i in range(3):  # later transactions: the lake's reach passes the capture
                conn.exec_driver_sql(f"INSERT INTO accounts VALUES ({1000 * n + i}, 0)")
                conn.commit()
            records = [r for r in debezium_records(pg_changes(conn, "cdc"), keys) if b"999999" not in r["value"]]
            write_parquet(tmp_path / f"raw{n}" / "part-0.parquet", records)
            assert jobs_run("debezium", tmp_path / f"raw{n}", tmp_path / "lake", "src", f"run{n}") == 0
            state = state_summary(lake, "src")
            lake_rows = LakeRowsNow(lake, "src", state, options.key_rows_limit_of)
            [row] = reconcile_run(lake, "src", f"run{n}", captured, state, options, hashes_now=lake_rows.hashes,
                                  rows_now=JudgedRows(url, state, lake_rows.texts, options))
            return {c.moment: c for c in row.checkpoints}

        with engine.connect() as conn:
            pg_tables_with_slot(conn, "CREATE TABLE accounts (id int PRIMARY KEY, balance int)")
            conn.exec_driver_sql("INSERT INTO accounts SELECT i, i FROM generate_series(1, 40) AS i")
            conn.commit()
            conn.exec_driver_sql("UPDATE accounts SET balance = 999999 WHERE id = 17")  # lost on its way
            conn.commit()
            state = state_summary(lake, "src") or {table_id: {"state_rows": 0, "snapshot_id": None,
                                                              "key_columns": ["id"],
                                                              "columns": {"id": "string", "balance": "string"}}}
            [first] = source_checkpoints(url, state, "run1", options)[0]
            assert first.row_hashes is None and first.fingerprints is not None  # 40 rows: over the limit
            [judged] = run(conn, 1, [first]).values()
            assert judged.verdict == MISMATCH and judged.value_diff.differing == 1 and judged.value_diff.keys is None
            drilled = replace(options, drill_buckets=drill_buckets(lake, "src"))
            assert drilled.drill_buckets == ((table_id, tuple(int(b) for b in judged.value_diff.source)),)
            [second] = source_checkpoints(url, state_summary(lake, "src"), "run2", drilled)[0]
            assert second.row_hash_buckets == drilled.drill_buckets[0][1] and '{"id":"17"}' in second.row_hashes
            assert len(second.row_hashes) <= 5
            verdict = run(conn, 2, [second])[second.moment.text]
        engine.dispose()
    assert verdict.verdict == MISMATCH and verdict.value_diff.keys.differ == ('{"id":"17"}',)
    assert verdict.value_diff.keys.missing_in_lake == () == verdict.value_diff.keys.extra_in_lake
    assert [c.to_json() for c in verdict.value_diff.rows[0].columns] == [
        {"column": "balance", "source": "999999", "lake": "17", "within_tolerance": False}]
