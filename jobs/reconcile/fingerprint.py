"""Value fingerprints at a source database: the rule of jobs.fold.fingerprints spelt in each database's SQL
(``source_fingerprint_sql``: PostgreSQL, MariaDB/MySQL, SQLite through two registered functions; SQL Server
and Oracle are written in docs/design/fingerprints.md), a table's fingerprints per bucket in one scan. The
property test (tests/integration/test_fingerprints.py) holds them to the rule's Python form.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from jobs.fold.fingerprints import _EXACT_POWER, _FACTORS, BUCKETS, FLOAT_DIGITS, MODULUS, md5_prefix, value_text
from jobs.fold.types import DECIMAL

# ---- SQL: a source table, in one scan ------------------------------------------------------------------

class SourceSql:
    """A database's form of the rule, over quoted column expressions (``quote``: the dialect's identifier
    quoting). PostgreSQL is the base; the others change what they spell differently."""

    name = "postgresql"
    # what the capture runs in its snapshot first: times read in UTC
    session_setup: tuple[str, ...] = ("SET LOCAL TIME ZONE 'UTC'",)

    def text(self, c: str, lake_type: str) -> str:
        t = lake_type.lower()
        decimal = DECIMAL.fullmatch(t)
        if t == "boolean":
            return self.boolean(c)
        if t in ("int", "bigint"):
            return self.integer(c)
        if decimal:
            return self.decimal(c, int(decimal.group(2)))
        return {"date": self.date, "timestamp": self.timestamp, "binary": self.binary}.get(t, self.string)(c)

    def boolean(self, c: str) -> str:
        return f"CASE WHEN CAST({c} AS BOOLEAN) THEN 'true' WHEN NOT CAST({c} AS BOOLEAN) THEN 'false' END"

    def integer(self, c: str) -> str:
        return f"CAST(CAST({c} AS BIGINT) AS TEXT)"

    def decimal(self, c: str, scale: int) -> str:
        return f"CAST(trim_scale(round(CAST({c} AS NUMERIC), {scale})) AS TEXT)"

    def date(self, c: str) -> str:
        return f"to_char(CAST({c} AS DATE), 'YYYY-MM-DD')"

    def timestamp(self, c: str) -> str:
        return f"to_char(CAST({c} AS TIMESTAMPTZ), 'YYYY-MM-DD HH24:MI:SS.US')"

    def binary(self, c: str) -> str:
        return f"encode(CAST({c} AS BYTEA), 'hex')"

    def string(self, c: str) -> str:
        return f"CAST({c} AS TEXT)"

    # a float: the same arithmetic as float_text, spelled in SQL over named steps (source_hashes_sql)
    double = "CAST({c} AS DOUBLE PRECISION)"
    log10 = "log({x})"
    pow10 = "power(CAST(10 AS DOUBLE PRECISION), {k})"
    int_text = "CAST(CAST(round({v}) AS BIGINT) AS TEXT)"
    length = "length({t})"
    rtrim0 = "rtrim({t}, '0')"
    arithmetic_floats = True  # False: text() renders floats too
    specials = ("WHEN {x} = 'NaN' THEN 'NaN' WHEN {x} = 'Infinity' THEN 'Infinity' "
                "WHEN {x} = '-Infinity' THEN '-Infinity' ")

    def float_exponent(self, x: str) -> str:
        """q: the exponent of the last of the value's significant digits (null for 0, NaN, infinities)."""
        return (f"CASE {self.specials.format(x=x)}WHEN {x} = 0 THEN NULL "
                f"ELSE FLOOR({self.log10.format(x=f'ABS({x})')}) - {FLOAT_DIGITS - 1} END")

    def float_scaled(self, x: str, q: str) -> str:
        """The value times 10^-q through the chain of exact factors (_factors)."""
        down, up = x, x
        for i in range(_FACTORS):
            factor = self.pow10.format(k=f"LEAST(GREATEST(ABS({q}) - {_EXACT_POWER * i}, 0), {_EXACT_POWER})")
            down, up = f"({down} / {factor})", f"({up} * {factor})"
        return f"CASE WHEN {q} > 0 THEN {down} ELSE {up} END"

    def float_text(self, x: str, q: str, m: str) -> str:
        """The text from the value, its exponent and its mantissa's digits ``m`` (trailing zeros moved out)."""
        stripped = self.rtrim0.format(t=m)
        zeros = f"({self.length.format(t=m)} - {self.length.format(t=stripped)})"
        exponent = self.cast_text(f"CAST({q} + {zeros} AS {self.int_type})")
        return (f"CASE {self.specials.format(x=x)}WHEN {x} = 0 THEN '0' "
                f"ELSE {self.concat([stripped, repr_sql('e'), exponent])} END")

    int_type = "BIGINT"

    def cast_text(self, v: str) -> str:
        return f"CAST({v} AS TEXT)"

    def concat(self, parts: Sequence[str]) -> str:
        """Parts joined; null when one is null."""
        return "(" + " || ".join(parts) + ")"

    def field(self, name: str, text: str) -> str:
        """``name=<length>:<text>;``, null where the value is."""
        return self.concat([repr_sql(f"{name}="), self.cast_text(self.char_length(text)), "':'", text, "';'"])

    def char_length(self, t: str) -> str:
        return f"char_length({t})"

    def join_fields(self, fields: Sequence[str]) -> str:
        """Fields joined, the null ones left out (PostgreSQL's concat takes at most 100 arguments)."""
        if not fields:
            return "''"
        chunks = [f"concat({', '.join(fields[i:i + 50])})" for i in range(0, len(fields), 50)]
        return chunks[0] if len(chunks) == 1 else f"concat({', '.join(chunks)})"

    def md5_number(self, text: str, hex_digits: int) -> str:
        padded = f"lpad(substr(md5(convert_to({text}, 'UTF8')), 1, {hex_digits}), 16, '0')"
        return f"CAST(CAST(('x' || {padded}) AS BIT(64)) AS BIGINT)"

    def bucket(self, key_text: str, buckets: int) -> str:
        return f"MOD({self.md5_number(key_text, 8)}, {buckets})"

    def row_sum(self, h: str) -> str:
        return f"SUM(CAST({h} AS NUMERIC))"


