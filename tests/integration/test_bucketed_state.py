"""State tables in key-hash buckets: a run rewrites only the buckets its changes touch, and the state
stays equal to an independent replay (the simulator's SQLite); replacing runs and tables of the
earlier, unbucketed layout rewrite everything."""
from __future__ import annotations

import pytest

from jobs import publish, stages
from jobs.decoders import DecodeOptions
from jobs.lake import Lake
from scripts.simulate_source import SourceSimulator, TableSpec, write_parquet

pytestmark = pytest.mark.integration

TABLE = TableSpec("db", "public", "accounts", [("id", "int"), ("owner", "text"), ("balance", "decimal(12,2)")],
                  ["id"])
TABLE_ID = "db.public.accounts"
BUCKETS = 16


class Runs:
    def __init__(self, spark, tmp_path, sim: SourceSimulator):
        self.spark, self.tmp_path, self.sim = spark, tmp_path, sim
        self.lake = Lake.at(str(tmp_path / "lake"))
        self.sent = 0

    def run(self, run_id: str, buckets: int = BUCKETS) -> dict:
        records = self.sim.to_kafka_records(with_schema=True)
        raw = self.tmp_path / run_id / "p.parquet"
        write_parquet(raw, records[self.sent:])
        self.sent = len(records)
        ctx = stages.RunContext(self.lake, "buckets", run_id)
        stages.run_decode(self.spark, ctx, "debezium", str(raw.parent), DecodeOptions())
        return stages.run_merge(self.spark, ctx, buckets=buckets)["tables"][TABLE_ID]

    def table(self):
        return publish.load_table(publish.open_catalog(self.lake), "buckets", TABLE_ID)

    def rows(self) -> list[dict]:
        arrow = self.table().scan().to_arrow().select(["id", "owner", "balance"])
        return sorted(arrow.to_pylist(), key=lambda r: r["id"])

    def expected(self) -> list[dict]:
        return sorted(({c: r[c] for c in ("id", "owner", "balance")} for r in self.sim.expected_state("accounts")),
                      key=lambda r: r["id"])


def _bucket_files(table) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for task in table.scan().plan_files():
        out.setdefault(task.file.partition[0], set()).add(task.file.file_path)
    return out


def test_a_run_rewrites_only_the_buckets_it_touches(spark, tmp_path):
    sim = SourceSimulator(5, [TABLE], "postgresql", n_partitions=2)
    sim.populate("accounts", 400)
    sim.snapshot()
    runs = Runs(spark, tmp_path, sim)
    first = runs.run("r1")
    assert first["buckets"] == BUCKETS and first["buckets_rewritten"] == BUCKETS
    table = runs.table()
    assert [f.name for f in table.spec().fields] == [publish.BUCKET_COLUMN]
    files_before = _bucket_files(table)
    assert len(files_before) == BUCKETS and all(len(f) == 1 for f in files_before.values())  # one file per bucket
    assert runs.rows() == runs.expected()

    # two keys change: at most two buckets are rewritten, every other file stays in the new snapshot
    sim.update("accounts", {"id": 7}, {"owner": "changed"})
    sim.delete("accounts", {"id": 300})
    second = runs.run("r2")
    assert 1 <= second["buckets_rewritten"] <= 2
    assert second["files_removed"] == second["buckets_rewritten"]
    total_bytes = first["bytes_added"]
    assert second["bytes_removed"] < total_bytes * 3 / BUCKETS
    files_after = _bucket_files(runs.table())
    kept = [b for b in files_before if files_after.get(b) == files_before[b]]
    assert len(kept) == BUCKETS - second["buckets_rewritten"]
    assert runs.rows() == runs.expected()
    assert second["state_rows"] == len(runs.expected())

    # many random changes over runs: still the replay's state, key unique across buckets
    for i in range(3):
        sim.random_ops(40)
        report = runs.run(f"r{3 + i}")
        assert report["buckets_rewritten"] <= BUCKETS
        assert runs.rows() == runs.expected()
    ids = [r["id"] for r in runs.rows()]
    assert len(ids) == len(set(ids))

    # a re-run of a published run changes nothing; an existing table keeps its bucket count
    assert runs.table().properties[publish.BUCKETS_PROP] == str(BUCKETS)
    sim.update("accounts", {"id": 8}, {"owner": "again"})
    report = runs.run("r6", buckets=4)
    assert report["buckets"] == BUCKETS and report["buckets_rewritten"] == 1
    assert runs.rows() == runs.expected()


def test_truncate_rewrites_every_bucket(spark, tmp_path):
    sim = SourceSimulator(6, [TABLE], "postgresql", n_partitions=1)
    sim.populate("accounts", 100)
    sim.snapshot()
    runs = Runs(spark, tmp_path, sim)
    runs.run("r1")
    sim.truncate("accounts")
    sim.insert("accounts")
    report = runs.run("r2")
    assert report["buckets_rewritten"] == BUCKETS
    assert runs.rows() == runs.expected()
    assert len(runs.rows()) == 1


def test_a_table_of_the_earlier_layout_is_bucketed_by_its_next_run(spark, tmp_path):
    sim = SourceSimulator(7, [TABLE], "postgresql", n_partitions=1)
    sim.populate("accounts", 100)
    sim.snapshot()
    runs = Runs(spark, tmp_path, sim)
    runs.run("r1", buckets=0)  # the layout of earlier versions: one unpartitioned file set
    table = runs.table()
    assert not publish.is_bucketed(table) and table.spec().fields == ()
    old_files = {t.file.file_path for t in table.scan().plan_files()}

    sim.update("accounts", {"id": 3}, {"owner": "x"})
    report = runs.run("r2")
    table = runs.table()
    assert publish.is_bucketed(table)
    assert report["buckets_rewritten"] == BUCKETS
    assert not old_files & {t.file.file_path for t in table.scan().plan_files()}  # all replaced
    assert runs.rows() == runs.expected()

    sim.update("accounts", {"id": 4}, {"owner": "y"})
    assert runs.run("r3")["buckets_rewritten"] == 1
    assert runs.rows() == runs.expected()
