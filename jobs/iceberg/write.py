"""Published state: Apache Iceberg tables committed with pyiceberg, data files written by Spark.

One table per source table in the namespace of the pipeline. A run's new state of a table is one
``overwrite`` snapshot (the replaced files out, the new ones in) carrying ``cdc.run-id`` in its
summary, so a re-run of the same run id is recognised and changes nothing. Nothing becomes visible
before the catalog commit: a failure before it leaves the previous snapshot published. All of a run's
tables (states and histories) are committed at once (stage_state, then commit_states: jobs.iceberg.commit):
on a SQL catalog in one database transaction, so a reader sees every table at this run or every one at the
run before.

State tables are laid out in key buckets by Iceberg's own ``bucket[N]`` partition transform on their key
columns (jobs.model.buckets, jobs.iceberg.layout), one file per bucket and run, written sorted by the key (the
table's sort order); the key columns are required and, where Iceberg allows, the table's identifier fields.
A run reads only the buckets its changes touch; the others' files stay as they are. A table of the earlier
layout (identity-partitioned by a ``_cdc_bucket`` column) is moved to this one by its next run, which rewrites
it whole and drops the column.

Every data file carries the Iceberg field id of each of its columns (Parquet field ids, as the table's
schema gives them in the transaction), so readers resolving columns by id need no name mapping; the
name mapping (for files written before) is made once, at create, and merged by pyiceberg's schema
update, never rebuilt: a name another tool renames stays an alias of its field.

A run changing few of the touched buckets' rows rewrites none of them (merge-on-read): it appends its
changed rows and deletes the rows they replace by position (Iceberg v2 position-delete files, one per
data file they delete from, committed in the same snapshot; see jobs.iceberg.row_delta). Once a
bucket's deleted rows or files pass a bound (``CDC_STATE_MAX_DELETED_SHARE``,
``CDC_STATE_MAX_FILES_PER_BUCKET``), the run rewrites its touched buckets whole instead
(copy-on-write), which drops their delete files: the compaction.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs import env, failpoints
from jobs.iceberg.catalog import (
    BUCKET_COLUMN,
    _free_table_name,
    _live_records,
    ensure_namespace,
    iceberg_schema,
    load_table,
)
from jobs.iceberg.commit import TablesCommitFailed, abandon, commit_tables
from jobs.iceberg.layout import is_bucketed, layout_of, partition_spec, sort_order, with_bucket
from jobs.iceberg.read import FILE_COLUMN, ROW_COLUMN, _delete_files, _file_keys, _scan_tasks, _spark_uri
from jobs.lake.lease import Attempt, attempt_folder, new_attempt_id
from jobs.lake.storage import file_uris
from jobs.model.buckets import BucketLayout
from jobs.model.properties import (
    ATTEMPT_PROP,
    BUCKETS_PROP,
    KEY_COLUMNS_PROP,
    PIPELINE_PROP,
    REPORT_PROP,
    RUN_ID_PROP,
    TABLE_ID_PROP,
    TOMBSTONES_PROP,
)
from jobs.spark.session import without_dictionary

# enough buckets that a run touching a few keys rewrites a small share, few enough that files stay large (a
# run's own count: --state-buckets, a pipeline's sink.state_buckets or CDC_STATE_BUCKETS, jobs.settings)
DEFAULT_BUCKETS = 16


_BUCKET_DIR = "_cdc_b"


# a position-delete file's folder below its bucket's: the data file it deletes from (its index in the scan)
_DATA_FILE_DIR = "_cdc_df"


# the table property of the name mapping (Iceberg's): each field id and the names its column had
NAME_MAPPING_PROP = "schema.name-mapping.default"


# merge-on-read: on unless CDC_STATE_DELTAS=0; a run rewrites its touched buckets instead once their
# deleted rows would pass this share of their rows, or one of them has this many data files (the
# defaults; each variable, where set, is read when a run publishes)
DELTAS = True


MAX_DELETED_SHARE = 0.2


MAX_FILES_PER_BUCKET = 16


# Iceberg's table property for the codec of a table's Parquet files, and its default (Iceberg's since
# 1.4, and pyiceberg's) rather than Spark's snappy: a state table takes about half the space and
# a full rewrite as much time (bench/README.md, "Rewrites"); a table that names another codec gets it
CODEC_PROP = "write.parquet.compression-codec"


DEFAULT_CODEC = "zstd"


# Every commit writes a new metadata JSON (hourly runs: thousands a year per table). Iceberg's own
# cleanup: after a commit, metadata files past the last 100 are deleted (the snapshots, and so time
# travel, live in the current one). A table that sets either property otherwise keeps its setting.
METADATA_DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"


METADATA_CLEANUP = {METADATA_DELETE_AFTER_COMMIT: "true", "write.metadata.previous-versions-max": "100"}


_SPARK_CODECS = {"zstd", "snappy", "gzip", "lz4", "brotli", "uncompressed", "none", "lzo", "lz4_raw"}


@dataclass(frozen=True)
class Bucketing:
    """How a state is written: in the buckets of ``layout`` (made for about ``buckets`` buckets, the count a
    re-keyed table's new layout is made for again); ``touched`` are the buckets (jobs.model.buckets numbers)
    this state replaces (None: all of them, the whole table)."""

    buckets: int
    layout: BucketLayout
    touched: frozenset[int] | None = None


# Iceberg Java's default, pyiceberg's is false: a table's manifests are merged as commits add them
MANIFEST_MERGE = {"commit.manifest-merge.enabled": "true"}


def deltas_fit(table, touched: frozenset[int] | None, changes: int) -> bool:
    """Whether a run of about ``changes`` change records may publish the touched buckets by position
    deletes (merge-on-read) rather than rewrite them: the table is bucketed (Iceberg v2), the run
    does not replace it whole, and the buckets' deleted rows stay within ``MAX_DELETED_SHARE`` of
    their rows and their data files below ``MAX_FILES_PER_BUCKET`` a bucket."""
    deltas = env.text("CDC_STATE_DELTAS", "1" if DELTAS else "0") != "0"
    if not deltas or touched is None or not is_bucketed(table) or table.metadata.format_version < 2:
        return False
    tasks = _scan_tasks(table, touched)
    rows = sum(t.file.record_count for t in tasks)
    deleted = sum(d.record_count for d in _delete_files(tasks))
    files = Counter(tuple(t.file.partition) for t in tasks)
    return (rows > 0 and deleted + changes <= env.number("CDC_STATE_MAX_DELETED_SHARE", MAX_DELETED_SHARE) * rows
            and max(files.values(), default=0) < env.number("CDC_STATE_MAX_FILES_PER_BUCKET", MAX_FILES_PER_BUCKET,
                                                           whole=True))


def _list_parquet(uri: str) -> list[str]:
    # bucketed states are written one folder per bucket
    return file_uris(uri, ".parquet")


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
    buckets: int | None = None  # the table's key-hash buckets, and how many of them this run rewrote
    buckets_rewritten: int | None = None
    already_published: bool = False
    # merge-on-read: the run appended its changed rows and deleted the rows they replace by position
    # ("delta"), or it wrote the state of the touched buckets (or table) whole ("rewrite")
    mode: str = "rewrite"
    position_deletes: int = 0
    delete_files_added: int = 0
    delete_files_removed: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class StagedState:
    """One table's new state: files written, snapshot staged in ``transaction``, not committed."""

    table_id: str
    identifier: tuple[str, str]  # (pipeline, name) as the catalog knows it
    transaction: object  # pyiceberg Transaction / CreateTableTransaction
    published: Published  # snapshot_id and state_rows of the staged snapshot
    written: dict[str, list[str]]  # folder -> files, checked right before the commit


def parquet_codec(table) -> str:
    """The Parquet codec a table's files are written with: its ``write.parquet.compression-codec``."""
    codec = (table.properties.get(CODEC_PROP) if table is not None else None) or DEFAULT_CODEC
    if codec.lower() not in _SPARK_CODECS:
        raise ValueError(f"table property {CODEC_PROP}={codec!r}: not a Parquet codec Spark writes "
                         f"({', '.join(sorted(_SPARK_CODECS))})")
    return codec.lower()


class CommitConflict(RuntimeError):
    """Another writer committed to the table between this attempt's read of it and its commit."""


class MissingFiles(RuntimeError):
    """Files this commit would reference are no longer where the attempt wrote them."""


@dataclass
class _Written:
    """The files an attempt wrote for one commit, by folder (each folder its own: see jobs.lake.lease)."""

    data: list[str]
    deletes: list[str]
    tombstones_dir: str | None
    folders: dict[str, list[str]]  # folder -> the Parquet files written there


def _bucketed(state: DataFrame, bucketing: Bucketing, sort_columns: tuple[str, ...]) -> DataFrame:
    # one shuffle puts each bucket in one task: one file per bucket, in a folder of its own (the
    # partition's values are the folder's, as a bucket's cannot be read back from the file's bounds);
    # sorted by it, a task writes its buckets one after the other (one open Parquet writer, whose
    # row groups need not shrink to share a small heap), each sorted by the key (the table's sort order)
    return (with_bucket(state, bucketing.layout, _BUCKET_DIR).repartition(_BUCKET_DIR)
            .sortWithinPartitions(_BUCKET_DIR, *[_quoted(c) for c in sort_columns]))


def with_field_ids(state: DataFrame, schema) -> DataFrame:
    """The state's columns labelled with their Iceberg field ids (``schema``: the table's schema as the
    transaction commits it, whose ids create_table assigns afresh), which Spark writes as the Parquet
    field ids (``spark.sql.parquet.fieldId.write.enabled``); a column not in the schema (a folder) as it is."""
    ids = {f.name: f.field_id for f in schema.fields}
    return state.select(*[
        F.col(_quoted(c)).alias(c, metadata={"parquet.field.id": ids[c]}) if c in ids else F.col(_quoted(c))
        for c in state.columns
    ])


def _quoted(column: str) -> str:
    return f"`{column.replace('`', '``')}`"


def _write_files(state: DataFrame, tombstones: DataFrame | None, replaced: DataFrame | None, table, tasks: list,
                 folder_of, bucketed: bool, codec: str, unique_columns: Sequence[str] = ()) -> _Written:
    """Spark writes the state's data files, the position deletes of ``replaced`` and the tombstones, each
    into a folder of this attempt's that is new (``folder_of(kind)``): nothing another attempt wrote is
    overwritten, nor taken for this one's."""
    data_dir = folder_of("data")
    writer = state.write.option("compression", codec).options(**without_dictionary(unique_columns))
    (writer.partitionBy(_BUCKET_DIR) if bucketed else writer).parquet(_spark_uri(data_dir))
    folders = {data_dir: _list_parquet(data_dir)}
    if replaced is not None:
        deletes_dir = folder_of("deletes")
        _write_position_deletes(replaced, table, tasks, deletes_dir, codec)
        folders[deletes_dir] = _list_parquet(deletes_dir)
    tombstones_dir = None
    if tombstones is not None:
        tombstones_dir = folder_of("tombstones")
        tombstones.coalesce(1).write.option("compression", codec).parquet(_spark_uri(tombstones_dir))
        folders[tombstones_dir] = _list_parquet(tombstones_dir)
    return _Written(folders[data_dir], folders[deletes_dir] if replaced is not None else [], tombstones_dir, folders)


def check_written(table_id: str, run_id: str, written: dict[str, list[str]]) -> None:
    """Every folder a commit references holds exactly the files the attempt wrote there (a reader reads a
    tombstones folder whole): raises MissingFiles otherwise, before anything is committed."""
    for folder, paths in written.items():
        present = set(file_uris(folder, ".parquet"))
        gone, extra = sorted(set(paths) - present), sorted(present - set(paths))
        if gone or extra:
            what = f"{len(gone)} of its files are gone (first: {gone[0]})" if gone else \
                f"{len(extra)} files appeared that it did not write (first: {extra[0]})"
            raise MissingFiles(f"{table_id}: nothing committed, as {folder} changed after this attempt wrote it: "
                               f"{what}; another process wrote or deleted there: re-run run {run_id}")


def commit_conflict(table_id: str, run_id: str, pipeline: str, exc: Exception,
                    committed: Sequence[str] = ()) -> CommitConflict:
    """Losing a race to another writer of ``table_id``, in one line; ``committed``: the tables of this attempt
    a catalog that commits one table at a time committed before it."""
    cause = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    published = ("nothing of this attempt is published" if not committed else
                 f"of this attempt only {', '.join(committed)} are published (this catalog commits one table at "
                 "a time)")
    # 240: room for the tables the refused commit names
    return CommitConflict(
        f"{table_id}: another attempt or run of pipeline {pipeline} committed to the table first ({cause[:240]}); "
        f"{published}: once no other attempt runs, re-run run {run_id}, which leaves what is published alone "
        "and commits the rest")


def _open_transaction(catalog, pipeline: str, table_id: str, run_id: str, table, schema,
                      layout: BucketLayout | None, sort_columns: tuple[str, ...]):
    """(transaction, table name, location): a new table's creation (its one partition spec the layout's), or
    a transaction on ``table``."""
    from pyiceberg.exceptions import TableAlreadyExistsError

    if table is not None:
        return table.transaction(), table.name()[-1], table.location()
    name = _free_table_name(catalog, pipeline, table_id)
    try:
        txn = catalog.create_table_transaction(
            (pipeline, name), schema=schema, partition_spec=partition_spec(schema, layout),
            sort_order=sort_order(schema, sort_columns),
            properties={TABLE_ID_PROP: table_id, CODEC_PROP: DEFAULT_CODEC, **METADATA_CLEANUP, **MANIFEST_MERGE})
    except TableAlreadyExistsError as exc:
        raise commit_conflict(table_id, run_id, pipeline, exc) from exc
    return txn, name, txn.table_metadata.location


def _stage_layout(txn, table, schema, layout: BucketLayout | None, sort_columns: tuple[str, ...]) -> None:
    """The schema, partition spec and sort order the commit brings, staged in ``txn`` before any file is written
    (the files carry the field ids of this schema; every file of a changed spec is replaced by the commit); the
    name mapping made (a new table) or kept whole."""
    if table is None:
        txn.set_properties(**{NAME_MAPPING_PROP: txn.table_metadata.schema().name_mapping.model_dump_json()})
        return
    identifier = {f.name for f in schema.fields if f.field_id in schema.identifier_field_ids}
    # a key column made required: the fold never leaves a key null, and each file's null counts are checked
    with txn.update_schema(allow_incompatible_changes=True) as update:  # which merges the name mapping
        update.union_by_name(schema)
        for field in txn.table_metadata.schema().fields:
            if field.name in identifier and not field.required:
                update.update_column(field.name, required=True)
        if identifier != set(txn.table_metadata.schema().identifier_field_names()):
            update.set_identifier_fields(*identifier)
    mapping = name_mapping_with_aliases(txn.table_metadata)
    if txn.table_metadata.name_mapping() != mapping:  # a mapping rebuilt by earlier versions: repaired
        txn.set_properties(**{NAME_MAPPING_PROP: mapping.model_dump_json()})
    current = txn.table_metadata.schema()
    if _bucket_fields(layout_of(table)) != _bucket_fields(layout) or (layout is None and table.spec().fields):
        with txn.update_spec() as spec:
            for field in table.spec().fields:
                spec.remove_field(field.name)
            taken = {f.name for s in table.specs().values() for f in s.fields}
            for field in partition_spec(current, layout, taken).fields:
                spec.add_field(current.find_field(field.source_id).name, field.transform, field.name)
    if txn.table_metadata.sort_order().fields != sort_order(current, sort_columns).fields:
        with txn.update_sort_order() as order:
            for field in sort_order(current, sort_columns).fields:
                order.asc(current.find_column_name(field.source_id), field.transform, field.null_order)
    missing = {k: v for k, v in MANIFEST_MERGE.items() if k not in table.properties}
    if missing:
        txn.set_properties(**missing)


def _bucket_fields(layout: BucketLayout | None) -> list[tuple[str, int]]:
    # a layout's partition fields, whatever its columns' types (an int key widened to bigint keeps its buckets)
    return [(f.column, f.count) for f in layout.fields] if layout is not None else []


def name_mapping_with_aliases(metadata):
    """The table's name mapping with every name each current column had (in ``metadata.schemas``) as an
    alias of its field id: what pyiceberg's schema updates keep, and what earlier versions of this module
    lost by rebuilding the mapping from the current schema at every commit. A column's current name is its
    own; a former name also held by another column stays with the first (the mapping's, then the newest
    schema's). Fields of the mapping no longer in the schema are kept. Applied to its own result: the same."""
    from pyiceberg.table.name_mapping import MappedField, NameMapping

    current = metadata.schema()
    existing = metadata.name_mapping()
    fresh = {f.field_id: f for f in current.name_mapping}
    names = {f.field_id: [f.name] for f in current.fields}
    owner = {f.name: f.field_id for f in current.fields}
    earlier = [(f.field_id, f.names) for f in existing or []]
    earlier += [(f.field_id, [f.name]) for s in sorted(metadata.schemas, key=lambda s: -s.schema_id) for f in s.fields]
    for field_id, field_names in earlier:
        for name in field_names if field_id in names else []:
            if owner.setdefault(name, field_id) == field_id and name not in names[field_id]:
                names[field_id].append(name)
    gone = [MappedField(field_id=f.field_id, names=kept, fields=f.fields) for f in existing or []
            if f.field_id not in names and (kept := [n for n in f.names if n not in owner])]
    return NameMapping([MappedField(field_id=i, names=n, fields=fresh[i].fields) for i, n in names.items()] + gone)


def _stage_snapshot(txn, table_id: str, iceberg_table: str, summary: dict[str, str], tasks: list, written: _Written,
                    bucketing: Bucketing | None, delta: bool, report: dict | None) -> Published:
    """Stage the snapshot that replaces the touched buckets' files (or the whole table's) with the
    written ones, or, as a ``delta``, adds the written data and position deletes; what it does."""
    from jobs.iceberg.row_delta import RowDelta, data_file

    touched = bucketing.touched if bucketing is not None else None
    new_files = [data_file(txn, path, _partition(path, bucketing)) for path in written.data]
    _key_made_optional_where_null(txn, new_files)
    delete_files = [_position_delete_file(txn, path, tasks) for path in written.deletes]
    # a delta removes nothing; a rewrite removes the data files it replaces and the deletes of them
    old_data = [] if delta else [t.file for t in tasks]
    old_deletes = [] if delta else _delete_files(tasks)
    published = Published(table_id, iceberg_table, None, 0, len(new_files), len(old_data),
                          sum(f.file_size_in_bytes for f in new_files + delete_files),
                          sum(f.file_size_in_bytes for f in old_data + old_deletes),
                          buckets=bucketing.layout.buckets if bucketing else None,
                          buckets_rewritten=(0 if delta else len(touched) if touched is not None
                                             else bucketing.layout.buckets) if bucketing else None,
                          mode="delta" if delta else "rewrite",
                          position_deletes=sum(f.record_count for f in delete_files),
                          delete_files_added=len(delete_files), delete_files_removed=len(old_deletes))
    if report is not None:
        summary = {**summary, REPORT_PROP: json.dumps({**published.as_dict(), **report}, sort_keys=True, default=str)}
    # RowDelta: manifests of delete files (pyiceberg's producers write data manifests only), merged as they
    # accumulate (pyiceberg's overwrite never merges)
    with RowDelta(txn, summary) as overwrite:
        for data_file in old_data + old_deletes:
            overwrite.delete_data_file(data_file)
        for data_file in new_files + delete_files:
            overwrite.append_data_file(data_file)
    return published


def _writes_whole(bucketing: Bucketing | None, replaced: DataFrame | None) -> bool:
    return (bucketing is None or bucketing.touched is None) and replaced is None


def _key_made_optional_where_null(txn, new_files: list) -> None:
    """A key whose written files hold a null (a key block naming a column the row has no value of) cannot be
    Iceberg's identifier: its columns made optional again and the identifier fields cleared, in this commit,
    and kept so (only a commit writing every row makes them required again)."""
    schema = txn.table_metadata.schema()
    # a file without a null count of a column may hold nulls in it
    nullable = [f.name for f in schema.fields
                if f.required and any((d.null_value_counts or {}).get(f.field_id, 1) for d in new_files)]
    if not nullable:
        return
    with txn.update_schema() as update:
        update.set_identifier_fields()
        for name in {*nullable, *schema.identifier_field_names()}:
            update.make_column_optional(name)


def _partition(path: str, bucketing: Bucketing | None) -> tuple:
    """The partition of a data file: its bucket's (the folder it was written to), none unbucketed."""
    if bucketing is None:
        return ()
    folder = re.search(rf"/{_BUCKET_DIR}=(\d+)/[^/]+$", path)
    if folder is None:
        raise ValueError(f"a data file outside a bucket's folder: {path}")
    return bucketing.layout.partition(int(folder.group(1)))


def _drop_legacy_bucket_column(txn, summary: dict[str, str]) -> None:
    """A table moved from the earlier layout loses its bucket column, once no live manifest needs it: an empty
    snapshot after the rewrite's (which keeps only the manifests of live files) and the column dropped."""
    from jobs.iceberg.row_delta import RowDelta

    if BUCKET_COLUMN not in {f.name for f in txn.table_metadata.schema().fields}:
        return
    with RowDelta(txn, summary):
        pass
    with txn.update_schema() as update:
        update.delete_column(BUCKET_COLUMN)


def publish_state(
    catalog,
    pipeline: str,
    table_id: str,
    state: DataFrame,
    columns: dict[str, str],
    run_id: str,
    properties: dict[str, str],
    tombstones: DataFrame | None = None,
    bucketing: Bucketing | None = None,
    replaced: DataFrame | None = None,
    report: dict | None = None,
    attempt: Attempt | None = None,
    identifier: tuple[str, ...] = (),
) -> Published:
    """Write the new state with Spark, then commit it as one Iceberg snapshot of the table (stage_state, then
    commit_states of this table alone).

    With ``bucketing``, ``state`` holds the rows of the touched buckets only, and only those buckets'
    files are replaced; without, ``state`` is the whole table. With ``replaced`` too (the prior rows
    of the keys this run changed, read with their positions), ``state`` holds the changed rows only:
    they are appended, and the replaced rows deleted by position; no file is rewritten. ``report``
    (the run's report of the table) is kept in the snapshot's summary with what this commit did
    (REPORT_PROP), so that a re-run of the run reports what the run did (published_report). ``identifier``:
    the key columns the table declares as its identifier fields (required; jobs.iceberg.layout); a bucketed
    table's sort order is its key (properties' KEY_COLUMNS_PROP), the order each bucket is written in. The files
    go to this ``attempt``'s folders (``<kind>/run=<run_id>/attempt=<id>/``); right before the commit,
    its lease is checked and every file the commit names is checked to be there (MissingFiles).
    ``unique_columns`` (stage_state's): columns of nearly one value per row, written without a dictionary."""
    attempt = attempt or Attempt(new_attempt_id())
    staged = stage_state(catalog, pipeline, table_id, state, columns, run_id, properties, tombstones, bucketing,
                         replaced, report, attempt, identifier)
    return commit_states(catalog, pipeline, run_id, [staged], attempt)[0]


def stage_state(
    catalog,
    pipeline: str,
    table_id: str,
    state: DataFrame,
    columns: dict[str, str],
    run_id: str,
    properties: dict[str, str],
    tombstones: DataFrame | None = None,
    bucketing: Bucketing | None = None,
    replaced: DataFrame | None = None,
    report: dict | None = None,
    attempt: Attempt | None = None,
    identifier: tuple[str, ...] = (),
    unique_columns: Sequence[str] = (),
) -> StagedState:
    """publish_state's first half: the files written and the snapshot staged, nothing committed (the
    arguments are publish_state's). Its Published has the staged snapshot's id and rows, which its commit
    lands; commit_states commits it, or jobs.iceberg.commit.abandon gives it up."""
    attempt = attempt or Attempt(new_attempt_id())
    ensure_namespace(catalog, pipeline)
    table = load_table(catalog, pipeline, table_id)
    touched = bucketing.touched if bucketing is not None else None
    if touched is not None and not is_bucketed(table):
        raise ValueError(f"{table_id}: a state of some buckets only, for a table that is not bucketed")
    if replaced is not None and touched is None:
        raise ValueError(f"{table_id}: position deletes need a bucketed table and the buckets they touch")
    state = state.select(*[_quoted(c) for c in columns])
    sort_columns = ()
    if bucketing is not None:
        properties = {**properties, BUCKETS_PROP: str(bucketing.buckets)}
        sort_columns = tuple(json.loads(properties.get(KEY_COLUMNS_PROP, "[]")))
        state = _bucketed(state, bucketing, sort_columns)
    layout = bucketing.layout if bucketing is not None else None
    if table is not None and not _writes_whole(bucketing, replaced) and not table.schema().identifier_field_ids:
        identifier = ()  # only a commit that writes every row may make a key required: it sees each one
    schema = iceberg_schema(columns, identifier)
    txn, name, location = _open_transaction(catalog, pipeline, table_id, run_id, table, schema, layout, sort_columns)
    tasks = _scan_tasks(table, touched) if table is not None else []
    if table is not None:  # tables created before the cleanup was set get it on their next commit
        properties = {**{k: v for k, v in METADATA_CLEANUP.items() if k not in table.properties}, **properties}
    _stage_layout(txn, table, schema, layout, sort_columns)
    written = _write_files(with_field_ids(state, txn.table_metadata.schema()), tombstones, replaced, table, tasks,
                           lambda kind: f"{location}/{kind}/run={run_id}/{attempt_folder(attempt.id)}",
                           bucketing is not None, parquet_codec(table), unique_columns)
    if written.tombstones_dir is not None:
        properties = {**properties, TOMBSTONES_PROP: written.tombstones_dir}
    txn.set_properties(**properties)
    summary = {RUN_ID_PROP: run_id, PIPELINE_PROP: pipeline, ATTEMPT_PROP: attempt.id}
    published = _stage_snapshot(txn, table_id, f"{pipeline}.{name}", summary, tasks, written, bucketing,
                                replaced is not None, report)
    _drop_legacy_bucket_column(txn, summary)
    snapshot = txn.table_metadata.current_snapshot()  # the staged one: its id and totals are the commit's
    published = replace(published, snapshot_id=snapshot.snapshot_id if snapshot else None,
                        state_rows=_live_records(snapshot))
    return StagedState(table_id, (pipeline, name), txn, published, written.folders)


def commit_states(catalog, pipeline: str, run_id: str, staged: Sequence[StagedState],
                  attempt: Attempt) -> list[Published]:
    """The run's one commit of its staged tables (jobs.iceberg.commit: on a SQL catalog all or nothing), after
    the lease and every file are checked; each table's Published as committed, in the order given. A refusal
    is a CommitConflict naming the table; on any failure before the commit, nothing staged is kept."""
    if not staged:
        return []
    try:
        # last before the commit: this attempt still holds the lease, and every file it names is there
        failpoints.reached("publish.files-written")
        attempt.check()
        for s in staged:
            check_written(s.table_id, run_id, s.written)
    except BaseException:
        abandon([s.transaction for s in staged])
        raise
    by_identifier = {s.identifier: s for s in staged}
    try:
        tables = commit_tables(catalog, [s.transaction for s in staged])
    except TablesCommitFailed as exc:
        raise commit_conflict(by_identifier[exc.table].table_id, run_id, pipeline, exc,
                              committed=[by_identifier[i].table_id for i in exc.committed]) from exc
    out = []
    for s, table in zip(staged, tables, strict=True):
        snapshot = table.current_snapshot()
        out.append(replace(s.published, snapshot_id=snapshot.snapshot_id if snapshot else None,
                           state_rows=_live_records(snapshot)))
    return out


def _write_position_deletes(replaced: DataFrame, table, tasks: list, deletes_dir: str, codec: str) -> None:
    """The replaced rows' positions as position-delete files, one per data file they delete from (as
    Iceberg's own writers since 1.8), in a folder of its own below its bucket's
    (``_cdc_b=<bucket>/_cdc_df=<its index in tasks>``): each row names its data file by the full path the
    table's metadata gives it."""
    from jobs.iceberg.row_delta import DELETE_FILE_PATH_ID, DELETE_POS_ID

    positions = replaced.select(BUCKET_COLUMN, FILE_COLUMN, ROW_COLUMN).join(
        F.broadcast(_file_keys(replaced.sparkSession, table, tasks, index=_DATA_FILE_DIR)), [BUCKET_COLUMN, FILE_COLUMN]
    ).select(
        # the spec's reserved field ids, written into the Parquet schema (Spark writes a field's
        # parquet.field.id), so that readers resolving columns by id find them
        F.col("file_path").alias("file_path", metadata={"parquet.field.id": DELETE_FILE_PATH_ID}),
        F.col(ROW_COLUMN).alias("pos", metadata={"parquet.field.id": DELETE_POS_ID}),
        F.col(BUCKET_COLUMN).alias(_BUCKET_DIR), _DATA_FILE_DIR,
    )
    # one task per data file's positions, one file each; the spec wants each file sorted by (file_path, pos)
    folders = [_BUCKET_DIR, _DATA_FILE_DIR]
    (positions.repartition(*folders).sortWithinPartitions(*folders, "file_path", "pos")
     .write.option("compression", codec).partitionBy(*folders).parquet(_spark_uri(deletes_dir)))


def _position_delete_file(txn, path: str, tasks: list):
    """The manifest entry's file of a position-delete file written by _write_position_deletes: in the
    partition and spec of the data file it deletes from, with its metrics (jobs.iceberg.row_delta)."""
    from jobs.iceberg.row_delta import position_delete_file

    folder = re.search(rf"/{_BUCKET_DIR}=\d+/{_DATA_FILE_DIR}=(\d+)/[^/]+$", path)
    if folder is None or int(folder.group(1)) >= len(tasks):
        raise ValueError(f"a position-delete file outside a data file's folder: {path}")
    return position_delete_file(txn, path, tasks[int(folder.group(1))].file)
