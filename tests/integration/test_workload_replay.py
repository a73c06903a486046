"""Random workloads through ``python -m jobs run``: published Iceberg state == SQLite replay.

The source simulator applies every operation to SQLite with plain SQL (the independent model) and
emits the Debezium messages a connector would; the pipeline sees only the messages.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from jobs import cli
from jobs.demo.simulator import SourceSimulator, write_parquet
from jobs.iceberg.catalog import open_catalog
from jobs.lake.layout import Lake
from jobs.model.properties import RUN_ID_PROP
from tests.support.checkpoints import assert_commit_points_hold
from tests.support.pipeline_runs import jobs_run
from tests.support.replay import assert_state_equals_source, make_workload, run_cli


def write_runs(sim: SourceSimulator, tmp: Path, with_schema: bool, runs: int) -> list[Path]:
    """The stream cut into `runs` consecutive slices, one raw folder each (order kept per partition)."""
    records = sim.to_kafka_records(with_schema=with_schema)
    size = -(-len(records) // runs)
    paths = []
    for i in range(runs):
        path = tmp / f"raw{i}"
        path.mkdir()
        write_parquet(path / "part-0.parquet", records[i * size:(i + 1) * size])
        paths.append(path)
    return paths


def test_postgres_with_schema_two_runs_through_the_cli(spark, tmp_path, monkeypatch):
    """The real command line, as a user runs it, for the second of two consecutive runs (the first, and
    a re-run of the second, in this process: each command line is a fresh JVM, half a minute)."""
    sim = make_workload(11, "postgresql", 300)
    raws = write_runs(sim, tmp_path, with_schema=True, runs=2)
    lake = tmp_path / "lake"
    source_db = sim.save_sqlite(tmp_path / "source.db")  # reconciled through SQLAlchemy COUNT(*)
    args = ["--format", "debezium", "--lake", str(lake), "--pipeline", "wl", "--source-counts", f"sqlite:///{source_db}"]
    archives = tmp_path / "archives"  # the driver's class archive (jobs.spark.class_archive)
    with monkeypatch.context() as m:
        m.setenv("CDC_CLASS_ARCHIVE", str(archives))
        assert cli.main(["run", *args, "--raw", str(raws[0]), "--run-id", "r0"]) == 0
    # a run in a process whose session runs already records nothing, and leaves that session running
    assert not archives.exists() and spark.range(3).count() == 3
    proc = run_cli(["run", *args, "--raw", str(raws[1]), "--run-id", "r1"],
                   env={**os.environ, "CDC_CLASS_ARCHIVE": str(archives)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the first driver of this JVM and these jars recorded it; kept once that JVM exited, with no recording left
    (kept,) = archives.iterdir()
    assert kept.name.startswith("spark-classes-") and kept.suffix == ".jsa"
    assert_state_equals_source(sim, lake, "wl", with_schema=True)

    reports = lake / "reports/wl"
    decoded = [json.loads((reports / f"run=r{i}/decode.json").read_text()) for i in range(2)]
    assert all(d["balanced"] for d in decoded)
    assert sum(d["total"]["quarantined"] for d in decoded) == sim.garbage_count
    recon = json.loads((reports / "run=r1/reconciliation.json").read_text())
    # SQLite names no moment: its counts are judged as of the time they were queried, long after the
    # replayed changes, which no run reaches: behind, never a mismatch
    assert {r["status"] for r in recon["tables"]} == {"behind"}
    assert {r["table"]: r["source_rows"] for r in recon["tables"]} == {
        f"inv.public.{t}": n for t, n in sim.source_counts().items()}
    assert {p["moment_assumed"] for r in recon["tables"] for p in r["pending"]} == {"the time the source was queried"}
    assert "behind" in proc.stdout and "alert email sent:" in proc.stdout

    # re-running a published run id changes nothing
    catalog = open_catalog(Lake.at(str(lake)))
    before = {t: catalog.load_table(t).current_snapshot().snapshot_id for t in catalog.list_tables("wl")}
    assert jobs_run("debezium", raws[1], lake, "wl", "r1") == 0
    catalog = open_catalog(Lake.at(str(lake)))
    after = {t: catalog.load_table(t).current_snapshot().snapshot_id for t in catalog.list_tables("wl")}
    assert after == before
    summaries = [s.summary.additional_properties.get(RUN_ID_PROP)
                 for t in catalog.list_tables("wl") for s in catalog.load_table(t).metadata.snapshots]
    assert sorted(set(summaries)) == ["r0", "r1"]


@pytest.mark.parametrize(
    "connector, with_schema, runs, seed",
    [("mysql", False, 1, 3), ("sqlserver", True, 3, 5), ("postgresql", False, 2, 8)],
)
def test_workloads_in_process(spark, tmp_path, connector, with_schema, runs, seed):
    sim = make_workload(seed, connector, 240, replica_identity_default=(connector == "postgresql"))
    raws = write_runs(sim, tmp_path, with_schema=with_schema, runs=runs)
    lake = tmp_path / "lake"
    for i, raw in enumerate(raws):
        assert jobs_run("debezium", raw, lake, "wl", f"run{i}") == 0
    assert_state_equals_source(sim, lake, "wl", with_schema=with_schema)
    # the lake's counts at the simulator's commit points: by source time, and by the connector's own
    # log position where the simulator logs one
    assert_commit_points_hold(sim, lake, "wl", runs)
    if connector == "mysql":
        assert_commit_points_hold(sim, lake, "wl", runs, by="position", fmt="debezium")
    elif connector == "postgresql":
        # an LSN places the cut within one transaction (positions carry the previous commit's LSN), whose
        # changes move a table's count by at most its size (make_workload: 3)
        assert_commit_points_hold(sim, lake, "wl", runs, by="position", fmt="debezium", off_by=4)


def test_unusable_arguments_exit_2_with_one_line(tmp_path):
    proc = run_cli(["run", "--format", "nope", "--raw", str(tmp_path), "--lake", str(tmp_path / "l"),
                    "--pipeline", "p", "--run-id", "r"])
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "unknown format" in proc.stderr
    proc = run_cli(["run", "--format", "debezium", "--raw", str(tmp_path / "missing"), "--lake",
                    str(tmp_path / "l"), "--pipeline", "p", "--run-id", "r"])
    assert proc.returncode == 2 and "no such file" in proc.stderr
    (tmp_path / "file").write_text("x")
    (raw := tmp_path / "raw").mkdir()
    (raw / "t.jsonl").write_text("{}\n")
    proc = run_cli(["run", "--format", "debezium", "--raw", str(raw), "--lake", str(tmp_path / "file"),
                    "--pipeline", "p", "--run-id", "r"])
    assert proc.returncode == 2 and "is a file" in proc.stderr
    proc = run_cli(["run", "--format", "debezium", "--raw", str(tmp_path), "--lake", str(tmp_path / "l"),
                    "--pipeline", "../x", "--run-id", "r"])
    assert proc.returncode == 2 and "pipeline" in proc.stderr
    # an S3 lake without a catalog that can live beside it: refused before any stage writes
    env = {k: v for k, v in os.environ.items() if k != "CDC_ICEBERG_CATALOG"}
    proc = run_cli(["run", "--format", "debezium", "--raw", str(tmp_path), "--lake", "s3://bucket/lake",
                    "--pipeline", "p", "--run-id", "r"], env=env)
    assert proc.returncode == 2 and "CDC_ICEBERG_CATALOG" in proc.stderr
    proc = run_cli(["run", "--format", "debezium", "--raw", str(tmp_path), "--lake", str(tmp_path / "l"),
                    "--pipeline", "p", "--run-id", "r"], env={**os.environ, "CDC_JIT": "c2"})
    assert proc.returncode == 2 and proc.stderr.strip() == "error: CDC_JIT='c2': one of tiered, c1"
