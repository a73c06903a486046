"""OpenLineage of the tasks (jobs.airflow.lineage): dataset names as the naming conventions give them, the
facets of a real Iceberg commit, the reconciliation's verdicts, and no credential in any event."""
from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from openlineage.client.event_v2 import Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.serde import Serde

from jobs.airflow import lineage
from jobs.iceberg.catalog import ensure_namespace, iceberg_schema, open_catalog
from jobs.lake.layout import Lake
from jobs.model.reports import CheckpointVerdict, ReconciliationReport, TableReconciliation
from jobs.settings import RunSettings
from jobs.stages import RunContext
from tests.support.openlineage import schema_errors
from tests.support.pipelines import pipeline

WINDOW = (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
SECRET = "Pa55-never-shown"


def _event(inputs: list, outputs: list) -> dict:
    """The COMPLETE event the provider would send with these datasets, as JSON."""
    event = RunEvent(eventType=RunState.COMPLETE, eventTime="2026-11-02T00:00:00Z", run=Run(runId=str(uuid.uuid4())),
                     job=Job(namespace="cdc-test", name="cdc_demo.task"), inputs=inputs, outputs=outputs,
                     producer="https://example.com/cdc")
    return json.loads(Serde.to_json(event))


# ---- names ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "expected"), [
    ("/lake/raw/demo/t/interval=a_b", ("file", "/lake/raw/demo/t/interval=a_b")),
    ("file:///lake/warehouse/demo/t", ("file", "/lake/warehouse/demo/t")),
    ("s3://bucket/lake/raw/demo/t", ("s3://bucket", "lake/raw/demo/t")),
    ("s3a://key:secret@bucket/lake/t/", ("s3://bucket", "lake/t")),
])
def test_files_and_folders_are_named_by_their_store_and_path(path, expected):
    assert lineage.storage_dataset(path) == expected


@pytest.mark.parametrize(("bootstrap", "expected"), [
    ("b1.example:9092,b2.example:9093", "kafka://b1.example:9092"),
    ("SASL_SSL://hub.servicebus.windows.net:9093", "kafka://hub.servicebus.windows.net:9093"),
    ("broker", "kafka://broker:9092"),
])
def test_topics_are_named_by_the_first_bootstrap_server(bootstrap, expected):
    assert lineage.kafka_namespace(bootstrap) == expected


@pytest.mark.parametrize(("url", "table_id", "expected"), [
    (f"postgresql+psycopg://cdc:{SECRET}@db.example:6543/shop", "shop.public.customers",
     ("postgres://db.example:6543", "shop.public.customers")),
    (f"postgresql://cdc:{SECRET}@db.example/shop", "customers", ("postgres://db.example:5432", "shop.public.customers")),
    (f"mysql+pymysql://cdc:{SECRET}@maria/inventory", "srv.inventory.orders", ("mysql://maria:3306", "inventory.orders")),
    (f"mariadb+pymysql://cdc:{SECRET}@maria:3307/inventory", "orders", ("mysql://maria:3307", "inventory.orders")),
    (f"mssql+pymssql://cdc:{SECRET}@sql.example/sales", "sales.dbo.items", ("sqlserver://sql.example:1433",
                                                                            "sales.dbo.items")),
    ("sqlite:////data/source.db", "shop.public.items", ("file", "/data/source.db/items")),
])
def test_source_tables_are_named_by_dialect_host_port_and_database_never_credentials(url, table_id, expected):
    assert lineage.database_dataset(url, table_id) == expected


