"""Value fingerprints: Spark, real PostgreSQL, real MariaDB and SQLite give every row the same hash and every
bucket of keys the same fingerprint for the same values (jobs.reconcile.fingerprint), unicode, extreme
numbers and nulls among them. The rule's Python form is the reference the four are held to.
"""
from __future__ import annotations

import datetime as dt
import sqlite3
from decimal import Decimal

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.fold import fingerprints as rule
from jobs.reconcile import fingerprint as fp
from tests.support.databases import mariadb_server, postgres_server

# the lake's types of the table, and each database's column types holding them
LAKE = {"id": "bigint", "s": "string", "i": "int", "f": "double", "r": "float", "d": "decimal(12,3)",
        "ok": "boolean", "day": "date", "ts": "timestamp", "bin": "binary", "note": "string"}
KEYS = ["id"]
COLUMN_SQL = {
    "postgresql": {"id": "BIGINT PRIMARY KEY", "s": "TEXT", "i": "INTEGER", "f": "DOUBLE PRECISION", "r": "REAL",
                   "d": "NUMERIC(12,3)", "ok": "BOOLEAN", "day": "DATE", "ts": "TIMESTAMP(6)", "bin": "BYTEA",
                   "note": "VARCHAR(200)"},
    "mariadb": {"id": "BIGINT PRIMARY KEY", "s": "TEXT CHARACTER SET utf8mb4", "i": "INT", "f": "DOUBLE",
                "r": "FLOAT", "d": "DECIMAL(12,3)", "ok": "BOOLEAN", "day": "DATE", "ts": "DATETIME(6)",
                "bin": "BLOB", "note": "VARCHAR(200) CHARACTER SET latin1"},
    "sqlite": {c: "" for c in LAKE},
}

EDGE_ROWS = [
    {"id": 1, "s": "plain", "i": 0, "f": 0.0, "r": 0.0, "d": Decimal("0.000"), "ok": False,
     "day": dt.date(1970, 1, 1), "ts": dt.datetime(1970, 1, 1), "bin": b"", "note": ""},
    {"id": -9223372036854775808, "s": "naïve — 東京 🚀 \t\n'\";=:", "i": -2147483648, "f": 1.7976931348623157e308,
     "r": 3.4028234663852886e38, "d": Decimal("-999999999.999"), "ok": True, "day": dt.date(1000, 1, 1),
     "ts": dt.datetime(1000, 1, 1, 0, 0, 0, 1), "bin": bytes(range(256)), "note": "café"},
    {"id": 9223372036854775807, "s": "", "i": 2147483647, "f": -5e-324, "r": 1.401298464324817e-45,
     "d": Decimal("0.001"), "ok": None, "day": dt.date(9999, 12, 31), "ts": dt.datetime(9999, 12, 30, 23, 59, 59,
                                                                                           999999),
     "bin": None, "note": None},
    {"id": 4, "s": None, "i": None, "f": 2e23, "r": 0.1, "d": Decimal("12.500"), "ok": None, "day": None,
     "ts": None, "bin": b"\x00\xff", "note": "x" * 200},
    {"id": 5, "s": "1", "i": 1, "f": 1 / 3, "r": -2.5, "d": None, "ok": True, "day": dt.date(2024, 2, 29),
     "ts": dt.datetime(2024, 2, 29, 12, 0), "bin": b"1", "note": "1"},
    {"id": 6, "s": "x", "i": 7, "f": 123456789012345680.0, "r": 16777216.0, "d": Decimal("100"), "ok": False,
     "day": dt.date(2000, 1, 1), "ts": dt.datetime(2000, 1, 1, 0, 0, 0, 500000), "bin": b"a", "note": "y"},
]


@pytest.fixture(scope="module")
def engines():
    with postgres_server() as pg_url, mariadb_server() as maria:
        out = {"postgresql": sa.create_engine(pg_url), "mariadb": sa.create_engine(maria.url)}
        yield out
        for engine in out.values():
            engine.dispose()


def _create(conn, dialect: str) -> None:
    columns = ", ".join(f"{_quote(conn, c)} {t}" for c, t in COLUMN_SQL[dialect].items())
    conn.exec_driver_sql(f"CREATE TABLE values_t ({columns})")


def _quote(conn, name: str) -> str:
    return conn.dialect.identifier_preparer.quote(name) if hasattr(conn, "dialect") else f'"{name}"'


def _source_rows(conn, sql: fp.SourceSql, quote, rows: list[dict], placeholder: str) -> tuple[dict, list]:
    """The rows written to ``values_t``, then each row's (bucket, hash) and the table's fingerprints as the
    database computes them, in one snapshot with the session the capture sets up."""
    def run(statement: str) -> list[tuple]:
        return fp.fetch_all(conn, statement) if hasattr(conn, "exec_driver_sql") else conn.execute(statement).fetchall()

    names = list(LAKE)
    insert = f"INSERT INTO values_t ({', '.join(quote(c) for c in names)}) VALUES ({', '.join([placeholder] * len(names))})"
    for row in rows:
        conn.exec_driver_sql(insert, tuple(row[c] for c in names)) if hasattr(conn, "exec_driver_sql") else \
            conn.execute(insert, tuple(_sqlite_value(row[c]) for c in names))
    for statement in sql.session_setup:
        run(statement)
    per_row = fp.source_hashes_sql(sql, quote, "values_t", LAKE, KEYS, also=["id"])
    hashes = {int(r[0]): (int(r[1]), int(r[2]) % rule.MODULUS) for r in run(per_row)}
    buckets = run(fp.source_fingerprint_sql(sql, quote, "values_t", LAKE, KEYS))
    return hashes, sorted((int(b), int(n), int(f) % rule.MODULUS) for b, n, f in buckets)


