"""Published state: Apache Iceberg tables committed with pyiceberg, data files written by Spark.

One table per source table in the namespace of the pipeline. A run's new state of a table is one
``overwrite`` snapshot (the replaced files out, the new ones in) carrying ``cdc.run-id`` in its
summary, so a re-run of the same run id is recognised and changes nothing. Nothing becomes visible
before the catalog commit: a failure before it leaves the previous snapshot published.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from urllib.parse import urlparse

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.canonical import iceberg_table_name
from jobs.lake import Lake

RUN_ID_PROP = "cdc.run-id"
KEY_COLUMNS_PROP = "cdc.key-columns"
FULL_LOAD_POSITION_PROP = "cdc.full-load-position"
TABLE_ID_PROP = "cdc.table-id"
TRUNCATE_POSITION_PROP = "cdc.truncate-position"
# where the table's tombstones (deleted keys and their positions) of this snapshot are: a Parquet
# folder written before the commit and named in the same commit, so it changes atomically with the state
TOMBSTONES_PROP = "cdc.tombstones"
PENDING_LOAD_PROP = "cdc.pending-load"  # a full load not yet known complete: {"start", "end"} positions
HISTORY_OF_PROP = "cdc.history-of"  # on an SCD2 history table: the table_id whose history it is


def history_table_id(table_id: str) -> str:
    """The history table of a table sits beside it: ``<db>__<schema>__<table>__history``."""
    return f"{table_id}.history"


def open_catalog(lake: Lake):
    """The Iceberg catalog of a lake.

    Embedded default: pyiceberg's SQL catalog on SQLite at ``<lake>/warehouse/catalog.db``.
    Production: set ``CDC_ICEBERG_CATALOG`` to the name of a catalog configured for pyiceberg
    (``~/.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__*`` variables: REST, Glue, Hive, SQL).
    """
    from pyiceberg.catalog import load_catalog
    from pyiceberg.catalog.sql import SqlCatalog

    named = os.environ.get("CDC_ICEBERG_CATALOG")
    if named:
        return load_catalog(named)
    if lake.is_s3:
        raise ValueError("an S3 lake needs CDC_ICEBERG_CATALOG naming a pyiceberg catalog (SQLite cannot live on S3)")
    warehouse = lake.join(lake.warehouse)
    os.makedirs(warehouse, exist_ok=True)
    return SqlCatalog(
        "cdc",
        uri=f"sqlite:///{warehouse}/catalog.db",
        warehouse=lake.uri(lake.warehouse),
    )


def ensure_namespace(catalog, pipeline: str) -> None:
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    try:
        catalog.create_namespace(pipeline)
    except NamespaceAlreadyExistsError:
        pass


def load_table(catalog, pipeline: str, table_id: str):
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table((pipeline, iceberg_table_name(table_id)))
    except NoSuchTableError:
        return None


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
def arrow_type(spark_type: str) -> pa.DataType:
    simple = {
        "string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "float": pa.float32(),
        "double": pa.float64(), "boolean": pa.bool_(), "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"), "binary": pa.binary(),
    }
    if spark_type in simple:
        return simple[spark_type]
    if spark_type.startswith("decimal("):
        precision, scale = (int(x) for x in spark_type[len("decimal("):-1].split(","))
        return pa.decimal128(precision, scale)
    raise ValueError(f"no Iceberg type for {spark_type}")


def arrow_schema(columns: dict[str, str]) -> pa.Schema:
    # every field nullable: Spark marks some written columns required, which add_files rejects
    return pa.schema([pa.field(name, arrow_type(t), nullable=True) for name, t in columns.items()])


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


def table_columns(table) -> dict[str, str]:
    """Column name -> Spark type of the table's current schema, in order."""
    return {f.name: spark_type_of(f.field_type) for f in table.schema().fields}


def read_state(spark: SparkSession, table) -> DataFrame | None:
    """The table's current snapshot as a DataFrame, read from its own data files."""
    if table is None or table.current_snapshot() is None:
        return None
    paths = [task.file.file_path for task in table.scan().plan_files()]
    ddl = ", ".join(f"`{c.replace('`', '``')}` {t}" for c, t in table_columns(table).items())
    if not paths:
        return spark.createDataFrame([], ddl)
    return spark.read.schema(ddl).parquet(*[_spark_uri(p) for p in paths])


def _spark_uri(uri: str) -> str:
    return "s3a://" + uri.split("://", 1)[1] if uri.startswith("s3://") else uri


