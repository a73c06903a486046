"""OpenLineage of a pipeline's tasks, for Airflow's openlineage provider (docs/operations/lineage.md).

The provider asks an operator for its lineage once the task succeeded (``get_openlineage_facets_on_complete``);
the DAG's operators (jobs.airflow.dags) answer with the functions here, which read what the task did from
the run's manifests and reports and the Iceberg catalog's metadata (never the messages, never the source
database), and name every dataset as OpenLineage's naming conventions do:

- land: the topics (``kafka://host:port`` and the topic; or the folder the topic files were read from) →
  one raw folder per topic, with its messages and bytes;
- transform: the raw folders → every Iceberg table it committed to (named by its location, with a symlink to
  its catalog name; schema, the commit's snapshot and statistics, column lineage) and the quarantine folder.
  The tables are its inputs too: the fold reads their state and the validation reads what was published, so
  Great Expectations' results ride on them as data-quality assertions (OpenLineage puts assertions on the
  datasets a job reads); the change records' suite rides on the raw folders they were decoded from;
- reconcile: the source database's tables (namespace from the connection's dialect, host and port: never
  its credentials) or the counts file, with each judged checkpoint as an assertion, and the lake's tables.

Nothing here imports pyspark; openlineage's client and the provider are imported by the functions that
build the events, so the DAG processor's parse loads neither.
"""
from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

from jobs.config import PipelineConfig
from jobs.settings import RunSettings

log = logging.getLogger(__name__)

# the default port of each database the reconciliation reads, as the naming conventions spell its scheme
_DATABASES = {"postgresql": ("postgres", 5432), "mysql": ("mysql", 3306), "mariadb": ("mysql", 3306),
              "mssql": ("sqlserver", 1433), "oracle": ("oracle", 1521)}


# ---- dataset names (OpenLineage naming conventions) --------------------------------------------
def storage_dataset(path: str) -> tuple[str, str]:
    """(namespace, name) of a file or folder: ``file`` and its absolute path, ``s3://bucket`` and its key."""
    parsed = urlparse(path)
    if parsed.scheme in ("s3", "s3a", "s3n"):
        return f"s3://{parsed.hostname}", parsed.path.strip("/")
    if parsed.scheme in ("", "file"):
        return "file", str(Path(parsed.path if parsed.scheme else path).absolute())
    return f"{parsed.scheme}://{parsed.hostname}", parsed.path.strip("/")  # abfss, gs: no user info


def kafka_namespace(bootstrap: str) -> str:
    """``kafka://host:port`` of the first bootstrap server (a listener's scheme dropped; 9092 when unsaid)."""
    first = bootstrap.split(",")[0].strip()
    first = first.split("://", 1)[-1]
    host, sep, port = first.rpartition(":")
    return f"kafka://{host}:{port}" if sep and port.isdigit() else f"kafka://{first}:9092"


def database_dataset(url_text: str, table_id: str) -> tuple[str, str]:
    """(namespace, name) of the source table a table id stands for, in the database of a SQLAlchemy URL: only
    the dialect, host, port and database of the URL are read (a password never is)."""
    from sqlalchemy.engine import make_url

    url = make_url(url_text)
    backend = url.get_backend_name()
    parts = table_id.split(".")
    table, schema = parts[-1], parts[-2] if len(parts) >= 2 else None
    if backend == "sqlite":
        return "file", f"{Path(url.database or '').absolute()}/{table}"
    scheme, port = _DATABASES.get(backend, (backend, None))
    namespace = f"{scheme}://{url.host or 'localhost'}:{url.port or port}"
    if scheme == "mysql":  # databases are MySQL's schemas: the id's schema part names the database
        return namespace, f"{schema or url.database}.{table}"
    default_schema = {"postgres": "public", "sqlserver": "dbo"}.get(scheme)
    return namespace, f"{url.database}.{schema or default_schema}.{table}"


def warehouse_uri(cfg: PipelineConfig, lake: Any) -> str:
    """Where the pipeline's catalog keeps its tables: the embedded catalog's warehouse folder, else the
    catalog's name (its own configuration, which may hold credentials, is not read)."""
    return f"iceberg://{cfg.sink.catalog}" if cfg.sink.catalog else lake.uri(lake.warehouse)


