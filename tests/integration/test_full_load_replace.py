"""A newer complete full load replaces the table as of its position: keys missing from it disappear,
also keys whose delete never arrived. The re-snapshot comes in the middle of the stream; the load is
closed by the snapshot's ``last`` row or by the table's next CDC event, in the same run or in the next
one. An incremental snapshot only upserts, and never overrides a later change of the same key."""
from __future__ import annotations

import json

import pytest

from jobs.demo.simulator import SourceSimulator
from tests.support.pipeline_runs import jobs_run
from tests.support.replay import TABLES, assert_state_equals_source, published_rows, run_parts


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


# (the stream in one run is the first run of last-row-closes-load; a load closed in its own run or by the
# next, at the fold's level: tests/unit/fold/test_fold_semantics.py)
@pytest.mark.parametrize("cut", [0, -1], ids=["last-row-closes-load", "load-closed-by-next-run"])
def test_newer_complete_load_removes_keys_missing_from_it(spark, tmp_path, cut):
    """``cut``: where the first run ends, relative to the re-snapshot's end (-1: before its last row)."""
    sim, end_of_load = workload()
    records = sim.to_kafka_records(with_schema=True)
    parts = [records] if cut is None else [records[:end_of_load + cut], records[end_of_load + cut:]]
    lake = run_parts(tmp_path, parts)
    for i in range(len(parts)):
        merge = json.loads((lake / f"reports/wl/run=run{i}/merge.json").read_text())
        loads = {t: r["full_load"] for t, r in merge["tables"].items()}
        # whether each table's latest load is complete after the run (None: no load applied or pending)
        complete = {t.rsplit(".", 1)[-1]: load and load["complete"] for t, load in loads.items()}
        expected = {
            # the snapshot's last row (of stock, the last table read) closes every table's load; each
            # table's last_in_data_collection row closes its own
            (None, 0): {"items": True, "stock": True},
            (0, 0): {"items": True, "stock": True},
            (0, 1): {"items": None, "stock": None},
            # the first run ends just before stock's last row: stock's load waits for the next run
            (-1, 0): {"items": True, "stock": False},
            (-1, 1): {"items": None, "stock": True},
        }[(cut, i)]
        assert complete == expected
    assert_state_equals_source(sim, lake, "wl", with_schema=True)


def test_incremental_snapshot_upserts_and_never_overrides_a_later_change(spark, tmp_path):
    sim = SourceSimulator(62, TABLES, "postgresql", n_partitions=2)
    sim.populate("items", 24)
    sim.populate("stock", 10)
    sim.snapshot()
    sim.random_ops(30, max_tx_size=2)
    chunks: list[range] = []
    after = None
    for _ in range(3):  # the chunks of an incremental snapshot of items, streaming in between
        start = len(sim.events)
        after = sim.incremental_snapshot("items", after_key=after, limit=10)
        chunks.append(range(start, len(sim.events)))
        sim.random_ops(25, max_tx_size=2)
    sim.redeliver(0.05)
    records = sim.to_kafka_records(with_schema=True)
    late = {i for chunk in chunks for i in chunk}
    assert late, "the incremental snapshot read no row"
    # the chunks' messages arrive last (another partition lagging), after every later change
    parts = [[r for i, r in enumerate(records) if i not in late], [records[i] for i in sorted(late)]]
    lake = run_parts(tmp_path, parts, pipeline="inc")
    merge = json.loads((lake / "reports/inc/run=run1/merge.json").read_text())
    assert merge["tables"] and all(t["full_load"] is None for t in merge["tables"].values())  # no load
    assert_state_equals_source(sim, lake, "inc", with_schema=True)


def test_the_end_of_a_snapshot_closes_the_load_of_a_table_read_in_an_earlier_run(spark, tmp_path):
    """A snapshot of two tables (Debezium 1.x marks only its very last row, snapshot=last): the re-snapshot
    of table a ends in one run, the `last` row, of table b, comes in the next. That row closes a's load
    too, so the key the re-snapshot no longer holds is gone, though the run has no row of a."""
    source = {"connector": "postgresql", "db": "d", "schema": "public"}

    def read(table: str, lsn: int, row_id: int, snapshot: str = "true") -> str:
        return json.dumps({"op": "r", "before": None, "after": {"id": row_id, "v": f"{table}{row_id}"},
                           "ts_ms": 1730000000000, "source": {**source, "table": table, "lsn": lsn,
                                                              "snapshot": snapshot}})

    runs = [[read("a", 100, 1), read("a", 100, 2), read("a", 100, 3), read("b", 100, 10, "last")],
            [read("a", 5000, 1), read("a", 5000, 3), read("b", 5000, 10)],  # 2 was deleted meanwhile
            [read("b", 100, 10, "last")],  # the first snapshot's end, redelivered: it closes nothing
            [read("b", 5000, 11, "last")]]
    lake = tmp_path / "lake"
    for i, messages in enumerate(runs):
        raw = tmp_path / f"run{i}.jsonl"
        raw.write_text("\n".join(messages) + "\n")
        assert jobs_run("debezium", raw, lake, "p", f"r{i}", "--primary-keys", "a=id", "--primary-keys", "b=id") == 0
        if i == 2:
            assert sorted(r["id"] for r in published_rows(lake, "p", "a")) == ["1", "2", "3"]
            merge = json.loads((lake / "reports/p/run=r2/merge.json").read_text())
            assert "d.public.a" not in merge["tables"]
    assert sorted(r["id"] for r in published_rows(lake, "p", "a")) == ["1", "3"]
    assert sorted(r["id"] for r in published_rows(lake, "p", "b")) == ["10", "11"]
    merge = json.loads((lake / "reports/p/run=r3/merge.json").read_text())
    assert merge["tables"]["d.public.a"]["full_load"]["complete"] is True
