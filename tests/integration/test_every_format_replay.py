"""Generated workloads in every non-Debezium format: the published Iceberg state equals the
simulator's independent SQLite replay, with redeliveries and garbage in the stream, in one or
several runs (tests/integration/test_workload_replay.py does the same for Debezium).

Formats that declare types (Qlik metadata, DTS value branches, Canal mysqlType, DataWorks types) give
typed state; Maxwell, SharePlex and OGG give strings. Values are compared by meaning: the same number,
date, instant (DataWorks carries milliseconds only) or text.
"""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from jobs.demo.simulator import SourceSimulator
from jobs.demo.streams import FORMAT_RECORDS, logical_changes
from tests.support.checkpoints import assert_commit_points_hold
from tests.support.replay import (
    TABLES,
    assert_state_equals_source,
    assert_state_means_source,
    expected_versions,
    history_rows,
    make_workload,
    run_parts,
    same_value,
)


def run_slices(records, tmp_path, runs: int, fmt: str, extra: list[str] = ()) -> list[dict]:
    size = -(-len(records) // runs)
    lake = run_parts(tmp_path, [records[i * size:(i + 1) * size] for i in range(runs)], fmt, extra=extra)
    return [json.loads((lake / f"reports/wl/run=run{i}/decode.json").read_text()) for i in range(runs)]


@pytest.mark.parametrize("stream, runs, seed", [
    ("qlik", 2, 21), ("qlik_avro", 1, 22), ("dts_avro", 2, 23), ("canal", 2, 24), ("maxwell", 1, 25),
    ("dataworks", 2, 26), ("shareplex", 2, 27), ("ogg", 1, 28),
])
def test_generated_stream_folds_to_the_sqlite_replay(spark, tmp_path, stream, runs, seed):
    fmt = stream.removesuffix("_avro") if stream == "qlik_avro" else stream
    sim = make_workload(seed, "mysql", 160)
    records = FORMAT_RECORDS[stream](sim)
    # SharePlex messages never name the key (the documented way is --primary-keys)
    extra = [f"--primary-keys={t.upper()}={','.join(s.primary_key)}" for t, s in sim.tables.items()] \
        if fmt == "shareplex" else []
    reports = run_slices(records, tmp_path, runs, fmt, extra)
    assert_commit_points_hold(sim, tmp_path / "lake", "wl", runs)  # the lake's counts at source times
    if fmt in ("qlik", "dts_avro"):
        assert_state_equals_source(sim, tmp_path / "lake", "wl", with_schema=True)  # typed exactly
    else:
        assert_state_means_source(sim, tmp_path / "lake", fmt)
    assert all(r["balanced"] for r in reports)
    assert sum(r["total"]["landed"] for r in reports) == len(records)
    # every garbage message, and nothing else, is quarantined
    assert sum(r["total"]["quarantined"] for r in reports) == sim.garbage_count
    if fmt == "qlik" and runs > 1:
        # the metadata came in the first run only: the second decoded with what the lake remembered
        assert reports[0]["remembered_documents"] == len(sim.tables)
        assert reports[1]["remembered_documents"] == 0


def _key_moves(sim: SourceSimulator) -> list[tuple[str, tuple, tuple, int]]:
    """(table, old key, new key, stream index) of every key change, in stream order."""
    moves = []
    for index, e, op, before, after in logical_changes(sim):
        if op == "u":
            keys = [tuple(str(row[k]) for k in sim.tables[e.table].primary_key) for row in (before, after)]
            if keys[0] != keys[1]:
                moves.append((e.table, keys[0], keys[1], index))
    return moves


@pytest.mark.parametrize("runs, history", [(1, True), (2, False)])
def test_shareplex_key_changes_move_whole_rows(spark, tmp_path, runs, history):
    """A SharePlex key change carries the changed columns only: the new key still holds the whole row,
    also when a row moves again later in the same run (a chain of keys) or in a later run, and the
    history shows one version per source change (no extra version for the move)."""
    sim = SourceSimulator(61, TABLES, "mysql", n_partitions=3)
    sim.populate("items", 20)
    sim.populate("stock", 15)
    sim.snapshot()
    sim.random_ops(140, {"insert": 0.15, "update": 0.3, "delete": 0.05, "pk_change": 0.5},
                   max_tx_size=3, concurrency=2)
    sim.redeliver(0.05)
    moves = _key_moves(sim)
    # the workload holds what the test claims: chains (a moved row moved again) in one run
    assert any(t == t2 and new == old2 and i < j for t, _, new, i in moves for t2, old2, _, j in moves)
    records = FORMAT_RECORDS["shareplex"](sim)
    extra = [f"--primary-keys={t.upper()}={','.join(s.primary_key)}" for t, s in sim.tables.items()]
    reports = run_slices(records, tmp_path, runs, "shareplex", [*extra, *(["--history"] if history else [])])
    assert all(r["balanced"] for r in reports)
    assert_state_means_source(sim, tmp_path / "lake", "shareplex")
    merged = [json.loads((tmp_path / f"lake/reports/wl/run=run{i}/merge.json").read_text()) for i in range(runs)]
    assert sum(t.get("key_moves", 0) for m in merged for t in m["tables"].values()) >= len(moves)
    if history:
        versions = expected_versions(sim)
        for table, spec in sim.tables.items():
            by_key: dict[tuple, list] = defaultdict(list)
            for r in history_rows(tmp_path / "lake", table.upper()):
                by_key[tuple(str(r[k]) for k in spec.primary_key)].append(r)
            assert by_key.keys() == versions[table].keys()
            for key, rows in by_key.items():
                rows.sort(key=lambda r: r["_valid_from_position"])
                expected = versions[table][key]
                assert len(rows) == len(expected), f"{table} {key}"
                for got, (op, image) in zip(rows, expected):
                    assert (got["_op"] == "DELETE") == (op == "DELETE")
                    for column, value in (image or {}).items():
                        assert same_value(spec.column_type(column).kind, got[column], value, False), \
                            f"{table} {key}.{column}: history {got[column]!r}, source {value!r}"
