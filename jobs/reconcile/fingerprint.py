"""Value fingerprints: a 64-bit hash of each row's canonical text, added up per bucket of keys modulo 2^64.

The rule (docs/design/fingerprints.md) is made three ways, one per kind of engine that must agree on it:
Spark column expressions for the lake's state (``row_hash``, ``key_bucket``), SQL for a source database
(``source_fingerprint_sql``: PostgreSQL, MariaDB/MySQL, SQLite through two registered functions; SQL Server
and Oracle as their documentation gives them), and plain Python for one row at a time (``row_text``: SQLite's
registered functions, and tests). The property test (tests/integration/test_fingerprints.py) holds all of
them to the same hash for the same values.

A row's text lists its non-null columns in name order as ``name=<length>:<text>;`` (length in characters):
a column added later, null in the older rows, leaves their text and hash as they were. The hash is the first
eight bytes of the text's UTF-8 MD5, big-endian, unsigned; a bucket is the first four bytes of the key's own
text's MD5 modulo the bucket count. Fingerprints add modulo 2^64, so a bucket's fingerprint changes by
``h(row after) - h(row before)`` with each change, whatever the order.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import math
import struct
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from jobs.fold.types import DECIMAL
from jobs.spark.sql import sql_ident, sql_str

BUCKETS = 64  # buckets of keys a table's fingerprint is kept in: what a mismatch narrows the keys down to
MODULUS = 2 ** 64
FLOAT_DIGITS = 15  # significant digits of a float's text: what a double holds for sure
_TS = "%Y-%m-%d %H:%M:%S.%f"
# a double's power of ten is exact up to 10^22: a float is scaled by a chain of such factors, the same
# correctly rounded operations in every engine (one inexact power would be each engine's own libm's)
_EXACT_POWER = 22
_FACTORS = 16  # enough for a subnormal's 10^338


def _factors(k: int) -> list[int]:
    """The exponents of the chain that scales by 10^k: 22, 22, ..., the rest, then zeros (one factor each)."""
    return [min(max(k - _EXACT_POWER * i, 0), _EXACT_POWER) for i in range(_FACTORS)]


# ---- Python: one value, one row ------------------------------------------------------------------------

def float_text(x: float) -> str:
    """A float's canonical text: ``<mantissa>e<exponent>``, the mantissa the value's 15 significant digits
    (rounded half to even) as an integer without trailing zeros, the exponent that of its last digit. The
    same arithmetic as the SQL and Spark forms (log10, an exact power of ten, one rounding)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    q = math.floor(math.log10(abs(x))) - (FLOAT_DIGITS - 1)
    scaled = x
    for j in _factors(abs(q)):
        scaled = scaled / 10.0 ** j if q > 0 else scaled * 10.0 ** j
    return _float_parts(round(scaled), q)


def _float_parts(m: int, q: int) -> str:
    while m and m % 10 == 0:  # 1.5 and 1.50: one text
        m, q = m // 10, q + 1
    return f"{m}e{q}"


def decimal_text(d: Decimal | int | str, scale: int) -> str:
    """A decimal's canonical text: rounded to its column's ``scale`` (half away from zero), plain, without
    trailing fraction zeros (12.50 and 12.5 are one value)."""
    from decimal import ROUND_HALF_UP

    value = Decimal(str(d)).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
    text = f"{value:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def value_text(value: Any, lake_type: str) -> str | None:
    """One value's canonical text as a column of ``lake_type`` holds it (None: null, left out of the row)."""
    if value is None:
        return None
    t = lake_type.lower()
    if t == "boolean":
        return "true" if value else "false"
    if t in ("int", "bigint"):
        return str(int(value))
    if t == "float":  # what a 32-bit column holds of it
        return float_text(struct.unpack("f", struct.pack("f", float(value)))[0])
    if t == "double":
        return float_text(float(value))
    decimal = DECIMAL.fullmatch(t)
    if decimal:
        return decimal_text(value, int(decimal.group(2)))
    if t == "date":
        return (value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))).isoformat()
    if t == "timestamp":
        return _timestamp_text(value)
    if t == "binary":
        return bytes(value).hex()
    return value if isinstance(value, str) else str(value)


