"""Value fingerprints: a 64-bit hash of each row's canonical text, added up per bucket of keys modulo 2^64.

The rule (docs/design/fingerprints.md) is made three ways, one per kind of engine that must agree on it:
plain Python for one row at a time (``row_text``: SQLite's registered functions, and tests), Spark SQL for the
lake's state and for the rows the fold makes (``row_hash``, ``key_bucket``, ``map_hash_sql``), and each source
database's SQL (jobs.reconcile.fingerprint). The property test (tests/integration/test_fingerprints.py) holds all of
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

from jobs.fold.types import DECIMAL, from_canonical_sql
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
    return joined_text(value_texts(row, columns))


def value_texts(row: Mapping[str, Any], columns: Mapping[str, str]) -> dict[str, str | None]:
    """Each column's canonical text (None: NULL)."""
    return {name: value_text(row.get(name), lake_type) for name, lake_type in columns.items()}


def joined_text(texts: Mapping[str, str | None]) -> str:
    """A row's canonical text from its columns' texts."""
    return "".join(f"{name}={len(texts[name])}:{texts[name]};" for name in sorted(texts) if texts[name] is not None)


def bucket_of(texts: Mapping[str, str | None], key_columns: Sequence[str], buckets: int = BUCKETS) -> int:
    """The bucket of a row's key, from its columns' texts."""
    return text_bucket(joined_text({k: texts[k] for k in key_columns}), buckets)


def md5_prefix(text: str, size: int) -> int:
    """The first ``size`` bytes of the text's UTF-8 MD5, big-endian, as an unsigned integer."""
    return int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:size], "big")


def text_hash(text: str) -> int:
    return md5_prefix(text, 8)


def text_bucket(text: str, buckets: int = BUCKETS) -> int:
    return md5_prefix(text, 4) % buckets


def add(*fingerprints: int) -> int:
    return sum(fingerprints) % MODULUS


def hex_of(fingerprint: int) -> str:
    """How reports write a fingerprint: 16 hex digits."""
    return f"{fingerprint % MODULUS:016x}"


def hexes(fingerprints: Sequence[int] | None) -> list[str] | None:
    """Each bucket's fingerprint as reports write it (None: not known)."""
    return None if fingerprints is None else [hex_of(f) for f in fingerprints]


# ---- Spark: the lake's rows -------------------------------------------------------------------------
# Spark SQL text, so that the fold's own aggregate (jobs.fold.core) hashes its rows by the same rule as a
# query over the state does. A value used more than once is written twice where the SQL is a column of a
# projection (Spark's common subexpression elimination computes it once, in generated code); inside a lambda,
# which Spark interprets and where it eliminates nothing, it is bound once (``_bind``). A float's text is
# always bound: its parts sit in the branches of a CASE, which the elimination does not look into.

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
    if DECIMAL.fullmatch(t):  # Spark's decimals have no negative zero to write as 0
        return f"regexp_replace(regexp_replace(CAST({v} AS STRING), '([.][0-9]*?)0+$', '$1'), '[.]$', '')"
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
    # one exact power where it is enough (the chain's other factors are 1): the same result, without the fold
    scaled = (f"CASE WHEN abs(_fq) <= {_EXACT_POWER} THEN "
              f"CASE WHEN _fq > 0 THEN _fx / power(10D, _fq) ELSE _fx * power(10D, -_fq) END "
              f"ELSE aggregate(sequence(0, {_FACTORS - 1}), _fx, "
              f"(_fa, _fi) -> CASE WHEN _fq > 0 THEN _fa / {factor} ELSE _fa * {factor} END) END")
    digits = f"CAST(CAST(bround({scaled}, 0) AS DECIMAL(20,0)) AS STRING)"
    text = _bind(digits, "_fm", "concat(regexp_replace(_fm, '0+$', ''), 'e', "
                                "CAST(_fq + length(_fm) - length(regexp_replace(_fm, '0+$', '')) AS STRING))")
    return ("CASE WHEN isnan(_fx) THEN 'NaN' WHEN _fx = double('Infinity') THEN 'Infinity' "
            "WHEN _fx = double('-Infinity') THEN '-Infinity' WHEN _fx = 0 THEN '0' "
            f"ELSE {_bind(exponent, '_fq', text)} END")


_SPARK_FLOAT = _spark_float()


def spark_row_text(values: Mapping[str, str], columns: Mapping[str, str], bound: bool = False) -> str:
    """Spark SQL of ``row_text``: ``values`` the SQL of each column's value (by name), ``columns`` their
    lake types. Each text is used twice (its length and itself): ``bound`` for SQL inside a lambda."""
    names = sorted(columns)
    if not names:
        return "''"
    texts = {n: spark_value_text(values[n], columns[n]) for n in names}
    if bound:
        struct = "named_struct(" + ", ".join(f"'t{i}', {texts[n]}" for i, n in enumerate(names)) + ")"
        texts = {n: f"_ft.t{i}" for i, n in enumerate(names)}
    fields = ", ".join(f"concat({sql_str(n + '=')}, CAST(length({texts[n]}) AS STRING), ':', {texts[n]}, ';')"
                       for n in names)
    return _bind(struct, "_ft", f"concat_ws('', {fields})") if bound else f"concat_ws('', {fields})"


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


# ---- inside the fold: the rows it makes, as images ----------------------------------------------------
# A hash goes through the fold as its two 32-bit halves (``hi``, ``lo``) in 64-bit integers: their differences
# and sums never overflow, where the whole hash would need decimals (slow) or wrap (an error under ANSI SQL).
HALF = 2 ** 32


def map_hash_sql(row_map: str, types: Mapping[str, str], bound: bool = False) -> str:
    """Spark SQL of the hash of the row whose image is the map ``row_map``, as a struct of its halves (0 for
    no row): each column of ``types`` as the state types it. ``bound``: SQL inside a lambda (spark_row_text)."""
    values = {c: from_canonical_sql(f"try_element_at({row_map}, {sql_str(c)})", t) for c, t in types.items()}
    digest = f"md5({spark_row_text(values, types, bound)})"

    def halves(d: str, times: str = "") -> str:
        hi, lo = (f"CAST(conv(substr({d}, {at}, 8), 16, 10) AS BIGINT){times}" for at in (1, 9))
        return f"named_struct('hi', {hi}, 'lo', {lo})"
    if bound:
        return (f"CASE WHEN {row_map} IS NULL THEN named_struct('hi', 0L, 'lo', 0L) "
                f"ELSE {_bind(digest, '_fh', halves('_fh'))} END")
    # no row: both halves times 0, so that the digest is in no branch of a CASE and is computed once
    return halves(digest, f" * CAST({row_map} IS NOT NULL AS BIGINT)")


def step_deltas_sql(steps: str, step: str, index: str, prior_exists: str, prior_hash: str) -> dict[str, str]:
    """The change of the key's row count that its step ``step`` (at ``index`` of its ``steps``) makes, ``d`` (+1
    where a row now is and was not, -1 the reverse), and of its hash, ``dh_hi`` and ``dh_lo``: its own less
    the step's before (the prior row's first). SQL over the columns of an exploded row (no lambda)."""
    def before(field: str, prior: str) -> str:
        return f"(CASE WHEN {index} = 0 THEN {prior} ELSE {steps}[{index} - 1].{field} END)"
    return {"d": f"CAST({step}.x AS INT) - CAST({before('x', prior_exists)} AS INT)",
            "dh_hi": f"{step}.h.hi - {before('h', prior_hash)}.hi",
            "dh_lo": f"{step}.h.lo - {before('h', prior_hash)}.lo"}
