"""pyiceberg's private internals behind jobs.iceberg.row_delta, each against a real SQL catalog's table
(no Spark): a pyiceberg upgrade that moves one of them fails here, by name, before any run does. RowDelta's
manifest merging and snapshot operations too, many small commits checked against a model of the table."""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestEntryStatus
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
    data_file,
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


def data_files(transaction, paths: list[str]) -> list:
    """data_file of each file, in the identity partition its one ``name`` gives (where the default spec has one)."""
    partitioned = bool(transaction.table_metadata.spec().fields)
    return [data_file(transaction, path, tuple(pq.read_table(urlparse(path).path, columns=["name"])["name"]
                                               .unique().to_pylist()[:1]) if partitioned else ())
            for path in paths]


@pytest.fixture()
def catalog(tmp_path: Path):
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("ns")
    return catalog


@pytest.fixture()
def table(catalog):
    return catalog.create_table("ns.t", SCHEMA, properties={"format-version": "2"})


def _data_file(table, name: str, ids: list[int], group: str | None = None) -> str:
    """A data file of rows ``ids``, each named n<id>, or all ``group`` (one identity partition's file)."""
    path = f"{table.location()}/data/{name}.parquet"
    Path(path.removeprefix("file://")).parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([pa.field("id", pa.int64(), True, {"PARQUET:field_id": "1"}),
                        pa.field("name", pa.string(), True, {"PARQUET:field_id": "2"})])
    names = [group or f"n{i}" for i in ids]
    pq.write_table(pa.table({"id": ids, "name": names}, schema=schema), path.removeprefix("file://"))
    return path


def _position_deletes_file(table, name: str, data_paths: list[str], positions: list[int]) -> str:
    path = f"{table.location()}/deletes/{name}.parquet"
    Path(path.removeprefix("file://")).parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([pa.field("file_path", pa.string(), False, {"PARQUET:field_id": str(DELETE_FILE_PATH_ID)}),
                        pa.field("pos", pa.int64(), False, {"PARQUET:field_id": str(DELETE_POS_ID)})])
    pq.write_table(pa.table({"file_path": data_paths, "pos": positions}, schema=schema), path.removeprefix("file://"))
    return path


def _position_deletes(table, name: str, data_path: str, positions: list[int], of: DataFile | None = None) -> DataFile:
    """A delete file without metrics (it deletes from every data file of its partition as old as it or
    older; pyiceberg's inspect.entries needs column_sizes, if empty): in the partition and spec of data file
    ``of``, else of the unpartitioned default spec."""
    path = _position_deletes_file(table, name, [data_path] * len(positions), positions)
    deletes = DataFile.from_args(content=DataFileContent.POSITION_DELETES, file_path=path,
                                 file_format=FileFormat.PARQUET, partition=of.partition if of else Record(),
                                 record_count=len(positions), file_size_in_bytes=len(table.io.new_input(path)),
                                 column_sizes={}, sort_order_id=None, equality_ids=None, key_metadata=None)
    deletes.spec_id = of.spec_id if of else table.metadata.default_spec_id
    return deletes


def _commit(table, add=(), remove=(), summary=None):
    txn = table.transaction()
    with RowDelta(txn, summary or {"cdc.test": "1"}) as delta:
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


# -- manifest merging (Iceberg Java's rules, the table's commit.manifest* properties) -------------------------------

MIN_COUNT = 4
TOTALS = ("total-data-files", "total-delete-files", "total-records", "total-position-deletes")


def _merging_table(catalog, name: str, **properties: str):
    return catalog.create_table(f"ns.{name}", SCHEMA, properties={
        "format-version": "2", "commit.manifest.min-count-to-merge": str(MIN_COUNT), **properties})


def _live_files(table) -> dict[str, DataFile]:
    """The current snapshot's live files, data and deletes, by path (as a rewrite finds what it removes)."""
    snapshot = table.current_snapshot()
    return {e.data_file.file_path: e.data_file for m in (snapshot.manifests(table.io) if snapshot else [])
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True)}


