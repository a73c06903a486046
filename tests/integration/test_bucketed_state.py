"""State tables in key-hash buckets: a run rewrites only the buckets its changes touch (copy-on-write),
or none of them (merge-on-read: its changed rows appended, the rows they replace deleted by position),
and the state stays equal to an independent replay (the simulator's SQLite), read by pyiceberg's own
scan; replacing runs and tables of the earlier, unbucketed layout rewrite everything."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlparse

import pyarrow.parquet as pq
import pytest

from jobs.demo.simulator import SourceSimulator
from jobs.iceberg import write as iceberg_write
from jobs.iceberg.catalog import open_catalog
from jobs.iceberg.expire import expire_table
from jobs.iceberg.layout import is_bucketed
from jobs.iceberg.read import read_state
from jobs.iceberg.write import CODEC_PROP
from jobs.model.properties import BUCKETS_PROP
from tests.support.bucketed import BUCKETS, TABLE, Runs, loaded


def _bucket_files(table) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for task in table.scan().plan_files():
        out.setdefault(task.file.partition[0], set()).add(task.file.file_path)
    return out


def test_a_run_rewrites_only_the_buckets_it_touches(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(iceberg_write, "DELTAS", False)  # copy-on-write
    sim = SourceSimulator(5, [TABLE], "postgresql", n_partitions=2)
    sim.populate("accounts", 400)
    sim.snapshot()
    runs = Runs(spark, tmp_path, sim)
    first = runs.run("r1")
    assert first["buckets"] == BUCKETS and first["buckets_rewritten"] == BUCKETS
    table = runs.table()
    # Iceberg's own bucket transform on the key, the key required and the table's identifier field, sorted by it
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("id_bucket", f"bucket[{BUCKETS}]")]
    assert table.schema().identifier_field_names() == {"id"} and table.schema().find_field("id").required
    assert [table.schema().find_column_name(f.source_id) for f in table.sort_order().fields] == ["id"]
    assert [s.spec_id for s in table.specs().values()] == [0]  # no leftover spec
    files_before = _bucket_files(table)
    assert len(files_before) == BUCKETS and all(len(f) == 1 for f in files_before.values())  # one file per bucket
    assert runs.rows() == runs.expected()

    # two keys change: at most two buckets are rewritten, every other file stays in the new snapshot
    sim.update("accounts", {"id": 7}, {"owner": "changed"})
    sim.delete("accounts", {"id": 300})
    second = runs.run("r2")
    assert 1 <= second["buckets_rewritten"] <= 2
    assert second["files_removed"] == second["buckets_rewritten"]
    total_bytes = first["bytes_added"]
    assert second["bytes_removed"] < total_bytes * 3 / BUCKETS
    files_after = _bucket_files(runs.table())
    kept = [b for b in files_before if files_after.get(b) == files_before[b]]
    assert len(kept) == BUCKETS - second["buckets_rewritten"]
    assert runs.rows() == runs.expected()
    assert second["state_rows"] == len(runs.expected())

    # many random changes over runs: still the replay's state, key unique across buckets
    for i in range(3):
        sim.random_ops(40)
        report = runs.run(f"r{3 + i}")
        assert report["buckets_rewritten"] <= BUCKETS
        assert runs.rows() == runs.expected()
    ids = [r["id"] for r in runs.rows()]
    assert len(ids) == len(set(ids))

    # a re-run of a published run changes nothing; an existing table keeps its bucket count
    assert runs.table().properties[BUCKETS_PROP] == str(BUCKETS)
    sim.update("accounts", {"id": 8}, {"owner": "again"})
    report = runs.run("r6", buckets=4)
    assert report["buckets"] == BUCKETS and report["buckets_rewritten"] == 1
    assert runs.rows() == runs.expected()


def _delete_files(table) -> dict[str, object]:
    return {d.file_path: d for task in table.scan().plan_files() for d in task.delete_files}


def _spark_rows(spark, table) -> list[dict]:
    state = read_state(spark, table).select("id", "owner", "balance")
    return sorted((r.asDict() for r in state.toLocalIterator()), key=lambda r: r["id"])


def test_a_small_run_deletes_by_position_and_rewrites_nothing(spark, tmp_path, monkeypatch):
    sim = SourceSimulator(8, [TABLE], "postgresql", n_partitions=2)
    sim.populate("accounts", 400)
    sim.snapshot()
    runs = Runs(spark, tmp_path, sim)
    assert runs.run("r1")["mode"] == "rewrite"  # a new table is written whole
    files_before = _bucket_files(runs.table())

    # one update, one delete, one insert: the two replaced rows are deleted by position, the changed
    # rows appended; every file of the first run stays
    sim.update("accounts", {"id": 7}, {"owner": "changed"})
    sim.delete("accounts", {"id": 300})
    sim.insert("accounts")
    second = runs.run("r2")
    assert second["mode"] == "delta" and second["buckets_rewritten"] == 0
    assert second["files_removed"] == 0 and second["bytes_removed"] == 0
    assert second["position_deletes"] == 2
    assert 1 <= second["delete_files_added"] <= 2
    table = runs.table()
    files_after = _bucket_files(table)
    assert all(files_before[b] <= files_after[b] for b in files_before)
    assert second["bytes_added"] < sum(f.file_size_in_bytes for f in _delete_files(table).values()) + 3 * 4096
    # the delete files as the spec has them: the reserved field ids, each row naming a data file of
    # the table by its path, sorted by (file_path, pos)
    data_paths = {p for paths in files_after.values() for p in paths}
    for path in _delete_files(table):
        schema = pq.read_schema(urlparse(path).path)
        assert {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in schema} == {
            "file_path": 2147483546, "pos": 2147483545}
        rows = pq.read_table(urlparse(path).path).to_pylist()
        assert {r["file_path"] for r in rows} <= data_paths
        assert rows == sorted(rows, key=lambda r: (r["file_path"], r["pos"]))
    assert runs.rows() == runs.expected()  # pyiceberg's scan applies the position deletes
    assert _spark_rows(spark, table) == runs.expected()  # and so does the pipeline's own reader
    assert second["state_rows"] == len(runs.expected())

    # a re-run of the published run changes nothing
    again = runs.run("r2")
    assert again["already_published"] and again["state_rows"] == len(runs.expected())
    assert _bucket_files(runs.table()) == files_after

    # runs of random changes: once a bucket holds too many files the touched buckets are rewritten
    # whole, which drops their delete files; the state is the replay's after every run
    monkeypatch.setattr(iceberg_write, "MAX_FILES_PER_BUCKET", 3)
    modes = []
    for i in range(4):
        sim.random_ops(60)
        report = runs.run(f"r{3 + i}")
        modes.append(report["mode"])
        assert runs.rows() == runs.expected()
        assert _spark_rows(spark, runs.table()) == runs.expected()
        assert report["state_rows"] == len(runs.expected())
        if report["mode"] == "rewrite":
            # each rewritten bucket: one file of this run, no delete file left
            table = runs.table()
            fresh = [b for b, f in _bucket_files(table).items() if all(f"/run=r{3 + i}/" in p for p in f)]
            assert len(fresh) == report["buckets_rewritten"] > 0
            assert all(len(_bucket_files(table)[b]) == 1 for b in fresh)
            assert not [d for d in _delete_files(table).values() if d.partition[0] in fresh]
            assert report["delete_files_removed"] > 0
    assert "delta" in modes and "rewrite" in modes
    ids = [r["id"] for r in runs.rows()]
    assert len(ids) == len(set(ids))


def test_deltas_stop_at_the_deleted_share(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(iceberg_write, "MAX_DELETED_SHARE", 0.05)
    sim = SourceSimulator(9, [TABLE], "postgresql", n_partitions=1)
    sim.populate("accounts", 200)
    sim.snapshot()
    runs = Runs(spark, tmp_path, sim)
    runs.run("r1", buckets=1)  # one bucket: the share is of the whole table, 10 rows of 200

    def update(ids: range) -> None:
        for i in ids:
            sim.update("accounts", {"id": i}, {"owner": f"o{i}"})

    update(range(1, 5))
    assert runs.run("r2")["mode"] == "delta"  # 4 rows deleted of 200
    update(range(20, 27))
    third = runs.run("r3")  # 4 deleted + 7 more would pass 10: the bucket is rewritten
    assert third["mode"] == "rewrite" and third["delete_files_removed"] == 1 and third["files_removed"] == 2
    assert not _delete_files(runs.table()) and len(_bucket_files(runs.table())[0]) == 1
    update(range(30, 32))
    assert runs.run("r4")["mode"] == "delta"
    assert runs.rows() == runs.expected()
    assert _spark_rows(spark, runs.table()) == runs.expected()


def test_truncate_rewrites_every_bucket(spark, tmp_path):
    sim = SourceSimulator(6, [TABLE], "postgresql", n_partitions=1)
    sim.populate("accounts", 100)
    sim.snapshot()
    runs = Runs(spark, tmp_path, sim)
    runs.run("r1")
    sim.truncate("accounts")
    sim.insert("accounts")
    report = runs.run("r2")
    assert report["buckets_rewritten"] == BUCKETS
    assert runs.rows() == runs.expected()
    assert len(runs.rows()) == 1


def test_a_table_of_the_earlier_layout_is_bucketed_by_its_next_run(spark, tmp_path):
    sim = SourceSimulator(7, [TABLE], "postgresql", n_partitions=1)
    sim.populate("accounts", 100)
    sim.snapshot()
    runs = Runs(spark, tmp_path, sim)
    runs.run("r1", buckets=0)  # the layout of earlier versions: one unpartitioned file set
    table = runs.table()
    assert not is_bucketed(table) and table.spec().fields == ()

    # kept unbucketed, a run of one changed key rewrites the table whole (never by position deletes)
    old_files = {t.file.file_path for t in table.scan().plan_files()}
    sim.update("accounts", {"id": 2}, {"owner": "w"})
    report = runs.run("r1b", buckets=0)
    table = runs.table()
    assert not is_bucketed(table)
    assert report["mode"] == "rewrite" and report["position_deletes"] == 0
    assert report["files_removed"] == len(old_files)
    assert not old_files & {t.file.file_path for t in table.scan().plan_files()}  # all replaced
    assert runs.rows() == runs.expected()
    old_files = {t.file.file_path for t in table.scan().plan_files()}

    sim.update("accounts", {"id": 3}, {"owner": "x"})
    report = runs.run("r2")
    table = runs.table()
    assert is_bucketed(table)
    assert report["buckets_rewritten"] == BUCKETS
    assert not old_files & {t.file.file_path for t in table.scan().plan_files()}  # all replaced
    assert runs.rows() == runs.expected()

    sim.update("accounts", {"id": 4}, {"owner": "y"})
    r3 = runs.run("r3")  # by position deletes or one bucket rewritten, as the bucket's share of deletes says
    assert r3["buckets_rewritten"] == (0 if r3["mode"] == "delta" else 1) and r3["files_removed"] <= 1
    assert runs.rows() == runs.expected()


def _as_earlier_layout(runs: Runs) -> set[str]:
    """The published table made again as earlier versions laid it out: a ``_cdc_bucket`` column of a key hash,
    an empty spec 0 and a spec 1 identity-partitioned by it, no identifier field; its data files' paths."""
    import pyarrow as pa
    import pyarrow.compute as pc

    old = runs.table()
    rows = old.scan().to_arrow()
    rows = rows.append_column("_cdc_bucket", pc.cast(pc.bit_wise_and(rows["id"], pa.scalar(3, pa.int32())), pa.int32()))
    catalog, ident = open_catalog(runs.lake), old.name()
    properties = {k: v for k, v in old.properties.items()}
    catalog.drop_table(ident)
    schema = pa.schema([pa.field(f.name, f.type, nullable=True) for f in rows.schema])
    table = catalog.create_table(ident, schema=schema, properties=properties)
    with table.update_spec() as spec:
        spec.add_identity("_cdc_bucket")
    table = catalog.load_table(ident)
    table.append(rows.cast(schema))
    table = catalog.load_table(ident)
    assert [s.spec_id for s in table.specs().values()] == [0, 1] and not table.schema().identifier_field_ids
    return {t.file.file_path for t in table.scan().plan_files()}


