"""Reading published state with Spark: a table's current rows (or some of its buckets), without the rows its
position deletes delete, optionally with where each row is; its tombstones; the keys of a small table."""
from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.iceberg.catalog import BUCKET_COLUMN, load_table, table_columns
from jobs.iceberg.layout import layout_of, partition_bucket, with_bucket
from jobs.model.properties import TOMBSTONES_PROP

# a state row read with its place: the data file (its name; with the bucket, see _file_keys) and row index in it
FILE_COLUMN = "_cdc_file"


ROW_COLUMN = "_cdc_row"


# up to this many deleted positions are broadcast to the readers (about 80 bytes each)
BROADCAST_DELETES = 1_000_000


def _scan_tasks(table, buckets: frozenset[int] | None) -> list:
    """The current data files of the given buckets (None: all), each with the delete files that apply
    to it; from the manifests, nothing read."""
    if buckets is not None and not buckets:
        return []
    tasks = list(table.scan().plan_files())
    if buckets is None:
        return tasks
    layout = layout_of(table)
    return [t for t in tasks if partition_bucket(layout, t.file.partition) in buckets]


def _delete_files(tasks: list) -> list:
    """The distinct delete files of the scan tasks (one applies to many data files)."""
    return list({d.file_path: d for task in tasks for d in task.delete_files}.values())


def _file_keys(spark: SparkSession, table, tasks: list, index: str | None = None) -> DataFrame:
    """How a row read with positions names its data file (its bucket and file name, unique in a
    bucketed table: Spark names a file by its write job's uuid), against the file's Iceberg path; with
    ``index``, a column of that name with the file's index in ``tasks``."""
    layout = layout_of(table)
    rows = [(t.file.file_path, partition_bucket(layout, t.file.partition), t.file.file_path.rsplit("/", 1)[1])
            for t in tasks]
    ddl = f"file_path string, {BUCKET_COLUMN} int, {FILE_COLUMN} string"
    if index is None:
        return spark.createDataFrame(rows, ddl)
    return spark.createDataFrame([(*row, i) for i, row in enumerate(rows)], f"{ddl}, {index} int")


def _ddl(columns: dict[str, str]) -> str:
    """A Spark schema string of column -> type, every name quoted (names come from messages)."""
    return ", ".join(f"`{c.replace('`', '``')}` {t}" for c, t in columns.items())


def read_state(spark: SparkSession, table, buckets: frozenset[int] | None = None,
               positions: bool = False) -> DataFrame | None:
    """The table's current snapshot (or the rows of some of its buckets) as a DataFrame, read from
    its own data files, without the rows its position-delete files delete. With ``positions``, each
    row also says where it is: ``_cdc_bucket`` (its bucket's number), ``_cdc_file`` (its data file's name) and
    ``_cdc_row`` (its index in it)."""
    if table is None or table.current_snapshot() is None:
        return None
    tasks = _scan_tasks(table, buckets)
    # a table of the earlier layout holds its rows' buckets; the current one's are computed from the key
    columns = table_columns(table, layout=True)
    layout = layout_of(table)
    if not tasks:
        placed = {BUCKET_COLUMN: "int", FILE_COLUMN: "string", ROW_COLUMN: "bigint"} if positions else {}
        return spark.createDataFrame([], _ddl({**columns, **placed}))
    rows = spark.read.schema(_ddl(columns)).parquet(*[_spark_uri(t.file.file_path) for t in tasks])
    deletes = _delete_files(tasks)
    if not deletes and not positions:
        return rows
    # the file's name, not its path: Spark's path is URL-encoded and scheme-normalised, and a string
    # function over every row's path costs more than the read (bench/README.md, "Rewrites")
    rows = rows.withColumns({FILE_COLUMN: F.col("_metadata.file_name"), ROW_COLUMN: F.col("_metadata.row_index")})
    if layout is not None:
        rows = with_bucket(rows, layout)
    if deletes:
        deleted = spark.read.schema("file_path string, pos bigint").parquet(
            *[_spark_uri(d.file_path) for d in deletes]
        ).join(F.broadcast(_file_keys(spark, table, tasks)), "file_path").select(
            BUCKET_COLUMN, FILE_COLUMN, F.col("pos").alias(ROW_COLUMN))
        # Spark estimates a join's size as the product of its sides', so it would shuffle the whole
        # state for a few positions (bench/README.md, "Rewrites")
        if sum(d.record_count for d in deletes) <= BROADCAST_DELETES:
            deleted = F.broadcast(deleted)
        rows = rows.join(deleted, [BUCKET_COLUMN, FILE_COLUMN, ROW_COLUMN], "left_anti")
    return rows if positions else rows.drop(FILE_COLUMN, ROW_COLUMN, BUCKET_COLUMN)


def read_tombstones(spark: SparkSession, table, key_types: dict[str, str]) -> DataFrame | None:
    path = table.properties.get(TOMBSTONES_PROP) if table is not None else None
    if not path:
        return None
    return spark.read.schema(_ddl({**key_types, "_cdc_position": "string", "_cdc_run_id": "string"})).parquet(
        _spark_uri(path))


def state_keys(catalog, pipeline: str, table_id: str, key_columns: list[str]) -> list[str]:
    """Every key of a (small) state table, as count steps name keys (JSON of the values as text)."""
    from jobs.model.keys import key_text

    table = load_table(catalog, pipeline, table_id)
    if table is None or table.current_snapshot() is None:
        return []
    rows = table.scan(selected_fields=tuple(key_columns)).to_arrow()
    columns = [rows.column(k).to_pylist() for k in key_columns]
    return [key_text(tuple(key_columns), values) for values in zip(*columns)]


def state_batches(catalog, pipeline: str, table_id: str, columns: list[str]) -> Iterator:
    """The rows of a state table, of ``columns``, as a stream of Arrow record batches (none unpublished)."""
    table = load_table(catalog, pipeline, table_id)
    if table is None or table.current_snapshot() is None:
        return iter(())
    return iter(table.scan(selected_fields=tuple(columns)).to_arrow_batch_reader())


def _spark_uri(uri: str) -> str:
    return "s3a://" + uri.split("://", 1)[1] if uri.startswith("s3://") else uri
