"""pyiceberg's private internals behind jobs.iceberg.row_delta, each against a real SQL catalog's table
(no Spark): a pyiceberg upgrade that moves one of them fails here, by name, before any run does."""
from __future__ import annotations

from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent
from pyiceberg.schema import Schema
from pyiceberg.table.update import AddSnapshotUpdate, AssertCreate, AssertRefSnapshotId, AssertTableUUID
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType
from sqlalchemy import select
from sqlalchemy.orm import Session

from jobs.iceberg.row_delta import (
    DELETE_FILE_PATH_ID,
    DELETE_POS_ID,
    RowDelta,
    close_committed,
    data_files,
    delete_old_metadata,
    discard_staged,
    new_table_row,
    position_delete_file,
    referenced_data_file,
    sql_catalog_rows,
    stage_metadata,
    staged_commit,
    table_io,
    write_metadata,
)

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


@pytest.fixture()
def table(tmp_path: Path):
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("ns")
    return catalog.create_table("ns.t", SCHEMA, properties={"format-version": "2"})


def _data_file(table, name: str, ids: list[int]) -> str:
    path = f"{table.location()}/data/{name}.parquet"
    Path(path.removeprefix("file://")).parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([pa.field("id", pa.int64(), True, {"PARQUET:field_id": "1"}),
                        pa.field("name", pa.string(), True, {"PARQUET:field_id": "2"})])
    pq.write_table(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=schema), path.removeprefix("file://"))
    return path


def _position_deletes_file(table, name: str, data_paths: list[str], positions: list[int]) -> str:
    path = f"{table.location()}/deletes/{name}.parquet"
    Path(path.removeprefix("file://")).parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([pa.field("file_path", pa.string(), False, {"PARQUET:field_id": str(DELETE_FILE_PATH_ID)}),
                        pa.field("pos", pa.int64(), False, {"PARQUET:field_id": str(DELETE_POS_ID)})])
    pq.write_table(pa.table({"file_path": data_paths, "pos": positions}, schema=schema), path.removeprefix("file://"))
    return path


def _position_deletes(table, name: str, data_path: str, positions: list[int]) -> DataFile:
    path = _position_deletes_file(table, name, [data_path] * len(positions), positions)
    deletes = DataFile.from_args(content=DataFileContent.POSITION_DELETES, file_path=path,
                                 file_format=FileFormat.PARQUET, partition=Record(), record_count=len(positions),
                                 file_size_in_bytes=len(table.io.new_input(path)), sort_order_id=None,
                                 equality_ids=None, key_metadata=None)
    deletes.spec_id = table.metadata.default_spec_id
    return deletes


def _commit(table, add=(), remove=()):
    txn = table.transaction()
    with RowDelta(txn, {"cdc.test": "1"}) as delta:
        for f in add:
            delta.append_data_file(f)
        for f in remove:
            delta.delete_data_file(f)
    txn.commit_transaction()
    return table.refresh()


def _ids(table) -> list[int]:
    return sorted(table.scan().to_arrow()["id"].to_pylist())


def test_table_io_is_the_tables_own_file_io(table):
    txn = table.transaction()
    assert table_io(txn) is table.io


def test_data_files_reads_counts_and_bounds_of_a_file_written_outside_pyiceberg(table):
    path = _data_file(table, "a", [3, 1, 2])
    [found] = data_files(table.transaction(), [path])
    assert (found.file_path, found.content, found.record_count) == (path, DataFileContent.DATA, 3)
    assert found.file_size_in_bytes == len(table.io.new_input(path))
    assert found.lower_bounds[1] == (1).to_bytes(8, "little") and found.upper_bounds[1] == (3).to_bytes(8, "little")


