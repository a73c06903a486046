"""Random workloads through ``python -m jobs run``: published Iceberg state == SQLite replay.

The source simulator applies every operation to SQLite with plain SQL (the independent model) and
emits the Debezium messages a connector would; the pipeline sees only the messages.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Iterable, Sequence

import pytest

from jobs import cli, publish
from jobs.lake import Lake
from scripts.simulate_source import INVENTORY_TABLES, SourceSimulator, encode_value, write_parquet
from tests.pipeline_runs import jobs_run

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

TABLES = INVENTORY_TABLES


def make_workload(seed: int, connector: str, ops: int, replica_identity_default: bool = False) -> SourceSimulator:
    tables = list(TABLES)
    if replica_identity_default:
        # updates without before images and unchanged TOAST columns sent as "unavailable"
        tables[0] = dataclasses.replace(tables[0], replica_identity="default", toasted=("name",))
    sim = SourceSimulator(seed, tables, connector, n_partitions=3)
    sim.populate("items", 40)
    sim.populate("stock", 30)
    sim.snapshot()
    sim.random_ops(ops // 2, max_tx_size=3, concurrency=2)
    sim.redeliver(0.05)
    sim.garbage(5)
    sim.random_ops(ops - ops // 2, max_tx_size=3, concurrency=2)
    sim.redeliver(0.03)
    return sim


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


def run_one(raw: Path, lake: Path, run_id: str, fmt: str = "debezium", pipeline: str = "wl",
            extra: Sequence[str] = ()) -> None:
    """One `jobs run` of a raw folder, in this process, asserted to succeed."""
    assert jobs_run(fmt, raw, lake, pipeline, run_id, *extra) == 0


def run_parts(tmp: Path, parts: Iterable[list], fmt: str = "debezium", pipeline: str = "wl",
              extra: Sequence[str] = ()) -> Path:
    """One `jobs run` per part of the messages, in order (raw folders raw0, raw1, ..., run ids run0,
    run1, ...), each asserted to succeed; the lake."""
    lake = tmp / "lake"
    for i, part in enumerate(parts):
        raw = tmp / f"raw{i}"
        raw.mkdir()
        write_parquet(raw / "part-0.parquet", part)
        run_one(raw, lake, f"run{i}", fmt, pipeline, extra)
    return lake


def published_rows(lake: Path, pipeline: str, table: str) -> list[dict]:
    catalog = publish.open_catalog(Lake.at(str(lake)))
    (ident,) = [t for t in catalog.list_tables(pipeline) if t[-1].endswith(f"__{table}")]
    rows = catalog.load_table(ident).scan().to_arrow().to_pylist()
    return [{k: v for k, v in r.items() if not k.startswith("_cdc_")} for r in rows]


def normalise(value):
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return value


def assert_state_equals_source(sim: SourceSimulator, lake: Path, pipeline: str, with_schema: bool,
                               expected_states: dict[str, list[dict]] | None = None) -> None:
    """``expected_states``: the source's state at an earlier moment, where not the current one."""
    for table, spec in sim.tables.items():
        expected = expected_states[table] if expected_states else sim.expected_state(table)
        actual = published_rows(lake, pipeline, table)
        if not with_schema:
            # without a schema section the messages carry no types: state holds the values as sent
            expected = [
                {c: (None if v is None else str(encode_value(spec.column_type(c), v, False)).replace("True", "true")
                     .replace("False", "false")) for c, v in row.items()}
                for row in expected
            ]
        key = lambda r: tuple(str(r[k]) for k in spec.primary_key)  # noqa: E731
        exp = sorted(({k: normalise(v) for k, v in r.items()} for r in expected), key=key)
        act = sorted(({k: normalise(v) for k, v in r.items()} for r in actual), key=key)
        assert len(act) == len(exp), f"{table}: {len(act)} rows published, {len(exp)} in the source"
        doubles = {c for c in spec.column_names if spec.column_type(c).kind == "double"}
        for a, e in zip(act, exp):
            assert a.keys() == e.keys()
            for c in a:
                if c in doubles and a[c] is not None and e[c] is not None:
                    assert float(a[c]) == pytest.approx(float(e[c])), f"{table}.{c}: {a} != {e}"
                else:
                    assert a[c] == e[c], f"{table}.{c}: {a} != {e}"