# ---- the tasks' lineage --------------------------------------------------------------------------
def land_lineage(cfg: PipelineConfig, settings: RunSettings):
    """The topics read → the raw folders written, with each folder's messages and bytes."""
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.generated import output_statistics_output_dataset as stats

    from jobs.lake import storage
    from jobs.land.command import landed_folders
    from jobs.land.common import MANIFEST

    outputs, topics = [], []
    for folder in landed_folders(settings.lake_at(), cfg.name, settings.start, settings.end):
        manifest = json.loads(storage.read_text(f"{folder}/{MANIFEST}"))
        topics.append(manifest["topic"])
        totals = manifest.get("totals") or {}
        outputs.append(OutputDataset(*storage_dataset(folder), outputFacets={
            "outputStatistics": stats.OutputStatisticsOutputDatasetFacet(
                rowCount=int(totals.get("records", 0)), size=int(totals.get("bytes", 0)),
                fileCount=int(totals.get("files", 0)))}))
    inputs = [InputDataset(namespace, name) for namespace, name in _topic_datasets(cfg, topics)]
    return _operator_lineage(inputs, outputs)


def _topic_datasets(cfg: PipelineConfig, topics: list[str]) -> list[tuple[str, str]]:
    s = cfg.source
    if s.kafka is None:  # the files of the topics, read from one folder (or prefix)
        return [storage_dataset(str(getattr(s, s.location)))]
    from jobs.land.command import TopicSource, with_connection

    bootstrap = with_connection(TopicSource("kafka", s.kafka.bootstrap, tuple(s.kafka.topics),
                                            s.kafka.connection)).location
    return [(kafka_namespace(bootstrap), topic) for topic in (topics or s.kafka.topics)]


def transform_lineage(cfg: PipelineConfig, settings: RunSettings):
    """The raw folders → the Iceberg tables committed and the quarantine; the tables with their
    expectations' results as inputs too."""
    from openlineage.client.event_v2 import InputDataset, OutputDataset

    from jobs.model.reports import DecodeReport, FoldReport, ValidationReport

    ctx = _context(settings)
    decode = ctx.read_report(DecodeReport) or DecodeReport()
    fold = ctx.read_report(FoldReport) or FoldReport()
    validation = ctx.read_report(ValidationReport) or ValidationReport()
    raw = [decode.raw] if isinstance(decode.raw, str) else list(decode.raw or [])
    suites = {s.table: s for s in validation.suites}
    inputs = [InputDataset(*storage_dataset(f), inputFacets=_assertions(suites.get(None))) for f in raw]
    outputs = []
    for table in _committed(ctx, cfg, fold):
        counts = decode.tables.get(table.table_id)
        facets, output_facets = table.facets(raw_of_topics(raw, counts.topics if counts else ()))
        outputs.append(OutputDataset(table.namespace, table.name, facets=facets, outputFacets=output_facets))
        inputs.append(InputDataset(table.namespace, table.name, facets=table.identity_facets(),
                                   inputFacets=_assertions(suites.get(table.table_id))))
    if decode.total.quarantined:
        outputs.append(_quarantine(ctx, decode.total.quarantined))
    return _operator_lineage(inputs, outputs)


def raw_of_topics(raw: list[str], topics: Iterable[str]) -> list[tuple[str, str]]:
    """The datasets of the raw folders (one per topic: ``.../<topic>/interval=...``) of these topics; every
    folder where the topics are not known (a report of an earlier version)."""
    from jobs.model.record import safe_part

    wanted = {safe_part(t) for t in topics}
    picked = [f for f in raw if PurePosixPath(f.rstrip("/")).parent.name in wanted]
    return [storage_dataset(f) for f in picked or raw]


def _quarantine(ctx: Any, messages: int):
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.generated import output_statistics_output_dataset as stats

    folder = ctx.lake.join(ctx.lake.quarantine_dir(ctx.pipeline, ctx.run_id))
    return OutputDataset(*storage_dataset(folder), outputFacets={
        "outputStatistics": stats.OutputStatisticsOutputDatasetFacet(rowCount=messages)})


def reconcile_lineage(cfg: PipelineConfig, settings: RunSettings):
    """The source's tables (or its counts file) with each judged checkpoint as an assertion, and the lake's
    tables they were compared with."""
    from openlineage.client.event_v2 import InputDataset

    from jobs.model.reports import ReconciliationReport

    ctx = _context(settings)
    report = ctx.read_report(ReconciliationReport) or ReconciliationReport()
    spec = settings.reconcile.source_counts
    url = _source_url(spec) if _is_database(spec) else None
    inputs = []
    if spec and url is None:  # a counts file: one dataset, every table's checkpoints on it
        inputs.append(InputDataset(*storage_dataset(spec), inputFacets=_verdicts(report.tables)))
    for row in report.tables:
        if url is not None:
            inputs.append(InputDataset(*database_dataset(url, row.table), inputFacets=_verdicts([row])))
    inputs += [InputDataset(t.namespace, t.name, facets=t.identity_facets())
               for t in _committed(ctx, cfg, None, [r.table for r in report.tables if r.in_state])]
    return _operator_lineage(inputs, [])