def test_a_row_delta_commits_position_deletes_in_a_manifest_of_deletes(table):
    data_path = _data_file(table, "a", [1, 2, 3, 4, 5])
    table = _commit(table, add=data_files(table.transaction(), [data_path]))
    assert _ids(table) == [1, 2, 3, 4, 5]

    deletes = _position_deletes(table, "d", data_path, [1, 3])
    table = _commit(table, add=[deletes])
    assert _ids(table) == [1, 3, 5]  # rows at positions 1 and 3 are gone
    manifests = table.current_snapshot().manifests(table.io)
    by_content = {m.content: [e.data_file.file_path for e in m.fetch_manifest_entry(table.io)] for m in manifests}
    # readers take every file of a data manifest for data: the delete file must be in a manifest of deletes
    assert by_content == {ManifestContent.DATA: [data_path], ManifestContent.DELETES: [deletes.file_path]}
    summary = table.current_snapshot().summary
    assert summary["added-position-deletes"] == "2" and summary["cdc.test"] == "1"


def test_a_row_delta_removes_a_data_file_and_its_deletes_together(table):
    old_path = _data_file(table, "a", [1, 2, 3])
    table = _commit(table, add=data_files(table.transaction(), [old_path]))
    table = _commit(table, add=[_position_deletes(table, "d", old_path, [0])])
    # what a rewrite removes, as the table's scan gives it
    [task] = table.scan().plan_files()
    assert [d.file_path for d in task.delete_files] == [f"{table.location()}/deletes/d.parquet"]
    new_path = _data_file(table, "b", [2, 3, 9])
    table = _commit(table, add=data_files(table.transaction(), [new_path]), remove=[task.file, *task.delete_files])
    assert _ids(table) == [2, 3, 9]
    live = [e.data_file.file_path for m in table.current_snapshot().manifests(table.io)
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True)]
    assert live == [new_path]


def test_a_delete_file_of_one_data_file_gets_the_metrics_iceberg_java_writes(table):
    data_path = _data_file(table, "a", [1, 2, 3, 4, 5])
    table = _commit(table, add=data_files(table.transaction(), [data_path]))
    [task] = table.scan().plan_files()
    path = _position_deletes_file(table, "d", [data_path] * 2, [3, 1])
    deletes = position_delete_file(table.transaction(), path, task.file)
    assert (deletes.content, deletes.record_count, deletes.spec_id) == (DataFileContent.POSITION_DELETES, 2, 0)
    assert deletes.file_size_in_bytes == len(table.io.new_input(path)) and deletes.partition == task.file.partition
    assert deletes.lower_bounds == {DELETE_FILE_PATH_ID: data_path.encode(), DELETE_POS_ID: (1).to_bytes(8, "little")}
    assert deletes.upper_bounds == {DELETE_FILE_PATH_ID: data_path.encode(), DELETE_POS_ID: (3).to_bytes(8, "little")}
    assert set(deletes.column_sizes) == {DELETE_FILE_PATH_ID, DELETE_POS_ID}
    assert not deletes.value_counts and not deletes.null_value_counts and not deletes.nan_value_counts
    assert referenced_data_file(deletes) == data_path and referenced_data_file(task.file) is None

    # the manifest of deletes carries referenced_data_file (field 143), which pyiceberg's v2 reader skips
    table = _commit(table, add=[deletes])
    assert _ids(table) == [1, 3, 5]
    [manifest] = [m for m in table.current_snapshot().manifests(table.io) if m.content == ManifestContent.DELETES]
    with open(manifest.manifest_path.removeprefix("file://"), "rb") as stream:
        [entry] = list(fastavro.reader(stream))
    assert entry["data_file"]["referenced_data_file"] == data_path
    assert [e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io)] == [path]

    # deletes of two data files are not one data file's
    other = _position_deletes_file(table, "e", [data_path, data_path + "x"], [0, 0])
    with pytest.raises(ValueError, match="not the deletes of .*a.parquet only"):
        position_delete_file(table.transaction(), other, task.file)


# ---- the parts of a commit jobs.iceberg.commit puts several tables' in one database transaction ----
def _rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def _metadata_folder(table) -> set[str]:
    return {p.name for p in Path(table.location().removeprefix("file://"), "metadata").iterdir()}


