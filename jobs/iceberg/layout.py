"""A state table's layout as Iceberg holds it: its schema (key columns required, declared as identifier
fields where Iceberg allows), its partition spec (``bucket[N]`` on key columns: jobs.model.buckets), its sort
order (the key), and, in Spark, the bucket of each row by Iceberg's own hash (jvm/src/cdc/IcebergBucket.java)."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.iceberg.catalog import BUCKET_COLUMN, spark_type_of
from jobs.model.buckets import BucketField, BucketLayout
from jobs.spark.jvm import register_iceberg_bucket

# Iceberg's identifier fields cannot be floating point (nor optional, nor nested)
_NOT_IDENTIFIER_TYPES = ("float", "double")


def identifier_columns(key_types: dict[str, str], whole_row: bool) -> tuple[str, ...]:
    """The key columns a table declares as Iceberg identifier fields (required): all of them, unless the key is
    the whole row (it may hold nulls: the table is a bag of rows to other engines) or has a float or double."""
    if whole_row or any(t in _NOT_IDENTIFIER_TYPES for t in key_types.values()):
        return ()
    return tuple(key_types)


def partition_spec(schema, layout: BucketLayout | None, reserved: set[str] = frozenset()):
    """The partition spec of a layout over ``schema`` (None: unpartitioned), field names kept clear of columns and
    of the ``reserved`` names (the table's earlier partition fields': a spec change may not reuse one)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import BucketTransform

    if layout is None:
        return PartitionSpec()
    taken = {f.name for f in schema.fields} | set(reserved)
    fields = []
    for i, field in enumerate(layout.fields):
        name = _free_name(f"{field.column}_bucket", taken)
        taken.add(name)
        fields.append(PartitionField(source_id=schema.find_field(field.column).field_id, field_id=1000 + i,
                                     transform=BucketTransform(field.count), name=name))
    return PartitionSpec(*fields)


def _free_name(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def sort_order(schema, key_columns: tuple[str, ...]):
    """Ascending by the key columns: the order a table's data files are written in."""
    from pyiceberg.table.sorting import NullOrder, SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    if not key_columns:
        return SortOrder()
    # as Spark sorts: nulls first
    return SortOrder(*[SortField(source_id=schema.find_field(c).field_id, transform=IdentityTransform(),
                                 null_order=NullOrder.NULLS_FIRST) for c in key_columns])


def layout_of(table) -> BucketLayout | None:
    """The table's bucket layout: its partition spec when every field is Iceberg's bucket transform of a column
    (None: unpartitioned, or laid out otherwise, as by earlier versions)."""
    from pyiceberg.transforms import BucketTransform

    if table is None:
        return None
    spec, schema = table.spec(), table.schema()
    if not spec.fields or not all(isinstance(f.transform, BucketTransform) for f in spec.fields):
        return None
    fields = []
    for f in spec.fields:
        column = schema.find_field(f.source_id)
        fields.append(BucketField(column.name, spark_type_of(column.field_type), f.transform.num_buckets))
    return BucketLayout(tuple(fields))


def is_bucketed(table) -> bool:
    """Whether the table is laid out in key buckets by Iceberg's transform (tables of earlier versions are not)."""
    return layout_of(table) is not None


def partition_bucket(layout: BucketLayout | None, partition) -> int:
    """The bucket number of a data file's partition: by the layout, or (a table of the earlier layout) its
    one identity value; 0 for an unpartitioned table."""
    values = tuple(partition) if partition is not None else ()
    if layout is not None:
        return layout.index(values)
    return int(values[0]) if values and values[0] is not None else 0


def _field_bucket(field: BucketField) -> Column:
    value = F.col(f"`{field.column.replace('`', '``')}`")
    t, n = field.state_type, F.lit(field.count)
    if t in ("int", "bigint"):
        return F.call_function("iceberg_bucket_long", value.cast("bigint"), n)
    if t == "date":
        return F.call_function("iceberg_bucket_long", F.unix_date(value).cast("bigint"), n)
    if t == "timestamp":
        return F.call_function("iceberg_bucket_long", F.unix_micros(value), n)
    if t == "string":
        return F.call_function("iceberg_bucket_string", value, n)
    if t == "binary":
        return F.call_function("iceberg_bucket_binary", value, n)
    if t.startswith("decimal("):
        return F.call_function("iceberg_bucket_decimal", value, n)
    raise ValueError(f"column {field.column}: Iceberg's bucket transform does not take {t}")


def with_bucket(df: DataFrame, layout: BucketLayout, name: str = BUCKET_COLUMN) -> DataFrame:
    """``df`` with its rows' bucket numbers (BucketLayout.index of the buckets Iceberg's transform gives their
    key columns) as column ``name``."""
    register_iceberg_bucket(df.sparkSession)
    index = F.lit(0)
    for field in layout.fields:
        index = index * F.lit(field.count + 1) + F.coalesce(_field_bucket(field), F.lit(field.count))
    return df.withColumn(name, index.cast("int"))
