"""The pipeline's Iceberg catalog and what its tables say of themselves: the catalog of a lake, a table by
table id, its columns and layout, the snapshot a run committed, the rows of a snapshot. No Spark."""
from __future__ import annotations

import json

from jobs.lake import storage
from jobs.lake.layout import Lake
from jobs.model.properties import (
    HISTORY_OF_PROP,
    KEY_COLUMNS_PROP,
    REPORT_PROP,
    RUN_ID_PROP,
    TABLE_ID_PROP,
)
from jobs.model.record import hashed_table_name, iceberg_table_name, joined_table_name

# a row's bucket number (jobs.model.buckets.BucketLayout.index) while a run reads or writes it, no column of
# the table; tables published before buckets were Iceberg's transform have it as a column (identity-partitioned
# by it), which a run moving such a table to the current layout drops
BUCKET_COLUMN = "_cdc_bucket"


def history_table_id(table_id: str) -> str:
    """The history table of a table sits beside it: ``<db>__<schema>__<table>__history``."""
    return f"{table_id}.history"


def open_catalog(lake: Lake, read_only: bool = False):
    """The Iceberg catalog of a lake.

    Embedded default: pyiceberg's SQL catalog on SQLite at ``<lake>/warehouse/catalog.db``; ``read_only``
    (``expire --dry-run``) opens it so that nothing is written, and a lake without one as an empty catalog.
    Production: the lake names a catalog configured for pyiceberg (``Lake.catalog``, from a pipeline's
    ``sink.catalog`` or ``CDC_ICEBERG_CATALOG``: jobs.settings), in ``~/.pyiceberg.yaml`` or
    ``PYICEBERG_CATALOG__<NAME>__*`` variables (REST, Glue, Hive, SQL).
    """
    from pyiceberg.catalog import load_catalog
    from pyiceberg.catalog.sql import SqlCatalog

    if lake.catalog:
        return load_catalog(lake.catalog)
    if lake.is_s3:
        raise ValueError("an S3 lake needs a pyiceberg catalog (sink.catalog, CDC_ICEBERG_CATALOG): SQLite cannot "
                         "live on S3")
    file = embedded_catalog_file(lake)
    if read_only:  # SQLite's read-only mode: no journal, no table made
        uri = f"sqlite:///file:{file}?mode=ro&uri=true" if storage.exists(file) else "sqlite:///:memory:"
    else:
        lake.make_dirs(lake.warehouse)
        uri = f"sqlite:///{file}"
    return SqlCatalog("cdc", uri=uri, warehouse=lake.uri(lake.warehouse))


def embedded_catalog_file(lake: Lake) -> str | None:
    """The SQLite file of the lake's embedded catalog; None where the lake names another catalog."""
    if lake.catalog or lake.is_s3:
        return None
    return f"{lake.join(lake.warehouse)}/catalog.db"


def ensure_namespace(catalog, pipeline: str) -> None:
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    try:
        catalog.create_namespace(pipeline)
    except NamespaceAlreadyExistsError:
        pass


def _table_names(table_id: str) -> tuple[str, ...]:
    """Where the table of ``table_id`` may be: its name (jobs.model.record.iceberg_table_name); the plain
    join of its parts, under which tables were published before names were made one-to-one; its hashed
    name, taken when another table already held its name."""
    return tuple(dict.fromkeys((iceberg_table_name(table_id), joined_table_name(table_id),
                                hashed_table_name(table_id))))


def load_table(catalog, pipeline: str, table_id: str):
    """The state table of ``table_id``, or None: the table under one of its names that says it holds
    this table id (a table without the property, under its own name)."""
    from pyiceberg.exceptions import NoSuchTableError

    names = _table_names(table_id)
    for candidate in names:
        try:
            table = catalog.load_table((pipeline, candidate))
        except NoSuchTableError:
            continue
        held = table.properties.get(TABLE_ID_PROP)
        if held == table_id or (held is None and candidate == names[0]):
            return table
    return None


def _free_table_name(catalog, pipeline: str, table_id: str) -> str:
    """The name a new table of ``table_id`` is created under: its own, unless a table of another id
    published before names were made one-to-one holds it (then its hashed name)."""
    name = iceberg_table_name(table_id)
    return hashed_table_name(table_id) if catalog.table_exists((pipeline, name)) else name


def published_by(table, run_id: str) -> int | None:
    """The snapshot this run id already committed to the table, if any."""
    if table is None:
        return None
    for snapshot in table.metadata.snapshots:
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if summary.get(RUN_ID_PROP) == run_id:
            return snapshot.snapshot_id
    return None