def test_a_table_of_the_identity_bucket_layout_moves_to_icebergs_bucket_transform(spark, tmp_path):
    sim, runs = loaded(spark, tmp_path, 11, 120)
    runs.run("r1")
    old_files = _as_earlier_layout(runs)
    before = runs.table().current_snapshot().snapshot_id

    sim.update("accounts", {"id": 5}, {"owner": "moved"})
    report = runs.run("r2")
    table = runs.table()
    # every file rewritten in the new layout, the bucket column gone, the key required and identifier
    assert report["mode"] == "rewrite" and report["buckets_rewritten"] == BUCKETS
    assert is_bucketed(table) and [str(f.transform) for f in table.spec().fields] == [f"bucket[{BUCKETS}]"]
    assert "_cdc_bucket" not in {f.name for f in table.schema().fields}
    assert table.schema().identifier_field_names() == {"id"}
    assert not old_files & {t.file.file_path for t in table.scan().plan_files()}
    assert runs.rows() == runs.expected()
    assert _spark_rows(spark, table) == runs.expected()
    # the snapshot before the move still reads as it was
    assert table.scan(snapshot_id=before).to_arrow().num_rows == 120

    sim.update("accounts", {"id": 6}, {"owner": "after"})
    assert runs.run("r3")["buckets_rewritten"] <= 1
    assert runs.rows() == runs.expected()

    # once the snapshots before the move expire, so do the earlier layout's specs and schemas, and pyiceberg's
    # inspect reads the table (it cannot while a spec's source column is gone)
    expire_table(runs.table(), datetime.now(UTC) + timedelta(days=1), retain_last=1)
    table = runs.table()
    assert [s.spec_id for s in table.specs().values()] == [table.spec().spec_id]
    assert [s.schema_id for s in table.metadata.schemas] == [table.schema().schema_id]
    live = [f for f in table.inspect.files().to_pylist()]
    assert sum(f["record_count"] for f in live if f["content"] == 0) - \
        sum(f["record_count"] for f in live if f["content"] == 1) == len(runs.expected())
    assert len(table.inspect.entries()) >= len(live) and len(table.inspect.partitions()) > 0
    assert runs.rows() == runs.expected()


