"""Snapshot expiry (python -m jobs expire): old snapshots leave the tables' metadata, the files only they
reached leave the lake, and what is kept still reads as an independent replay (the simulator's
SQLite) says it should -- the current state, and the kept older snapshots by time travel."""
from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from urllib.parse import urlparse

import pytest

from jobs import cli
from jobs.iceberg import write as iceberg_write
from jobs.iceberg.catalog import published_by
from jobs.iceberg.write import METADATA_CLEANUP
from jobs.lake import ledger as count_ledger
from jobs.model.properties import TOMBSTONES_PROP
from tests.support.bucketed import TABLE_ID, loaded


def _on_disk(table, folder: str, suffix: str = ".parquet") -> set[str]:
    root = os.path.join(urlparse(table.location()).path, folder)
    return {os.path.join(d, f) for d, _, files in os.walk(root) for f in files
            if f.endswith(suffix) and not f.startswith(".")}


def _run_dirs(table, folder: str) -> list[str]:
    root = os.path.join(urlparse(table.location()).path, folder)
    return [os.path.join(root, d) for d in os.listdir(root)] if os.path.isdir(root) else []


def _reached(table, snapshot) -> set[str]:
    """Data and delete files of a snapshot, as pyiceberg's own scan plans them."""
    tasks = table.scan(snapshot_id=snapshot.snapshot_id).plan_files()
    return {urlparse(p).path for t in tasks for p in [t.file.file_path, *[d.file_path for d in t.delete_files]]}


def _rows(table, snapshot_id: int) -> list[dict]:
    arrow = table.scan(snapshot_id=snapshot_id).to_arrow().select(["id", "owner", "balance"])
    return sorted(arrow.to_pylist(), key=lambda r: r["id"])


