"""Every format's transactional stream on a topic partitioned by key: a transaction's rows land on the
partitions of their keys, its markers (BEGIN / COMMIT, a transaction topic) elsewhere. Cut into 7 runs
at the same Kafka time on every partition, the published state equals the SQLite replay and nothing is
held at the end; a transaction cut by a run boundary is held and applied by the run that lands its end.
(Each stream in one run is test_every_format_replay's case; how an open transaction is held, by id or
by bracket, and released, is tests/unit/fold/test_fold_semantics.py's.)"""
from __future__ import annotations

import pytest

from jobs.demo.simulator import write_parquet
from jobs.demo.streams import FORMAT_RECORDS, debezium_transaction_records, dts_avro_records, json_format_records
from jobs.formats import DecodeOptions
from jobs.lake.layout import Lake
from jobs.settings import TransformSettings
from jobs.stages import RunContext
from tests.support.pipeline_runs import decode_and_merge
from tests.support.replay import assert_state_equals_source, assert_state_means_source, make_workload
from tests.support.tiers import breadth

STREAMS = {
    "debezium": debezium_transaction_records,
    "qlik": FORMAT_RECORDS["qlik"],
    "dts_avro": lambda sim: dts_avro_records(sim, markers=True),
    "dataworks": lambda sim: json_format_records(sim, "dataworks", markers=True),
    "maxwell": FORMAT_RECORDS["maxwell"],
    "shareplex": FORMAT_RECORDS["shareplex"],
}


def runs_of(spark, tmp_path, parts: list[list[dict]], fmt: str, options: DecodeOptions) -> list[dict]:
    """One decode + merge per part (the stages this property lives in); each run's merge report."""
    lake = Lake.at(str(tmp_path / "lake"))
    reports = []
    for i, part in enumerate(parts):
        raw = tmp_path / f"raw{i}"
        write_parquet(raw / "part-0.parquet", part)
        reports.append(decode_and_merge(spark, RunContext(lake, "wl", f"run{i}"), fmt, raw, options))
    return reports


@pytest.mark.parametrize("runs", [7])
# CI: a transaction topic (Debezium) and markers in the stream (DTS); make test-long: every format
@pytest.mark.parametrize("fmt", breadth(sorted(STREAMS), in_ci=("debezium", "dts_avro")))
def test_transactions_split_across_partitions_fold_to_the_sqlite_replay(spark, tmp_path, fmt, runs):
    sim = make_workload(40 + runs, "mysql", 60)
    records = sorted(STREAMS[fmt](sim), key=lambda r: r["timestamp"])  # as landing cuts: by Kafka time
    # the layout this is about: rows on every partition, so most transactions' rows are not beside their markers
    assert {r["partition"] for r in records if r["key"]} == {0, 1, 2}
    size = -(-len(records) // runs)
    keys = tuple((t.upper(), tuple(s.primary_key)) for t, s in sim.tables.items()) if fmt == "shareplex" else ()
    reports = runs_of(spark, tmp_path, [records[i * size:(i + 1) * size] for i in range(runs)], fmt,
                      TransformSettings(primary_keys=keys).decode_options())
    assert reports[-1].held.transactions == 0 and reports[-1].held.records == 0
    if runs == 7 and fmt in ("debezium", "dts_avro", "dataworks"):  # ends in markers of their own
        assert any(r.held.transactions for r in reports[:-1]), "no run boundary cut a transaction"
    lake = tmp_path / "lake"
    if fmt in ("debezium", "qlik", "dts_avro"):
        assert_state_equals_source(sim, lake, "wl", with_schema=fmt != "debezium")
    else:
        assert_state_means_source(sim, lake, fmt)
