"""What other readers find in a published table (jobs.iceberg.write): data files whose Parquet columns carry the
table's field ids, a name mapping that keeps a renamed column's old name (and gets it back where earlier versions
rebuilt it), and position-delete files scoped to one data file each whose manifest entries say which (bounds,
``referenced_data_file``), so that pyiceberg's ``inspect`` and readers that attach a delete file to its data file
only read the table right. Each read is compared with the rows written, not with the pipeline's own reader."""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import fastavro
import polars
import pyarrow.parquet as pq
import pytest
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType
from pyspark.sql import functions as F

from jobs.iceberg.catalog import BUCKET_COLUMN, load_table, open_catalog
from jobs.iceberg.read import FILE_COLUMN, ROW_COLUMN, read_state
from jobs.iceberg.row_delta import DELETE_FILE_PATH_ID, DELETE_POS_ID
from jobs.iceberg.write import NAME_MAPPING_PROP, Bucketing, name_mapping_with_aliases, publish_state
from jobs.lake.layout import Lake
from jobs.model.buckets import BucketField, BucketLayout

PIPELINE, TABLE_ID, BUCKETS = "p", "db.s.t", 4
COLUMNS = {"id": "bigint", "name": "string", "amount": "decimal(10,2)"}
LAYOUT = BucketLayout((BucketField("id", "bigint", BUCKETS),))
_bucket = BucketTransform(BUCKETS).transform(LongType())  # Iceberg's own, as pyiceberg computes it


def _rows(ids, version: int = 1) -> list[dict]:
    return [{"id": i, "name": f"n{i}-v{version}", "amount": Decimal(f"{i}.{version:02d}")} for i in ids]


def _frame(spark, rows: list[dict], columns: dict[str, str]):
    ddl = ", ".join(f"`{c}` {t}" for c, t in columns.items())
    return spark.createDataFrame([tuple(r[c] for c in COLUMNS) for r in rows], ddl)


def _bucketing(touched=None) -> Bucketing:
    return Bucketing(BUCKETS, LAYOUT, touched)


def _publish(spark, catalog, run_id: str, rows: list[dict], columns=COLUMNS, changed: set[int] | None = None):
    """A run: the whole table (``changed`` None), or a delta replacing the rows of the keys ``changed``
    (merge-on-read: the changed rows appended, the replaced ones deleted by position)."""
    state = _frame(spark, rows, columns)
    if changed is None:
        return publish_state(catalog, PIPELINE, TABLE_ID, state, columns, run_id, {}, bucketing=_bucketing())
    touched = frozenset(_bucket(i) for i in changed)
    table = load_table(catalog, PIPELINE, TABLE_ID)
    replaced = read_state(spark, table, touched, positions=True).where(F.col("id").isin(sorted(changed)))
    return publish_state(catalog, PIPELINE, TABLE_ID, state, columns, run_id, {}, bucketing=_bucketing(touched),
                         replaced=replaced.select("id", BUCKET_COLUMN, FILE_COLUMN, ROW_COLUMN))


@pytest.fixture()
def catalog(tmp_path: Path):
    return open_catalog(Lake.at(str(tmp_path / "lake")))


def _local(uri: str) -> str:
    return uri.removeprefix("file://")


def _scan(table, name: str = "name") -> list[dict]:
    rows = table.scan(selected_fields=("id", name, "amount")).to_arrow().to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def _manifest_entries(table) -> list[dict]:
    """The live entries of the current snapshot's manifests, as the Avro files hold them (fastavro)."""
    entries = []
    for manifest in table.current_snapshot().manifests(table.io):
        with open(_local(manifest.manifest_path), "rb") as stream:
            entries += [e for e in fastavro.reader(stream) if e["status"] != 2]
    return entries


def test_data_files_carry_the_field_ids_of_the_tables_schema(spark, catalog):
    published = _publish(spark, catalog, "r1", _rows(range(20)))
    table = load_table(catalog, PIPELINE, TABLE_ID)
    ids = {f.name: f.field_id for f in table.schema().fields}
    assert set(ids) == set(COLUMNS)
    paths = [t.file.file_path for t in table.scan().plan_files()]
    assert len(paths) == published.files_added == BUCKETS
    for path in paths:
        schema = pq.read_schema(_local(path))
        assert {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in schema} == ids
    # the mapping made at create: each column's one name
    assert [(f.field_id, f.names) for f in table.name_mapping()] == [(i, [n]) for n, i in ids.items()]