def _sqlite_value(v):
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, dt.date):
        return v.isoformat(sep=" ") if isinstance(v, dt.datetime) else v.isoformat()
    return v


def _python(rows: list[dict]) -> tuple[dict, list]:
    hashes = {r["id"]: (rule.text_bucket(rule.row_text(r, {"id": "bigint"})), rule.text_hash(rule.row_text(r, LAKE)))
              for r in rows}
    sums: dict[int, list[int]] = {}
    for b, h in hashes.values():
        sums.setdefault(b, []).append(h)
    return hashes, sorted((b, len(hs), rule.add(*hs)) for b, hs in sums.items())


def _spark(spark, rows: list[dict]) -> tuple[dict, list]:
    from pyspark.sql import functions as F

    schema = ", ".join(f"{c} {t}" for c, t in LAKE.items())
    frame = spark.createDataFrame([{**r, "ts": r["ts"].replace(tzinfo=dt.UTC) if r["ts"] else None}
                                   for r in rows], schema)
    got = frame.select("id", rule.key_bucket({"id": "bigint"}).alias("b"), rule.row_hash(LAKE).alias("h")).collect()
    buckets = rule.bucket_fingerprints(frame, LAKE, KEYS).orderBy(F.col("bucket")).collect()
    return ({r["id"]: (r["b"], int(r["h"])) for r in got},
            [(r["bucket"], r["rows"], int(r["fingerprint"]) % rule.MODULUS) for r in buckets])


def _every_engine(spark, engines, rows: list[dict]) -> dict[str, tuple[dict, list]]:
    out = {"python": _python(rows), "spark": _spark(spark, rows)}
    for dialect, engine in engines.items():
        with engine.connect() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS values_t")
            _create(conn, dialect)
            conn.commit()
            out[dialect] = _source_rows(conn, fp.DIALECTS[dialect], conn.dialect.identifier_preparer.quote,
                                        rows, "%s")
            conn.rollback()
    lite = sqlite3.connect(":memory:")
    fp.register_sqlite(lite)
    lite.execute(f"CREATE TABLE values_t ({', '.join(LAKE)})")
    out["sqlite"] = _source_rows(lite, fp.DIALECTS["sqlite"], lambda n: f'"{n}"', rows, "?")
    return out


def _assert_agree(found: dict[str, tuple[dict, list]]) -> None:
    want_rows, want_buckets = found["python"]
    for engine, (rows, buckets) in found.items():
        differing = {k: (rows.get(k), v) for k, v in want_rows.items() if rows.get(k) != v}
        assert not differing, f"{engine}: rows whose (bucket, hash) differ from the rule's: {differing}"
        assert buckets == want_buckets, engine


def test_edge_values_hash_alike_everywhere(spark, engines):
    found = _every_engine(spark, engines, EDGE_ROWS)
    _assert_agree(found)
    # the rule's text of a few of them, as docs/design/fingerprints.md writes it
    assert rule.row_text(EDGE_ROWS[3], {"f": "double", "r": "float", "d": "decimal(12,3)", "bin": "binary"}) == \
        "bin=4:00ff;d=4:12.5;f=4:2e23;r=19:100000001490116e-15;"


_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30)
_rows = st.lists(st.fixed_dictionaries({
    "s": st.none() | _text,
    "i": st.none() | st.integers(-2 ** 31, 2 ** 31 - 1),
    "f": st.none() | st.floats(allow_nan=False, allow_infinity=False),
    "r": st.none() | st.floats(width=32, allow_nan=False, allow_infinity=False),
    "d": st.none() | st.decimals(min_value=Decimal("-999999999.999"), max_value=Decimal("999999999.999"),
                                 places=3, allow_nan=False, allow_infinity=False),
    "ok": st.none() | st.booleans(),
    "day": st.none() | st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)),
    "ts": st.none() | st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 30)),
    "bin": st.none() | st.binary(max_size=20),
    "note": st.none() | st.text(st.characters(min_codepoint=32, max_codepoint=255, exclude_categories=("Cc",)),
                                max_size=20),
}), min_size=1, max_size=40)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(rows=_rows)
def test_any_values_hash_alike_everywhere(spark, engines, rows):
    _assert_agree(_every_engine(spark, engines, [{"id": i, **r} for i, r in enumerate(rows)]))


def test_a_changed_value_changes_its_bucket_fingerprint_only():
    rows = [{"id": i, "s": f"v{i}"} for i in range(200)]
    types = {"id": "bigint", "s": "string"}
    before = _bucket_sums(rows, types)
    rows[17] = {"id": 17, "s": "changed"}
    after = _bucket_sums(rows, types)
    changed = {b for b in before if before[b] != after[b]}
    assert changed == {rule.text_bucket(rule.row_text({"id": 17}, {"id": "bigint"}))}
    # a row's fingerprint steps: + h(after) - h(before) brings the old sum to the new one
    bucket = changed.pop()
    step = rule.text_hash(rule.row_text(rows[17], types)) - rule.text_hash(rule.row_text({"id": 17, "s": "v17"}, types))
    assert rule.add(before[bucket], step) == after[bucket]


def _bucket_sums(rows, types) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in rows:
        b = rule.text_bucket(rule.row_text(r, {"id": "bigint"}))
        out[b] = rule.add(out.get(b, 0), rule.text_hash(rule.row_text(r, types)))
    return out
