"""Snapshot expiry: a pipeline's Iceberg tables keep their snapshots for a retention, and the files
that only expired snapshots held are deleted.

Every run commits a snapshot per table it changed, and a run that rewrites buckets leaves the files
it replaced to the snapshots before it: without expiry a table's folder grows by a copy of every
rewritten bucket, forever. pyiceberg 0.12's ``expire_snapshots`` removes snapshots from the table's
metadata only, so the files are found here: those reachable from an expired snapshot (its manifest
list, manifests, data and delete files) and from no kept one; then the expiry is committed, and only
then the files are deleted (a failed commit deletes nothing; a failed delete leaves a stray file, never
a table missing one). A run's tombstones folder goes with the run's snapshot, unless it is the one
the table names.

The time comes in as an argument (the DAG passes its interval's end), never from the clock, so a
re-run expires what the first run did. A re-run of a run whose snapshot has expired is no longer
recognised as published: its changes are folded again, as a backfill (events at or before a row's
position are replays and are skipped).
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlparse

from jobs.publish import RUN_ID_PROP, TABLE_ID_PROP, TOMBSTONES_PROP, list_files

DEFAULT_RETAIN_DAYS = 7
DEFAULT_RETAIN_LAST = 10


@dataclass
class TableExpiry:
    table: str
    snapshots_expired: int = 0
    snapshots_kept: int = 0
    files_deleted: dict[str, int] = field(default_factory=dict)  # kind -> count
    bytes_deleted: int = 0  # of data and delete files (manifests are small and not counted)
    runs_expired: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"table": self.table, "snapshots_expired": self.snapshots_expired,
                "snapshots_kept": self.snapshots_kept, "files_deleted": dict(sorted(self.files_deleted.items())),
                "bytes_deleted": self.bytes_deleted, "runs_expired": self.runs_expired}


def snapshots_to_expire(metadata, older_than: datetime, retain_last: int) -> list[int]:
    """Ids of the snapshots committed before ``older_than`` that are none of the ``retain_last`` newest,
    nor the current one, nor the head of a branch or tag."""
    cutoff_ms = int(older_than.timestamp() * 1000)
    newest = sorted(metadata.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number or 0), reverse=True)
    keep = {s.snapshot_id for s in newest[:max(retain_last, 1)]}
    keep |= {ref.snapshot_id for ref in metadata.refs.values()}
    if metadata.current_snapshot_id is not None:
        keep.add(metadata.current_snapshot_id)
    return [s.snapshot_id for s in metadata.snapshots if s.timestamp_ms < cutoff_ms and s.snapshot_id not in keep]


class _Reachable:
    """The files a snapshot reaches, each manifest read once (snapshots share most of theirs)."""

    def __init__(self, io) -> None:
        self.io = io
        self._manifests: dict[str, list[tuple[str, str, int]]] = {}

    def _entries(self, manifest) -> list[tuple[str, str, int]]:
        from pyiceberg.manifest import DataFileContent

        if manifest.manifest_path not in self._manifests:
            # live entries only: a DELETED entry names a file the snapshot removed, which only the
            # snapshots before it hold
            self._manifests[manifest.manifest_path] = [
                (e.data_file.file_path, "data" if e.data_file.content == DataFileContent.DATA else "delete",
                 e.data_file.file_size_in_bytes)
                for e in manifest.fetch_manifest_entry(self.io, discard_deleted=True)]
        return self._manifests[manifest.manifest_path]

    def files(self, snapshot) -> dict[str, tuple[str, int]]:
        """path -> (kind, bytes) of every file ``snapshot`` reaches."""
        out = {snapshot.manifest_list: ("manifest list", 0)}
        for manifest in snapshot.manifests(self.io):
            out[manifest.manifest_path] = ("manifest", 0)
            for path, kind, size in self._entries(manifest):
                out[path] = (kind, size)
        return out


def plan_table_expiry(table, older_than: datetime, retain_last: int) -> tuple[list[int], dict[str, tuple[str, int]]]:
    """The snapshots to expire and the files only they reach (path -> (kind, bytes))."""
    metadata = table.metadata
    expired = set(snapshots_to_expire(metadata, older_than, retain_last))
    if not expired:
        return [], {}
    reach = _Reachable(table.io)
    kept_files: set[str] = set()
    gone: dict[str, tuple[str, int]] = {}
    for snapshot in metadata.snapshots:
        files = reach.files(snapshot)
        if snapshot.snapshot_id in expired:
            gone.update(files)
        else:
            kept_files.update(files)
    return sorted(expired), {p: v for p, v in gone.items() if p not in kept_files}


def _run_ids(metadata, snapshot_ids: list[int]) -> list[str]:
    ids = []
    for snapshot in metadata.snapshots:
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if snapshot.snapshot_id in snapshot_ids and summary.get(RUN_ID_PROP):
            ids.append(summary[RUN_ID_PROP])
    return sorted(set(ids))


def _delete_tree(io, uri: str) -> int:
    """Delete a folder of the lake and what it holds; the number of files deleted."""
    files = list_files(uri)
    for path in files:
        io.delete(path)
    parsed = urlparse(uri)
    local = parsed.path if parsed.scheme == "file" else uri
    if parsed.scheme in ("", "file") and os.path.isdir(local):
        shutil.rmtree(local)  # the folders left, and the checksum files Spark writes beside its own
    return len(files)


# a run's folder of data or delete files: <table>/data/run=<id>/..., <table>/deletes/run=<id>/...
_RUN_FOLDER = re.compile(r"^(.*/(?:data|deletes)/run=[^/]+)/")


def _emptied_run_folders(deleted: list[str]) -> list[str]:
    """The run folders of ``deleted`` files that hold no Parquet file any more (only Spark's markers)."""
    folders = sorted({m.group(1) for m in map(_RUN_FOLDER.match, deleted) if m})
    return [f for f in folders if not list_files(f, ".parquet")]


def expire_table(table, older_than: datetime, retain_last: int, dry_run: bool = False) -> TableExpiry:
    """Expire one table's snapshots older than ``older_than`` (keeping the ``retain_last`` newest) and
    delete the files only they reach, after the expiry is committed."""
    name = table.properties.get(TABLE_ID_PROP, ".".join(table.name()))
    expired, gone = plan_table_expiry(table, older_than, retain_last)
    report = TableExpiry(name, len(expired), len(table.metadata.snapshots) - len(expired))
    if not expired:
        return report
    report.runs_expired = _run_ids(table.metadata, expired)
    for kind, size in gone.values():
        report.files_deleted[kind] = report.files_deleted.get(kind, 0) + 1
        report.bytes_deleted += size
    current_tombstones = table.properties.get(TOMBSTONES_PROP, "")
    tombstones = [f"{table.location()}/tombstones/run={run}" for run in report.runs_expired]
    tombstones = [t for t in tombstones if t.rstrip("/") != current_tombstones.rstrip("/")]
    if dry_run:
        return report
    table.maintenance.expire_snapshots().by_ids(expired).commit()
    deleted_files = sorted(gone)
    for path in deleted_files:
        table.io.delete(path)
    for folder in _emptied_run_folders(deleted_files):
        _delete_tree(table.io, folder)
    deleted = sum(_delete_tree(table.io, t) for t in tombstones)
    if deleted:
        report.files_deleted["tombstones"] = deleted
    return report


def expire_pipeline(catalog, pipeline: str, as_of: datetime, retain_days: int = DEFAULT_RETAIN_DAYS,
                    retain_last: int = DEFAULT_RETAIN_LAST, dry_run: bool = False) -> dict:
    """Expire the snapshots of every table of ``pipeline`` committed more than ``retain_days`` before
    ``as_of``, keeping each table's ``retain_last`` newest whatever their age."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    if retain_days < 0 or retain_last < 1:
        raise ValueError(f"retention: days must be >= 0 and snapshots kept >= 1 (got {retain_days}, {retain_last})")
    older_than = as_of - timedelta(days=retain_days)
    try:
        identifiers = sorted(catalog.list_tables(pipeline))
    except NoSuchNamespaceError:
        identifiers = []
    tables = [expire_table(catalog.load_table(ident), older_than, retain_last, dry_run).as_dict()
              for ident in identifiers]
    return {"pipeline": pipeline, "as_of": as_of.isoformat(), "older_than": older_than.isoformat(),
            "retain_days": retain_days, "retain_last": retain_last, "dry_run": dry_run, "tables": tables}