def test_a_table_written_whole_without_buckets_carries_them_too(spark, catalog):
    # as history tables are published: no buckets, the whole table each run
    columns = {**COLUMNS, "_cdc_valid_to": "string"}
    rows = [{**r, "_cdc_valid_to": None} for r in _rows(range(5))]
    state = spark.createDataFrame([tuple(r.values()) for r in rows], ", ".join(f"`{c}` {t}" for c, t in columns.items()))
    for run in ("r1", "r2"):
        publish_state(catalog, PIPELINE, "db.s.h", state, columns, run, {})
    table = load_table(catalog, PIPELINE, "db.s.h")
    ids = {f.name: f.field_id for f in table.schema().fields}
    for task in table.scan().plan_files():
        schema = pq.read_schema(_local(task.file.file_path))
        assert {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in schema} == ids


def test_merge_on_read_writes_one_delete_file_per_data_file_each_entry_naming_it(spark, catalog):
    _publish(spark, catalog, "r1", _rows(range(40)))
    _publish(spark, catalog, "r2", _rows(range(40, 48)), changed=set(range(40, 48)))  # a second file a bucket
    changed = {1, 5, 9, 41, 2, 3}
    published = _publish(spark, catalog, "r3", _rows(sorted(changed), version=2), changed=changed)
    # the data file of a key: its bucket's of r1 (keys below 40) or of r2
    touched_files = {(_bucket(k), k >= 40) for k in changed}
    assert (published.mode, published.position_deletes) == ("delta", 6)

    table = load_table(catalog, PIPELINE, TABLE_ID)
    tasks = list(table.scan().plan_files())
    data_paths = {t.file.file_path for t in tasks}
    deletes = [e for e in _manifest_entries(table) if e["data_file"]["content"] == 1]
    referenced = [e["data_file"]["referenced_data_file"] for e in deletes]
    # one per data file it deletes from
    assert len(deletes) == published.delete_files_added == len(set(referenced)) == len(touched_files) > 1
    assert set(referenced) <= data_paths
    for entry in deletes:
        file = entry["data_file"]
        bounds = {b["key"]: b["value"] for b in file["lower_bounds"]}, {b["key"]: b["value"] for b in file["upper_bounds"]}
        assert bounds[0][DELETE_FILE_PATH_ID] == bounds[1][DELETE_FILE_PATH_ID] == file["referenced_data_file"].encode()
        assert {b["key"] for b in file["column_sizes"]} == {DELETE_FILE_PATH_ID, DELETE_POS_ID}
        assert not file["value_counts"] and not file["null_value_counts"]  # as Iceberg Java writes them
        assert file["file_size_in_bytes"] == Path(_local(file["file_path"])).stat().st_size
        positions = pq.read_table(_local(file["file_path"]))
        assert file["record_count"] == positions.num_rows
        assert set(positions["file_path"].to_pylist()) == {file["referenced_data_file"]}
        low, high = (int.from_bytes(b[DELETE_POS_ID], "little") for b in bounds)
        assert (low, high) == (min(positions["pos"].to_pylist()), max(positions["pos"].to_pylist()))
        # in the partition of its data file
        [task] = [t for t in tasks if t.file.file_path == file["referenced_data_file"]]
        assert file["partition"]["id_bucket"] == task.file.partition[0]
    # pyiceberg's planner attaches each delete file to its data file only
    for task in tasks:
        assert {d.file_path for d in task.delete_files} == {e["data_file"]["file_path"] for e in deletes
                                                            if e["data_file"]["referenced_data_file"] == task.file.file_path}

    expected = sorted(_rows(set(range(48)) - changed) + _rows(changed, version=2), key=lambda r: r["id"])
    assert _scan(table) == expected


def test_pyiceberg_inspect_reads_every_table_and_agrees_with_its_rows(spark, catalog):
    _publish(spark, catalog, "r1", _rows(range(30)))
    changed = {4, 7, 8}
    _publish(spark, catalog, "r2", _rows(changed, version=2), changed=changed)
    table = load_table(catalog, PIPELINE, TABLE_ID)

    entries = table.inspect.entries()
    files = table.inspect.files()
    partitions = table.inspect.partitions()
    live = [e for e in entries.to_pylist() if e["status"] != 2]
    touched = {_bucket(k) for k in changed}
    # r1's files, r2's data and delete file of each bucket it touched
    assert len(live) == files.num_rows == BUCKETS + 2 * len(touched)
    by_content = {c: [f for f in files.to_pylist() if f["content"] == c] for c in (0, 1)}
    rows = sum(f["record_count"] for f in by_content[0]) - sum(f["record_count"] for f in by_content[1])
    assert rows == len(_scan(table)) == 30
    assert sum(p["record_count"] for p in partitions.to_pylist()) == 30 + 3
    assert sum(p["position_delete_record_count"] for p in partitions.to_pylist()) == 3
    assert {p["partition"]["id_bucket"]: p["position_delete_file_count"] for p in partitions.to_pylist()} == \
        {b: int(b in touched) for b in range(BUCKETS)}


