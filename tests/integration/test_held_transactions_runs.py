"""A transaction still open at the end of a run's snapshot is held back, across whole ``jobs run``s, and
applied by the run that completes it; the run's report says how many are held (how each format's
transactions are split into applied and held: tests/unit/fold/test_transactions.py)."""
from __future__ import annotations

import json

from jobs.demo.qlik import json_metadata
from jobs.iceberg.catalog import load_table, open_catalog
from jobs.lake.layout import Lake
from tests.support.decoders import raw_frame
from tests.support.pipeline_runs import jobs_run
from tests.support.qlik import ACCOUNTS
from tests.support.qlik import accounts_message as msg


def run(spark, tmp_path, run_id: str, values: list[str]) -> dict:
    raw = tmp_path / f"raw-{run_id}"
    if not raw.exists():
        raw_frame(spark, values).write.parquet(str(raw))
    assert jobs_run("qlik", raw, tmp_path / "lake", "bank", run_id) == 0
    return json.loads((tmp_path / f"lake/reports/bank/run={run_id}/merge.json").read_text())


def balances(tmp_path) -> dict[int, int]:
    table = load_table(open_catalog(Lake.at(str(tmp_path / "lake"))), "bank", "_.bank.accounts")
    return {r["id"]: r["balance"] for r in table.scan().to_arrow().to_pylist()}


def test_open_transaction_is_held_until_the_run_that_completes_it(spark, tmp_path):
    first = [
        json_metadata(ACCOUNTS),
        msg(1, "INSERT", {"id": 1, "balance": 100}, "T1", 1, None),
        msg(2, "INSERT", {"id": 2, "balance": 50}, "T1", 2, True),
        # T2 moves 30 from account 1 to 2; the snapshot ends after its first half
        msg(3, "UPDATE", {"id": 1, "balance": 70}, "T2", 1, False),
    ]
    second = [msg(4, "UPDATE", {"id": 2, "balance": 80}, "T2", 2, True),
              msg(5, "INSERT", {"id": 3, "balance": 5}, "T3", 1, True)]

    report = run(spark, tmp_path, "r1", first)
    assert report["held"]["transactions"] == 1 and report["held"]["records"] == 1
    assert balances(tmp_path) == {1: 100, 2: 50}  # no half transfer is visible

    # re-running r1 reproduces the same state and the same held set (in the folder of its own attempt)
    again = run(spark, tmp_path, "r1", first)
    assert {**again["held"], "path": None} == {**report["held"], "path": None}
    assert again["held"]["path"].startswith("held/bank/run=r1/attempt=") and again["held"]["path"] != report["held"]["path"]
    assert balances(tmp_path) == {1: 100, 2: 50}

    report = run(spark, tmp_path, "r2", second)
    assert report["held"]["transactions"] == 0 and report["held"]["released_from"] == again["held"]["path"]
    # the run's rewrite is measured: what it wrote, and the files of r1's state it replaced
    published = report["tables"]["_.bank.accounts"]
    assert published["bytes_added"] > 0 and published["bytes_removed"] > 0 and published["files_removed"] >= 1
    assert balances(tmp_path) == {1: 70, 2: 80, 3: 5}

    # re-running r2 starts again from r1's held records: same state
    run(spark, tmp_path, "r2", second)
    assert balances(tmp_path) == {1: 70, 2: 80, 3: 5}