def test_manifests_merge_once_min_count_is_reached_keeping_each_entrys_snapshot_and_sequence_numbers(catalog):
    # no commit.manifest-merge.enabled: merging is on, as Iceberg Java's default (pyiceberg's is off)
    table = catalog.create_table("ns.m", SCHEMA, properties={"format-version": "2",
                                                              "commit.manifest.min-count-to-merge": "3"})
    paths, snapshots, counts = [], [], []
    for n in range(3):
        paths.append(_data_file(table, f"a{n}", [n]))
        table = _commit(table, add=data_files(table.transaction(), paths[-1:]))
        snapshots.append(table.current_snapshot().snapshot_id)
        counts.append(len(table.current_snapshot().manifests(table.io)))
    # the new files' manifest is merged with the others once the bin holding it has 3 manifests
    assert counts == [1, 2, 1]
    [manifest] = table.current_snapshot().manifests(table.io)
    assert (manifest.added_files_count, manifest.existing_files_count, manifest.deleted_files_count) == (1, 2, 0)
    entries = {e.data_file.file_path: (e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number)
               for e in manifest.fetch_manifest_entry(table.io)}
    assert entries == {paths[0]: (ManifestEntryStatus.EXISTING, snapshots[0], 1, 1),
                       paths[1]: (ManifestEntryStatus.EXISTING, snapshots[1], 2, 2),
                       paths[2]: (ManifestEntryStatus.ADDED, snapshots[2], 3, 3)}
    assert manifest.min_sequence_number == 1 and manifest.sequence_number == 3
    assert _ids(table) == [0, 1, 2]
    # three appends: an incremental reader finds what each added, in the manifests each wrote
    assert [s.summary.operation.value for s in table.snapshots()] == ["append"] * 3
    scan = table.incremental_append_scan(from_snapshot_id_exclusive=snapshots[0])
    assert sorted(scan.to_arrow()["id"].to_pylist()) == [1, 2]


def test_a_merge_keeps_this_commits_removals_and_drops_earlier_ones(catalog):
    table = catalog.create_table("ns.m", SCHEMA, properties={"format-version": "2",
                                                              "commit.manifest.min-count-to-merge": "3"})
    a, b, c, d, e = (data_files(table.transaction(), [_data_file(table, name, [n])])[0] for n, name in enumerate("abcde"))

    def entries():
        [manifest] = table.current_snapshot().manifests(table.io)
        return manifest, {entry.data_file.file_path[-9:]: (entry.status, entry.snapshot_id)
                          for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False)}

    table = _commit(_commit(table, add=[a]), add=[b])
    second = table.current_snapshot().snapshot_id
    # the new file's manifest, the removed one's and the other file's: three, merged into one
    table = _commit(table, add=[c], remove=[_live_files(table)[a.file_path]])
    rewrite = table.current_snapshot().snapshot_id
    manifest, found = entries()
    assert found == {"a.parquet": (ManifestEntryStatus.DELETED, rewrite), "b.parquet": (ManifestEntryStatus.EXISTING, second),
                     "c.parquet": (ManifestEntryStatus.ADDED, rewrite)}
    assert (manifest.added_files_count, manifest.existing_files_count, manifest.deleted_files_count) == (1, 1, 1)
    table = _commit(table, add=[d])  # two manifests: not merged, the removal of a still listed where it was
    assert len(table.current_snapshot().manifests(table.io)) == 2
    table = _commit(table, add=[e])
    manifest, found = entries()
    # merged again: the removal of a, an earlier commit's, is gone
    assert set(found) == {"b.parquet", "c.parquet", "d.parquet", "e.parquet"} and manifest.deleted_files_count == 0
    assert found["b.parquet"] == (ManifestEntryStatus.EXISTING, second)
    assert found["c.parquet"] == (ManifestEntryStatus.EXISTING, rewrite)
    assert _ids(table) == [1, 2, 3, 4]


