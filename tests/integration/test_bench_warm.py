"""bench.warm: the pipeline contender (a whole ``jobs run`` on a fresh lake each time) run twice in one
process, the last run measured (the other contenders: tests/unit/test_bench_warm.py)."""
from __future__ import annotations

import pytest

from bench.warm import run_warm
from tests.support.bench import write_warm_snapshot


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    return write_warm_snapshot(tmp_path_factory.mktemp("raw"))


def test_pipeline_runs_twice_in_one_process_and_reports_the_second(spark, tmp_path, raw):
    result = run_warm("pipeline", "debezium", str(raw), tmp_path / "pipeline", 2, spark)
    assert result["warm_runs"] == 2 and len(result["run_seconds"]) == 2
    assert all(s > 0 for s in result["run_seconds"])
    # the figure is the last run's: the sum of its own stage timings
    assert result["seconds"] == result["run_seconds"][-1] == pytest.approx(sum(result["stages"].values()), abs=0.01)
    assert result["quarantined"] == 0
    # the first run (a fresh process's figure, as bench.bench measures it) is kept with its stages
    first = result["earlier_runs"][0]
    assert first["seconds"] == result["run_seconds"][0] and set(first["stages"]) == set(result["stages"])
    # each run had a fresh lake (a second run on the first's lake would publish nothing new); only the last is kept
    assert not (tmp_path / "pipeline/run0").exists()
    assert (tmp_path / "pipeline/run1/reports/bench/run=bench/run.json").is_file()
    # and the last run's state is the one a user's naive fold of the same files gives
    naive = run_warm("naive_spark", "debezium", str(raw), tmp_path / "naive", 2, spark)
    assert naive["warm_runs"] == 2 and naive["seconds"] == naive["run_seconds"][-1]
    assert result["state_rows"] == naive["state_rows"] > 0
