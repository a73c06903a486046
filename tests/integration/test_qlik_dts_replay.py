"""Generated workloads as Qlik Replicate (JSON and Avro) and DTS Avro messages: the published Iceberg
state equals the simulator's independent SQLite replay, with redeliveries and garbage in the stream.

Both formats declare their types (Qlik metadata messages, DTS value branches), so the comparison is
typed. Qlik's metadata messages come only at the head of the stream, so with several runs the later
runs decode with the metadata remembered in the lake by the first.
"""
from __future__ import annotations

import json

import pytest

from jobs import cli
from scripts.qlik_dts_stream import dts_avro_records, qlik_records
from scripts.simulate_source import write_parquet
from tests.integration.test_workload_replay import assert_state_equals_source, make_workload

pytestmark = pytest.mark.integration


def run_slices(records, tmp_path, runs: int, fmt: str) -> list[dict]:
    lake = tmp_path / "lake"
    size = -(-len(records) // runs)
    reports = []
    for i in range(runs):
        raw = tmp_path / f"raw{i}"
        raw.mkdir()
        write_parquet(raw / "part-0.parquet", records[i * size:(i + 1) * size])
        assert cli.main(["run", "--format", fmt, "--raw", str(raw), "--lake", str(lake), "--pipeline", "wl",
                         "--run-id", f"run{i}"]) == 0
        reports.append(json.loads((lake / f"reports/wl/run=run{i}/decode.json").read_text()))
    return reports


@pytest.mark.parametrize("fmt, avro, runs, seed", [
    ("qlik", False, 2, 21),
    ("qlik", True, 1, 22),
    ("dts_avro", None, 2, 23),
])
def test_generated_stream_folds_to_the_sqlite_replay(spark, tmp_path, fmt, avro, runs, seed):
    sim = make_workload(seed, "mysql", 160)
    records = qlik_records(sim, avro=avro) if fmt == "qlik" else dts_avro_records(sim)
    reports = run_slices(records, tmp_path, runs, fmt)
    assert_state_equals_source(sim, tmp_path / "lake", "wl", with_schema=True)
    assert all(r["balanced"] for r in reports)
    assert sum(r["total"]["landed"] for r in reports) == len(records)
    # every garbage message, and nothing else, is quarantined
    assert sum(r["total"]["quarantined"] for r in reports) == sim.garbage_count
    if fmt == "qlik" and runs > 1:
        assert reports[0]["remembered_documents"] == len(sim.tables)
        assert reports[1]["remembered_documents"] == 0
