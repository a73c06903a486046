"""A capture's values inside one snapshot (jobs.reconcile.sources._Snapshot), on SQLite through its registered
functions: every table read once, small or large, and a large table's drilled buckets kept within its limit."""
from __future__ import annotations

import sqlalchemy as sa

from jobs.fold import fingerprints as rule
from jobs.model.keys import key_text
from jobs.reconcile.sources import SourceSnapshot, Table, _Snapshot

COLUMNS = {"id": "bigint", "v": "string"}


def _captured(rows: int, limit: int, buckets: tuple[int, ...] = ()) -> tuple[SourceSnapshot, list[str]]:
    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        conn.exec_driver_sql("INSERT INTO t VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(rows)))
        statements: list[str] = []
        conn.connection.driver_connection.set_trace_callback(statements.append)
        counting, out = _Snapshot(conn, limit), SourceSnapshot("sqlite")
        counting.prepare()
        counting.count(Table("t", None, "t", ("id",), None, COLUMNS, buckets), out)
    return out, [s for s in statements if s.lstrip().upper().startswith("SELECT")]


def _truth(rows: range) -> tuple[list[int], dict[str, str]]:
    sums, hashes = [0] * rule.BUCKETS, {}
    for i in rows:
        texts = rule.value_texts({"id": i, "v": f"v{i}"}, COLUMNS)
        b, h = rule.bucket_of(texts, ["id"]), rule.text_hash(rule.joined_text(texts))
        sums[b], hashes[key_text(("id",), [i])] = rule.add(sums[b], h), rule.hex_of(h)
    return sums, hashes


def test_a_small_table_is_read_once_for_its_rows_fingerprints_and_row_hashes():
    out, selects = _captured(40, limit=50)
    sums, hashes = _truth(range(40))
    assert len(selects) == 1
    assert out.rows["t"] == 40 and out.fingerprints["t"] == sums and out.row_hashes["t"] == hashes
    assert out.keys["t"] == list(hashes) and "t" not in out.row_hash_buckets


def test_a_large_table_keeps_the_row_hashes_of_the_buckets_to_drill_into_that_fit_its_limit():
    sums, hashes = _truth(range(400))
    by_bucket = {}
    for key, h in hashes.items():
        by_bucket.setdefault(rule.bucket_of({"id": key.split('"')[3]}, ["id"]), {})[key] = h
    first, second = sorted(by_bucket, key=lambda b: len(by_bucket[b]))[:2]
    limit = len(by_bucket[first]) + len(by_bucket[second]) - 1  # room for the first bucket only
    out, _selects = _captured(400, limit=limit, buckets=(first, second))
    assert out.rows["t"] == 400 and out.fingerprints["t"] == sums and "t" not in out.keys
    assert out.row_hash_buckets["t"] == (first,) and out.row_hashes["t"] == by_bucket[first]
    plain, selects = _captured(400, limit=limit)
    assert "t" not in plain.row_hashes and len(selects) == 2  # the first rows, then the aggregate