class MySql(SourceSql):
    name = "mysql"
    session_setup = ("SET time_zone = '+00:00'",)
    log10 = "LOG10({x})"
    pow10 = "POW(10, {k})"
    int_text = "CAST(CAST(ROUND({v}) AS SIGNED) AS CHAR)"
    rtrim0 = "TRIM(TRAILING '0' FROM {t})"
    specials = ""  # no NaN nor infinity in a column
    int_type = "SIGNED"

    def boolean(self, c: str) -> str:
        return f"CASE WHEN {c} THEN 'true' WHEN NOT {c} THEN 'false' END"

    def integer(self, c: str) -> str:
        return f"CAST(CAST({c} AS SIGNED) AS CHAR)"

    def decimal(self, c: str, scale: int) -> str:
        t = f"CAST(CAST({c} AS DECIMAL(65, {min(scale, 30)})) AS CHAR)"
        return f"CASE WHEN LOCATE('.', {t}) > 0 THEN TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {t})) ELSE {t} END"

    def date(self, c: str) -> str:
        return f"DATE_FORMAT({c}, '%Y-%m-%d')"

    def timestamp(self, c: str) -> str:
        return f"DATE_FORMAT({c}, '%Y-%m-%d %H:%i:%s.%f')"

    def binary(self, c: str) -> str:
        return f"LOWER(HEX({c}))"

    def string(self, c: str) -> str:
        return f"CAST({c} AS CHAR CHARACTER SET utf8mb4)"

    double = "CAST({c} AS DOUBLE)"

    def cast_text(self, v: str) -> str:
        return f"CAST({v} AS CHAR)"

    def concat(self, parts: Sequence[str]) -> str:
        return f"CONCAT({', '.join(parts)})"

    def join_fields(self, fields: Sequence[str]) -> str:
        return f"CONCAT_WS('', {', '.join(fields)})" if fields else "''"

    def md5_number(self, text: str, hex_digits: int) -> str:
        return f"CAST(CONV(SUBSTR(MD5({text}), 1, {hex_digits}), 16, 10) AS DECIMAL(20, 0))"

    def bucket(self, key_text: str, buckets: int) -> str:
        return f"MOD({self.md5_number(key_text, 8)}, {buckets})"

    def row_sum(self, h: str) -> str:
        return f"SUM({h})"


class Sqlite(SourceSql):
    """SQLite has no MD5: the rule's Python form, through functions registered on the connection
    (``register_sqlite``); the fingerprint sums in Python too (SQLite's integers are signed 64-bit)."""

    name = "sqlite"
    session_setup = ()
    arithmetic_floats = False

    def text(self, c: str, lake_type: str) -> str:
        return f"cdc_value_text({c}, {repr_sql(lake_type)})"

    def cast_text(self, v: str) -> str:
        return f"CAST({v} AS TEXT)"

    def char_length(self, t: str) -> str:
        return f"length({t})"

    def join_fields(self, fields: Sequence[str]) -> str:
        return " || ".join(f"COALESCE({f}, '')" for f in fields) if fields else "''"

    def md5_number(self, text: str, hex_digits: int) -> str:
        return f"cdc_md5_prefix({text}, {hex_digits})"

    def bucket(self, key_text: str, buckets: int) -> str:
        return f"cdc_md5_prefix({key_text}, 8) % {buckets}"

    def row_sum(self, h: str) -> str:
        return f"cdc_sum({h})"


