"""``--history``: an SCD type 2 table per source table, checked against the simulator's own record of
every row version (its change stream in commit order, without redeliveries or garbage), over two
runs with redeliveries and garbage in the topic."""
from __future__ import annotations

from collections import defaultdict

from jobs.demo.simulator import SourceSimulator
from jobs.lake.layout import Lake
from tests.support.replay import TABLES, expected_versions, history_rows, normalise, published_rows, run_parts


def test_history_has_every_version_of_every_key(spark, tmp_path):
    sim = SourceSimulator(52, TABLES, "mysql", n_partitions=3)
    sim.populate("items", 25)
    sim.populate("stock", 15)
    sim.snapshot()
    sim.random_ops(120, max_tx_size=3, concurrency=2)
    sim.redeliver(0.05)
    sim.garbage(3)
    sim.random_ops(80, max_tx_size=3, concurrency=2)
    sim.redeliver(0.05)
    records = sim.to_kafka_records(with_schema=True)
    half = len(records) // 2
    lake = run_parts(tmp_path, [records[:half], records[half:]], extra=["--history"])

    expected = expected_versions(sim)
    for table, spec in sim.tables.items():
        rows = history_rows(lake, table)
        by_key: dict[tuple, list] = defaultdict(list)
        for r in rows:
            by_key[tuple(str(r[k]) for k in spec.primary_key)].append(r)
        assert by_key.keys() == expected[table].keys()
        for key, versions in by_key.items():
            versions.sort(key=lambda r: r["_valid_from_position"])
            got = [(v["_op"], None if v["_op"] == "DELETE" else {c: normalise(v[c]) for c in spec.column_names})
                   for v in versions]
            assert got == expected[table][key], f"{table} {key}"
            # contiguous: each version ends where the next begins; only the last may be open
            for a, b in zip(versions, versions[1:]):
                assert a["_valid_to_position"] == b["_valid_from_position"] and not a["_is_current"]
            last = versions[-1]
            assert last["_valid_to_position"] is None
            assert last["_is_current"] == (last["_op"] != "DELETE")

        # the current versions are the published state
        current = sorted(str({c: normalise(r[c]) for c in spec.column_names}) for r in rows if r["_is_current"])
        state = sorted(str({c: normalise(r[c]) for c in spec.column_names})
                       for r in published_rows(lake, "wl", table))
        assert current == state

    # history tables are not state tables: reconciliation lists the two source tables only
    from jobs.iceberg.catalog import state_summary
    assert sorted(state_summary(Lake.at(str(lake)), "wl")) == ["inv._.items", "inv._.stock"]


def test_rows_removed_by_a_truncate_or_a_newer_load_are_no_longer_current(spark, tmp_path):
    """A TRUNCATE and a complete newer load remove rows without an event of their key: their current
    versions end there, so the current history is the published state (the source's, independently)."""
    sim = SourceSimulator(71, TABLES, "postgresql", n_partitions=2)
    sim.populate("items", 20)
    sim.populate("stock", 15)
    sim.snapshot()
    sim.random_ops(50, max_tx_size=2)
    # deletes that never arrived: only the newer load of stock removes these rows
    lost = []
    spec = sim.tables["stock"]
    for row in sim.expected_state("stock")[:3]:
        key = tuple(row[k] for k in spec.primary_key)
        sim._sql_delete(spec, key)  # noqa: SLF001 - modelling a lost event, not an operation
        sim._remove_key("stock", key)  # noqa: SLF001
        lost.append(tuple(str(k) for k in key))
    first_run = len(sim.events)
    sim.truncate("items")
    sim.random_ops(20, tables=["items"], max_tx_size=2)
    sim.snapshot(["stock"])
    sim.random_ops(20, max_tx_size=2)
    records = sim.to_kafka_records(with_schema=True)
    lake = run_parts(tmp_path, [records[:first_run], records[first_run:]], extra=["--history"])
    for table, spec in sim.tables.items():
        rows = history_rows(lake, table)
        current = [r for r in rows if r["_is_current"]]
        keys = [tuple(str(r[k]) for k in spec.primary_key) for r in current]
        assert len(keys) == len(set(keys)), f"{table}: a key with two current versions"
        as_text = lambda rs: sorted(str({c: normalise(r[c]) for c in spec.column_names}) for r in rs)  # noqa: E731, B023
        expected = as_text(sim.expected_state(table))
        assert as_text(published_rows(lake, "wl", table)) == expected
        assert as_text(current) == expected, table
    items = history_rows(lake, "items")
    # every version of the first run ended at the truncate, none is current
    first = [r for r in items if r["_run_id"] == "run0"]
    assert first and not any(r["_is_current"] for r in first)
    closed_at = {r["_valid_to_position"] for r in first if r["_op"] != "DELETE" and r["_valid_to"] is not None}
    assert len(closed_at) >= 1
    stock = history_rows(lake, "stock")
    for key in lost:
        versions = [r for r in stock if tuple(str(r[k]) for k in spec.primary_key) == key]
        assert versions and not any(r["_is_current"] for r in versions), key
