"""bench.warm: a contender run several times in one process, the last run measured: the floor, the naive
fold and the contract floor (the pipeline contender, a whole ``jobs run``: tests/integration/test_bench_warm.py)."""
from __future__ import annotations

import pytest

from bench.warm import run_warm
from tests.support.bench import write_warm_snapshot


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    return write_warm_snapshot(tmp_path_factory.mktemp("raw"))


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