def _is_database(spec: str | None) -> bool:
    """An Airflow connection or a SQLAlchemy URL (not a counts file), as the reconcile stage tells them."""
    from jobs.reconcile.stage import is_database_url

    return bool(spec) and (spec.startswith("conn:") or is_database_url(spec))


def _source_url(spec: str) -> str | None:
    from jobs.airflow.tasks import source_counts_spec

    try:
        return source_counts_spec(spec)
    except Exception as exc:  # noqa: BLE001 - lineage never fails a task; the reconcile task said why
        log.warning("no lineage of the source's tables: %s", type(exc).__name__)
        return None


# ---- facets ------------------------------------------------------------------------------------
def _assertions(suite: Any) -> dict[str, Any]:
    """A Great Expectations suite's results as the dataQualityAssertions input facet (none: no facet)."""
    from openlineage.client.generated import data_quality_assertions_dataset as dq

    if suite is None or not suite.results:
        return {}
    return {"dataQualityAssertions": dq.DataQualityAssertionsDatasetFacet(assertions=[
        dq.Assertion(assertion=r.expectation or "unknown", success=bool(r.success),
                     column=r.kwargs.get("column"), name=f"{suite.suite}.{r.expectation}")
        for r in suite.results])}


def _verdicts(rows: Iterable[Any]) -> dict[str, Any]:
    """Each judged checkpoint of these tables as an assertion (``match`` succeeds; ``behind`` and ``unknown``
    are not judged yet: no assertion), and the source's rows where one table is named."""
    from openlineage.client.generated import data_quality_assertions_dataset as dq
    from openlineage.client.generated import data_quality_metrics_input_dataset as metrics

    rows = list(rows)
    assertions = [dq.Assertion(assertion="row_count_and_values_at_moment", success=c.verdict == "match",
                               name=f"{row.table} at {c.moment or c.taken_at}", description=c.reason,
                               expected=_text(c.source_rows), actual=_text(c.lake_rows))
                  for row in rows for c in row.checkpoints if c.verdict in ("match", "mismatch")]
    facets: dict[str, Any] = {}
    if assertions:
        facets["dataQualityAssertions"] = dq.DataQualityAssertionsDatasetFacet(assertions=assertions)
    if len(rows) == 1 and rows[0].source_rows is not None:
        facets["dataQualityMetrics"] = metrics.DataQualityMetricsInputDatasetFacet(
            columnMetrics={}, rowCount=rows[0].source_rows)
    return facets


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _operator_lineage(inputs: list[Any], outputs: list[Any]):
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(inputs=inputs, outputs=outputs)


def _context(settings: RunSettings):
    from jobs.stages import RunContext

    return RunContext.of(settings)


def _committed(ctx: Any, cfg: PipelineConfig, fold: Any, table_ids: list[str] | None = None) -> list[IcebergTable]:
    """The Iceberg tables the run's fold report committed to (or those of ``table_ids``), as the catalog
    holds them (its metadata only: no data file is read)."""
    from jobs.iceberg.catalog import load_table, open_catalog

    if fold is not None:
        table_ids = [t for t, r in sorted(fold.tables.items()) if r.snapshot_id is not None]
    if not table_ids:
        return []
    catalog = open_catalog(ctx.lake, read_only=True)
    found = []
    for table_id in table_ids:
        table = load_table(catalog, cfg.name, table_id)
        if table is not None:
            snapshot_id = fold.tables[table_id].snapshot_id if fold is not None else None
            found.append(IcebergTable.of(cfg, ctx.lake, table_id, table, snapshot_id))
    return found