def test_staged_commit_is_what_commit_transaction_would_send(table):
    txn = table.transaction()
    txn.append(_rows(1))
    identifier, requirements, updates = staged_commit(txn)
    assert identifier == ("ns", "t")
    assert any(isinstance(r, AssertRefSnapshotId) and r.ref == "main" for r in requirements)
    assert requirements[-1] == AssertTableUUID(uuid=table.metadata.table_uuid)
    assert any(isinstance(u, AddSnapshotUpdate) for u in updates)
    create = table.catalog.create_table_transaction(("ns", "new"), SCHEMA)
    assert staged_commit(create)[:2] == (("ns", "new"), (AssertCreate(),)) and staged_commit(create)[2]


def test_stage_metadata_validates_and_write_metadata_writes_the_next_file(table):
    txn = table.transaction()
    txn.set_properties(k="v")
    identifier, requirements, updates = staged_commit(txn)
    staged = stage_metadata(table.catalog, table, identifier, requirements, updates)
    assert staged.metadata.properties["k"] == "v" and "/metadata/00001-" in staged.metadata_location
    path = Path(staged.metadata_location.removeprefix("file://"))
    assert not path.exists()
    write_metadata(staged)
    assert path.exists() and table.catalog.load_table("ns.t").metadata_location == table.metadata_location
    with pytest.raises(CommitFailedException, match="current table metadata is missing"):
        stage_metadata(table.catalog, None, identifier, requirements, updates)


def test_sql_catalog_rows_are_the_pointers_a_commit_swaps(table):
    engine, rows = sql_catalog_rows(table.catalog)
    with Session(engine) as session:
        row = session.execute(select(rows).where(rows.table_name == "t")).scalar_one()
    assert (row.catalog_name, row.table_namespace, row.metadata_location) == ("t", "ns", table.metadata_location)
    assert hasattr(rows, "previous_metadata_location")
    new = new_table_row(table.catalog, "ns", "u", "file:///m.json")
    assert {k: new[k] for k in ("catalog_name", "table_namespace", "table_name", "metadata_location")} == \
        {"catalog_name": "t", "table_namespace": "ns", "table_name": "u", "metadata_location": "file:///m.json"}


def test_discard_staged_deletes_its_manifests_and_close_committed_spends_it(table):
    before = _metadata_folder(table)
    txn = table.transaction()
    txn.append(_rows(1))
    assert _metadata_folder(table) > before  # its manifest and manifest list
    discard_staged(txn)
    assert _metadata_folder(table) == before
    with pytest.raises(RuntimeError, match="cannot be reused"):
        txn.commit_transaction()

    txn = table.transaction()
    txn.append(_rows(2))
    table.catalog.commit_table(table, *staged_commit(txn)[1:])  # as commit_tables' swap lands it
    close_committed(txn)
    landed = table.catalog.load_table("ns.t")
    txn.commit_transaction()  # commits nothing
    assert table.catalog.load_table("ns.t").metadata_location == landed.metadata_location
    assert _ids(landed) == [2]


def test_delete_old_metadata_keeps_the_last_versions_only(tmp_path: Path):
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", SCHEMA, properties={"write.metadata.delete-after-commit.enabled": "true",
                                                              "write.metadata.previous-versions-max": "1"})
    first = table.metadata_location
    table.transaction().set_properties(a="1").commit_transaction()  # 00001, its log: 00000
    txn = table.transaction()
    txn.set_properties(a="2")
    staged = stage_metadata(catalog, table, *staged_commit(txn))
    write_metadata(staged)
    assert Path(first.removeprefix("file://")).exists()
    delete_old_metadata(staged, table.metadata)  # the staged 00002's log: 00001 only
    assert not Path(first.removeprefix("file://")).exists()
    assert Path(table.metadata_location.removeprefix("file://")).exists()


def test_no_other_module_reaches_into_pyiceberg_internals():
    import re

    import jobs

    private = re.compile(r"from pyiceberg[\w.]* import[^\n]*\b_[A-Za-z]\w*|\._table\b\.io|\btxn\._")
    package = Path(jobs.__file__).parent
    reaching = sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py")
                      if private.search(p.read_text(encoding="utf-8")))
    assert reaching == ["iceberg/row_delta.py"]
