"""The reconcile stage: state row counts against the source's, and the counts that must balance.

Pure Python (no Spark). Source row counts come either from a JSON file ``{table: count}`` or from
a SQL source through a SQLAlchemy URL (``SELECT COUNT(*)`` per table, identifiers quoted by
SQLAlchemy). Table ids are ``<database>.<schema>.<table>`` made safe by ``jobs.canonical.table_part``,
so the source table a table id stands for is found by comparing names, not by trusting the id.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from jobs.canonical import MAX_PART_CHARS, MISSING_PART, NAME_HASH_DIGITS, safe_part, table_id_forms

log = logging.getLogger(__name__)
# a table-id part made safe: its safe form, then _ and the hash of the name (jobs.canonical.table_part)
_HASHED = re.compile(rf"(.*)_[0-9a-f]{{{NAME_HASH_DIGITS}}}")

MATCH, MISMATCH, UNKNOWN = "match", "mismatch", "unknown"
BALANCE_KEYS = ("landed", "decoded", "quarantined", "ignored")


class SourceCountsError(ValueError):
    """The source counts cannot be read at all (bad file, unreachable database)."""


# ---- source counts -------------------------------------------------------------------------------
def load_source_counts(spec: str, table_ids: list[str]) -> dict[str, int | None]:
    """Row count at the source of every table id (None = unknown), from a JSON file or a SQL URL.

    From a JSON file, the result also holds the listed tables that match no table id (under their
    key as written), so that a table missing from the lake is reported.
    """
    if _looks_like_url(spec):
        return _sql_counts(spec, table_ids)
    return _json_counts(spec, table_ids)


def _looks_like_url(spec: str) -> bool:
    return "://" in spec and not Path(spec).is_file()


def _json_counts(path: str, table_ids: list[str]) -> dict[str, int | None]:
    try:
        listed = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SourceCountsError(f"source counts {path}: cannot read a JSON object ({type(exc).__name__})") from None
    if not isinstance(listed, dict):
        raise SourceCountsError(f"source counts {path}: expected a JSON object {{table: count}}")
    for key, count in listed.items():
        # bool is an int in Python; a true/false count is a typo, not a number
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            raise SourceCountsError(f"source counts {path}: count of {key!r} is not a row count: {count!r}")

    out: dict[str, int | None] = {}
    used: set[str] = set()
    for table_id in table_ids:
        keys = _keys_for(table_id, listed)
        if len(keys) == 1:
            out[table_id] = listed[keys[0]]
            used.add(keys[0])
        else:
            out[table_id] = None
            if keys:  # e.g. "orders" listed while two schemas both publish an orders table
                log.warning("source counts: %s matches several entries %s; count unknown", table_id, keys)
                used.update(keys)
    for key, count in listed.items():
        if key not in used and not _matches_any(key, table_ids):
            out[key] = count  # listed at the source, absent from the lake
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


def _sql_counts(url_text: str, table_ids: list[str]) -> dict[str, int | None]:
    import sqlalchemy as sa
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

    try:
        engine = sa.create_engine(url)
    except ImportError as exc:  # the dialect is known, its driver is not installed
        raise SourceCountsError(f"source {shown}: database driver not installed ({exc.name or exc})") from None
    except sa.exc.SQLAlchemyError as exc:
        raise SourceCountsError(f"source {shown}: {_driver_message(exc, url.password)}") from None
    try:
        with engine.connect() as conn:
            finder = _SourceTables(sa.inspect(conn), conn.dialect.name)
            out: dict[str, int | None] = {}
            for table_id in table_ids:
                found = finder.find(table_id)
                if found is None:
                    out[table_id] = None
                    continue
                schema, name = found
                query = sa.select(sa.func.count()).select_from(sa.table(name, schema=schema))
                out[table_id] = int(conn.execute(query).scalar_one())
            return out
    except sa.exc.SQLAlchemyError as exc:
        raise SourceCountsError(f"source {shown}: {_driver_message(exc, url.password)}") from None
    finally:
        engine.dispose()


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


# ---- comparing -----------------------------------------------------------------------------------
def reconcile_counts(state: dict[str, dict], source_counts: dict[str, int | None]) -> list[dict]:
    """One row per table (state tables and source-only tables), sorted by table."""
    rows = []
    for table in sorted(set(state) | set(source_counts)):
        in_state = table in state
        state_rows = int(state[table].get("state_rows") or 0) if in_state else 0
        source_rows = source_counts.get(table)
        if source_rows is None:
            status = UNKNOWN
        elif not in_state:
            # a table the source has and the lake never published
            status = MISMATCH
        else:
            status = MATCH if state_rows == source_rows else MISMATCH
        rows.append(
            {
                "table": table,
                "state_rows": state_rows,
                "source_rows": source_rows,
                "status": status,
                "snapshot_id": state[table].get("snapshot_id") if in_state else None,
                "in_state": in_state,
            }
        )
    return rows


def balance_problems(decode_report: dict) -> list[str]:
    """Where ``landed = decoded + quarantined + ignored`` fails, in total or per table (empty = balanced)."""
    if not decode_report:
        return []
    problems: list[str] = []
    tables = decode_report.get("tables") or {}
    checked = [("in total", decode_report.get("total"))] + [
        (f"for table {table}", counts) for table, counts in sorted(tables.items())
    ]
    for where, counts in checked:
        if not isinstance(counts, dict):
            problems.append(f"counts {where} are missing")
            continue
        missing = [k for k in BALANCE_KEYS if not isinstance(counts.get(k), int)]
        if missing:
            problems.append(f"counts {where} lack {', '.join(missing)}")
            continue
        landed, decoded, quarantined, ignored = (counts[k] for k in BALANCE_KEYS)
        if landed != decoded + quarantined + ignored:
            problems.append(
                f"{where}: landed {landed} != decoded {decoded} + quarantined {quarantined} "
                f"+ ignored {ignored} (= {decoded + quarantined + ignored})"
            )
    total = decode_report.get("total")
    if tables and isinstance(total, dict) and isinstance(total.get("landed"), int):
        per_table = sum(c.get("landed", 0) for c in tables.values() if isinstance(c, dict))
        if per_table != total["landed"]:
            problems.append(f"tables' landed counts add up to {per_table}, total says {total['landed']}")
    return problems