@pytest.mark.parametrize("properties", [{"commit.manifest-merge.enabled": "false"},
                                        {"commit.manifest.target-size-bytes": "1"}],  # every manifest a bin of its own
                         ids=["disabled", "tiny-target-size"])
def test_no_manifest_is_merged_when_the_tables_properties_say_so(catalog, properties):
    table = _merging_table(catalog, "p", **properties)
    for n in range(MIN_COUNT + 2):
        table = _commit(table, add=data_files(table.transaction(), [_data_file(table, f"a{n}", [n])]))
    assert len(table.current_snapshot().manifests(table.io)) == MIN_COUNT + 2


def test_the_operation_is_iceberg_javas_row_delta_s_and_the_totals_count_the_live_files(table):
    def commit(add=(), remove=()):
        nonlocal table
        table = _commit(table, add=add, remove=remove)
        summary = table.current_snapshot().summary
        return summary.operation.value, {k: int(summary[k]) for k in TOTALS}

    first = data_files(table.transaction(), [_data_file(table, "a", [1, 2, 3])])
    assert commit(add=first) == ("append", dict(zip(TOTALS, (1, 0, 3, 0))))
    second = data_files(table.transaction(), [_data_file(table, "b", [4, 5])])
    assert commit(add=second) == ("append", dict(zip(TOTALS, (2, 0, 5, 0))))  # pyiceberg's overwrite: "overwrite"
    deletes = _position_deletes(table, "d", first[0].file_path, [0])
    assert commit(add=[deletes]) == ("delete", dict(zip(TOTALS, (2, 1, 5, 1))))
    more = data_files(table.transaction(), [_data_file(table, "c", [6])])
    more_deletes = _position_deletes(table, "e", second[0].file_path, [1])
    assert commit(add=[*more, more_deletes]) == ("overwrite", dict(zip(TOTALS, (3, 2, 6, 2))))
    assert _ids(table) == [2, 3, 4, 6]
    # a rewrite without any delete file: what pyiceberg's overwrite did, in the operation Iceberg Java names
    live = _live_files(table)
    rewritten = data_files(table.transaction(), [_data_file(table, "f", [6, 7])])
    assert commit(add=rewritten, remove=[live[more[0].file_path]]) == ("overwrite", dict(zip(TOTALS, (3, 2, 7, 2))))
    # a rewrite of a file with its deletes, then a removal only
    live = _live_files(table)
    rewritten = data_files(table.transaction(), [_data_file(table, "g", [2, 3])])
    assert commit(add=rewritten, remove=[live[first[0].file_path], live[deletes.file_path]]) == (
        "overwrite", dict(zip(TOTALS, (3, 1, 6, 1))))
    live = _live_files(table)
    assert commit(remove=[live[second[0].file_path], live[more_deletes.file_path]]) == (
        "overwrite", dict(zip(TOTALS, (2, 0, 4, 0))))
    assert _ids(table) == [2, 3, 6, 7]
    assert commit() == ("overwrite", dict(zip(TOTALS, (2, 0, 4, 0))))  # nothing at all
    assert table.current_snapshot().summary["cdc.test"] == "1"


@dataclass
class _File:
    """A live file of the model: the commit that added it, and its rows (data) or what it deletes."""

    seq: int
    snapshot_id: int
    partition: tuple  # its spec id and partition values
    ids: list[int] = field(default_factory=list)  # a data file's rows by position
    group: str = ""  # a data file's rows' name
    target: str = ""  # a delete file's data file
    positions: frozenset[int] = frozenset()
    scoped: bool = False  # its file_path bounds name its data file; else it is the partition's, by sequence number