def _timestamp_text(value: Any) -> str:
    if not isinstance(value, dt.datetime):
        value = dt.datetime.fromisoformat(str(value))
    if value.tzinfo is not None:  # an instant: its UTC wall time; a naive time is taken as UTC already
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value.strftime(_TS)


def row_text(row: Mapping[str, Any], columns: Mapping[str, str]) -> str:
    """The canonical text of a row: ``name=<length>:<text>;`` for each non-null column, by name."""
    parts = []
    for name in sorted(columns):
        text = value_text(row.get(name), columns[name])
        if text is not None:
            parts.append(f"{name}={len(text)}:{text};")
    return "".join(parts)


def text_hash(text: str) -> int:
    """The first eight bytes of the text's UTF-8 MD5, as an unsigned integer."""
    return int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "big")


def text_bucket(text: str, buckets: int = BUCKETS) -> int:
    return int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:4], "big") % buckets


def add(*fingerprints: int) -> int:
    return sum(fingerprints) % MODULUS


def hex_of(fingerprint: int) -> str:
    """How reports write a fingerprint: 16 hex digits."""
    return f"{fingerprint % MODULUS:016x}"


# ---- Spark: the lake's rows -------------------------------------------------------------------------
# Spark SQL text, so that the fold's own aggregate (jobs.fold.core) hashes its rows by the same rule as a
# query over the state does. A value used more than once is bound once (``_bind``): SQL inside a lambda
# repeats no subexpression for us.

def _bind(value_sql: str, name: str, body_sql: str) -> str:
    """``body_sql`` with ``name`` standing for the value of ``value_sql``, evaluated once."""
    return f"transform(array({value_sql}), {name} -> {body_sql})[0]"


def spark_value_text(v: str, lake_type: str) -> str:
    """Spark SQL of ``value_text`` over the SQL ``v`` of a value of ``lake_type`` (the session's time zone is
    UTC)."""
    t = lake_type.lower()
    if t == "boolean":
        return f"CASE WHEN {v} THEN 'true' WHEN NOT {v} THEN 'false' END"
    if t in ("float", "double"):
        return _bind(f"CAST({v} AS DOUBLE)", "_fx", _SPARK_FLOAT)
    if DECIMAL.fullmatch(t):
        trimmed = f"regexp_replace(regexp_replace(CAST({v} AS STRING), '([.][0-9]*?)0+$', '$1'), '[.]$', '')"
        return _bind(trimmed, "_fd", "CASE WHEN _fd = '-0' THEN '0' ELSE _fd END")
    if t == "date":
        return f"date_format({v}, 'yyyy-MM-dd')"
    if t == "timestamp":
        return f"date_format({v}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')"
    if t == "binary":
        return f"lower(hex({v}))"
    return f"CAST({v} AS STRING)"


def _spark_float() -> str:
    """The text of the double ``_fx`` (float_text): its exponent ``_fq`` bound once, the chain of exact
    factors as a fold over their indexes, the digits ``_fm`` bound once."""
    finite = "NOT isnan(_fx) AND abs(_fx) != double('Infinity') AND _fx != 0"
    exponent = f"CASE WHEN {finite} THEN CAST(floor(log10(abs(_fx))) AS BIGINT) - {FLOAT_DIGITS - 1} ELSE 0 END"
    factor = f"power(10D, least(greatest(abs(_fq) - {_EXACT_POWER} * _fi, 0), {_EXACT_POWER}))"
    scaled = (f"aggregate(sequence(0, {_FACTORS - 1}), _fx, "
              f"(_fa, _fi) -> CASE WHEN _fq > 0 THEN _fa / {factor} ELSE _fa * {factor} END)")
    digits = f"CAST(CAST(bround({scaled}, 0) AS DECIMAL(20,0)) AS STRING)"
    text = _bind(digits, "_fm", "concat(regexp_replace(_fm, '0+$', ''), 'e', "
                                "CAST(_fq + length(_fm) - length(regexp_replace(_fm, '0+$', '')) AS STRING))")
    return ("CASE WHEN isnan(_fx) THEN 'NaN' WHEN _fx = double('Infinity') THEN 'Infinity' "
            "WHEN _fx = double('-Infinity') THEN '-Infinity' WHEN _fx = 0 THEN '0' "
            f"ELSE {_bind(exponent, '_fq', text)} END")


