"""A run that fails before its Iceberg commit leaves the published snapshot as it was; a re-run heals."""
from __future__ import annotations

import pytest

from jobs import publish, stages
from jobs.lake import Lake
from scripts.simulate_source import SourceSimulator, TableSpec, write_parquet
from tests.support.pipeline_runs import decode_and_merge

TABLE = TableSpec("db", "public", "accounts", [("id", "int"), ("owner", "text"), ("balance", "decimal(12,2)")],
                  ["id"])


def _rows(lake: Lake, table_id: str) -> list[dict]:
    table = publish.load_table(publish.open_catalog(lake), "atom", table_id)
    return sorted(table.scan().to_arrow().select(["id", "owner", "balance"]).to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("rows, ops, crash_in, mode", [
    # many changes of a small table: the touched buckets are rewritten; crash once the data is written
    (20, 60, "pyiceberg.table._parquet_files_to_data_files", "rewrite"),
    # few changes of a larger one: position deletes; crash once the delete files are written too
    (400, 6, "jobs.publish._position_delete_file", "delta"),
])
def test_failure_before_commit_keeps_the_published_snapshot(spark, tmp_path, monkeypatch, rows, ops, crash_in, mode):
    sim = SourceSimulator(21, [TABLE], "postgresql", n_partitions=2)
    sim.populate("accounts", rows)
    sim.snapshot()
    first = sim.to_kafka_records(with_schema=True)
    sim.random_ops(ops)
    second = sim.to_kafka_records(with_schema=True)[len(first):]
    write_parquet(tmp_path / "r1" / "p.parquet", first)
    write_parquet(tmp_path / "r2" / "p.parquet", second)
    lake = Lake.at(str(tmp_path / "lake"))

    def run(run_id, raw):
        ctx = stages.RunContext(lake, "atom", run_id)
        return decode_and_merge(spark, ctx, "debezium", raw)["tables"]["db.public.accounts"]

    run("r1", tmp_path / "r1")
    table_id = "db.public.accounts"
    table = publish.load_table(publish.open_catalog(lake), "atom", table_id)
    snapshot_before = table.current_snapshot().snapshot_id
    rows_before = _rows(lake, table_id)

    # crash after Spark wrote the new data files, before the catalog commit
    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash before commit")

    monkeypatch.setattr(crash_in, crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run("r2", tmp_path / "r2")
    table = publish.load_table(publish.open_catalog(lake), "atom", table_id)
    assert table.current_snapshot().snapshot_id == snapshot_before
    assert _rows(lake, table_id) == rows_before

    monkeypatch.undo()
    assert run("r2", tmp_path / "r2")["mode"] == mode
    expected = sorted(
        ({"id": r["id"], "owner": r["owner"], "balance": r["balance"]} for r in sim.expected_state("accounts")),
        key=lambda r: r["id"],
    )
    assert _rows(lake, table_id) == expected
    table = publish.load_table(publish.open_catalog(lake), "atom", table_id)
    assert table.current_snapshot().summary.additional_properties[publish.RUN_ID_PROP] == "r2"
