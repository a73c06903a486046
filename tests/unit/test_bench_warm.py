"""bench.warm: a contender run several times in one process, the last run measured."""
from __future__ import annotations

import pytest

from bench.generate import write_snapshot
from bench.warm import run_warm


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    folder = tmp_path_factory.mktemp("raw")
    write_snapshot("debezium", 3_000, folder, batch_rows=1_000, rows_per_file=1_500)
    return folder


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


def test_floor_counts_every_message_in_each_run(spark, tmp_path, raw):
    result = run_warm("floor", "debezium", str(raw), tmp_path / "floor", 3, spark)
    assert result["counted"] == result["parsed"] == 3_000
    assert len(result["run_seconds"]) == 3 and result["seconds"] == result["run_seconds"][-1]


def test_no_runs_is_an_error(spark, tmp_path, raw):
    with pytest.raises(ValueError):
        run_warm("floor", "debezium", str(raw), tmp_path / "floor", 0, spark)


def test_contract_floor_writes_every_message_as_a_change_record_then_folds_them(spark, tmp_path, raw):
    result = run_warm("contract_floor", "debezium", str(raw), tmp_path / "contract", 1, spark)
    changes = spark.read.parquet(str(tmp_path / "contract/run0/changes"))
    # every message is a record, in the lake's changes/ layout: a folder per table, as the pipeline writes it
    assert changes.count() == 3_000
    assert sorted(r["table"] for r in changes.select("table").distinct().collect()) == sorted(
        p.name.split("=", 1)[1] for p in (tmp_path / "contract/run0/changes").glob("table=*"))
    assert changes.where("key IS NULL OR event_id IS NULL OR position IS NULL").count() == 0
    # its fold keeps the states the naive fold of the raw messages keeps, and the write is timed apart
    naive = run_warm("naive_spark", "debezium", str(raw), tmp_path / "naive", 1, spark)
    assert result["state_rows"] == naive["state_rows"] > 0
    assert 0 < result["records_seconds"] < result["seconds"]