# ---- a real Iceberg commit -----------------------------------------------------------------------
def test_a_committed_table_is_named_by_its_location_with_its_catalog_name_and_commit(tmp_path):
    cfg, _ = pipeline(tmp_path, lake=str(tmp_path / "lake"))
    lake = Lake.at(cfg.sink.lake)
    catalog = open_catalog(lake)
    ensure_namespace(catalog, cfg.name)
    table = catalog.create_table((cfg.name, "shop__public__items"),
                                 iceberg_schema({"id": "bigint", "name": "string", "_cdc_op": "string"}))
    table.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", None], "_cdc_op": ["INSERT"] * 3},
                          schema=table.schema().as_arrow()))
    snapshot = table.current_snapshot()
    raw = [("file", "/lake/raw/demo/shop_public_items/interval=a_b")]

    found = lineage.IcebergTable.of(cfg, lake, "shop.public.items", table, snapshot.snapshot_id)
    facets, output = found.facets(raw)

    assert (found.namespace, found.name) == ("file", table.metadata.location.removeprefix("file://"))
    assert [(i.namespace, i.name, i.type) for i in facets["symlinks"].identifiers] == [
        (lake.uri("warehouse"), "demo.shop__public__items", "TABLE")]
    assert facets["version"].datasetVersion == str(snapshot.snapshot_id)
    assert [f.name for f in facets["schema"].fields] == ["id", "name", "_cdc_op"]
    assert (output["outputStatistics"].rowCount, output["outputStatistics"].fileCount) == (3, 1)
    commit = output["icebergCommitReport"]
    assert (commit.snapshotId, commit.operation, commit.commitMetrics["addedRecords"]) == (
        snapshot.snapshot_id, "append", 3)
    # the data columns come one to one from the messages' values; the fold's own columns are not lineage
    assert set(facets["columnLineage"].fields) == {"id", "name"}
    assert [(f.namespace, f.name, f.field) for f in facets["columnLineage"].fields["id"].inputFields] == [
        (*raw[0], "value")]

    event = _event([], [OutputDataset(found.namespace, found.name, facets=facets, outputFacets=output)])
    assert schema_errors(event) == []


def test_a_tables_topics_pick_its_raw_folders():
    raw = ["/l/raw/p/shop_public_items/interval=a_b", "/l/raw/p/shop_public_orders/interval=a_b"]
    assert lineage.raw_of_topics(raw, ["shop.public.orders"]) == [("file", raw[1])]
    assert lineage.raw_of_topics(raw, []) == [("file", f) for f in raw]  # an earlier report: not known


# ---- reconcile -----------------------------------------------------------------------------------
def _reconciled(tmp_path, source_counts: str):
    cfg, _ = pipeline(tmp_path, lake=str(tmp_path / "lake"))
    settings = RunSettings.from_pipeline(cfg, WINDOW)
    settings = replace(settings, reconcile=replace(settings.reconcile, source_counts=source_counts))
    verdicts = [CheckpointVerdict(table="shop.public.items", verdict="match", moment="0/16B3748", source_rows=5,
                                  lake_rows=5),
                CheckpointVerdict(table="shop.public.items", verdict="mismatch", moment="0/16B3799", source_rows=6,
                                  lake_rows=5, reason="the lake holds 1 row fewer")]
    report = ReconciliationReport(pipeline=cfg.name, run_id=settings.run_id, tables=(
        TableReconciliation(table="shop.public.items", source_rows=6, status="mismatch", checkpoints=tuple(verdicts),
                            pending=(CheckpointVerdict(table="shop.public.items", verdict="behind"),)),))
    ctx = RunContext.of(settings)
    ctx.lake.write_json(f"{ctx.report_dir}/{report.FILE}", report.to_json())
    return cfg, settings


def _reconcile_event(cfg, settings) -> dict:
    found = lineage.reconcile_lineage(cfg, settings)
    return _event(found.inputs, found.outputs)


def test_reconcile_names_the_source_tables_with_each_judged_checkpoint_and_no_password(tmp_path):
    cfg, settings = _reconciled(tmp_path, f"postgresql://cdc:{SECRET}@db.example:5432/shop")

    event = _reconcile_event(cfg, settings)

    assert schema_errors(event) == [] and SECRET not in json.dumps(event)
    [source] = event["inputs"]
    assert (source["namespace"], source["name"]) == ("postgres://db.example:5432", "shop.public.items")
    assertions = source["inputFacets"]["dataQualityAssertions"]["assertions"]
    # judged checkpoints only (behind is not a verdict on the values yet)
    assert [(a["success"], a["expected"], a["actual"]) for a in assertions] == [(True, "5", "5"), (False, "6", "5")]
    assert source["inputFacets"]["dataQualityMetrics"]["rowCount"] == 6


def test_reconcile_from_a_counts_file_names_the_file(tmp_path):
    counts = tmp_path / "counts.json"
    cfg, settings = _reconciled(tmp_path, str(counts))

    event = _reconcile_event(cfg, settings)

    assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [("file", str(counts))]
    assert len(event["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]) == 2


def test_the_vendored_schemas_refuse_a_broken_facet(tmp_path):
    cfg, settings = _reconciled(tmp_path, str(tmp_path / "counts.json"))
    event = _reconcile_event(cfg, settings)
    del event["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"][0]["success"]
    event["run"]["runId"] = "not a uuid"

    errors = schema_errors(event)

    assert any("success" in e for e in errors) and any("uuid" in e for e in errors), errors