# ---- Spark <-> Iceberg schemas ---------------------------------------------------------------
def iceberg_schema(columns: dict[str, str], identifier: tuple[str, ...] = ()):
    """The Iceberg schema of columns (name -> Spark type): the identifier columns required and declared as
    identifier fields, every other column optional. Field ids in order (a new table's are assigned afresh)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    fields = [NestedField(i, name, iceberg_type(t), required=name in identifier)
              for i, (name, t) in enumerate(columns.items(), start=1)]
    return Schema(*fields, identifier_field_ids=[f.field_id for f in fields if f.name in identifier])


def iceberg_type(spark_type: str):
    from pyiceberg import types as T

    simple = {"string": T.StringType(), "int": T.IntegerType(), "bigint": T.LongType(), "float": T.FloatType(),
              "double": T.DoubleType(), "boolean": T.BooleanType(), "date": T.DateType(),
              "timestamp": T.TimestamptzType(), "binary": T.BinaryType()}
    if spark_type in simple:
        return simple[spark_type]
    if spark_type.startswith("decimal("):
        precision, scale = (int(x) for x in spark_type[len("decimal("):-1].split(","))
        return T.DecimalType(precision, scale)
    raise ValueError(f"no Iceberg type for {spark_type}")


def spark_type_of(iceberg_type) -> str:
    from pyiceberg import types as T

    mapping = {
        T.StringType: "string", T.IntegerType: "int", T.LongType: "bigint", T.FloatType: "float",
        T.DoubleType: "double", T.BooleanType: "boolean", T.DateType: "date", T.TimestamptzType: "timestamp",
        T.TimestampType: "timestamp", T.BinaryType: "binary",
    }
    for cls, name in mapping.items():
        if isinstance(iceberg_type, cls):
            return name
    if isinstance(iceberg_type, T.DecimalType):
        return f"decimal({iceberg_type.precision},{iceberg_type.scale})"
    return "string"


def table_columns(table, layout: bool = False) -> dict[str, str]:
    """Column name -> Spark type of the table's current schema, in order (without the bucket column of a table
    of the earlier layout unless ``layout``: it is where a row is stored, not what it says)."""
    return {f.name: spark_type_of(f.field_type) for f in table.schema().fields
            if layout or f.name != BUCKET_COLUMN}


def data_columns(table) -> dict[str, str]:
    """The table's columns (name -> Spark type) without the fold's own (``_cdc_*``)."""
    return {c: t for c, t in table_columns(table).items() if not c.startswith("_cdc_")}


def key_columns_of(table) -> list[str] | None:
    if table is None:
        return None
    raw = table.properties.get(KEY_COLUMNS_PROP)
    return json.loads(raw) if raw else None


def _live_records(snapshot) -> int:
    """The rows of a snapshot: its data files' rows less the rows its position deletes delete (each
    deletes one live row: positions are taken from rows read without the earlier deletes)."""
    if snapshot is None:
        return 0
    summary = snapshot.summary.additional_properties
    return int(summary.get("total-records", 0)) - int(summary.get("total-position-deletes", 0))


def snapshot_record_count(table, snapshot_id: int | None = None) -> int:
    """The rows of the table's current snapshot, or of the snapshot ``snapshot_id``."""
    if table is None:
        return 0
    return _live_records(table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id))


def published_report(table, snapshot_id: int) -> dict:
    """What the run that committed ``snapshot_id`` reported of the table (REPORT_PROP), with the
    snapshot's id and rows, marked ``already_published``; the id and rows alone for a snapshot
    committed without one."""
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    summary = snapshot.summary.additional_properties if snapshot and snapshot.summary else {}
    stored = json.loads(summary[REPORT_PROP]) if REPORT_PROP in summary else {}
    return {**stored, "already_published": True, "snapshot_id": snapshot_id,
            "state_rows": snapshot_record_count(table, snapshot_id)}



def published_fingerprints(table) -> dict | None:
    """The value fingerprints the run that published the table's current snapshot reported (its counts'
    ``fingerprints``: jobs.fold.stage), or None."""
    snapshot = table.current_snapshot() if table is not None else None
    summary = snapshot.summary.additional_properties if snapshot and snapshot.summary else {}
    if REPORT_PROP not in summary:
        return None
    counts = json.loads(summary[REPORT_PROP]).get("counts")
    return counts.get("fingerprints") if isinstance(counts, dict) else None


def state_summary(lake: Lake, pipeline: str) -> dict[str, dict]:
    """table_id -> state rows and snapshot id of every published table of the pipeline."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    catalog = open_catalog(lake)
    out = {}
    try:
        identifiers = catalog.list_tables(pipeline)
    except NoSuchNamespaceError:
        return out
    for ident in identifiers:
        table = catalog.load_table(ident)
        if HISTORY_OF_PROP in table.properties:
            continue  # a history table is not a state table
        table_id = table.properties.get(TABLE_ID_PROP, ident[-1])
        snapshot = table.current_snapshot()
        out[table_id] = {
            "state_rows": snapshot_record_count(table),
            "snapshot_id": snapshot.snapshot_id if snapshot else None,
            "iceberg_table": ".".join(ident),
            "key_columns": key_columns_of(table),
            # the data columns (name -> type) a value fingerprint reads (jobs.reconcile.fingerprint)
            "columns": data_columns(table),
        }
    return out