def run_cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # the command line as a user runs it: adaptive execution on, as in production (conftest turns it off);
    # a fresh JVM for a few thousand messages, so the JIT's quick compiler only (CDC_JIT, jobs.spark)
    env = {"CDC_JIT": "c1", **{k: v for k, v in (os.environ if env is None else env).items()
                               if k != "CDC_SPARK_ADAPTIVE"}, "PYTHONPATH": str(REPO), "CDC_SPARK_MASTER": "local[2]"}
    return subprocess.run([sys.executable, "-m", "jobs", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)


def test_postgres_with_schema_two_runs_through_the_cli(spark, tmp_path):
    """The real command line, as a user runs it, for the second of two consecutive runs (the first, and
    a re-run of the second, in this process: each command line is a fresh JVM, half a minute)."""
    sim = make_workload(11, "postgresql", 300)
    raws = write_runs(sim, tmp_path, with_schema=True, runs=2)
    lake = tmp_path / "lake"
    source_db = sim.save_sqlite(tmp_path / "source.db")  # reconciled through SQLAlchemy COUNT(*)
    args = ["--format", "debezium", "--lake", str(lake), "--pipeline", "wl", "--source-counts", f"sqlite:///{source_db}"]
    assert cli.main(["run", *args, "--raw", str(raws[0]), "--run-id", "r0"]) == 0
    proc = run_cli(["run", *args, "--raw", str(raws[1]), "--run-id", "r1"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_state_equals_source(sim, lake, "wl", with_schema=True)

    reports = lake / "reports/wl"
    decoded = [json.loads((reports / f"run=r{i}/decode.json").read_text()) for i in range(2)]
    assert all(d["balanced"] for d in decoded)
    assert sum(d["total"]["quarantined"] for d in decoded) == sim.garbage_count
    recon = json.loads((reports / "run=r1/reconciliation.json").read_text())
    assert {r["status"] for r in recon["tables"]} == {"match"}
    assert {r["table"]: r["source_rows"] for r in recon["tables"]} == {
        f"inv.public.{t}": n for t, n in sim.source_counts().items()}
    assert "match" in proc.stdout and "alert email sent:" in proc.stdout

    # re-running a published run id changes nothing
    catalog = publish.open_catalog(Lake.at(str(lake)))
    before = {t: catalog.load_table(t).current_snapshot().snapshot_id for t in catalog.list_tables("wl")}
    assert jobs_run("debezium", raws[1], lake, "wl", "r1") == 0
    catalog = publish.open_catalog(Lake.at(str(lake)))
    after = {t: catalog.load_table(t).current_snapshot().snapshot_id for t in catalog.list_tables("wl")}
    assert after == before
    summaries = [s.summary.additional_properties.get(publish.RUN_ID_PROP)
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


def test_unusable_arguments_exit_2_with_one_line(tmp_path):
    proc = run_cli(["run", "--format", "nope", "--raw", str(tmp_path), "--lake", str(tmp_path / "l"),
                    "--pipeline", "p", "--run-id", "r"])
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "unknown format" in proc.stderr
    proc = run_cli(["run", "--format", "debezium", "--raw", str(tmp_path / "missing"), "--lake",
                    str(tmp_path / "l"), "--pipeline", "p", "--run-id", "r"])
    assert proc.returncode == 2 and "no such file" in proc.stderr
    (tmp_path / "file").write_text("x")
    proc = run_cli(["run", "--format", "debezium", "--raw", str(tmp_path), "--lake", str(tmp_path / "file"),
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