class _Model:
    """What the table must hold, kept apart from it: every live file with the sequence number and snapshot of the
    commit that added it; a position delete applies to the data files of its partition as old as it or older,
    to its own data file only when its bounds say so (Iceberg's spec, "Scan Planning")."""

    def __init__(self):
        self.data: dict[str, _File] = {}
        self.deletes: dict[str, _File] = {}

    def deleted(self, path: str) -> set[int]:
        return {p for d in self.deletes.values() if d.target == path for p in d.positions}

    def rows(self) -> list[tuple[int, str]]:
        return sorted((i, f.group) for path, f in self.data.items()
                      for pos, i in enumerate(f.ids) if pos not in self.deleted(path))

    def attached(self, path: str) -> set[str]:
        data = self.data[path]
        return {d_path for d_path, d in self.deletes.items() if d.seq >= data.seq
                and (d.target == path if d.scoped else d.partition == data.partition)}

    def operation(self, add: list[DataFile], remove: list[DataFile]) -> str:
        adds_data = any(f.content == DataFileContent.DATA for f in add)
        adds_deletes = any(f.content != DataFileContent.DATA for f in add)
        if adds_data and not adds_deletes and not any(f.content == DataFileContent.DATA for f in remove):
            return "append"
        return "delete" if adds_deletes and not adds_data else "overwrite"


def _check(table, model: _Model, operation: str, removed: set[str]) -> None:
    snapshot = table.current_snapshot()
    assert sorted(zip(*table.scan().to_arrow().select(["id", "name"]).to_pydict().values())) == model.rows()
    # each delete file still applies to the data files its sequence number says, and to those only
    tasks = {t.file.file_path: {d.file_path for d in t.delete_files} for t in table.scan().plan_files()}
    assert tasks == {path: model.attached(path) for path in model.data}
    # every live entry keeps the snapshot and sequence numbers of the commit that added it; the files removed are
    # listed by this commit (a kept manifest may still list files an earlier commit removed, as in Iceberg Java)
    entries = table.inspect.entries().to_pylist()
    live = {e["data_file"]["file_path"]: (e["data_file"]["content"], e["snapshot_id"], e["sequence_number"],
                                          e["file_sequence_number"]) for e in entries if e["status"] != 2}
    assert live == {path: (content, f.snapshot_id, f.seq, f.seq)
                    for content, files in ((0, model.data), (1, model.deletes)) for path, f in files.items()}
    gone = [(e["data_file"]["file_path"], e["snapshot_id"]) for e in entries if e["status"] == 2]
    assert {path for path, snapshot_id in gone if snapshot_id == snapshot.snapshot_id} == removed
    assert not {path for path, _ in gone} & set(live) and len(gone) == len(set(gone))
    manifests = table.inspect.manifests().to_pylist()
    assert len(manifests) == len(snapshot.manifests(table.io))
    assert sum(m["added_data_files_count"] + m["existing_data_files_count"] for m in manifests) == len(model.data)
    assert sum(m["added_delete_files_count"] + m["existing_delete_files_count"] for m in manifests) == len(model.deletes)
    summary = snapshot.summary
    assert summary.operation.value == operation
    assert {k: int(summary[k]) for k in TOTALS} == {
        "total-data-files": len(model.data), "total-delete-files": len(model.deletes),
        "total-records": sum(len(f.ids) for f in model.data.values()),
        "total-position-deletes": sum(len(d.positions) for d in model.deletes.values())}


