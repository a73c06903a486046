"""The reconcile stage: the source's row counts, each with the moment it is true, against the lake's.

Source counts come from a JSON counts file (jobs.reconcile.checkpoints.read_counts_file: a count, or checkpoints
with ``as_of`` / ``position``) or from a SQL source through a SQLAlchemy URL (jobs.reconcile.sources:
one consistent snapshot and its moment). Each becomes a checkpoint; the new ones and those earlier runs
left pending are judged against the lake's counts through time (jobs.reconcile.checkpoints, jobs.lake.ledger),
and the pending ones are kept in the lake for the run that reaches them. Table ids are
``<database>.<schema>.<table>`` made safe by ``jobs.model.record.table_part``, so the source table a table
id stands for is found by comparing names, not by trusting the id. No Spark.
"""
from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jobs.model.record import MAX_PART_CHARS, MISSING_PART, NAME_HASH_DIGITS, safe_part, table_id_forms
from jobs.model.reports import CheckpointVerdict, DecodeCounts, TableReconciliation
from jobs.model.table_rules import setting_for
from jobs.reconcile import checkpoints as cps
from jobs.reconcile.checkpoints import (
    BEHIND,
    MATCH,
    MISMATCH,
    UNKNOWN,
    Checkpoint,
    Judgement,
    Tolerance,
    parse_duration,
)
from jobs.reconcile.columns import ColumnRules, RowReader
from jobs.reconcile.landed_reach import DEFAULT_CAPTURE_DELAY, LandedReach

log = logging.getLogger(__name__)
# a table-id part made safe: its safe form, then _ and the hash of the name (jobs.model.record.table_part)
_HASHED = re.compile(rf"(.*)_[0-9a-f]{{{NAME_HASH_DIGITS}}}")

BALANCE_KEYS = ("landed", "decoded", "quarantined", "ignored")
KEEP_JUDGED = 1000  # judged checkpoints kept in the lake (the newest), beside the pending ones
__all__ = ["BEHIND", "MATCH", "MISMATCH", "UNKNOWN"]


class SourceCountsError(ValueError):
    """The source counts cannot be read at all (bad file, unreachable database)."""


@dataclass(frozen=True)
class ReconcileOptions:
    fmt: str | None = None  # the pipeline's format: what a checkpoint's position means
    tolerance: Tolerance | None = None  # for counts without a moment (judged at an assumed one)
    max_lag_s: float | None = None  # a pending checkpoint older than this (at ``as_of``) alerts
    as_of: int | None = None  # when the wait is measured (epoch microseconds); default: the capture's time
    key_rows_limit: int = 10_000  # tables up to this many rows name the keys of a mismatch
    # how long a committed change may take to reach its topic: a landing read past its interval's end
    # holds every change up to that end minus this (jobs.reconcile.landed_reach)
    capture_delay_s: float = parse_duration(DEFAULT_CAPTURE_DELAY)
    # per-table settings over the two above, (table pattern, value) in their order (jobs.model.table_rules)
    table_tolerances: tuple[tuple[str, Tolerance], ...] = ()
    table_key_rows_limits: tuple[tuple[str, int], ...] = ()
    # what a pipeline file declares of tables' columns: never shown, and numbers' allowed differences
    table_sensitive_columns: tuple[tuple[str, tuple[str, ...]], ...] = ()
    table_value_tolerances: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()
    # (table id, buckets): where a large table's values last differed, the keys a capture keeps the row hashes of
    drill_buckets: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def column_rules_of(self, table_id: str) -> ColumnRules:
        return ColumnRules(frozenset(setting_for(self.table_sensitive_columns, table_id, ())),
                           dict(setting_for(self.table_value_tolerances, table_id, ())))

    def tolerance_of(self, table_id: str) -> Tolerance | None:
        return setting_for(self.table_tolerances, table_id, self.tolerance)

    def key_rows_limit_of(self, table_id: str) -> int:
        return setting_for(self.table_key_rows_limits, table_id, self.key_rows_limit)


# ---- source checkpoints --------------------------------------------------------------------------
def source_checkpoints(spec: str, state: dict[str, dict], run_id: str, options: ReconcileOptions) -> tuple[
        list[Checkpoint], str]:
    """This run's checkpoints from a counts file or a SQL source, their table ids resolved; and what the
    source offered for the moment."""
    if is_database_url(spec):
        return _sql_checkpoints(spec, state, run_id, options)
    return _file_checkpoints(spec, sorted(state), run_id, options), "counts file"