def _codecs(paths) -> set[str]:
    out = set()
    for path in paths:
        meta = pq.ParquetFile(urlparse(path).path).metadata
        out |= {meta.row_group(g).column(c).compression for g in range(meta.num_row_groups)
                for c in range(meta.num_columns)}
    return out


def test_files_are_written_with_the_tables_codec(spark, tmp_path):
    sim, runs = loaded(spark, tmp_path, 10, 100)
    runs.run("r1")
    table = runs.table()
    assert table.properties[CODEC_PROP] == "zstd"  # Iceberg's default, named on the table
    assert _codecs(t.file.file_path for t in table.scan().plan_files()) == {"ZSTD"}

    # a table set to another codec gets it from its next run on, its delete files too
    table.transaction().set_properties(**{CODEC_PROP: "snappy"}).commit_transaction()
    sim.update("accounts", {"id": 5}, {"owner": "v"})
    assert runs.run("r2")["mode"] == "delta"
    table = runs.table()
    new = [t.file.file_path for t in table.scan().plan_files() if "/run=r2/" in t.file.file_path]
    deletes = list(_delete_files(table))
    assert new and deletes
    assert _codecs(new + deletes) == {"SNAPPY"}
    assert runs.rows() == runs.expected()

    # a codec Spark does not write: the run fails naming the property, and the published state stays
    table.transaction().set_properties(**{CODEC_PROP: "lzma"}).commit_transaction()
    published = runs.table().current_snapshot().snapshot_id
    sim.update("accounts", {"id": 6}, {"owner": "w"})
    with pytest.raises(ValueError, match=CODEC_PROP):
        runs.run("r3")
    assert runs.table().current_snapshot().snapshot_id == published
