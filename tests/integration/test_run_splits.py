"""Re-running a run id reproduces the same reports, and backfills equal a clean sequential run.
(state(run n) = fold(state(n-1), changes(n)) for any cut of a stream into runs is the property of
tests/unit/fold/test_fold_against_model.py, and of tests/integration/test_properties.py in every format.)"""
from __future__ import annotations

import json
from pathlib import Path

from jobs.demo.simulator import SourceSimulator, write_parquet
from tests.support.replay import TABLES, assert_state_equals_source, published_rows, run_one, run_parts


def workload() -> SourceSimulator:
    sim = SourceSimulator(41, TABLES, "postgresql", n_partitions=3)
    sim.populate("items", 30)
    sim.populate("stock", 20)
    sim.snapshot()
    sim.random_ops(150, max_tx_size=3, concurrency=2)
    sim.redeliver(0.05)
    sim.garbage(3)
    sim.random_ops(100, max_tx_size=3, concurrency=2)
    sim.redeliver(0.05)
    return sim


def run_all(records, tmp_path, runs: int) -> Path:
    """The stream cut into ``runs`` parts, one run each (tests/support/replay.run_parts) in a folder of
    its own (``split<runs>``: its lake, raw0, raw1, ...; run ids run0, run1, ...); that folder."""
    folder = tmp_path / f"split{runs}"
    folder.mkdir()
    size = -(-len(records) // runs)
    run_parts(folder, [records[i * size:(i + 1) * size] for i in range(runs)])
    return folder


def without_timings(report):
    """Reports are equal but for how long things took."""
    if isinstance(report, dict):
        return {k: without_timings(v) for k, v in report.items() if k != "seconds"}
    if isinstance(report, list):
        return [without_timings(v) for v in report]
    return report


def test_rerunning_a_run_reproduces_its_reports(spark, tmp_path):
    sim = workload()
    records = sim.to_kafka_records(with_schema=False)
    folder = run_all(records, tmp_path, 2)
    lake = folder / "lake"

    def rerun(i: int) -> None:
        run_one(folder / f"raw{i}", lake, f"run{i}")

    reports = lake / "reports/wl/run=run1"
    before = {n: without_timings(json.loads((reports / n).read_text())) for n in ("decode.json", "validation.json")}
    rerun(1)
    after = {n: without_timings(json.loads((reports / n).read_text())) for n in ("decode.json", "validation.json")}
    assert after == before
    merge = json.loads((reports / "merge.json").read_text())
    assert all(t.get("already_published") for t in merge["tables"].values())
    assert_state_equals_source(sim, lake, "wl", with_schema=False)

    # re-running the earlier run reports the rows of the snapshots it committed, not the later run's
    first = lake / "reports/wl/run=run0/merge.json"
    published = {t: (r["snapshot_id"], r["state_rows"]) for t, r in json.loads(first.read_text())["tables"].items()}
    rerun(0)
    again = json.loads(first.read_text())["tables"]
    assert all(r["already_published"] for r in again.values())
    assert {t: (r["snapshot_id"], r["state_rows"]) for t, r in again.items()} == published
    later = {t: r["state_rows"] for t, r in merge["tables"].items()}
    assert any(later[t] != rows for t, (_, rows) in published.items()), "the runs' states differ in size"


def test_backfills_equal_a_clean_sequential_run(spark, tmp_path):
    """Interval 1 is missed, interval 2 runs, interval 1 is backfilled, interval 2 re-runs; then the
    first interval is cleared and re-run: the state equals the sequential run's, and the re-runs change
    nothing. (MySQL: full row images; see docs/operations/runs.md on backfills.)"""
    sim = SourceSimulator(43, TABLES, "mysql", n_partitions=3)
    sim.populate("items", 20)
    sim.populate("stock", 10)
    sim.snapshot()
    sim.random_ops(80, max_tx_size=3, concurrency=2)
    sim.redeliver(0.05)
    sim.random_ops(80, max_tx_size=3, concurrency=2)
    records = sim.to_kafka_records(with_schema=True)
    size = -(-len(records) // 3)
    raws = []
    for i in range(3):
        raws.append(tmp_path / f"raw{i}")
        write_parquet(raws[-1] / "part-0.parquet", records[i * size:(i + 1) * size])

    def run(lake: str, i: int) -> dict:
        run_one(raws[i], tmp_path / lake, f"interval{i}")
        return json.loads((tmp_path / lake / f"reports/wl/run=interval{i}/merge.json").read_text())

    for i in range(3):
        run("sequential", i)
    for i in (0, 2, 1):
        run("backfilled", i)
    rerun = run("backfilled", 2)
    assert all(t.get("already_published") for t in rerun["tables"].values())
    assert all(t.get("already_published") for t in run("backfilled", 0)["tables"].values())
    for lake in ("sequential", "backfilled"):
        assert_state_equals_source(sim, tmp_path / lake, "wl", with_schema=True)
    assert ({t: sorted(map(str, published_rows(tmp_path / "sequential", "wl", t))) for t in sim.tables}
            == {t: sorted(map(str, published_rows(tmp_path / "backfilled", "wl", t))) for t in sim.tables})