def test_polars_native_reader_reads_a_table_with_deletes(spark, catalog):
    _publish(spark, catalog, "r1", _rows(range(30)))
    changed = {4, 7, 8}
    _publish(spark, catalog, "r2", _rows(changed, version=2), changed=changed)
    table = load_table(catalog, PIPELINE, TABLE_ID)
    read = polars.scan_iceberg(table, reader_override="native").select("id", "name", "amount").collect()
    expected = sorted(_rows(set(range(30)) - changed) + _rows(changed, version=2), key=lambda r: r["id"])
    assert sorted(read.to_dicts(), key=lambda r: r["id"]) == expected


def test_a_column_renamed_by_another_tool_keeps_its_old_name_as_an_alias(spark, catalog):
    _publish(spark, catalog, "r1", _rows(range(12)))
    table = load_table(catalog, PIPELINE, TABLE_ID)
    with table.update_schema() as update:
        update.rename_column("name", "full_name")
    renamed = {"id": "bigint", "full_name": "string", "amount": "decimal(10,2)"}
    changed = {3}
    rows = [{"id": 3, "full_name": "n3-v2", "amount": Decimal("3.02")}]
    _publish(spark, catalog, "r2", [{"name": r["full_name"], **r} for r in rows], renamed, changed=changed)

    table = load_table(catalog, PIPELINE, TABLE_ID)
    field = table.schema().find_field("full_name")
    assert [f.names for f in table.name_mapping() if f.field_id == field.field_id] == [["full_name", "name"]]
    expected = [{**{k: v for k, v in r.items() if k != "name"}, "full_name": r["name"]}
                for r in sorted(_rows(set(range(12)) - changed) + _rows(changed, version=2), key=lambda r: r["id"])]
    assert _scan(table, "full_name") == expected


def test_a_table_whose_mapping_was_rebuilt_gets_its_aliases_back_at_its_next_commit(spark, catalog):
    # a table as earlier versions left it: files without field ids, and after a rename by another tool,
    # the mapping rebuilt from the current schema by their next commit (the old name gone)
    spark.conf.set("spark.sql.parquet.fieldId.write.enabled", "false")
    try:
        _publish(spark, catalog, "r1", _rows(range(12)))
    finally:
        spark.conf.set("spark.sql.parquet.fieldId.write.enabled", "true")
    table = load_table(catalog, PIPELINE, TABLE_ID)
    assert all(b"PARQUET:field_id" not in (f.metadata or {})
               for t in table.scan().plan_files() for f in pq.read_schema(_local(t.file.file_path)))
    with table.update_schema() as update:
        update.rename_column("name", "full_name")
    with table.transaction() as txn:
        txn.set_properties(**{NAME_MAPPING_PROP: txn.table_metadata.schema().name_mapping.model_dump_json()})
    table = load_table(catalog, PIPELINE, TABLE_ID)
    with pytest.raises(ValueError, match="Could not find field with name: name"):
        table.scan().to_arrow()

    renamed = {"id": "bigint", "full_name": "string", "amount": "decimal(10,2)"}
    _publish(spark, catalog, "r2", [{**r, "full_name": r["name"]} for r in _rows([3], 2)], renamed, changed={3})
    table = load_table(catalog, PIPELINE, TABLE_ID)
    field = table.schema().find_field("full_name")
    assert [f.names for f in table.name_mapping() if f.field_id == field.field_id] == [["full_name", "name"]]
    assert name_mapping_with_aliases(table.metadata) == table.name_mapping()  # repaired once: nothing more to do
    expected = [{"id": r["id"], "full_name": r["name"], "amount": r["amount"]}
                for r in sorted(_rows(set(range(12)) - {3}) + _rows([3], 2), key=lambda r: r["id"])]
    assert _scan(table, "full_name") == expected


def test_aliases_from_the_schema_history_never_take_a_name_another_column_has(tmp_path: Path):
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    catalog = open_catalog(Lake.at(str(tmp_path / "lake")))
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", Schema(NestedField(1, "a", LongType()), NestedField(2, "b", StringType())))
    with table.update_schema() as update:
        update.rename_column("a", "x")
    with table.update_schema() as update:
        update.add_column("a", StringType())  # the old name, now another column's
    with table.update_schema() as update:
        update.rename_column("b", "y")
    mapping = name_mapping_with_aliases(table.metadata)  # no mapping property at all: the history alone
    assert [(f.field_id, f.names) for f in mapping] == [(1, ["x"]), (2, ["y", "b"]), (3, ["a"])]
    with table.transaction() as txn:
        txn.set_properties(**{NAME_MAPPING_PROP: mapping.model_dump_json()})
    assert name_mapping_with_aliases(table.refresh().metadata) == mapping