@dataclass(frozen=True)
class IcebergTable:
    """A published table as OpenLineage names it: its location (as OpenLineage's Spark integration names an
    Iceberg table), a symlink to its catalog name; what a commit of a snapshot says of it."""

    table_id: str
    namespace: str
    name: str
    identifier: str  # <pipeline namespace>.<table> in the catalog
    catalog: str
    warehouse: str
    columns: tuple[tuple[str, str], ...]
    commit: dict[str, Any] | None  # the snapshot's id, sequence number, operation and summary

    @classmethod
    def of(cls, cfg: PipelineConfig, lake: Any, table_id: str, table: Any, snapshot_id: int | None) -> IcebergTable:
        snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
        commit = None if snapshot is None else {
            "snapshotId": snapshot.snapshot_id, "sequenceNumber": snapshot.sequence_number,
            "operation": str(getattr(snapshot.summary.operation, "value", snapshot.summary.operation)),
            "summary": dict(snapshot.summary.additional_properties)}
        return cls(table_id, *storage_dataset(table.metadata.location), ".".join(table.name()[-2:]),
                   cfg.sink.catalog or "cdc", warehouse_uri(cfg, lake),
                   tuple((f.name, str(f.field_type)) for f in table.schema().fields), commit)

    def identity_facets(self) -> dict[str, Any]:
        """The catalog's name of the table (a symlink) and the catalog: what makes it the same dataset for
        every consumer, whichever name it was reached by."""
        from openlineage.client.generated import catalog_dataset, symlinks_dataset

        return {"symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[symlinks_dataset.Identifier(
                    namespace=self.warehouse, name=self.identifier, type="TABLE")]),
                "catalog": catalog_dataset.CatalogDatasetFacet(
                    framework="iceberg", type="sql" if self.catalog == "cdc" else "pyiceberg", name=self.catalog,
                    warehouseUri=self.warehouse, source="pyiceberg")}

    def facets(self, raw: list[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(dataset facets, output facets) of the table as the run's transform committed it."""
        from openlineage.client.generated import dataset_version_dataset, schema_dataset

        facets = {**self.identity_facets(),
                  "schema": schema_dataset.SchemaDatasetFacet(fields=[
                      schema_dataset.SchemaDatasetFacetFields(name=n, type=t, ordinal_position=i)
                      for i, (n, t) in enumerate(self.columns, 1)]),
                  "columnLineage": self._column_lineage(raw)}
        if self.commit is None:
            return facets, {}
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=str(self.commit["snapshotId"]))
        return facets, _commit_facets(self.commit)

    def _column_lineage(self, raw: list[tuple[str, str]]):
        from openlineage.client.generated import column_lineage_dataset as cl

        def from_value(column: str) -> cl.Fields:
            how = cl.Transformation(type="DIRECT", subtype="TRANSFORMATION", masking=False,
                                    description=f"the row image's column {column} in the change event")
            return cl.Fields(inputFields=[cl.InputField(namespace=ns, name=name, field="value", transformations=[how])
                                          for ns, name in raw])

        # a data column is its source column's value in the events' row images; the fold's own are derived
        fields = {column: from_value(column) for column, _type in self.columns if not column.startswith("_cdc_")}
        return cl.ColumnLineageDatasetFacet(fields=fields)


def _commit_facets(commit: dict[str, Any]) -> dict[str, Any]:
    """The commit's statistics (rows, files and bytes added) and its Iceberg commit report."""
    from openlineage.client.generated import output_statistics_output_dataset as stats

    summary = commit["summary"]
    number = lambda key: int(summary.get(key, 0))  # noqa: E731 - Iceberg's summary holds numbers as text
    metrics = {name: number(key) for name, key in _COMMIT_METRICS.items() if key in summary}
    return {"outputStatistics": stats.OutputStatisticsOutputDatasetFacet(
                rowCount=number("added-records"), size=number("added-files-size"),
                fileCount=number("added-data-files")),
            "icebergCommitReport": _iceberg_commit_report(commit["snapshotId"], commit["sequenceNumber"],
                                                          commit["operation"], metrics)}


# Iceberg's snapshot summary keys under the names of OpenLineage's Iceberg commit report
_COMMIT_METRICS = {
    "addedDataFiles": "added-data-files", "removedDataFiles": "deleted-data-files",
    "totalDataFiles": "total-data-files", "addedDeleteFiles": "added-delete-files",
    "addedPositionalDeleteFiles": "added-position-delete-files", "removedDeleteFiles": "removed-delete-files",
    "totalDeleteFiles": "total-delete-files", "addedRecords": "added-records", "removedRecords": "deleted-records",
    "totalRecords": "total-records", "addedFilesSizeInBytes": "added-files-size",
    "removedFilesSizeInBytes": "removed-files-size", "totalFilesSizeInBytes": "total-files-size",
    "addedPositionalDeletes": "added-position-deletes", "totalPositionalDeletes": "total-position-deletes",
}
ICEBERG_COMMIT_REPORT = ("https://openlineage.io/spec/facets/1-0-2/IcebergCommitReportOutputDatasetFacet.json"
                         "#/$defs/IcebergCommitReportOutputDatasetFacet")


def _iceberg_commit_report(snapshot_id: int, sequence_number: int, operation: str, metrics: dict[str, int]):
    return _commit_report_class()(snapshotId=snapshot_id, sequenceNumber=sequence_number, operation=operation,
                                  commitMetrics=metrics)


@functools.cache
def _commit_report_class() -> type:
    """OpenLineage's Iceberg commit report facet (of its facet registry; the client has no class of it)."""
    import attr
    from openlineage.client.generated.base import OutputDatasetFacet

    @attr.define
    class IcebergCommitReportOutputDatasetFacet(OutputDatasetFacet):
        snapshotId: int  # noqa: N815
        sequenceNumber: int  # noqa: N815
        operation: str
        commitMetrics: dict[str, int]  # noqa: N815

        @staticmethod
        def _get_schema() -> str:
            return ICEBERG_COMMIT_REPORT

    return IcebergCommitReportOutputDatasetFacet