def _list_parquet(uri: str) -> list[str]:
    parsed = urlparse(uri)
    if parsed.scheme in ("s3", "s3a"):
        from jobs.lake import _s3

        bucket, prefix = parsed.netloc, parsed.path.lstrip("/").rstrip("/") + "/"
        keys = []
        for page in _s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys += [o["Key"] for o in page.get("Contents", []) if o["Key"].endswith(".parquet")]
        return [f"s3://{bucket}/{k}" for k in sorted(keys)]
    local = parsed.path if parsed.scheme == "file" else uri
    return ["file://" + p for p in sorted(glob.glob(os.path.join(local, "*.parquet")))]


@dataclass
class Published:
    table_id: str
    iceberg_table: str
    snapshot_id: int | None
    state_rows: int
    files_added: int
    files_removed: int
    bytes_added: int = 0  # what the run wrote, and what it replaced: a measure of rewrite amplification
    bytes_removed: int = 0
    already_published: bool = False

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def read_tombstones(spark: SparkSession, table, key_types: dict[str, str]) -> DataFrame | None:
    path = table.properties.get(TOMBSTONES_PROP) if table is not None else None
    if not path:
        return None
    ddl = ", ".join(f"`{c.replace('`', '``')}` {t}" for c, t in {
        **key_types, "_cdc_position": "string", "_cdc_run_id": "string"}.items())
    return spark.read.schema(ddl).parquet(_spark_uri(path))


def publish_state(
    catalog,
    pipeline: str,
    table_id: str,
    state: DataFrame,
    columns: dict[str, str],
    run_id: str,
    properties: dict[str, str],
    tombstones: DataFrame | None = None,
) -> Published:
    """Write the new state with Spark, then commit it as one Iceberg snapshot of the table."""
    from pyiceberg.table import _parquet_files_to_data_files

    ensure_namespace(catalog, pipeline)
    name = iceberg_table_name(table_id)
    table = load_table(catalog, pipeline, table_id)
    schema = arrow_schema(columns)
    if table is None:
        txn = catalog.create_table_transaction((pipeline, name), schema=schema, properties={TABLE_ID_PROP: table_id})
        location = txn.table_metadata.location
        old_files = []
    else:
        txn = table.transaction()
        location = table.location()
        old_files = [task.file for task in table.scan().plan_files()]

    data_dir = f"{location}/data/run={run_id}"
    # overwrite: only an uncommitted attempt of this same run can have left files here
    state.write.mode("overwrite").parquet(_spark_uri(data_dir))
    new_paths = _list_parquet(data_dir)
    if tombstones is not None:
        tombstones_dir = f"{location}/tombstones/run={run_id}"
        tombstones.coalesce(1).write.mode("overwrite").parquet(_spark_uri(tombstones_dir))
        properties = {**properties, TOMBSTONES_PROP: tombstones_dir}

    if table is not None:
        with txn.update_schema() as update:
            update.union_by_name(schema)
    txn.set_properties(**properties)
    txn.set_properties(
        **{"schema.name-mapping.default": txn.table_metadata.schema().name_mapping.model_dump_json()}
    )
    summary = {RUN_ID_PROP: run_id, "cdc.pipeline": pipeline}
    new_files = list(_parquet_files_to_data_files(txn.table_metadata, new_paths, txn._table.io))
    with txn.update_snapshot(snapshot_properties=summary).overwrite() as overwrite:
        for data_file in old_files:
            overwrite.delete_data_file(data_file)
        for data_file in new_files:
            overwrite.append_data_file(data_file)
    committed = txn.commit_transaction()
    snapshot = committed.current_snapshot()
    rows = int(snapshot.summary.additional_properties.get("total-records", 0)) if snapshot else 0
    return Published(table_id, f"{pipeline}.{name}", snapshot.snapshot_id if snapshot else None, rows,
                     len(new_paths), len(old_files), sum(f.file_size_in_bytes for f in new_files),
                     sum(f.file_size_in_bytes for f in old_files))


def snapshot_record_count(table) -> int:
    snapshot = table.current_snapshot() if table is not None else None
    if snapshot is None:
        return 0
    return int(snapshot.summary.additional_properties.get("total-records", 0))


def key_columns_of(table) -> list[str] | None:
    if table is None:
        return None
    raw = table.properties.get(KEY_COLUMNS_PROP)
    return json.loads(raw) if raw else None
