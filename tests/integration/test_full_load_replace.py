"""A newer complete full load replaces the table as of its position: keys missing from it disappear,
also keys whose delete never arrived. The re-snapshot comes in the middle of the stream; the load is
closed by the table's next CDC event, in the same run or in the next one."""
from __future__ import annotations

import json

import pytest

from jobs import cli
from scripts.simulate_source import SourceSimulator, write_parquet
from tests.integration.test_workload_replay import TABLES, assert_state_equals_source

pytestmark = pytest.mark.integration


def workload() -> tuple[SourceSimulator, int]:
    """The stream, and the number of messages up to the end of the re-snapshot."""
    sim = SourceSimulator(61, TABLES, "mysql", n_partitions=3)
    sim.populate("items", 30)
    sim.populate("stock", 20)
    sim.snapshot()
    sim.random_ops(60, max_tx_size=2, concurrency=2)
    # rows deleted at the source whose delete events were lost (a connector restarted from an old
    # offset, a topic compacted too early): only a new complete load can remove them
    for table, spec in sim.tables.items():
        for row in sim.expected_state(table)[:3]:
            key = tuple(row[k] for k in spec.primary_key)
            sim._sql_delete(spec, key)  # noqa: SLF001 - modelling a lost event, not an operation
            sim._remove_key(table, key)  # noqa: SLF001
    sim.random_ops(20, max_tx_size=2)
    sim.snapshot()  # the re-snapshot
    end_of_load = len(sim.events)
    sim.random_ops(60, max_tx_size=2, concurrency=2)
    sim.redeliver(0.05)
    return sim, end_of_load


@pytest.mark.parametrize("split_after_load", [False, True], ids=["one-run", "load-closed-by-next-run"])
def test_newer_complete_load_removes_keys_missing_from_it(spark, tmp_path, split_after_load):
    sim, end_of_load = workload()
    records = sim.to_kafka_records(with_schema=True)
    parts = [records[:end_of_load], records[end_of_load:]] if split_after_load else [records]
    lake = tmp_path / "lake"
    for i, part in enumerate(parts):
        raw = tmp_path / f"raw{i}"
        raw.mkdir()
        write_parquet(raw / "part-0.parquet", part)
        assert cli.main(["run", "--format", "debezium", "--raw", str(raw), "--lake", str(lake), "--pipeline", "wl",
                         "--run-id", f"run{i}"]) == 0
        merge = json.loads((lake / f"reports/wl/run=run{i}/merge.json").read_text())
        loads = {t: r["full_load"] for t, r in merge["tables"].items()}
        if split_after_load and i == 0:
            # the re-snapshot ends the first run: not yet known complete
            assert all(load and not load["complete"] for load in loads.values())
        else:
            assert all(load and load["complete"] for load in loads.values())
    assert_state_equals_source(sim, lake, "wl", with_schema=True)