DIALECTS: dict[str, SourceSql] = {"postgresql": SourceSql(), "mysql": MySql(), "mariadb": MySql(),
                                  "sqlite": Sqlite()}


def repr_sql(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _is_float(sql: SourceSql, lake_type: str) -> bool:
    return sql.arithmetic_floats and lake_type.lower() in ("float", "double")


def source_hashes_sql(sql: SourceSql, quote, table: str, columns: Mapping[str, str], key_columns: Sequence[str],
                      buckets: int = BUCKETS, also: Sequence[str] = (), with_texts: bool = False) -> str:
    """Each row's bucket ``b`` and hash ``h`` (and the columns ``also`` names, as they are; with ``with_texts``, each
    column's canonical text too, as ``t0``, ``t1``... in the order of the columns' sorted names) in a source table
    (``table``: its quoted name), read as the lake's columns of the same names and types hold them. Named steps,
    one per query level, so that no step's SQL is written out again in the next."""
    names = sorted(columns)
    floats = [i for i, n in enumerate(names) if _is_float(sql, columns[n])]
    kept = [f"a{j}" for j in range(len(also))]
    first = [*(f"{quote(c)} AS a{j}" for j, c in enumerate(also)),
             *(f"{sql.double.format(c=quote(n))} AS x{i}" if i in floats
               else f"{sql.text(quote(n), columns[n])} AS t{i}" for i, n in enumerate(names))]
    texts = [f"t{i}" for i in range(len(names)) if i not in floats]
    steps = [
        [f"x{i}" for i in floats] + [f"{sql.float_exponent(f'x{i}')} AS q{i}" for i in floats],
        [f"x{i}, q{i}" for i in floats] + [f"{sql.float_scaled(f'x{i}', f'q{i}')} AS s{i}" for i in floats],
        [f"x{i}, q{i}" for i in floats] + [f"{sql.int_text.format(v=f's{i}')} AS m{i}" for i in floats],
        [f"{sql.float_text(f'x{i}', f'q{i}', f'm{i}')} AS t{i}" for i in floats],
    ] if floats else []
    query = f"SELECT {', '.join(first)} FROM {table}"
    for n, step in enumerate(steps):
        query = f"SELECT {', '.join([*kept, *texts, *step])} FROM ({query}) AS f{n}"
    row = sql.join_fields([sql.field(n, f"t{i}") for i, n in enumerate(names)])
    key = sql.join_fields([sql.field(n, f"t{i}") for i, n in enumerate(names) if n in key_columns])
    b, h = sql.bucket(key, buckets), sql.md5_number(row, 16)
    shown = [f"t{i}" for i in range(len(names))] if with_texts else []
    return f"SELECT {', '.join([*kept, *shown, f'{b} AS b', f'{h} AS h'])} FROM ({query}) AS r"


def source_fingerprint_sql(sql: SourceSql, quote, table: str, columns: Mapping[str, str],
                           key_columns: Sequence[str], buckets: int = BUCKETS) -> str:
    """(bucket, rows, fingerprint) of a source table in one scan (``table``: its quoted name)."""
    hashes = source_hashes_sql(sql, quote, table, columns, key_columns, buckets)
    return (f"SELECT b AS bucket, COUNT(*) AS row_count, {sql.row_sum('h')} AS fingerprint "
            f"FROM ({hashes}) AS t GROUP BY b")


class _Sum:
    """SQLite's aggregate: the exact sum of unsigned hashes, as text."""

    def __init__(self) -> None:
        self.total = 0

    def step(self, value) -> None:
        if value is not None:
            self.total += int(value)

    def finalize(self) -> str:
        return str(self.total % MODULUS)


def register_sqlite(connection) -> None:
    """The functions ``Sqlite``'s SQL calls, on a sqlite3 connection."""
    connection.create_function("cdc_value_text", 2, value_text, deterministic=True)
    connection.create_function("cdc_md5_prefix", 2, _md5_prefix_text, deterministic=True)
    connection.create_aggregate("cdc_sum", 1, _Sum)


def _md5_prefix_text(text: str, hex_digits: int) -> str:
    # as text: the first 16 hex digits do not fit SQLite's signed integers
    return str(md5_prefix(text, hex_digits // 2))


def fetch_all(conn, statement: str) -> list[tuple]:
    """A statement's rows through the DB-API cursor, without parameters: pyformat drivers read no '%' of it as
    a placeholder (MySQL's DATE_FORMAT), and no ':' of a quoted name becomes a bind."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(statement)
        return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
    finally:
        cursor.close()
