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

Files no snapshot reaches (those of a run that failed before its commit and was never re-run, a
commit that lost a race) are orphans, and so are metadata files that are neither the table's current
one nor in its metadata log (a failed commit's; only on tables that delete old metadata files after
each commit, as this pipeline's do): deleted too, once older than the retention and at least
ORPHAN_MIN_AGE before the time given, so that the files of a run still writing are never taken.

The time comes in as an argument (the DAG passes its interval's end), never from the clock, so a
re-run expires what the first run did. A re-run of a run whose snapshot has expired is no longer
recognised as published: its changes are folded again, as a backfill (events at or before a row's
position are replays and are skipped).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlparse

from jobs.iceberg.write import METADATA_DELETE_AFTER_COMMIT
from jobs.lake import storage
from jobs.lake.storage import file_infos as list_file_info
from jobs.lake.storage import file_uris as list_files
from jobs.model.properties import RUN_ID_PROP, TABLE_ID_PROP, TOMBSTONES_PROP

DEFAULT_RETAIN_DAYS = 7
DEFAULT_RETAIN_LAST = 10
# a run writes its files before it commits them: a file no snapshot reaches is an orphan only once
# it is this much older than the time given (as Iceberg's own orphan removal keeps recent files)
ORPHAN_MIN_AGE = timedelta(days=1)


@dataclass
class TableExpiry:
    table: str
    snapshots_expired: int = 0
    snapshots_kept: int = 0
    files_deleted: dict[str, int] = field(default_factory=dict)  # kind -> count
    bytes_deleted: int = 0  # of data and delete files (manifests are small and not counted)
    runs_expired: list[str] = field(default_factory=list)
    orphans_deleted: int = 0  # files no snapshot reached (see the module docstring), tombstones included
    orphan_bytes_deleted: int = 0

    def as_dict(self) -> dict:
        return {"table": self.table, "snapshots_expired": self.snapshots_expired,
                "snapshots_kept": self.snapshots_kept, "files_deleted": dict(sorted(self.files_deleted.items())),
                "bytes_deleted": self.bytes_deleted, "runs_expired": self.runs_expired,
                "orphans_deleted": self.orphans_deleted, "orphan_bytes_deleted": self.orphan_bytes_deleted}


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


def plan_table_expiry(table, older_than: datetime,
                      retain_last: int) -> tuple[list[int], dict[str, tuple[str, int]], set[str]]:
    """The snapshots to expire, the files only they reach (path -> (kind, bytes)), and the files the
    kept snapshots reach."""
    metadata = table.metadata
    expired = set(snapshots_to_expire(metadata, older_than, retain_last))
    reach = _Reachable(table.io)
    kept_files: set[str] = set()
    gone: dict[str, tuple[str, int]] = {}
    for snapshot in metadata.snapshots:
        files = reach.files(snapshot)
        if snapshot.snapshot_id in expired:
            gone.update(files)
        else:
            kept_files.update(files)
    return sorted(expired), {p: v for p, v in gone.items() if p not in kept_files}, kept_files


def _same_file(path: str) -> str:
    # a manifest may name a local file as file:/x, file:///x or /x
    parsed = urlparse(path)
    return f"{parsed.netloc}{parsed.path}" if parsed.scheme not in ("", "file") else parsed.path


# a tombstones folder: <table>/tombstones/run=<id>/attempt=<attempt>/ (or run=<id>/ of earlier versions)
_TOMBSTONES_RUN = re.compile(r"^(.*/tombstones/run=([^/]+)(?:/attempt=[^/]+)?)/")


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it."""
    path, folder = _same_file(path.rstrip("/")), _same_file(folder.rstrip("/"))
    return path == folder or path.startswith(folder + "/")


def find_orphans(table, reached: set[str], before: datetime) -> tuple[dict[str, int], dict[str, int]]:
    """Files of the table no snapshot reaches, modified before ``before``: data, delete and manifest
    files, and metadata files that are neither the table's current one nor in its log (a failed
    commit's; path -> bytes), and the tombstones folders of runs the table has no snapshot of (not
    the one it names; folder -> the files it holds)."""
    location = table.location().rstrip("/")
    live = {_same_file(p) for p in reached}
    live |= {_same_file(table.metadata_location), *(_same_file(e.metadata_file) for e in table.metadata.metadata_log)}
    cutoff = before.timestamp()
    kinds = [("data", ".parquet"), ("deletes", ".parquet"), ("metadata", ".avro")]
    # a table told to keep its old metadata files keeps them: past its log's length they look the same
    if table.properties.get(METADATA_DELETE_AFTER_COMMIT, "false").lower() == "true":
        kinds.append(("metadata", ".metadata.json"))
    files = {}
    for folder, suffix in kinds:
        for path, mtime, size in list_file_info(f"{location}/{folder}", suffix):
            if mtime < cutoff and _same_file(path) not in live:
                files[path] = size
    runs = set(_run_ids(table.metadata, [s.snapshot_id for s in table.metadata.snapshots]))
    current = table.properties.get(TOMBSTONES_PROP, "")
    newest: dict[str, float] = {}
    held: dict[str, int] = {}
    for path, mtime, _ in list_file_info(f"{location}/tombstones"):
        match = _TOMBSTONES_RUN.match(path)
        if match and match.group(2) not in runs and not _inside(current, match.group(1)):
            newest[match.group(1)] = max(newest.get(match.group(1), 0.0), mtime)
            held[match.group(1)] = held.get(match.group(1), 0) + 1
    return files, {folder: held[folder] for folder, mtime in sorted(newest.items()) if mtime < cutoff}


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
    storage.delete_tree(uri)  # the folders left, and the checksum files Spark writes beside its own
    return len(files)


# a run's folder of data or delete files, and an attempt's in it: <table>/data/run=<id>/attempt=<a>/...,
# <table>/deletes/run=<id>/attempt=<a>/... (earlier versions wrote no attempt folder)
_RUN_FOLDER = re.compile(r"^((.*/(?:data|deletes)/run=[^/]+)(?:/attempt=[^/]+)?)/")


def _emptied_run_folders(deleted: list[str]) -> list[str]:
    """The attempt and run folders of ``deleted`` files that hold no Parquet file any more (only Spark's
    markers)."""
    matches = [m for m in map(_RUN_FOLDER.match, deleted) if m]
    folders = sorted({m.group(1) for m in matches} | {m.group(2) for m in matches})
    return [f for f in folders if not list_files(f, ".parquet")]


def _delete(io, files: list[str], folders: list[str]) -> int:
    """Delete ``files``, then the run folders they leave without a Parquet file, then ``folders``
    whole (tombstones); the number of files the folders held."""
    for path in files:
        io.delete(path)
    for folder in _emptied_run_folders(files):
        _delete_tree(io, folder)
    return sum(_delete_tree(io, folder) for folder in folders)


def unused_layouts(table) -> tuple[list[int], list[int]]:
    """The partition specs and schemas of the table that neither it nor any of its snapshots uses (a spec
    by the manifests of a snapshot, a schema by the snapshot's own id): (spec ids, schema ids)."""
    metadata = table.metadata
    specs, schemas = {metadata.default_spec_id}, {metadata.current_schema_id}
    for snapshot in metadata.snapshots:
        specs |= {m.partition_spec_id for m in snapshot.manifests(table.io)}
        if snapshot.schema_id is not None:
            schemas.add(snapshot.schema_id)
    return (sorted(s.spec_id for s in metadata.partition_specs if s.spec_id not in specs),
            sorted(s.schema_id for s in metadata.schemas if s.schema_id not in schemas))


def drop_unused_layouts(table) -> None:
    """Removes the specs and schemas no retained snapshot uses: those of a table's earlier layout, once the
    snapshots before its move are expired (their source columns gone, pyiceberg's inspect fails on them)."""
    from jobs.iceberg.row_delta import remove_specs_and_schemas

    remove_specs_and_schemas(table, *unused_layouts(table))


def expire_table(table, older_than: datetime, retain_last: int, dry_run: bool = False,
                 orphans_before: datetime | None = None) -> TableExpiry:
    """Expire one table's snapshots older than ``older_than`` (keeping the ``retain_last`` newest) and
    delete the files only they reach, after the expiry is committed; then the orphans modified before
    ``orphans_before`` (none if not given)."""
    name = table.properties.get(TABLE_ID_PROP, ".".join(table.name()))
    expired, gone, kept_files = plan_table_expiry(table, older_than, retain_last)
    report = TableExpiry(name, len(expired), len(table.metadata.snapshots) - len(expired))
    orphans, orphan_tombstones = find_orphans(table, kept_files | set(gone), orphans_before) \
        if orphans_before else ({}, {})
    report.orphans_deleted = len(orphans) + sum(orphan_tombstones.values())
    report.orphan_bytes_deleted = sum(orphans.values())
    if not dry_run:
        _delete(table.io, sorted(orphans), list(orphan_tombstones))
    if not expired:
        return report
    report.runs_expired = _run_ids(table.metadata, expired)
    for kind, size in gone.values():
        report.files_deleted[kind] = report.files_deleted.get(kind, 0) + 1
        report.bytes_deleted += size
    current_tombstones = table.properties.get(TOMBSTONES_PROP, "")
    tombstones = [f"{table.location()}/tombstones/run={run}" for run in report.runs_expired]
    tombstones = [t for t in tombstones if not _inside(current_tombstones, t)]
    if dry_run:
        return report
    table.maintenance.expire_snapshots().by_ids(expired).commit()
    drop_unused_layouts(table.refresh())
    deleted = _delete(table.io, sorted(gone), tombstones)
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
    orphans_before = min(older_than, as_of - ORPHAN_MIN_AGE)
    tables = [expire_table(catalog.load_table(ident), older_than, retain_last, dry_run, orphans_before).as_dict()
              for ident in identifiers]
    return {"pipeline": pipeline, "as_of": as_of.isoformat(), "older_than": older_than.isoformat(),
            "orphans_before": orphans_before.isoformat(),
            "retain_days": retain_days, "retain_last": retain_last, "dry_run": dry_run, "tables": tables}