def test_expiry_drops_old_snapshots_and_only_their_files(spark, tmp_path, monkeypatch, capsys):
    sim, runs = loaded(spark, tmp_path, 11, 300, partitions=2)
    expected_after = {}
    for i in range(5):
        # copy-on-write for the first runs (their replaced files become history), deltas after
        monkeypatch.setattr(iceberg_write, "DELTAS", i >= 3)
        if i:
            sim.random_ops(40)
        runs.run(f"r{i}")
        expected_after[f"r{i}"] = runs.expected()
    table = runs.table()
    snapshots = {published_by(table, f"r{i}"): f"r{i}" for i in range(5)}
    assert len(snapshots) == 5 and len(table.metadata.snapshots) >= 5
    data_before = _on_disk(table, "data") | _on_disk(table, "deletes")
    sizes = {p: os.path.getsize(p) for p in data_before}
    data_dirs_before = [d for k in ("data", "deletes") for d in _run_dirs(table, k)]
    tombstones_before = {os.path.dirname(p) for p in _on_disk(table, "tombstones")}
    assert len(tombstones_before) == 5  # every run had deletes: each wrote its tombstones
    as_of = datetime.fromtimestamp(table.metadata.snapshots[-1].timestamp_ms / 1000, UTC) + timedelta(seconds=1)
    args = ["expire", "--lake", str(runs.lake.root), "--pipeline", "buckets", "--run-id", "x1",
            "--as-of", as_of.isoformat(), "--retain-days", "0", "--retain-last", "2"]

    # a dry run says what would go and changes nothing (it writes no report either: it prints it)
    capsys.readouterr()
    assert cli.main([*args, "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert not runs.lake.exists("reports/buckets/run=x1/expire.json")
    assert dry["tables"][0]["snapshots_expired"] == len(table.metadata.snapshots) - 2
    assert len(runs.table().metadata.snapshots) == len(table.metadata.snapshots)
    assert _on_disk(table, "data") | _on_disk(table, "deletes") == data_before

    assert cli.main(args) == 0
    report = runs.lake.read_json("reports/buckets/run=x1/expire.json")["tables"][0]
    table = runs.table()
    kept = table.metadata.snapshots
    assert [snapshots.get(s.snapshot_id) for s in kept] == ["r3", "r4"]
    assert report["snapshots_expired"] == dry["tables"][0]["snapshots_expired"]
    assert report["runs_expired"] == ["r0", "r1", "r2"]
    # the lake holds exactly the files the kept snapshots reach, and each of them
    reached = set().union(*(_reached(table, s) for s in kept))
    on_disk = _on_disk(table, "data") | _on_disk(table, "deletes")
    assert on_disk == reached
    gone = data_before - on_disk
    # a run's folder stays while it holds a file a kept snapshot reaches, else it went whole (Spark's
    # _SUCCESS markers too); its files are in a folder of the attempt that wrote them
    left = [d for k in ("data", "deletes") for d in _run_dirs(table, k)]
    assert sorted(left) == sorted({p.split("/attempt=")[0] for p in reached})
    assert len(left) < len(data_dirs_before)
    assert gone and sum(report["files_deleted"].get(k, 0) for k in ("data", "delete")) == len(gone)
    assert report["bytes_deleted"] == sum(sizes[p] for p in gone)
    # the tombstones of the expired runs went; the kept runs' stayed, the table's current among them
    tombstones = {os.path.dirname(p) for p in _on_disk(table, "tombstones")}
    assert {os.path.basename(os.path.dirname(t)) for t in tombstones} == {"run=r3", "run=r4"}
    assert urlparse(table.properties[TOMBSTONES_PROP]).path.rstrip("/") in tombstones
    # and so did their count steps (the lake's counts at moments of expired runs are then unknown)
    assert report["count_steps_deleted"] == 3
    assert [r for r in ("r0", "r1", "r2", "r3", "r4")
            if runs.lake.exists(count_ledger.steps_dir("buckets", r, TABLE_ID))] == ["r3", "r4"]
    # what is kept reads as the replay said it was: now, and as of r3 (time travel)
    assert runs.rows() == expected_after["r4"]
    assert _rows(table, kept[0].snapshot_id) == expected_after["r3"]

    # again: nothing more to expire; the next runs fold on top as before
    assert cli.main(args) == 0
    assert runs.lake.read_json("reports/buckets/run=x1/expire.json")["tables"][0]["snapshots_expired"] == 0
    sim.random_ops(40)
    runs.run("r5")
    assert runs.rows() == runs.expected()


def test_expiry_keeps_the_current_snapshot_and_refuses_to_keep_none(tmp_path, capsys):
    args = ["expire", "--lake", str(tmp_path / "lake"), "--pipeline", "p", "--run-id", "x", "--as-of", "2026-11-24"]
    assert cli.main([*args, "--retain-last", "0"]) == 2
    assert "--retain-last" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main([*args[:-1], "yesterday"])
    assert cli.main(args) == 0  # a pipeline without tables: nothing to do


def test_metadata_files_past_the_tables_limit_are_deleted_after_each_commit(spark, tmp_path):
    """Every commit writes a metadata JSON; a new table asks Iceberg to keep only the last
    ``write.metadata.previous-versions-max`` of the earlier ones (100), and a limit the table sets
    itself is kept: here 2, so after five commits the folder holds the current file and two before it.
    The snapshots live on in the current file: the state, and an old snapshot by time travel, still
    read as the replay says."""
    sim, runs = loaded(spark, tmp_path, 12, 120)
    runs.run("m0")
    first_rows = runs.expected()
    table = runs.table()
    assert {k: table.properties.get(k) for k in METADATA_CLEANUP} == METADATA_CLEANUP
    with table.transaction() as txn:
        txn.set_properties(**{"write.metadata.previous-versions-max": "2"})
    for i in range(1, 4):
        sim.random_ops(15)
        runs.run(f"m{i}")
    table = runs.table()
    assert table.properties["write.metadata.previous-versions-max"] == "2"  # not reset to the default
    logged = {entry.metadata_file for entry in table.metadata.metadata_log}
    assert len(logged) == 2
    assert _on_disk(table, "metadata", ".metadata.json") == {
        urlparse(p).path for p in logged | {table.metadata_location}}
    assert runs.rows() == runs.expected()
    assert _rows(table, published_by(table, "m0")) == first_rows


def _metadata_reached(table) -> set[str]:
    out = set()
    for snapshot in table.metadata.snapshots:
        out.add(urlparse(snapshot.manifest_list).path)
        out |= {urlparse(m.manifest_path).path for m in snapshot.manifests(table.io)}
    return out


def test_orphans_of_a_failed_run_are_deleted_once_old_enough(spark, tmp_path, monkeypatch, capsys):
    """A run killed at its catalog commit leaves files no snapshot reaches: data, position deletes,
    tombstones, manifests and the metadata file the catalog never pointed to (a run that fails there deletes
    the last two itself: tests/unit/iceberg/test_commit.py). Expiry deletes them
    once they are a day older than --as-of (a run still writing is never robbed), reports them, and a
    dry run deletes nothing; every file a snapshot reaches stays, and the run, re-run, publishes what
    the replay says."""
    from pyiceberg.catalog.sql import SqlCatalog

    from jobs.iceberg import commit as commit_module

    sim, runs = loaded(spark, tmp_path, 13, 300)
    runs.run("o1")
    sim.random_ops(8)
    runs.run("o2")
    rows_o2 = runs.rows()
    assert rows_o2 == runs.expected()
    table = runs.table()
    before = {k: _on_disk(table, k) for k in ("data", "deletes", "tombstones")}
    metadata_before = _on_disk(table, "metadata", ".avro")
    assert metadata_before == _metadata_reached(table)
    metadata_json_before = _on_disk(table, "metadata", ".metadata.json")

    sim.random_ops(8)

    write_metadata = SqlCatalog._write_metadata

    def crash(metadata, io, metadata_path):  # the new metadata file is written, the catalog never swapped
        write_metadata(metadata, io, metadata_path)
        raise RuntimeError("simulated crash at the catalog commit")

    monkeypatch.setattr(SqlCatalog, "_write_metadata", staticmethod(crash))
    monkeypatch.setattr(commit_module, "_clean_up", lambda pending: None)  # killed: no cleanup runs
    sent = runs.sent
    with pytest.raises(RuntimeError, match="simulated crash"):
        runs.run("o3")
    monkeypatch.undo()
    table = runs.table()
    assert published_by(table, "o3") is None
    orphans = {k: _on_disk(table, k) - before[k] for k in before}
    orphan_manifests = _on_disk(table, "metadata", ".avro") - metadata_before
    orphan_metadata = _on_disk(table, "metadata", ".metadata.json") - metadata_json_before
    assert all(orphans.values()) and orphan_manifests and orphan_metadata  # each kind was left behind
    assert {p.split("/tombstones/")[1].split("/")[0] for p in orphans["tombstones"]} == {"run=o3"}

    written = max(os.path.getmtime(p) for p in set().union(*orphans.values()))
    lake_args = ["expire", "--lake", str(runs.lake.root), "--pipeline", "buckets", "--retain-days", "0",
                 "--retain-last", "10"]

    def expire(run_id: str, as_of: datetime, *extra: str) -> dict:
        assert cli.main([*lake_args, "--run-id", run_id, "--as-of", as_of.isoformat(), *extra]) == 0
        if "--dry-run" in extra:  # its report is what it prints
            return json.loads(capsys.readouterr().out)["tables"][0]
        return runs.lake.read_json(f"reports/buckets/run={run_id}/expire.json")["tables"][0]

    # less than a day old: kept, as a run still writing would be
    recent = expire("x1", datetime.fromtimestamp(written, UTC) + timedelta(hours=12))
    assert recent["orphans_deleted"] == 0
    assert _on_disk(table, "tombstones") == before["tombstones"] | orphans["tombstones"]
    later = datetime.fromtimestamp(written, UTC) + timedelta(days=2)
    capsys.readouterr()
    dry = expire("x2", later, "--dry-run", "--json")
    files = [p for k in ("data", "deletes") for p in orphans[k]] + sorted(orphan_manifests | orphan_metadata)
    assert dry["orphans_deleted"] >= len(files) + len(orphans["tombstones"])
    assert dry["orphan_bytes_deleted"] == sum(os.path.getsize(p) for p in files)
    assert orphan_manifests <= _on_disk(table, "metadata", ".avro")
    assert orphan_metadata <= _on_disk(table, "metadata", ".metadata.json")

    capsys.readouterr()  # the dry run's summary names the same figures
    report = expire("x3", later)
    assert f"orphans: {report['orphans_deleted']} ({report['orphan_bytes_deleted']:,} bytes)" in capsys.readouterr().out
    assert (report["orphans_deleted"], report["orphan_bytes_deleted"]) == (
        dry["orphans_deleted"], dry["orphan_bytes_deleted"])
    assert report["snapshots_expired"] == 0
    table = runs.table()
    assert {k: _on_disk(table, k) for k in before} == before  # exactly the files before the failed run
    assert _on_disk(table, "metadata", ".avro") == metadata_before == _metadata_reached(table)
    assert _on_disk(table, "metadata", ".metadata.json") == metadata_json_before
    assert not [d for k in ("data", "deletes") for d in _run_dirs(table, k) if d.endswith("run=o3")]
    assert runs.rows() == rows_o2

    # the failed run, re-run, publishes on top of what was kept
    runs.sent = sent
    runs.run("o3")
    assert runs.rows() == runs.expected()