_SPARK_FLOAT = _spark_float()


def spark_row_text(values: Mapping[str, str], columns: Mapping[str, str]) -> str:
    """Spark SQL of ``row_text``: ``values`` the SQL of each column's value (by name), ``columns`` their
    lake types. Each text is bound once: its length and itself."""
    names = sorted(columns)
    if not names:
        return "''"
    texts = "named_struct(" + ", ".join(f"'t{i}', {spark_value_text(values[n], columns[n])}"
                                        for i, n in enumerate(names)) + ")"
    fields = ", ".join(f"concat({sql_str(n + '=')}, CAST(length(_ft.t{i}) AS STRING), ':', _ft.t{i}, ';')"
                       for i, n in enumerate(names))
    return _bind(texts, "_ft", f"concat_ws('', {fields})")


def spark_md5_number(text_sql: str, hex_digits: int) -> str:
    return f"CAST(conv(substr(md5({text_sql}), 1, {hex_digits}), 16, 10) AS DECIMAL(20,0))"


def _columns_sql(names) -> dict[str, str]:
    return {n: sql_ident(n) for n in names}


def row_hash(columns: Mapping[str, str]):
    """A row's hash as decimal(20,0) (unsigned 64-bit: Spark's sums of it do not overflow), over the
    columns of those names."""
    from pyspark.sql import functions as F

    return F.expr(spark_md5_number(spark_row_text(_columns_sql(columns), columns), 16))


def key_bucket(key_types: Mapping[str, str], buckets: int = BUCKETS):
    from pyspark.sql import functions as F

    return F.expr(f"CAST({spark_md5_number(spark_row_text(_columns_sql(key_types), key_types), 8)} % {buckets} AS INT)")


def bucket_fingerprints(rows, columns: Mapping[str, str], key_columns: Sequence[str], buckets: int = BUCKETS):
    """(bucket, rows, fingerprint) of a table's ``rows``: one aggregate, the fingerprint as a decimal sum
    (modulo 2^64 when read: ``add``)."""
    from pyspark.sql import functions as F

    keys = {k: columns[k] for k in key_columns}
    return rows.select(key_bucket(keys, buckets).alias("bucket"), row_hash(columns).alias("h")).groupBy(
        "bucket").agg(F.count(F.lit(1)).alias("rows"), F.sum("h").alias("fingerprint"))


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
                      buckets: int = BUCKETS, also: Sequence[str] = ()) -> str:
    """Each row's bucket ``b`` and hash ``h`` (and the columns ``also`` names, as they are) in a source table
    (``table``: its quoted name), read as the lake's columns of the same names and types hold them. Named steps,
    one per query level, so that no step's SQL is written out again in the next."""
    names = sorted(columns)
    floats = [i for i, n in enumerate(names) if _is_float(sql, columns[n])]
    kept = [f"a{j}" for j in range(len(also))]
    first = [*(f"{quote(c)} AS a{j}" for j, c in enumerate(also)),
             *(f"{sql.double.format(c=quote(n))} AS x{i}" if i in floats else f"{sql.text(quote(n), columns[n])} AS t{i}"
               for i, n in enumerate(names))]
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
    return f"SELECT {', '.join([*kept, f'{b} AS b', f'{h} AS h'])} FROM ({query}) AS r"


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
    connection.create_function("cdc_value_text", 2, _sqlite_value_text, deterministic=True)
    connection.create_function("cdc_md5_prefix", 2, _md5_prefix_text, deterministic=True)
    connection.create_aggregate("cdc_sum", 1, _Sum)


def _sqlite_value_text(value, lake_type: str) -> str | None:
    return value_text(value, lake_type)


def _md5_prefix_text(text: str, hex_digits: int) -> str:
    # as text: the first 16 hex digits do not fit SQLite's signed integers
    return str(int(hashlib.md5(text.encode("utf-8")).hexdigest()[:hex_digits], 16))


def fetch_all(conn, statement: str) -> list[tuple]:
    """A statement's rows through the DB-API cursor, without parameters: pyformat drivers read no '%' of it as
    a placeholder (MySQL's DATE_FORMAT), and no ':' of a quoted name becomes a bind."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(statement)
        return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
    finally:
        cursor.close()
