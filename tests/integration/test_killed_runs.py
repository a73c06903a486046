"""Killed at any moment, nothing lost: a `jobs run` killed with SIGKILL of its whole process group
(driver, JVM, Python workers) after the decode's report (its quarantine and decoder memory written,
nothing published), after its held transactions, during the fold, right before or right after the run's
one commit of its tables, or after its validation report, leaves all of the run's tables committed or none
(a reader sees every table at the run or every one at the run before); re-run under the same run id, it
publishes the same state, history and reports as a run that was never interrupted; readers never see a
file of the killed attempt. A killed landing leaves no manifest, and landing the interval again lands the
same messages. The kill points are the failpoints of jobs/failpoints.py, and moments found by watching the
lake for a Spark write in progress."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from jobs.demo.simulator import write_parquet
from jobs.demo.streams import debezium_transaction_records
from jobs.iceberg.catalog import open_catalog, published_by
from jobs.lake.layout import Lake
from jobs.model.properties import RUN_ID_PROP
from tests.support.paths import REPO
from tests.support.pipeline_runs import jobs_run
from tests.support.replay import make_workload
from tests.support.tiers import breadth

PIPELINE = "shop"


def raw_parts(tmp_path: Path) -> list[Path]:
    """Two raw snapshots of a Debezium stream with transaction metadata (the second run releases what
    the first held), partitioned by key."""
    records = debezium_transaction_records(make_workload(71, "postgresql", 80))
    half = len(records) // 2
    paths = []
    for i, part in enumerate((records[:half], records[half:])):
        path = tmp_path / f"raw{i}"
        write_parquet(path / "part-0.parquet", part)
        paths.append(path)
    return paths


def run_args(raw: Path, lake: Path, run_id: str) -> list[str]:
    return ["run", "--format", "debezium", "--raw", str(raw), "--lake", str(lake), "--pipeline", PIPELINE,
            "--run-id", run_id, "--history"]


def killed_run(raw: Path, lake: Path, run_id: str, kill_at: str | None = None,
               kill_when: Path | None = None) -> None:
    """`python -m jobs run` in a process group of its own, killed (SIGKILL) at failpoint ``kill_at``, or
    by this test as soon as ``kill_when`` (a glob under the lake) exists."""
    env = {**os.environ, "CDC_JIT": "c1", "PYTHONPATH": str(REPO)}
    env.pop("CDC_KILL_AT", None)
    if kill_at:
        env["CDC_KILL_AT"] = kill_at
    proc = subprocess.Popen([sys.executable, "-m", "jobs", *run_args(raw, lake, run_id)], env=env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    if kill_when is not None:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline and not list(lake.glob(str(kill_when))):
            time.sleep(0.02)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, f"the run was not killed ({proc.returncode}): {err.decode()[-2000:]}"


def published(lake: Path) -> dict[str, list[dict]]:
    """Every table of the pipeline as a reader sees it (pyiceberg's scan of the current snapshot)."""
    catalog = open_catalog(Lake.at(str(lake)))
    tables = {}
    for ident in catalog.list_tables(PIPELINE):
        table = catalog.load_table(ident)
        for task in table.scan().plan_files():  # every file a reader is sent to exists
            assert Path(task.file.file_path.removeprefix("file://")).exists(), task.file.file_path
        rows = table.scan().to_arrow().to_pylist()
        tables[ident[-1]] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return tables


_RUN_SPECIFIC = {"snapshot_id", "already_published", "seconds", "timings_s", "generated_at", "run_time"}
_ATTEMPT = re.compile(r"/attempt=[^/]+")


def report(lake: Path, run_id: str, name: str) -> object:
    """A report of the run without what differs between two lakes (snapshot ids, times, the attempt
    folders its files were written to)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in _RUN_SPECIFIC}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return _ATTEMPT.sub("/attempt=*", value) if isinstance(value, str) else value

    return strip(json.loads((lake / f"reports/{PIPELINE}/run={run_id}/{name}").read_text()))


@pytest.fixture(scope="module")
def reference(tmp_path_factory, spark):
    """The uninterrupted runs: their raw snapshots and lake."""
    tmp = tmp_path_factory.mktemp("reference")
    raws = raw_parts(tmp)
    for i, raw in enumerate(raws):
        assert jobs_run("debezium", raw, tmp / "lake", PIPELINE, f"run{i}", "--history") == 0
    return raws, tmp / "lake"


KILLS = {
    "decode reported": dict(kill_at="decode.reported"),
    "held written": dict(kill_at="merge.held-written"),
    "during the fold": dict(kill_when=Path("warehouse/**/data/run=run1/attempt=*/_temporary")),
    "before the run's commit": dict(kill_at="publish.files-written"),
    "after the run's commit": dict(kill_at="merge.run-committed"),
    "during the reports": dict(kill_at="validate.report-written"),
}


# CI: a kill in the middle of the fold's write and one between the files and the commit; make test-long: every moment
@pytest.mark.parametrize("moment", breadth(KILLS, in_ci=("during the fold", "before the run's commit")))
def test_a_killed_run_rerun_publishes_what_an_uninterrupted_run_does(spark, tmp_path, reference, moment):
    raws, expected_lake = reference
    lake = tmp_path / "lake"
    assert jobs_run("debezium", raws[0], lake, PIPELINE, "run0", "--history") == 0
    killed_run(raws[1], lake, "run1", **KILLS[moment])
    # all or none of the run's tables committed
    catalog = open_catalog(Lake.at(str(lake)))
    committed = {published_by(catalog.load_table(i), "run1") is not None for i in catalog.list_tables(PIPELINE)}
    assert committed == {moment in ("after the run's commit", "during the reports")}, committed
    assert jobs_run("debezium", raws[1], lake, PIPELINE, "run1", "--history") == 0
    assert published(lake) == published(expected_lake)
    for name in ("decode.json", "merge.json", "validation.json", "reconciliation.json"):
        assert report(lake, "run1", name) == report(expected_lake, "run1", name), name
    # one snapshot per table and run: the re-run committed nothing twice
    catalog = open_catalog(Lake.at(str(lake)))
    for ident in catalog.list_tables(PIPELINE):
        runs = [s.summary.additional_properties.get(RUN_ID_PROP) for s in catalog.load_table(ident).snapshots()]
        assert runs.count("run1") <= 1 and runs.count("run0") <= 1, (ident, runs)


def test_a_killed_landing_leaves_no_manifest_and_lands_the_same_messages_again(tmp_path):
    dumps = tmp_path / "dumps"
    write_parquet(dumps / "part-0.parquet", debezium_transaction_records(make_workload(72, "postgresql", 20)))
    window = ["--start", "2026-10-01T00:00:00Z", "--end", "2026-12-01T00:00:00Z"]

    def land(lake: Path, kill: bool) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("CDC_KILL_AT", None)
        if kill:
            env["CDC_KILL_AT"] = "land.files-written"
        return subprocess.run([sys.executable, "-m", "jobs", "land", "--from-files", str(dumps), "--lake", str(lake),
                               "--pipeline", PIPELINE, *window], env=env, cwd=REPO, capture_output=True,
                              start_new_session=True, timeout=300)

    def landed(lake: Path) -> dict[str, list[tuple]]:
        out = {}
        for manifest in sorted(lake.glob(f"raw/{PIPELINE}/*/interval=*/_manifest.json")):
            rows = pq.read_table(manifest.parent).to_pylist()
            out[manifest.parent.parent.name] = sorted((r["partition"], r["offset"], r["value"]) for r in rows)
        return out

    assert land(tmp_path / "clean", kill=False).returncode == 0
    lake = tmp_path / "lake"
    assert land(lake, kill=True).returncode == -signal.SIGKILL
    assert list(lake.glob(f"raw/{PIPELINE}/*/interval=*/*.parquet")), "killed before it wrote anything"
    assert not list(lake.glob("**/_manifest.json"))
    assert land(lake, kill=False).returncode == 0
    assert landed(lake) == landed(tmp_path / "clean") != {}
