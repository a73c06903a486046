"""A simulated source of one bucketed state table (``db.public.accounts``) and the decode + merge runs
that publish it, stage by stage: shared by tests/integration/test_bucketed_state.py and test_expire.py."""
from __future__ import annotations

from jobs import stages
from jobs.demo.simulator import SourceSimulator, TableSpec, write_parquet
from jobs.iceberg.catalog import load_table, open_catalog
from jobs.lake.layout import Lake
from tests.support.pipeline_runs import decode_and_merge

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
        """A run of what the simulator sent since the last one; a run id seen before re-runs its snapshot."""
        raw = self.tmp_path / run_id / "p.parquet"
        if not raw.exists():
            records = self.sim.to_kafka_records(with_schema=True)
            write_parquet(raw, records[self.sent:])
            self.sent = len(records)
        ctx = stages.RunContext(self.lake, "buckets", run_id)
        # the table's report as merge.json writes it
        return decode_and_merge(self.spark, ctx, "debezium", raw.parent, buckets=buckets).tables[TABLE_ID].to_json()

    def table(self):
        return load_table(open_catalog(self.lake), "buckets", TABLE_ID)

    def rows(self) -> list[dict]:
        arrow = self.table().scan().to_arrow().select(["id", "owner", "balance"])
        return sorted(arrow.to_pylist(), key=lambda r: r["id"])

    def expected(self) -> list[dict]:
        return sorted(({c: r[c] for c in ("id", "owner", "balance")} for r in self.sim.expected_state("accounts")),
                      key=lambda r: r["id"])


def loaded(spark, tmp_path, seed: int, rows: int, partitions: int = 1) -> tuple[SourceSimulator, Runs]:
    """A simulated source of ``rows`` accounts, snapshotted, and the runs that will publish it."""
    sim = SourceSimulator(seed, [TABLE], "postgresql", n_partitions=partitions)
    sim.populate("accounts", rows)
    sim.snapshot()
    return sim, Runs(spark, tmp_path, sim)