def is_database_url(spec: str) -> bool:
    """Whether the source's counts are a database's (a SQLAlchemy URL), not a counts file."""
    return "://" in spec and not Path(spec).is_file()


def check_source_counts(spec: str, fmt: str | None) -> None:
    """Before any work (the command's argument check): a counts file that cannot be read or holds an entry
    that cannot be used, or a URL that does not parse, raises SourceCountsError in one line naming the
    file, the table and the field. The database of a URL is reached only at reconcile; a position is
    placed among the format's only when ``fmt`` is known."""
    if is_database_url(spec):
        _url(spec)
        return
    if not Path(spec).is_file():
        raise SourceCountsError(f"--source-counts {spec}: neither a SQLAlchemy URL nor an existing JSON file")
    try:
        cps.read_counts_file(_read_counts(spec)[0], spec, fmt, "check", place_positions=fmt is not None)
    except cps.CheckpointError as exc:
        raise SourceCountsError(str(exc)) from None


def _read_counts(path: str) -> tuple[Any, int]:
    """A counts file's JSON and when it was written (epoch microseconds): what a count without a moment
    was true at (the time taken after the read, so that it is never before what was read)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read()
            modified = os.fstat(fh.fileno()).st_mtime_ns // 1000
        return json.loads(text.decode("utf-8")), modified
    except RecursionError:  # json's decoder recurses per level: a hostile file must not end in a traceback
        raise SourceCountsError(f"source counts {path}: nested too deeply to be a counts file (a JSON object "
                                "{table: count or checkpoint})") from None
    except (OSError, ValueError) as exc:
        raise SourceCountsError(f"source counts {path}: cannot read a JSON object ({type(exc).__name__})") from None


def _file_checkpoints(path: str, table_ids: list[str], run_id: str, options: ReconcileOptions) -> list[Checkpoint]:
    listed, modified_at = _read_counts(path)
    try:
        found = cps.read_counts_file(listed, path, options.fmt, run_id, modified_at=modified_at)
    except cps.CheckpointError as exc:
        raise SourceCountsError(str(exc)) from None
    tables_of = _table_ids_of(listed, table_ids)
    # an ambiguous name, or a less specific spelling of a table listed more specifically, counts nothing
    return [replace(c, table_id=t, tolerance=c.tolerance or options.tolerance_of(t))
            for c in found for t in tables_of.get(c.table, [])]


def _table_ids_of(listed: dict[str, Any], table_ids: list[str]) -> dict[str, list[str]]:
    """The table ids each listed name stands for ("orders" may name the orders of two schemas); a name
    matching no table id stands for itself (a table the source has and the lake never published)."""
    out: dict[str, list[str]] = {}
    for table_id in table_ids:
        keys = _keys_for(table_id, listed)
        if len(keys) == 1:
            out.setdefault(keys[0], []).append(table_id)
        elif keys:  # e.g. "orders" and "ORDERS" both listed for one table
            log.warning("source counts: %s matches several entries %s; count unknown", table_id, keys)
    for key in listed:
        if key not in out and not _matches_any(key, table_ids):
            out[key] = [key]
    return out


def _key_matches(key: str, table_id: str, fold_case: bool = False) -> bool:
    """A counts key names a table id by its full id, ``schema.table`` or the table name alone; with
    ``fold_case``, in any case (as a case-insensitive source, or a person typing the file, spells it)."""
    if key == table_id:
        return True
    id_parts = table_id.split(".")
    key_parts = key.split(".")
    if len(key_parts) > len(id_parts):
        return False
    same = _same_in_any_case if fold_case else _same_part
    return all(same(name, part) for name, part in zip(key_parts, id_parts[-len(key_parts):]))


def _same_part(name: str, id_part: str) -> bool:
    """A source name stands as this id part: in its table-id form, or cut (an id too long, canonical)."""
    return id_part in table_id_forms([name])


def _same_in_any_case(name: str, id_part: str) -> bool:
    """_same_part in any case; for a name that needed replacing or cutting, its safe form without the
    hash (the hash is of the name as the messages spelt it, which a case-insensitive source may spell
    otherwise)."""
    if id_part.lower() in (form.lower() for form in table_id_forms([name])):
        return True
    unhashed = _HASHED.fullmatch(id_part)
    if not unhashed or (safe_part(name) == name and len(name) <= MAX_PART_CHARS):
        return False
    return unhashed.group(1).lower() in (safe_part(name).lower(), safe_part(name)[:MAX_PART_CHARS].lower())


def _keys_for(table_id: str, listed: dict[str, Any]) -> list[str]:
    if table_id in listed:  # the full id always wins over shorter names
        return [table_id]
    # names as the table id spells them, else in another case (the SQL source is matched so too)
    candidates = ([key for key in listed if _key_matches(key, table_id)]
                  or [key for key in listed if _key_matches(key, table_id, fold_case=True)])
    if len(candidates) > 1:  # prefer the most specific spelling (schema.table over table)
        most = max(len(k.split(".")) for k in candidates)
        candidates = [k for k in candidates if len(k.split(".")) == most]
    return candidates


def _matches_any(key: str, table_ids: list[str]) -> bool:
    return any(_key_matches(key, tid, fold_case=True) for tid in table_ids)


@contextmanager
def _source_database(url_text: str):
    """(a connection, the URL as shown) of a SQL source; its failures as SourceCountsError without the password."""
    import sqlalchemy as sa

    url, shown = _url(url_text)
    try:
        engine = sa.create_engine(url)
    except ImportError as exc:  # the dialect is known, its driver is not installed
        raise SourceCountsError(f"source {shown}: database driver not installed ({exc.name or exc})") from None
    except sa.exc.SQLAlchemyError as exc:
        raise SourceCountsError(f"source {shown}: {_driver_message(exc, url.password)}") from None
    try:
        with engine.connect() as conn:
            yield conn, shown
    except sa.exc.SQLAlchemyError as exc:
        raise SourceCountsError(f"source {shown}: {_driver_message(exc, url.password)}") from None
    finally:
        engine.dispose()


def _source_table(finder: _SourceTables, table_id: str, state: dict[str, dict], options: ReconcileOptions):
    """The source table of a state table (with its keys and the columns its values are read as), or None."""
    from jobs.reconcile.sources import Table

    found = finder.find(table_id)
    if found is None:
        return None
    keys = tuple(state[table_id].get("key_columns") or ())
    return Table(table_id, found[0], found[1], keys, options.key_rows_limit_of(table_id),
                 finder.fingerprinted(found, state[table_id].get("columns")),
                 dict(options.drill_buckets).get(table_id, ()))


def _sql_checkpoints(url_text: str, state: dict[str, dict], run_id: str,
                     options: ReconcileOptions) -> tuple[list[Checkpoint], str]:
    import sqlalchemy as sa

    from jobs.reconcile.sources import capture

    with _source_database(url_text) as (conn, shown):
        finder = _SourceTables(sa.inspect(conn), conn.dialect.name)
        tables = [t for t in (_source_table(finder, table_id, state, options) for table_id in sorted(state)) if t]
        conn.rollback()
        snap = capture(conn, tables, options.fmt, options.key_rows_limit)
    source = f"{snap.dialect} {shown}"
    found_cps = [Checkpoint(t.table_id, snap.rows[t.table_id], snap.moment, source, run_id, table_id=t.table_id,
                            taken_at=snap.taken_at, keys=tuple(snap.keys[t.table_id]) if t.table_id in snap.keys
                            else None, tolerance=options.tolerance_of(t.table_id) if snap.moment.assumed else None,
                            committed_by=snap.committed_by,
                            fingerprints=_fingerprints(snap.fingerprints.get(t.table_id)),
                            row_hashes=snap.row_hashes.get(t.table_id),
                            row_hash_buckets=snap.row_hash_buckets.get(t.table_id))
                 for t in tables]
    return found_cps, snap.how


class JudgedRows:
    """The rows of a value mismatch's keys (jobs.reconcile.columns.RowReader): the source's read again through
    its URL when the mismatch is judged (a counts file has none), the lake's from ``lake_texts`` (some keys'
    rows in a state table now, as canonical texts)."""

    def __init__(self, spec: str | None, state: dict[str, dict],
                 lake_texts: Callable[[str, Sequence[str]], dict[str, dict[str, str | None]] | None],
                 options: ReconcileOptions) -> None:
        self._spec, self._state, self._lake_texts, self._options = spec, state, lake_texts, options

    def source(self, table: str, keys: Sequence[str]) -> dict[str, tuple[str, dict[str, str | None]]] | None:
        import sqlalchemy as sa

        from jobs.fold import fingerprints as rule
        from jobs.reconcile.sources import current_rows

        if not self._spec or not is_database_url(self._spec) or table not in self._state:
            return None
        # the source reads only the rows of the keys' buckets (known from the lake's texts of the same keys)
        lake = self._lake_texts(table, keys) or {}
        buckets = {rule.bucket_of(texts, self._state[table]["key_columns"]) for texts in lake.values()}
        if not buckets:
            return {}
        try:
            with _source_database(self._spec) as (conn, _shown):
                found = _source_table(_SourceTables(sa.inspect(conn), conn.dialect.name), table, self._state,
                                      self._options)
                return None if found is None or not found.columns else current_rows(conn, found, keys,
                                                                                  tuple(sorted(buckets)))
        except SourceCountsError as exc:
            log.warning("the columns of %s's differing rows are not shown: %s", table, exc)
            return None

    def lake(self, table: str, keys: Sequence[str]) -> dict[str, dict[str, str | None]] | None:
        return self._lake_texts(table, keys)

    def rules(self, table: str) -> ColumnRules:
        return self._options.column_rules_of(table)


def _fingerprints(values: list[int] | None) -> tuple[str, ...] | None:
    from jobs.fold.fingerprints import hexes

    found = hexes(values)
    return None if found is None else tuple(found)


def _url(url_text: str):
    from sqlalchemy.engine import make_url

    try:
        url = make_url(url_text)
    except Exception:  # noqa: BLE001 - the text may hold a password: never echo it
        raise SourceCountsError("source counts: neither a JSON file nor a valid SQLAlchemy URL") from None
    shown = url.render_as_string(hide_password=True)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        # SQLite would silently create an empty database for a mistyped path
        if database and database != ":memory:" and not database.startswith("file:") and not Path(database).is_file():
            raise SourceCountsError(f"source {shown}: no such SQLite database file")
    return url, shown


def _driver_message(exc: Exception, password: str | None) -> str:
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [""])[0]
    if password:
        first = first.replace(str(password), "***")
    return f"{type(orig).__name__}: {first}"


class _SourceTables:
    """Finds the source table a (safe-made) table id stands for, through the database's catalog."""

    def __init__(self, inspector, dialect_name: str) -> None:
        self._inspector = inspector
        # SQLite's "schemas" are attached database files, never the schema part of a CDC table id
        self._has_schemas = dialect_name != "sqlite"
        self._schemas: list[str] | None = None
        self._names: dict[str | None, list[str]] = {}

    def find(self, table_id: str) -> tuple[str | None, str] | None:
        parts = table_id.split(".")
        name_part = parts[-1]
        schema_part = parts[-2] if len(parts) >= 2 else MISSING_PART
        schema: str | None = None
        if self._has_schemas and schema_part != MISSING_PART:
            schema = _pick(schema_part, self._schema_names(), f"schema of {table_id}")
            if schema is None:
                return None
        name = _pick(name_part, self._table_names(schema), f"table {table_id}")
        return None if name is None else (schema, name)

    def fingerprinted(self, found: tuple[str | None, str], columns: dict[str, str] | None) -> dict[str, str] | None:
        """The lake's ``columns`` when the source table has every one of them (its values are then read as
        the lake holds them), else None: its values are not compared."""
        if not columns:
            return None
        have = {c["name"] for c in self._inspector.get_columns(found[1], schema=found[0])}
        missing = sorted(set(columns) - have)
        if missing:
            log.warning("source table %s lacks the lake's columns %s: its values are not compared", found[1],
                        ", ".join(missing[:5]))
            return None
        return dict(columns)

    def _schema_names(self) -> list[str]:
        if self._schemas is None:
            self._schemas = list(self._inspector.get_schema_names())
        return self._schemas

    def _table_names(self, schema: str | None) -> list[str]:
        if schema not in self._names:
            names = list(self._inspector.get_table_names(schema=schema))
            try:
                names += self._inspector.get_view_names(schema=schema)
            except NotImplementedError:
                pass
            self._names[schema] = names
        return self._names[schema]


