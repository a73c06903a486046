"""The lake's value fingerprints after each run (the fold's steps added to the fingerprints before it,
jobs.fold.stage) against two independent computations: the rule's Python form over the source simulator's
own rows, and one aggregate over the published state."""
from __future__ import annotations

import pytest

from jobs.fold import fingerprints as rule
from jobs.iceberg.catalog import key_columns_of, open_catalog, published_fingerprints, table_columns
from jobs.iceberg.read import read_state
from jobs.lake.layout import Lake
from tests.support.replay import make_workload, run_parts


def _source_fingerprints(rows: list[dict], columns: dict[str, str], keys: list[str]) -> list[int]:
    sums = [0] * rule.BUCKETS
    for row in rows:
        b = rule.text_bucket(rule.row_text(row, {k: columns[k] for k in keys}))
        sums[b] = rule.add(sums[b], rule.text_hash(rule.row_text(row, columns)))
    return sums


@pytest.mark.parametrize("runs", [3])
def test_fingerprints_after_each_run_are_the_sources(spark, tmp_path, runs):
    sim = make_workload(23, "postgresql", 240)
    records = sim.to_kafka_records(with_schema=True)
    size = -(-len(records) // runs)
    lake = run_parts(tmp_path, [records[i * size:(i + 1) * size] for i in range(runs)])
    catalog = open_catalog(Lake.at(str(lake)))
    for ident in catalog.list_tables("wl"):
        table = catalog.load_table(ident)
        name = ident[-1].rsplit("__", 1)[-1]
        if name not in sim.tables:
            continue  # a history table
        stored = published_fingerprints(table)
        keys = key_columns_of(table)
        columns = {c: t for c, t in table_columns(table).items() if not c.startswith("_cdc_")}
        assert stored["key_columns"] == keys
        lake_after = [int(h, 16) for h in stored["after"]]
        scanned = {r["bucket"]: rule.add(int(r["fingerprint"]))
                   for r in rule.bucket_fingerprints(read_state(spark, table), columns, keys).collect()}
        assert lake_after == [scanned.get(b, 0) for b in range(rule.BUCKETS)], f"{name}: steps and state differ"
        assert lake_after == _source_fingerprints(sim.expected_state(name), columns, keys), \
            f"{name}: the lake's fingerprints are not the source's"