def _workload(table, commits: int, evolve_at: int, check_each: bool = True, seed: int = 46) -> tuple[list[int], set]:
    """``commits`` small commits through RowDelta, drawn at random: appends, position deletes (with bounds
    or partition-wide), both at once, rewrites of a data file without its deleted rows (removing it and its
    delete files); at ``evolve_at`` the spec gains identity(name). Each commit (or the last) checked against
    the model; the number of manifests in the current snapshot after each, and what the commits did."""
    rng = random.Random(seed)
    model, ids, counts, seen = _Model(), itertools.count(), [], set()
    for n in range(commits):
        if n == evolve_at:
            with table.update_spec() as update:
                update.add_identity("name")
            table = table.refresh()
        live, spec = _live_files(table), table.metadata.default_spec_id  # data_files gives no spec id: the default's
        kind = rng.choice(["append", "delete", "append+delete", "rewrite"]) if model.data else "append"
        add, remove, new_data, new_deletes = [], [], {}, {}
        if kind in ("append", "append+delete"):
            group = rng.choice(["g0", "g1"])
            rows = [next(ids) for _ in range(rng.randint(2, 4))]
            [data] = data_files(table.transaction(), [_data_file(table, f"c{n}", rows, group)])
            add.append(data)
            new_data[data.file_path] = _File(0, 0, (spec, tuple(data.partition)), rows, group)
        victims = [p for p, f in model.data.items() if len(model.deleted(p)) < len(f.ids)]
        if kind in ("delete", "append+delete") and victims:
            victim = rng.choice(sorted(victims))
            alive = sorted(set(range(len(model.data[victim].ids))) - model.deleted(victim))
            positions = rng.sample(alive, k=min(len(alive), rng.randint(1, 2)))
            scoped = rng.random() < 0.5
            if scoped:
                path = _position_deletes_file(table, f"d{n}", [victim] * len(positions), positions)
                deletes = position_delete_file(table.transaction(), path, live[victim])
            else:
                deletes = _position_deletes(table, f"d{n}", victim, positions, of=live[victim])
            add.append(deletes)
            new_deletes[deletes.file_path] = _File(0, 0, (deletes.spec_id, tuple(deletes.partition)),
                                                   target=victim, positions=frozenset(positions), scoped=scoped)
            seen |= {"deletes with bounds" if scoped else "partition-wide deletes",
                     *(["deletes of an older spec's file"] if deletes.spec_id != spec else [])}
        if kind == "rewrite":
            victim = rng.choice(sorted(model.data))
            old = model.data[victim]
            rows = [i for pos, i in enumerate(old.ids) if pos not in model.deleted(victim)] + [next(ids)]
            [data] = data_files(table.transaction(), [_data_file(table, f"c{n}", rows, old.group)])
            add.append(data)
            new_data[data.file_path] = _File(0, 0, (spec, tuple(data.partition)), rows, old.group)
            remove = [live[victim]] + [live[p] for p, d in model.deletes.items() if d.target == victim]
            seen.add("rewrite with deletes" if remove[1:] else "rewrite without deletes")
        operation = model.operation(add, remove)
        seen.add(operation)
        table = _commit(table, add=add, remove=remove, summary={"cdc.run-id": f"run{n}"})
        snapshot = table.current_snapshot()
        for f in remove:
            del (model.data if f.content == DataFileContent.DATA else model.deletes)[f.file_path]
        for files, new in ((model.data, new_data), (model.deletes, new_deletes)):
            for path, f in new.items():
                f.seq, f.snapshot_id = snapshot.sequence_number, snapshot.snapshot_id
                files[path] = f
        if check_each or n == commits - 1:
            _check(table, model, operation, {f.file_path for f in remove})
        assert snapshot.summary["cdc.run-id"] == f"run{n}"
        counts.append(len(snapshot.manifests(table.io)))
    return counts, seen


def test_manifests_stay_bounded_as_commits_accumulate_and_the_rows_stay_exact(catalog):
    merged, seen = _workload(_merging_table(catalog, "merged", **{"commit.manifest-merge.enabled": "true"}),
                             commits=24, evolve_at=12)
    assert seen == {"append", "delete", "overwrite", "deletes with bounds", "partition-wide deletes",
                    "deletes of an older spec's file", "rewrite with deletes", "rewrite without deletes"}
    # per content: the bin of this commit's new manifests, merged once it holds MIN_COUNT, and the other spec's
    assert max(merged) <= 2 * (MIN_COUNT - 1 + 1), merged
    # the same commits without merging: manifests accumulate (only the files' removals ever drop one)
    unmerged, _ = _workload(_merging_table(catalog, "unmerged", **{"commit.manifest-merge.enabled": "false"}),
                            commits=24, evolve_at=12, check_each=False)
    assert unmerged[-1] > 2 * max(merged) and max(unmerged) > 2 * MIN_COUNT, (merged, unmerged)


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