def _pick(id_part: str, names: list[str], what: str) -> str | None:
    """The one source name an id part stands for: exact, then made-safe, then case-insensitive (for a
    name that needed replacing, its safe form without the hash: the hash is of the name as the
    messages spelt it, which a case-insensitive source may spell otherwise)."""
    for same in (
        lambda n: n == id_part,
        lambda n: _same_part(n, id_part),
        lambda n: _same_in_any_case(n, id_part),
    ):
        hits = [n for n in names if same(n)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            log.warning("source: %s is ambiguous (%d candidates); count unknown", what, len(hits))
            return None
    return None


# ---- judging -------------------------------------------------------------------------------------
def reconcile_run(lake, pipeline: str, run_id: str, new: list[Checkpoint], state: dict[str, dict],
                  options: ReconcileOptions, keys_now: Callable[[str], list[str] | None] | None = None,
                  landing: LandedReach | None = None,
                  hashes_now: cps.HashesNow | None = None,
                  rows_now: RowReader | None = None) -> tuple[TableReconciliation, ...]:
    """Judge this run's checkpoints and those earlier runs left pending; keep the still pending (and the
    judged, for re-runs) in the lake; one row per table (state tables and source-only tables).
    ``landing``: the run's landing's evidence of reach (jobs.reconcile.landed_reach); ``hashes_now``: the row hash
    of each key a (small) table holds now, for the keys of a value mismatch; ``rows_now``: some keys' rows, for
    their columns."""
    from jobs.lake.ledger import ArrowSteps, read_ledger

    stored_rel, stored = _stored(lake, pipeline)
    todo = cps.merge_pending(stored, new, run_id)
    ledger, steps = read_ledger(lake, pipeline, through_run=run_id), ArrowSteps(lake)
    if landing is not None and landing.through is not None:
        ledger = [replace(r, landed_time=landing.through) if r.run_id == run_id else r for r in ledger]
    as_of = options.as_of if options.as_of is not None else max((c.taken_at for c in new if c.taken_at), default=None)
    judged = []
    for cp in todo:
        if cp.moment is None:  # no moment, and no time it was read at
            verdict = Judgement(UNKNOWN, reason="a count without a moment or a time it was read at")
        else:
            verdict = cps.judge(cp, ledger, steps, options.max_lag_s, as_of, keys_now, hashes_now, rows_now)
        judged.append((cp, verdict))
    _store(lake, stored_rel, stored, judged, run_id)
    return _table_rows(state, judged, _latest_judged(stored, run_id))


def _stored(lake, pipeline: str) -> tuple[str, list[Checkpoint]]:
    """Where the pipeline's checkpoints are kept, and those kept."""
    from jobs.lake.ledger import CHECKPOINTS

    rel = f"{lake.counts_dir(pipeline)}/{CHECKPOINTS}"
    return rel, cps.loads(lake.read_text(rel)) if lake.exists(rel) else []


def drill_buckets(lake, pipeline: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(table id, buckets) where a table's latest value verdict found buckets of keys that differ: the next
    capture keeps the row hashes of their keys (a table too large to keep every key's), so that its verdict
    names the keys and their columns (docs/design/fingerprints.md)."""
    latest: dict[str, dict] = {}
    for cp in _stored(lake, pipeline)[1]:
        if cp.judged_in is not None and cp.fingerprints is not None and cp.verdict:
            latest[cp.table_id or cp.table] = cp.verdict
    return tuple((table, tuple(sorted(int(b) for b in v["value_diff"].get("source") or {})))
                 for table, v in sorted(latest.items()) if v.get("value_diff") and v["verdict"] == MISMATCH)


def _latest_judged(stored: list[Checkpoint], run_id: str) -> dict[str, CheckpointVerdict]:
    """Per table, the verdict of the newest checkpoint an earlier run judged: what a run without a new
    count of the table shows beside its ``unknown`` (a quiet day is not a table nobody ever counted)."""
    latest: dict[str, CheckpointVerdict] = {}
    for cp in stored:
        if cp.verdict is not None and cp.judged_in not in (None, run_id):
            latest[cp.table_id or cp.table] = CheckpointVerdict.from_json({**cp.verdict, "judged_run": cp.judged_in})
    return latest


def _store(lake, rel: str, stored: list[Checkpoint], judged: list[tuple[Checkpoint, Judgement]], run_id: str) -> None:
    """The pending checkpoints and the judged ones (the newest), for the runs to come and for re-runs. A
    checkpoint judged by an earlier run keeps its verdict but no longer the source's keys nor its row hashes
    (they named the keys of its mismatch, which a re-run of the run that judged it names again; kept, the
    file would grow by a table's keys per judged checkpoint)."""
    now = {c.ident for c, _ in judged}
    kept = [c if c.judged_in is None else replace(c, keys=None, row_hashes=None, row_hash_buckets=None)
            for c in stored if c.ident not in now and c.taken_in != run_id]
    for cp, verdict in judged:
        if verdict.verdict == BEHIND:
            kept.append(replace(cp, judged_in=None, verdict=None))
        elif cp.moment is not None:  # judged: kept for re-runs and the previous verdict
            kept.append(replace(cp, judged_in=run_id, verdict=_verdict_dict(cp, verdict)))
    pending = [c for c in kept if c.judged_in is None]
    done = [c for c in kept if c.judged_in is not None][-KEEP_JUDGED:]
    lake.write_text(rel, cps.dumps(done + pending))


def _verdict_dict(cp: Checkpoint, v: Judgement) -> dict[str, Any]:
    lake_rows = v.lake_rows
    out = {"table": cp.table_id or cp.table, "verdict": v.verdict, "moment": cp.moment.text if cp.moment else None,
           "moment_kind": cp.moment.kind if cp.moment else None, "exact": bool(cp.moment and cp.moment.exact),
           "moment_assumed": cp.moment.assumed if cp.moment else None,
           "source_rows": cp.rows, "lake_rows": lake_rows, "source": cp.source, "taken_in": cp.taken_in,
           "taken_at": cps.format_time(cp.taken_at)}
    if isinstance(lake_rows, int):
        out["difference"] = lake_rows - cp.rows
    for name in ("reason", "judged_run", "lag", "key_diff", "value_diff"):
        if getattr(v, name) is not None:
            out[name] = getattr(v, name)
    return out


def _table_rows(state: dict[str, dict], judged: list[tuple[Checkpoint, Judgement]],
                latest: dict[str, CheckpointVerdict] | None = None) -> tuple[TableReconciliation, ...]:
    by_table: dict[str, list[CheckpointVerdict]] = {}
    for cp, verdict in judged:
        # the keys a verdict has are those the checkpoints' file keeps (reconciliation.json shows no null)
        by_table.setdefault(cp.table_id or cp.table, []).append(CheckpointVerdict.from_json(_verdict_dict(cp, verdict)))
    rows = []
    for table in sorted(set(state) | set(by_table)):
        verdicts = by_table.get(table, [])
        decided = tuple(v for v in verdicts if v.verdict != BEHIND)
        pending = tuple(v for v in verdicts if v.verdict == BEHIND)
        status, deciding = _status(decided, pending)
        rows.append(TableReconciliation(
            table=table,
            state_rows=int((state.get(table) or {}).get("state_rows") or 0),
            source_rows=deciding.source_rows if deciding else None,
            status=status,
            snapshot_id=(state.get(table) or {}).get("snapshot_id"),
            in_state=table in state,
            checkpoints=decided,
            pending=pending,
            overdue=any(v.lag is not None and v.lag.overdue for v in pending),
            # no count of this run: the last verdict an earlier run gave (never a reason to alert again)
            previous=(latest or {}).get(table) if not verdicts else None,
        ))
    return tuple(rows)


def _status(decided: tuple[CheckpointVerdict, ...],
            pending: tuple[CheckpointVerdict, ...]) -> tuple[str, CheckpointVerdict | None]:
    """mismatch (any), else match (any judged), else behind (pending), else unknown; and the checkpoint
    that says so."""
    for verdict in (MISMATCH, MATCH):
        hits = [v for v in decided if v.verdict == verdict]
        if hits:
            return verdict, hits[-1]
    if pending:
        return BEHIND, pending[-1]
    return UNKNOWN, decided[-1] if decided else None


def balance_problems(decode: DecodeCounts | None) -> list[str]:
    """Where ``landed = decoded + quarantined + ignored`` fails, in total or per table (empty = balanced; a
    count the report lacks is a problem, no report none)."""
    if decode is None:
        return []
    problems: list[str] = []
    total = decode.total if decode.has("total") else None
    checked = [("in total", total)] + [(f"for table {t}", counts) for t, counts in sorted(decode.tables.items())]
    for where, counts in checked:
        if counts is None:
            problems.append(f"counts {where} are missing")
            continue
        missing = [k for k in BALANCE_KEYS if not (counts.has(k) and isinstance(getattr(counts, k), int))]
        if missing:
            problems.append(f"counts {where} lack {', '.join(missing)}")
            continue
        landed, decoded, quarantined, ignored = (getattr(counts, k) for k in BALANCE_KEYS)
        if landed != decoded + quarantined + ignored:
            problems.append(
                f"{where}: landed {landed} != decoded {decoded} + quarantined {quarantined} "
                f"+ ignored {ignored} (= {decoded + quarantined + ignored})"
            )
    if decode.tables and total is not None and total.has("landed") and isinstance(total.landed, int):
        per_table = sum(c.landed or 0 for c in decode.tables.values() if c is not None)
        if per_table != total.landed:
            problems.append(f"tables' landed counts add up to {per_table}, total says {total.landed}")
    return problems
