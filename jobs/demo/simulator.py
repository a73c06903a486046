"""A simulated source database that emits change events shaped exactly as Debezium sends them.

The source database itself is a SQLite database: every operation is applied to it with plain SQL
``INSERT`` / ``UPDATE`` / ``DELETE``, so it is an *independent* model of what the pipeline's
published state must equal (``expected_state``, ``source_counts``, ``save_sqlite``). The Debezium
messages are built from the same operations, the way a connector would see them in the log.

What is real-shaped here (Debezium 2.7, JsonConverter):

* envelope ``{"before","after","source","transaction","op","ts_ms","ts_us","ts_ns"}``; ``op`` is
  ``r`` (snapshot read), ``c``, ``u``, ``d``, ``t`` (truncate, PostgreSQL only); a delete is followed
  by a tombstone (same key, value ``None``), as with ``tombstones.on.delete=true``;
* a primary-key change is a ``d`` for the old key (header ``__debezium.newkey``), its tombstone, and
  a ``c`` for the new key (header ``__debezium.oldkey``), all at one source position; header values
  are the key as JSON without schema (Kafka Connect's ``SimpleHeaderConverter``);
* source positions per connector:

  - ``postgresql``: ``lsn`` (int, the change's own WAL position), ``txId``, ``sequence`` = JSON
    string ``["<lsn of the last COMMIT before this transaction>","<lsn>"]``; the first element is
    ``null`` for snapshot reads and for the first transaction streamed after a snapshot, as
    Debezium sends it. With ``concurrency > 1`` transactions interleave in the WAL, so ``lsn``
    alone is *not* commit order; ``sequence`` is (see ``position_sort_key``).
  - ``sqlserver``: ``commit_lsn`` / ``change_lsn`` like ``"0000002a:00000758:0005"``,
    ``event_serial_no`` 1 (2 for an update, which SQL Server CDC logs as a before/after pair).
    Snapshot reads carry the snapshot's ``commit_lsn`` with ``change_lsn`` and
    ``event_serial_no`` null.
  - ``mysql``: ``file`` (``mysql-bin.000003``), ``pos`` (start of the rows event), ``row`` (row
    inside that event), ``gtid`` (``<server uuid>:<n>``), ``server_id``, ``thread``. The binlog is
    written at commit, so it is in commit order; consecutive same-table same-kind rows of one
    transaction share one rows event. ``source.ts_ms`` has whole seconds (binlog timestamps).

* topics: ``<server>.<schema>.<table>`` (postgresql), ``<server>.<db>.<table>`` (mysql, which has
  no schema), ``<server>.<db>.<schema>.<table>`` (sqlserver, Debezium 2.x);
* Kafka partition = ``murmur2(key bytes) % n_partitions`` (Kafka's default partitioner, so the
  old and the new key of a primary-key change may land in different partitions); offsets are
  consecutive per partition; timestamps (CreateTime, ms) strictly increase in stream order.

Value encodings. ``with_schema=True`` is JsonConverter with ``schemas.enable=true`` and Debezium's
``decimal.handling.mode=precise``: decimals are ``bytes`` named
``org.apache.kafka.connect.data.Decimal`` (base64 of the big-endian two's-complement unscaled
integer), dates ``int32`` ``io.debezium.time.Date`` (days since epoch), timestamps ``int64``
``io.debezium.time.MicroTimestamp`` (µs since epoch of the wall clock, as for a PostgreSQL
``timestamp``, MySQL ``datetime(6)`` or SQL Server ``datetime2(6)``). ``with_schema=False`` is
``schemas.enable=false`` with ``decimal.handling.mode=string``: decimals are JSON strings with
their scale (``"12.30"``), dates int days, timestamps int µs. Booleans are JSON booleans
(PostgreSQL ``boolean``, MySQL ``bit(1)``, SQL Server ``bit``), doubles JSON numbers.

PostgreSQL tables declared ``replica_identity="default"`` send updates with ``before`` null and
deletes whose ``before`` holds only the key columns (other columns null); their ``toasted`` text
columns, when an update leaves them unchanged, arrive as ``__debezium_unavailable_value``.

Nothing here needs Spark; pyarrow is imported only by ``write_parquet``.
"""
from __future__ import annotations

import base64
import json
import random
import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pyarrow

UTC = UTC
_EPOCH_MS = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_NAIVE = datetime(1970, 1, 1)
_EPOCH_DATE = date(1970, 1, 1)
_ONE_US = timedelta(microseconds=1)

DEBEZIUM_VERSION = "2.7.3.Final"
CONNECTORS = ("postgresql", "sqlserver", "mysql")
Connector = Literal["postgresql", "sqlserver", "mysql"]
UNAVAILABLE_VALUE = "__debezium_unavailable_value"
NEWKEY_HEADER = "__debezium.newkey"
OLDKEY_HEADER = "__debezium.oldkey"
GARBAGE_KINDS = ("broken_json", "empty_object", "json_array", "unknown_op", "update_without_after")
OP_KINDS = ("insert", "update", "delete", "pk_change")
DEFAULT_MIX: dict[str, float] = {"insert": 0.35, "update": 0.45, "delete": 0.12, "pk_change": 0.08}
DEFAULT_START = datetime(2026, 11, 1, tzinfo=UTC)
_SNAPSHOT_ALLOWED = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
_MYSQL_SERVER_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
_MYSQL_FIRST_EVENT_POS = 157  # after the binlog magic, format description and previous-GTIDs events


# ---- column types ------------------------------------------------------------------------------
_TYPE_RE = re.compile(
    r"^\s*(?:(?P<simple>int|bigint|text|boolean|date|timestamp|double)"
    r"|decimal\s*\(\s*(?P<p>\d+)\s*,\s*(?P<s>\d+)\s*\))\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ColumnType:
    """One of: int, bigint, text, decimal(p,s), boolean, date, timestamp, double."""

    kind: str
    precision: int | None = None
    scale: int | None = None

    @classmethod
    def parse(cls, text: str) -> ColumnType:
        match = _TYPE_RE.match(text)
        if not match:
            raise ValueError(
                f"column type {text!r}: use int, bigint, text, decimal(p,s), boolean, date, timestamp or double"
            )
        if match["simple"]:
            return cls(match["simple"].lower())
        precision, scale = int(match["p"]), int(match["s"])
        if not 0 < precision <= 38 or scale > precision:
            raise ValueError(f"column type {text!r}: need 0 < precision <= 38 and scale <= precision")
        return cls("decimal", precision, scale)

    @property
    def sqlite_type(self) -> str:
        # decimals, dates and timestamps are stored as exact text: SQLite's NUMERIC affinity
        # would turn "12.30" into the float 12.3
        return {"int": "INTEGER", "bigint": "INTEGER", "boolean": "INTEGER", "double": "REAL"}.get(
            self.kind, "TEXT"
        )


# ---- table specs -------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableSpec:
    """A source table. ``columns`` is a sequence of (name, type) pairs, in table order.

    ``schema`` is ignored by the mysql connector (MySQL has databases only).
    ``replica_identity`` and ``toasted`` matter for the postgresql connector only.
    """

    db: str
    schema: str | None
    name: str
    columns: Sequence[tuple[str, str]]
    primary_key: Sequence[str]
    replica_identity: Literal["full", "default"] = "full"
    toasted: Sequence[str] = ()

    def __post_init__(self) -> None:
        columns = tuple((str(n), str(t)) for n, t in self.columns)
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "primary_key", tuple(self.primary_key))
        object.__setattr__(self, "toasted", tuple(self.toasted))
        names = [n for n, _ in columns]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"table {self.name!r}: columns must be non-empty and unique")
        types = {n: ColumnType.parse(t) for n, t in columns}
        object.__setattr__(self, "_types", types)
        object.__setattr__(self, "_names", tuple(names))
        object.__setattr__(self, "_value_columns", tuple(n for n in names if n not in self.primary_key))
        if not self.primary_key or any(k not in types for k in self.primary_key):
            raise ValueError(f"table {self.name!r}: primary key {self.primary_key} must name columns")
        for k in self.primary_key:
            if types[k].kind not in ("int", "bigint", "text"):
                raise ValueError(f"table {self.name!r}: key column {k!r} must be int, bigint or text")
        if len(self.primary_key) == len(names):
            raise ValueError(f"table {self.name!r}: needs at least one non-key column")
        if self.replica_identity not in ("full", "default"):
            raise ValueError(f"table {self.name!r}: replica_identity is 'full' or 'default'")
        for t in self.toasted:
            if t not in types or types[t].kind != "text" or t in self.primary_key:
                raise ValueError(f"table {self.name!r}: toasted column {t!r} must be a non-key text column")

    @property
    def column_names(self) -> tuple[str, ...]:
        return self._names  # type: ignore[attr-defined]

    @property
    def value_columns(self) -> tuple[str, ...]:
        return self._value_columns  # type: ignore[attr-defined]

    def column_type(self, column: str) -> ColumnType:
        return self._types[column]  # type: ignore[attr-defined]


# a small inventory schema (a single and a composite key, every column kind) that the workload tests
# and bench.key_moves simulate
INVENTORY_TABLES = [
    TableSpec("inv", "public", "items",
              [("id", "int"), ("name", "text"), ("price", "decimal(10,2)"), ("added", "date"),
               ("seen_at", "timestamp"), ("active", "boolean"), ("ratio", "double")],
              ["id"], replica_identity="full"),
    TableSpec("inv", "public", "stock",
              [("item_id", "bigint"), ("site", "text"), ("qty", "int"), ("note", "text")],
              ["item_id", "site"], replica_identity="full"),
]


# ---- value conversions -------------------------------------------------------------------------
def decimal_to_connect_bytes(value: Decimal, scale: int) -> str:
    """Kafka Connect's Decimal: base64 of the unscaled value as Java's BigInteger.toByteArray()."""
    unscaled = int(value.scaleb(scale).to_integral_value())
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    raw = unscaled.to_bytes(bits // 8 + 1, "big", signed=True)
    return base64.b64encode(raw).decode("ascii")


def connect_bytes_to_decimal(encoded: str, scale: int) -> Decimal:
    unscaled = int.from_bytes(base64.b64decode(encoded), "big", signed=True)
    return Decimal(unscaled).scaleb(-scale)


def _decimal_text(value: Decimal, scale: int) -> str:
    return format(value.quantize(Decimal(1).scaleb(-scale)), "f")


def encode_value(ctype: ColumnType, value: Any, with_schema: bool) -> Any:
    """A typed Python value as Debezium writes it in JSON (see the module docstring)."""
    if value is None:
        return None
    kind = ctype.kind
    if kind == "decimal":
        assert ctype.scale is not None
        return decimal_to_connect_bytes(value, ctype.scale) if with_schema else _decimal_text(value, ctype.scale)
    if kind == "date":
        return (value - _EPOCH_DATE).days
    if kind == "timestamp":
        return (value - _EPOCH_NAIVE) // _ONE_US
    if kind == "boolean":
        return bool(value)
    return value


def _to_sqlite(ctype: ColumnType, value: Any) -> Any:
    if value is None:
        return None
    kind = ctype.kind
    if kind == "decimal":
        assert ctype.scale is not None
        return _decimal_text(value, ctype.scale)
    if kind == "date":
        return value.isoformat()
    if kind == "timestamp":
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if kind == "boolean":
        return int(value)
    return value


def _from_sqlite(ctype: ColumnType, value: Any) -> Any:
    if value is None:
        return None
    kind = ctype.kind
    if kind == "decimal":
        return Decimal(value)
    if kind == "date":
        return date.fromisoformat(value)
    if kind == "timestamp":
        return datetime.fromisoformat(value)
    if kind == "boolean":
        return bool(value)
    return value


def _connect_field(column: str, ctype: ColumnType, optional: bool) -> dict[str, Any]:
    """A field of a Connect struct schema as JsonConverter writes it."""
    kind = ctype.kind
    simple = {"int": "int32", "bigint": "int64", "text": "string", "boolean": "boolean", "double": "double"}
    if kind in simple:
        return {"type": simple[kind], "optional": optional, "field": column}
    if kind == "decimal":
        return {
            "type": "bytes",
            "optional": optional,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": str(ctype.scale), "connect.decimal.precision": str(ctype.precision)},
            "field": column,
        }
    logical = {"date": ("int32", "io.debezium.time.Date"), "timestamp": ("int64", "io.debezium.time.MicroTimestamp")}
    connect_type, name = logical[kind]
    return {"type": connect_type, "optional": optional, "name": name, "version": 1, "field": column}


def _f(connect_type: str, field_name: str, optional: bool = True, **extra: Any) -> dict[str, Any]:
    return {"type": connect_type, "optional": optional, **extra, "field": field_name}


def _source_schema(connector: str) -> dict[str, Any]:
    fields = [
        _f("string", "version", False),
        _f("string", "connector", False),
        _f("string", "name", False),
        _f("int64", "ts_ms", False),
        _f("string", "snapshot", True, name="io.debezium.data.Enum", version=1,
           parameters={"allowed": _SNAPSHOT_ALLOWED}, default="false"),
        _f("string", "db", False),
        _f("string", "sequence"),
        _f("int64", "ts_us"),
        _f("int64", "ts_ns"),
    ]
    if connector == "postgresql":
        fields += [_f("string", "schema", False), _f("string", "table", False), _f("int64", "txId"),
                   _f("int64", "lsn"), _f("int64", "xmin")]
    elif connector == "sqlserver":
        fields += [_f("string", "schema", False), _f("string", "table", False), _f("string", "change_lsn"),
                   _f("string", "commit_lsn"), _f("int64", "event_serial_no")]
    else:
        fields += [_f("string", "table"), _f("int64", "server_id", False), _f("string", "gtid"),
                   _f("string", "file", False), _f("int64", "pos", False), _f("int32", "row", False),
                   _f("int64", "thread"), _f("string", "query")]
    return {"type": "struct", "fields": fields, "optional": False,
            "name": f"io.debezium.connector.{connector}.Source", "version": 1, "field": "source"}


_TRANSACTION_SCHEMA = {
    "type": "struct",
    "fields": [_f("string", "id", False), _f("int64", "total_order", False),
               _f("int64", "data_collection_order", False)],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}


def _dumps(obj: Any) -> str:
    # JsonConverter (Jackson) writes compact JSON and keeps non-ASCII characters as UTF-8
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# ---- Kafka's default partitioner ---------------------------------------------------------------
def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (signed 32-bit result), used by its default partitioner."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_partition(key: bytes, n_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % n_partitions


# ---- ordering ------------------------------------------------------------------------------------
def position_sort_key(source: Mapping[str, Any]) -> tuple:
    """The order Debezium defines for the ``source`` block of one connector (reference for tests).

    postgresql: (last commit lsn, lsn) from ``sequence``, a null last commit counting as ``lsn``;
    sqlserver: (commit_lsn, change_lsn, event_serial_no); mysql: (binlog file number, pos, row).
    """
    connector = source.get("connector")
    if connector == "postgresql":
        last_commit, lsn = json.loads(source["sequence"]) if source.get("sequence") else (None, None)
        lsn_value = int(lsn) if lsn is not None else int(source["lsn"])
        return (int(last_commit) if last_commit is not None else lsn_value, lsn_value)
    if connector == "sqlserver":
        return (source["commit_lsn"] or "", source["change_lsn"] or "", source["event_serial_no"] or 0)
    if connector == "mysql":
        return (int(source["file"].rsplit(".", 1)[-1]), int(source["pos"]), int(source["row"]))
    raise ValueError(f"unknown connector {connector!r}")


# ---- the stream --------------------------------------------------------------------------------
@dataclass
class StreamEntry:
    """One message of the simulated topic stream, before encoding.

    kind: ``change`` (a Debezium event), ``tombstone`` (value None after a delete), ``redelivery``
    (a copy of entry ``original``), ``garbage`` (a malformed value of ``garbage_kind``).
    """

    kind: str
    table: str | None
    kafka_ts_ms: int
    op: str | None = None
    key: dict[str, Any] | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    source: dict[str, Any] | None = None
    proc_us: int = 0
    headers: tuple[tuple[str, dict[str, Any]], ...] = ()
    tx_seq: int | None = None  # commit order of the transaction that produced it
    original: int | None = None
    garbage_kind: str | None = None


@dataclass
class Transaction:
    """An open source transaction (a handle; use ``SourceSimulator.begin`` / ``commit``)."""

    txid: int
    changes: list[_Change] = field(default_factory=list)
    locks: set[tuple[str, tuple]] = field(default_factory=set)
    open: bool = True
    target_size: int = 1


@dataclass
class CommitPoint:
    """The source after one commit: its time (epoch us), the log position just after it (postgresql: an
    LSN past the commit record; mysql: ``file:offset`` where the next transaction starts), row counts."""

    time_us: int
    position: str | None
    counts: dict[str, int]


@dataclass
class _Change:
    table: str
    op: str
    key: dict[str, Any]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    headers: tuple[tuple[str, dict[str, Any]], ...] = ()
    lsn: Any = None  # postgresql int / sqlserver str, allocated when the change is made
    serial: int = 1
    same_position_as_previous: bool = False  # second half of a primary-key change


# ---- word lists for plausible values -----------------------------------------------------------
_FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Ken", "Linus", "Margaret", "Donald", "Frances",
          "Tim", "Radia", "John", "Katherine", "Dennis", "Hedy", "Niklaus", "Sophie", "Yukihiro", "Guido")
_LAST = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Thompson", "Torvalds", "Hamilton", "Knuth",
         "Allen", "Berners-Lee", "Perlman", "Backus", "Johnson", "Ritchie", "Lamarr", "Wirth", "Wilson")
_WORDS = ("alpha", "bravo", "delta", "echo", "harbor", "juniper", "kilo", "lumen", "nova", "orbit",
          "pixel", "quartz", "raven", "sierra", "tango", "umber", "vector", "willow", "zephyr")
# values that exercise escaping and encoding: quotes, markup, control characters, non-BMP text
_AWKWARD = ("O'Brien", 'Zoë "Zo" Quinn', "<script>alert(1)</script>", "tab\tand\nnewline",
            "naïve café", "日本語テキスト", "emoji 🎉🚀", "back\\slash", "  padded  ", "")
_COUNTRIES = ("DE", "FR", "US", "JP", "BR", "IN", "NG", "SE", "CA", "AU")
_STATUSES = ("new", "paid", "packed", "shipped", "delivered", "cancelled", "returned")


def _check_arguments(tables: Sequence[TableSpec], connector: str, n_partitions: int, start: datetime) -> None:
    if connector not in CONNECTORS:
        raise ValueError(f"connector must be one of {CONNECTORS}, not {connector!r}")
    if n_partitions < 1:
        raise ValueError("n_partitions must be >= 1")
    if start.tzinfo is None:
        raise ValueError("start must be timezone-aware (UTC)")
    names = [t.name for t in tables]
    if not names or len(set(names)) != len(names):
        raise ValueError("tables must be non-empty and have distinct names (the SQLite model uses bare names)")


class SourceSimulator:
    """A source database (SQLite) plus the Debezium change stream its operations produce.

    Operations (each returns what it did): ``populate`` (rows that exist before capture starts,
    no messages), ``snapshot``, ``incremental_snapshot``, ``insert``, ``update``, ``change_key``,
    ``delete``, ``truncate``, ``random_ops``; grouping with ``begin``/``commit`` or
    ``with sim.transaction() as tx``. Faults: ``redeliver``, ``garbage``. Output:
    ``to_kafka_records`` / ``iter_kafka_records``, ``write_parquet``. Model: ``expected_state``,
    ``source_counts``, ``save_sqlite``.
    """

    def __init__(
        self,
        seed: int,
        tables: Sequence[TableSpec],
        connector: Connector = "postgresql",
        *,
        server: str = "dbserver1",
        n_partitions: int = 3,
        start: datetime = DEFAULT_START,
        op_interval_ms: float = 1000.0,
        tombstones: bool = True,
        sqlite_path: str | Path | None = None,
    ) -> None:
        _check_arguments(tables, connector, n_partitions, start)
        self.seed = seed
        self.connector: str = connector
        self.server = server
        self.n_partitions = n_partitions
        self.op_interval_ms = op_interval_ms
        self.tombstones = tombstones
        self.tables: dict[str, TableSpec] = {t.name: t for t in tables}
        self.garbage_count = 0
        self.redelivered_count = 0
        self._rng = random.Random(seed)
        self._db = sqlite3.connect(str(sqlite_path) if sqlite_path else ":memory:", isolation_level=None)
        self._stream: list[StreamEntry] = []
        self._now_us = (start - _EPOCH_MS) // _ONE_US
        self._last_proc_us = 0
        self._last_kafka_ms = 0
        self._open: list[Transaction] = []
        self._locks: dict[tuple[str, tuple], Transaction] = {}
        self._keys: dict[str, list[tuple]] = {t: [] for t in self.tables}
        self._key_index: dict[str, dict[tuple, int]] = {t: {} for t in self.tables}
        self._key_counter: dict[str, int] = {t: 0 for t in self.tables}
        self._tx_seq = 0
        self._garbage_cycle = 0
        self._start_log_positions()
        self._last_position: dict[str, Any] | None = None
        # committed row counts per table, and after each commit: (source time us, log position, counts)
        self._committed: dict[str, int] = {t: 0 for t in self.tables}
        self.commit_log: list[CommitPoint] = []
        self._schema_cache: dict[str, tuple[str, str]] = {}
        self._sql_cache: dict[str, tuple[str, str]] = {}
        for spec in tables:
            self._create_table(spec)

    def _start_log_positions(self) -> None:
        """Each connector's log positions, started at a seeded random point."""
        self._txid = 600 + self._rng.randrange(400)
        self._pg_lsn = 0x1600000 + 8 * self._rng.randrange(10_000)
        self._pg_last_commit: int | None = None
        self._ss_lsn = [0x2A, 0x750 + self._rng.randrange(0x100), 1]
        self._my_file = 3
        self._my_pos = _MYSQL_FIRST_EVENT_POS + self._rng.randrange(50_000)
        self._my_gtid = 1
        self._my_thread = 7
        self._my_rotate_bytes = 1_048_576

    # ---- SQLite model ------------------------------------------------------------------------
    @staticmethod
    def _q(identifier: str) -> str:
        return '"' + identifier.replace('"', '""') + '"'

    def _create_table(self, spec: TableSpec) -> None:
        cols = ", ".join(f"{self._q(n)} {spec.column_type(n).sqlite_type}" for n in spec.column_names)
        pk = ", ".join(self._q(k) for k in spec.primary_key)
        self._db.execute(f"CREATE TABLE {self._q(spec.name)} ({cols}, PRIMARY KEY ({pk}))")

    def _key_tuple(self, spec: TableSpec, key: Mapping[str, Any] | Any) -> tuple:
        if not isinstance(key, Mapping):
            if len(spec.primary_key) != 1:
                raise ValueError(f"table {spec.name!r} has a composite key: pass a dict")
            return (key,)
        return tuple(key[k] for k in spec.primary_key)

    def _key_dict(self, spec: TableSpec, key: tuple) -> dict[str, Any]:
        return dict(zip(spec.primary_key, key))

    def _where(self, spec: TableSpec) -> str:
        return " AND ".join(f"{self._q(k)} = ?" for k in spec.primary_key)

    def _statements(self, spec: TableSpec) -> tuple[str, str]:
        """(select-by-key, insert) statements of a table, built once."""
        cached = self._sql_cache.get(spec.name)
        if cached is None:
            cols = ", ".join(self._q(n) for n in spec.column_names)
            marks = ", ".join("?" for _ in spec.column_names)
            cached = (f"SELECT {cols} FROM {self._q(spec.name)} WHERE {self._where(spec)}",
                      f"INSERT INTO {self._q(spec.name)} ({cols}) VALUES ({marks})")
            self._sql_cache[spec.name] = cached
        return cached

    def _read_row(self, spec: TableSpec, key: tuple) -> dict[str, Any] | None:
        stored = [_to_sqlite(spec.column_type(k), v) for k, v in zip(spec.primary_key, key)]
        row = self._db.execute(self._statements(spec)[0], stored).fetchone()
        if row is None:
            return None
        return {n: _from_sqlite(spec.column_type(n), v) for n, v in zip(spec.column_names, row)}

    def _sql_insert(self, spec: TableSpec, row: Mapping[str, Any]) -> None:
        values = [_to_sqlite(spec.column_type(n), row.get(n)) for n in spec.column_names]
        self._db.execute(self._statements(spec)[1], values)

    def _sql_update(self, spec: TableSpec, key: tuple, changes: Mapping[str, Any]) -> None:
        sets = ", ".join(f"{self._q(c)} = ?" for c in changes)
        values = [_to_sqlite(spec.column_type(c), v) for c, v in changes.items()]
        values += [_to_sqlite(spec.column_type(k), v) for k, v in zip(spec.primary_key, key)]
        self._db.execute(f"UPDATE {self._q(spec.name)} SET {sets} WHERE {self._where(spec)}", values)

    def _sql_delete(self, spec: TableSpec, key: tuple) -> None:
        values = [_to_sqlite(spec.column_type(k), v) for k, v in zip(spec.primary_key, key)]
        self._db.execute(f"DELETE FROM {self._q(spec.name)} WHERE {self._where(spec)}", values)

    def expected_state(self, table: str) -> list[dict[str, Any]]:
        """The source table's current rows (typed Python values), ordered by primary key."""
        spec = self.tables[table]
        cols = ", ".join(self._q(n) for n in spec.column_names)
        order = ", ".join(self._q(k) for k in spec.primary_key)
        rows = self._db.execute(f"SELECT {cols} FROM {self._q(spec.name)} ORDER BY {order}").fetchall()
        return [
            {n: _from_sqlite(spec.column_type(n), v) for n, v in zip(spec.column_names, row)} for row in rows
        ]

    def source_counts(self) -> dict[str, int]:
        return {
            name: self._db.execute(f"SELECT COUNT(*) FROM {self._q(name)}").fetchone()[0] for name in self.tables
        }

    def save_sqlite(self, path: str | Path) -> Path:
        """Write the source database to a SQLite file (tables named by their bare names)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.unlink()
        dest = sqlite3.connect(str(target))
        try:
            self._db.backup(dest)
        finally:
            dest.close()
        return target

    # ---- key bookkeeping -------------------------------------------------------------------
    def _add_key(self, table: str, key: tuple) -> None:
        self._key_index[table][key] = len(self._keys[table])
        self._keys[table].append(key)

    def _remove_key(self, table: str, key: tuple) -> None:
        keys, index = self._keys[table], self._key_index[table]
        pos = index.pop(key)
        last = keys.pop()
        if pos < len(keys):
            keys[pos] = last
            index[last] = pos

    def _new_key(self, spec: TableSpec) -> tuple:
        self._key_counter[spec.name] += 1
        n = self._key_counter[spec.name]
        parts: list[Any] = []
        for i, k in enumerate(spec.primary_key):
            kind = spec.column_type(k).kind
            if i == 0:  # the counter makes the key unique
                parts.append(f"{spec.name[:3].upper()}-{n:06d}" if kind == "text" else n)
            else:
                parts.append(self._rng.choice(_WORDS) if kind == "text" else self._rng.randint(1, 9))
        return tuple(parts)

    def _pick_key(self, table: str, tx: Transaction | None) -> tuple | None:
        """A skewed choice: low slots of the key list are hot (a few keys get most changes)."""
        keys = self._keys[table]
        for _ in range(12):
            if not keys:
                return None
            key = keys[int(len(keys) * self._rng.random() ** 3)]
            holder = self._locks.get((table, key))
            if holder is None or holder is tx:
                return key
        return None

    # ---- random values -------------------------------------------------------------------------
    def _random_value(self, spec: TableSpec, column: str) -> Any:
        ctype = spec.column_type(column)
        rng = self._rng
        if rng.random() < 0.06:
            return None
        lname = column.lower()
        kind = ctype.kind
        if kind in ("int", "bigint"):
            if lname.endswith("_id"):
                return rng.randint(1, 500)
            if "qty" in lname or "quantity" in lname:
                return rng.randint(1, 20)
            return rng.randint(-1000, 2_000_000) if kind == "int" else rng.randint(-(2**40), 2**52)
        if kind == "text":
            if rng.random() < 0.08:
                return rng.choice(_AWKWARD)
            if "email" in lname:
                return f"{rng.choice(_FIRST).lower()}.{rng.choice(_LAST).lower()}{rng.randint(1, 999)}@example.com"
            if "name" in lname:
                return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
            if "country" in lname:
                return rng.choice(_COUNTRIES)
            if "status" in lname:
                return rng.choice(_STATUSES)
            return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))
        if kind == "decimal":
            assert ctype.precision is not None and ctype.scale is not None
            int_digits = min(ctype.precision - ctype.scale, 6)
            unscaled = rng.randrange(10 ** (int_digits + ctype.scale))
            if rng.random() < 0.05:
                unscaled = -unscaled
            return Decimal(unscaled).scaleb(-ctype.scale)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "date":
            return date(2020, 1, 1) + timedelta(days=rng.randrange(3650))
        if kind == "timestamp":
            now = _EPOCH_NAIVE + self._now_us * _ONE_US
            return now - timedelta(microseconds=rng.randrange(30 * 86_400_000_000))
        if kind == "double":
            # within [1e-3, 1e7): Python and Java print such doubles the same way (no exponent)
            return round(rng.uniform(0.001, 100_000.0), rng.choice((1, 2, 3, 6)))
        raise AssertionError(kind)

    def _random_row(self, spec: TableSpec, key: tuple) -> dict[str, Any]:
        row = self._key_dict(spec, key)
        for column in spec.value_columns:
            row[column] = self._random_value(spec, column)
        return row

    # ---- clock -----------------------------------------------------------------------------
    @property
    def now(self) -> datetime:
        return _EPOCH_MS + self._now_us * _ONE_US

    def _tick(self) -> None:
        self._now_us += int(self.op_interval_ms * 1000 * self._rng.uniform(0.5, 1.5))

    def _proc_us(self, base_us: int) -> int:
        """When the connector processed an event: after the commit, and after the previous event."""
        proc = max(self._last_proc_us + self._rng.randint(20, 400), base_us + self._rng.randint(800, 60_000))
        self._last_proc_us = proc
        return proc

    def _kafka_ms(self, proc_us: int) -> int:
        kafka = max(self._last_kafka_ms + 1, proc_us // 1000 + self._rng.randint(1, 15))
        self._last_kafka_ms = kafka
        return kafka

    # ---- log positions ---------------------------------------------------------------------
    def _next_pg_lsn(self) -> int:
        self._pg_lsn += 8 * self._rng.randint(7, 40)
        return self._pg_lsn

    def _next_ss_lsn(self) -> str:
        vlf, block, slot = self._ss_lsn
        if slot >= 0x1FF or self._rng.random() < 0.2:
            block += self._rng.randint(1, 0x40)
            slot = 1
        else:
            slot += 1
        if block > 0xFFFFF:
            vlf, block = vlf + 1, 0x10
        self._ss_lsn = [vlf, block, slot]
        return f"{vlf:08x}:{block:08x}:{slot:04x}"

    def _advance_binlog(self, nbytes: int) -> None:
        self._my_pos += nbytes
        if self._my_pos > self._my_rotate_bytes:
            self._my_file += 1
            self._my_pos = _MYSQL_FIRST_EVENT_POS

    # ---- source blocks -----------------------------------------------------------------------
    def topic(self, table: str) -> str:
        spec = self.tables[table]
        if self.connector == "postgresql":
            return f"{self.server}.{spec.schema}.{spec.name}"
        if self.connector == "mysql":
            return f"{self.server}.{spec.db}.{spec.name}"
        return f"{self.server}.{spec.db}.{spec.schema}.{spec.name}"

    def topics(self) -> list[str]:
        return [self.topic(t) for t in self.tables]

    def _source(self, spec: TableSpec, ts_us: int, snapshot: str, position: Mapping[str, Any]) -> dict[str, Any]:
        ts_ms = ts_us // 1000
        if self.connector == "mysql":  # binlog event timestamps have whole seconds
            ts_ms = ts_ms // 1000 * 1000
            ts_us = ts_ms * 1000
        source: dict[str, Any] = {
            "version": DEBEZIUM_VERSION,
            "connector": self.connector,
            "name": self.server,
            "ts_ms": ts_ms,
            "snapshot": snapshot,
            "db": spec.db,
            "sequence": None,
            "ts_us": ts_us,
            "ts_ns": ts_us * 1000,
        }
        if self.connector in ("postgresql", "sqlserver"):
            source["schema"] = spec.schema
        source["table"] = spec.name
        if self.connector == "postgresql":
            source.update(txId=position["txId"], lsn=position["lsn"], xmin=None)
            source["sequence"] = position["sequence"]
        elif self.connector == "sqlserver":
            source.update(change_lsn=position["change_lsn"], commit_lsn=position["commit_lsn"],
                          event_serial_no=position["event_serial_no"])
        else:
            source.update(server_id=223344, gtid=position["gtid"], file=position["file"], pos=position["pos"],
                          row=position["row"], thread=position["thread"], query=None)
        return source

    def _snapshot_position(self) -> dict[str, Any]:
        if self.connector == "postgresql":
            self._txid += 1
            lsn = self._next_pg_lsn()
            # streaming restarts after a snapshot, so its first transaction has no last commit yet
            self._pg_last_commit = None
            return {"txId": self._txid, "lsn": lsn, "sequence": _dumps([None, str(lsn)])}
        if self.connector == "sqlserver":
            return {"change_lsn": None, "commit_lsn": self._next_ss_lsn(), "event_serial_no": None}
        return {"gtid": None, "file": f"mysql-bin.{self._my_file:06d}", "pos": self._my_pos, "row": 0,
                "thread": None}

    def _current_position(self) -> dict[str, Any]:
        """Where the log is now, without moving it (for events that are not changes)."""
        if self.connector == "postgresql":
            last = self._pg_last_commit
            return {"txId": self._txid, "lsn": self._pg_lsn,
                    "sequence": _dumps([None if last is None else str(last), str(self._pg_lsn)])}
        if self.connector == "sqlserver":
            vlf, block, slot = self._ss_lsn
            lsn = f"{vlf:08x}:{block:08x}:{slot:04x}"
            return {"change_lsn": lsn, "commit_lsn": lsn, "event_serial_no": 1}
        return {"gtid": None, "file": f"mysql-bin.{self._my_file:06d}", "pos": self._my_pos, "row": 0,
                "thread": None}

    # ---- emission --------------------------------------------------------------------------
    def _append(self, entry: StreamEntry) -> None:
        self._stream.append(entry)

    def _emit_change(self, spec: TableSpec, op: str, key: dict[str, Any] | None, before: dict | None,
                     after: dict | None, source: dict[str, Any], base_us: int,
                     headers: tuple = (), tx_seq: int | None = None) -> None:
        proc = self._proc_us(base_us)
        self._append(StreamEntry("change", spec.name, self._kafka_ms(proc), op, key, before, after, source, proc,
                                 headers, tx_seq))
        if op == "d" and self.tombstones:
            proc = self._proc_us(base_us)
            self._append(StreamEntry("tombstone", spec.name, self._kafka_ms(proc), None, key, None, None, None,
                                     proc, headers, tx_seq))

    # ---- operations: bulk --------------------------------------------------------------------
    def populate(self, table: str, n: int) -> int:
        """Rows that exist before change capture starts: SQLite only, no messages."""
        self._require_no_open_tx("populate")
        spec = self.tables[table]
        for _ in range(n):
            key = self._new_key(spec)
            self._sql_insert(spec, self._random_row(spec, key))
            self._add_key(table, key)
        self._committed[table] += n
        # the log moved on while those rows were written
        self._pg_lsn += 8 * 12 * n
        self._advance_binlog(100 * n)
        self._txid += 1
        return n

    def snapshot(self, tables: str | Sequence[str] | None = None) -> int:
        """An initial (blocking) snapshot: op "r" for every row, all at one position.

        ``source.snapshot`` is ``first`` for the first row of the snapshot, ``last`` for its last
        row, ``first_in_data_collection`` / ``last_in_data_collection`` at table boundaries in
        between, ``true`` otherwise (Debezium 2.x). Returns the number of rows read.
        """
        self._require_no_open_tx("snapshot")
        names = list(self.tables) if tables is None else [tables] if isinstance(tables, str) else list(tables)
        position = self._snapshot_position()
        base_us = self._now_us
        images = [(self.tables[name], self.expected_state(name)) for name in names]
        images = [(spec, rows) for spec, rows in images if rows]
        total = 0
        for t_index, (spec, rows) in enumerate(images):
            first_table, last_table = t_index == 0, t_index == len(images) - 1
            for r_index, row in enumerate(rows):
                first_row, last_row = r_index == 0, r_index == len(rows) - 1
                if last_table and last_row:
                    marker = "last"
                elif first_table and first_row:
                    marker = "first"
                elif first_row:
                    marker = "first_in_data_collection"
                elif last_row:
                    marker = "last_in_data_collection"
                else:
                    marker = "true"
                key = {k: row[k] for k in spec.primary_key}
                source = self._source(spec, base_us, marker, position)
                self._emit_change(spec, "r", key, None, row, source, base_us)
                total += 1
        self._last_position = position
        self._now_us = max(self._now_us, self._last_proc_us)
        return total

    def incremental_snapshot(self, table: str, *, after_key: Mapping[str, Any] | None = None,
                             limit: int | None = None) -> dict[str, Any] | None:
        """One chunk of an incremental snapshot: op "r", ``snapshot="incremental"``.

        Rows with a key greater than ``after_key`` (primary-key order), at most ``limit``, read now
        and stamped with the current streaming position (that of the last change emitted), as
        Debezium does when it closes a chunk window. Run ``random_ops`` between chunks to
        interleave with streaming. Returns the last key read (None when the table is exhausted).
        """
        self._require_no_open_tx("incremental_snapshot")
        spec = self.tables[table]
        rows = self.expected_state(table)
        if after_key is not None:
            bound = self._key_tuple(spec, after_key)
            rows = [r for r in rows if self._key_tuple(spec, r) > bound]
        rows = rows[:limit] if limit is not None else rows
        if not rows:
            return None
        position = self._last_position or self._current_position()
        for row in rows:
            key = {k: row[k] for k in spec.primary_key}
            self._emit_change(spec, "r", key, None, row, self._source(spec, self._now_us, "incremental", position),
                              self._now_us)
        return {k: rows[-1][k] for k in spec.primary_key}

    # ---- operations: transactions ------------------------------------------------------------
    def _require_no_open_tx(self, what: str) -> None:
        if self._open:
            raise RuntimeError(f"{what} needs every transaction committed first")

    def begin(self) -> Transaction:
        self._txid += 1
        tx = Transaction(self._txid)
        self._open.append(tx)
        return tx

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """``with sim.transaction() as tx: sim.insert("t", tx=tx) ...`` commits on exit.

        There is no rollback: after an exception inside the block the simulator is unusable.
        """
        tx = self.begin()
        yield tx
        self.commit(tx)

    def _lock(self, tx: Transaction, table: str, key: tuple) -> None:
        holder = self._locks.get((table, key))
        if holder is not None and holder is not tx:
            raise RuntimeError(f"{table} key {key} is locked by open transaction {holder.txid}")
        self._locks[(table, key)] = tx
        tx.locks.add((table, key))

    def _record(self, tx: Transaction, change: _Change) -> None:
        if change.same_position_as_previous:
            change.lsn = tx.changes[-1].lsn
        elif self.connector == "postgresql":
            change.lsn = self._next_pg_lsn()
        elif self.connector == "sqlserver":
            change.lsn = self._next_ss_lsn()
        tx.changes.append(change)

    def commit(self, tx: Transaction) -> None:
        """Commit: the transaction's changes reach the log, in commit order, at one commit point."""
        if not tx.open:
            raise RuntimeError("transaction already committed")
        tx.open = False
        self._open.remove(tx)
        for lock in tx.locks:
            self._locks.pop(lock, None)
        if not tx.changes:
            return
        self._tx_seq += 1
        commit_us = self._now_us + self._rng.randint(50, 2000)
        self._now_us = commit_us
        positions = self._commit_positions(tx)
        for change, position in zip(tx.changes, positions):
            spec = self.tables[change.table]
            source = self._source(spec, commit_us, "false", position)
            self._emit_change(spec, change.op, change.key, change.before, change.after, source, commit_us,
                              change.headers, self._tx_seq)
            self._last_position = position
            self._committed[change.table] += {"c": 1, "d": -1}.get(change.op, 0)
        self._log_commit(commit_us)

    def _log_commit(self, commit_us: int) -> None:
        """The committed counts after a commit, at its source time and the log's position after it."""
        if self.connector == "postgresql":
            after = str(self._pg_last_commit + 1)  # past the commit record
        elif self.connector == "mysql":
            after = f"mysql-bin.{self._my_file:06d}:{self._my_pos}"
        else:
            after = None
        self.commit_log.append(CommitPoint(commit_us, after, dict(self._committed)))

    def _commit_positions(self, tx: Transaction) -> list[dict[str, Any]]:
        if self.connector == "postgresql":
            commit_lsn = self._next_pg_lsn()
            last = self._pg_last_commit
            positions = [
                {"txId": tx.txid, "lsn": c.lsn, "sequence": _dumps([None if last is None else str(last), str(c.lsn)])}
                for c in tx.changes
            ]
            self._pg_last_commit = commit_lsn
            return positions
        if self.connector == "sqlserver":
            commit_lsn = self._next_ss_lsn()
            return [{"change_lsn": c.lsn, "commit_lsn": commit_lsn, "event_serial_no": c.serial} for c in tx.changes]
        # mysql: GTID + BEGIN events, then per rows event a table map and the rows, then XID
        gtid = f"{_MYSQL_SERVER_UUID}:{self._my_gtid}"
        self._my_gtid += 1
        self._my_thread += self._rng.randint(0, 2)
        self._advance_binlog(65 + 80)
        positions: list[dict[str, Any]] = []
        event_pos, row_no, group = None, 0, None
        for c in tx.changes:
            if c.same_position_as_previous:
                positions.append(dict(positions[-1]))
                continue
            # a primary-key change is one row of an UPDATE rows event
            this_group = (c.table, "u" if c.headers else c.op)
            if event_pos is not None and this_group == group and row_no < 15:
                row_no += 1
            else:
                self._advance_binlog(40 + len(c.table))  # table map event
                event_pos, row_no, group = self._my_pos, 0, this_group
                self._advance_binlog(19 + 8)
            self._advance_binlog(60 + self._rng.randint(0, 120))  # the row image(s)
            positions.append({"gtid": gtid, "file": f"mysql-bin.{self._my_file:06d}", "pos": event_pos,
                              "row": row_no, "thread": self._my_thread})
        self._advance_binlog(31)  # XID event
        return positions

    def _run(self, tx: Transaction | None, action: Callable[[Transaction], Any]) -> Any:
        """Run one operation in ``tx``, or in a transaction of its own (autocommit)."""
        own = tx is None
        tx = self.begin() if own else tx
        if not tx.open:
            raise RuntimeError("transaction already committed")
        changes_before = len(tx.changes)
        try:
            result = action(tx)
        except Exception:
            if own and len(tx.changes) == changes_before:  # nothing happened: forget the transaction
                tx.open = False
                self._open.remove(tx)
                for lock in tx.locks:
                    self._locks.pop(lock, None)
            raise
        if own:
            self.commit(tx)
        return result

    # ---- operations: rows --------------------------------------------------------------------
    def insert(self, table: str, row: Mapping[str, Any] | None = None, *, tx: Transaction | None = None) -> dict:
        """INSERT one row (generated when ``row`` is None); returns the row as stored."""
        spec = self.tables[table]

        def action(t: Transaction) -> dict:
            self._tick()
            if row is None:
                key = self._new_key(spec)
                new_row = self._random_row(spec, key)
            else:
                new_row = {n: row.get(n) for n in spec.column_names}
                key = self._key_tuple(spec, new_row)
            self._lock(t, table, key)
            self._sql_insert(spec, new_row)
            self._add_key(table, key)
            after = self._read_row(spec, key)
            self._record(t, _Change(table, "c", self._key_dict(spec, key), None, after))
            return after

        return self._run(tx, action)

    def update(self, table: str, key: Mapping[str, Any] | Any = None, changes: Mapping[str, Any] | None = None,
               *, tx: Transaction | None = None) -> tuple[dict, dict] | None:
        """UPDATE non-key columns of one row (random row / random values when not given)."""
        spec = self.tables[table]

        def action(t: Transaction) -> tuple[dict, dict] | None:
            self._tick()
            k = self._pick_key(table, t) if key is None else self._key_tuple(spec, key)
            if k is None:
                return None
            self._lock(t, table, k)
            old = self._read_row(spec, k)
            if old is None:
                raise KeyError(f"{table}: no row with key {k}")
            if changes is None:
                columns = self._rng.sample(spec.value_columns, self._rng.randint(1, min(2, len(spec.value_columns))))
                new_values = {c: self._random_value(spec, c) for c in columns}
            else:
                if any(c in spec.primary_key for c in changes):
                    raise ValueError("use change_key to change primary-key columns")
                new_values = dict(changes)
            self._sql_update(spec, k, new_values)
            new = self._read_row(spec, k)
            assert new is not None
            before, after = self._update_images(spec, old, new)
            change = _Change(table, "u", self._key_dict(spec, k), before, after, serial=2)
            self._record(t, change)
            return old, new

        return self._run(tx, action)

    def _update_images(self, spec: TableSpec, old: dict, new: dict) -> tuple[dict | None, dict]:
        if self.connector != "postgresql" or spec.replica_identity == "full":
            return old, new
        after = dict(new)
        for column in spec.toasted:  # an unchanged out-of-line value is not in the WAL record
            if old[column] == new[column] and new[column] is not None:
                after[column] = UNAVAILABLE_VALUE
        return None, after

    def _delete_image(self, spec: TableSpec, old: dict) -> dict:
        if self.connector == "postgresql" and spec.replica_identity == "default":
            return {n: (old[n] if n in spec.primary_key else None) for n in spec.column_names}
        return old

    def delete(self, table: str, key: Mapping[str, Any] | Any = None, *, tx: Transaction | None = None) -> dict | None:
        """DELETE one row (a random one when ``key`` is None); returns the deleted row."""
        spec = self.tables[table]

        def action(t: Transaction) -> dict | None:
            self._tick()
            k = self._pick_key(table, t) if key is None else self._key_tuple(spec, key)
            if k is None:
                return None
            self._lock(t, table, k)
            old = self._read_row(spec, k)
            if old is None:
                raise KeyError(f"{table}: no row with key {k}")
            self._sql_delete(spec, k)
            self._remove_key(table, k)
            self._record(t, _Change(table, "d", self._key_dict(spec, k), self._delete_image(spec, old), None))
            return old

        return self._run(tx, action)

    def change_key(self, table: str, key: Mapping[str, Any] | Any = None, new_key: Mapping[str, Any] | Any = None,
                   *, tx: Transaction | None = None) -> tuple[dict, dict] | None:
        """UPDATE a row's primary key: Debezium sends delete(old key) + create(new key)."""
        spec = self.tables[table]

        def action(t: Transaction) -> tuple[dict, dict] | None:
            self._tick()
            k = self._pick_key(table, t) if key is None else self._key_tuple(spec, key)
            if k is None:
                return None
            nk = self._new_key(spec) if new_key is None else self._key_tuple(spec, new_key)
            self._lock(t, table, k)
            self._lock(t, table, nk)
            old = self._read_row(spec, k)
            if old is None:
                raise KeyError(f"{table}: no row with key {k}")
            if self._read_row(spec, nk) is not None:
                raise ValueError(f"{table}: key {nk} already exists")
            self._sql_update(spec, k, self._key_dict(spec, nk))
            self._remove_key(table, k)
            self._add_key(table, nk)
            new = self._read_row(spec, nk)
            assert new is not None
            old_key, fresh_key = self._key_dict(spec, k), self._key_dict(spec, nk)
            serial = 2 if self.connector == "sqlserver" else 1
            self._record(t, _Change(table, "d", old_key, self._delete_image(spec, old), None,
                                    ((NEWKEY_HEADER, fresh_key),), serial=serial))
            self._record(t, _Change(table, "c", fresh_key, None, new, ((OLDKEY_HEADER, old_key),), serial=serial,
                                    same_position_as_previous=True))
            return old_key, fresh_key

        return self._run(tx, action)

    def truncate(self, table: str) -> int:
        """TRUNCATE (postgresql only, which sends op "t" with a null key when not skipped)."""
        if self.connector != "postgresql":
            raise ValueError("only the postgresql connector emits truncate events")
        self._require_no_open_tx("truncate")
        spec = self.tables[table]
        self._tick()
        n = self._db.execute(f"SELECT COUNT(*) FROM {self._q(table)}").fetchone()[0]
        self._db.execute(f"DELETE FROM {self._q(table)}")
        self._keys[table].clear()
        self._key_index[table].clear()
        tx = self.begin()
        self._open.remove(tx)
        tx.open = False
        self._tx_seq += 1
        lsn = self._next_pg_lsn()
        commit_lsn = self._next_pg_lsn()
        last = self._pg_last_commit
        position = {"txId": tx.txid, "lsn": lsn, "sequence": _dumps([None if last is None else str(last), str(lsn)])}
        self._pg_last_commit = commit_lsn
        source = self._source(spec, self._now_us, "false", position)
        self._emit_change(spec, "t", None, None, None, source, self._now_us, (), self._tx_seq)
        self._last_position = position
        self._committed[table] = 0
        self._log_commit(self._now_us)
        return n

    # ---- random workload -------------------------------------------------------------------
    def random_ops(self, n: int, mix: Mapping[str, float] | None = None, *, tables: Sequence[str] | None = None,
                   max_tx_size: int = 1, concurrency: int = 1) -> int:
        """``n`` random row operations with skewed keys; returns how many changed a row.

        ``mix`` weighs insert / update / delete / pk_change. Each transaction gets 1..max_tx_size
        operations; up to ``concurrency`` transactions are open at once (their changes interleave
        in the log, their keys never overlap: row locks). Every transaction is committed at the end.
        """
        weights = dict(DEFAULT_MIX if mix is None else mix)
        unknown = set(weights) - set(OP_KINDS)
        if unknown or not weights or sum(weights.values()) <= 0:
            raise ValueError(f"mix weighs {OP_KINDS}, got {dict(weights)}")
        kinds = list(weights)
        kind_weights = [weights[k] for k in kinds]
        names = list(self.tables) if tables is None else list(tables)
        rng = self._rng
        open_txs: list[Transaction] = []
        done = 0
        for _ in range(n):
            if not open_txs or (len(open_txs) < concurrency and rng.random() < 0.5):
                tx = self.begin()
                tx.target_size = rng.randint(1, max_tx_size)
                open_txs.append(tx)
            tx = rng.choice(open_txs)
            table = rng.choice(names)
            kind = rng.choices(kinds, kind_weights)[0]
            result = None
            if kind == "update":
                result = self.update(table, tx=tx)
            elif kind == "delete":
                result = self.delete(table, tx=tx)
            elif kind == "pk_change":
                result = self.change_key(table, tx=tx)
            if result is None:  # an insert, or nothing left (unlocked) to change
                self.insert(table, tx=tx)
            done += 1
            if len(tx.changes) >= tx.target_size:
                open_txs.remove(tx)
                self.commit(tx)
        rng.shuffle(open_txs)
        for tx in open_txs:
            self.commit(tx)
        return done

    # ---- faults --------------------------------------------------------------------------------
    def redeliver(self, fraction: float) -> int:
        """Append copies of a random ``fraction`` of the messages so far (same bytes, new offsets)."""
        candidates = [i for i, e in enumerate(self._stream) if e.kind in ("change", "tombstone")]
        count = min(len(candidates), max(1, round(len(candidates) * fraction))) if fraction > 0 else 0
        picked = sorted(self._rng.sample(candidates, count))
        for index in picked:
            proc = self._proc_us(self._now_us)
            self._append(StreamEntry("redelivery", self._stream[index].table, self._kafka_ms(proc), original=index,
                                     proc_us=proc))
        self.redelivered_count += count
        return count

    def garbage(self, n: int, kinds: Sequence[str] | None = None) -> int:
        """Append ``n`` malformed values, cycling through ``GARBAGE_KINDS`` (or the ``kinds`` given)."""
        chosen = list(kinds) if kinds else None
        for kind in chosen or []:
            if kind not in GARBAGE_KINDS:
                raise ValueError(f"garbage kind {kind!r} not in {GARBAGE_KINDS}")
        for i in range(n):
            if chosen:
                kind = chosen[i % len(chosen)]
            else:
                kind = GARBAGE_KINDS[self._garbage_cycle % len(GARBAGE_KINDS)]
                self._garbage_cycle += 1
            table = self._rng.choice(list(self.tables))
            spec = self.tables[table]
            key = row = source = None
            if kind in ("unknown_op", "update_without_after"):
                picked = self._pick_key(table, None)
                row = self._read_row(spec, picked) if picked else self._random_row(spec, self._new_key(spec))
                key = {k: row[k] for k in spec.primary_key}
                position = self._last_position or self._current_position()
                source = self._source(spec, self._now_us, "false", position)
            proc = self._proc_us(self._now_us)
            self._append(StreamEntry("garbage", table, self._kafka_ms(proc), "XX" if kind == "unknown_op" else "u",
                                     key, row if kind == "update_without_after" else None,
                                     row if kind == "unknown_op" else None, source, proc, garbage_kind=kind))
        self.garbage_count += n
        return n

    # ---- introspection ---------------------------------------------------------------------
    @property
    def events(self) -> list[StreamEntry]:
        """The stream so far, in emission order (do not modify)."""
        return self._stream

    def stats(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for e in self._stream:
            counts["messages"] += 1
            counts[e.kind] += 1
            if e.kind == "change":
                counts[f"op_{e.op}"] += 1
        return dict(counts)

    # ---- encoding ----------------------------------------------------------------------------
    def _schemas(self, table: str) -> tuple[str, str]:
        """(key schema JSON, envelope schema JSON) of a table, as JsonConverter writes them."""
        cache = self._schema_cache
        if table not in cache:
            spec = self.tables[table]
            topic = self.topic(table)
            key_schema = {"type": "struct",
                          "fields": [_connect_field(k, spec.column_type(k), False) for k in spec.primary_key],
                          "optional": False, "name": f"{topic}.Key"}
            row_fields = [_connect_field(n, spec.column_type(n), n not in spec.primary_key)
                          for n in spec.column_names]
            value = {"type": "struct", "fields": row_fields, "optional": True, "name": f"{topic}.Value"}
            envelope = {
                "type": "struct",
                "fields": [{**value, "field": "before"}, {**value, "field": "after"}, _source_schema(self.connector),
                           _TRANSACTION_SCHEMA, _f("string", "op", False), _f("int64", "ts_ms"),
                           _f("int64", "ts_us"), _f("int64", "ts_ns")],
                "optional": False,
                "name": f"{topic}.Envelope",
                "version": 2,
            }
            cache[table] = (_dumps(key_schema), _dumps(envelope))
        return cache[table]

    def _encode_row(self, spec: TableSpec, row: Mapping[str, Any] | None, with_schema: bool) -> dict | None:
        if row is None:
            return None
        return {n: encode_value(spec.column_type(n), row.get(n), with_schema) for n in spec.column_names}

    def _encode_key(self, spec: TableSpec, key: Mapping[str, Any], with_schema: bool) -> bytes:
        payload = _dumps({k: encode_value(spec.column_type(k), key[k], with_schema) for k in spec.primary_key})
        if with_schema:
            return ('{"schema":' + self._schemas(spec.name)[0] + ',"payload":' + payload + "}").encode()
        return payload.encode()

    def _encode_value(self, spec: TableSpec, entry: StreamEntry, with_schema: bool) -> bytes:
        payload = _dumps({
            "before": self._encode_row(spec, entry.before, with_schema),
            "after": self._encode_row(spec, entry.after, with_schema),
            "source": entry.source,
            "transaction": None,
            "op": entry.op,
            "ts_ms": entry.proc_us // 1000,
            "ts_us": entry.proc_us,
            "ts_ns": entry.proc_us * 1000,
        })
        if with_schema:
            return ('{"schema":' + self._schemas(spec.name)[1] + ',"payload":' + payload + "}").encode()
        return payload.encode()

    def _encode(self, entry: StreamEntry, with_schema: bool) -> tuple[bytes | None, bytes | None, list | None]:
        spec = self.tables[entry.table] if entry.table else None
        key = self._encode_key(spec, entry.key, with_schema) if spec and entry.key is not None else None
        headers = [(name, _dumps({k: encode_value(spec.column_type(k), v, with_schema) for k, v in value.items()})
                    .encode()) for name, value in entry.headers] if spec else []
        if entry.kind == "tombstone":
            return key, None, headers or None
        if entry.kind == "garbage":
            kind = entry.garbage_kind
            if kind == "broken_json":
                return key, b"{]", None
            if kind == "empty_object":
                return key, b"{}", None
            if kind == "json_array":
                return key, b'[{"op":"c"},1,"two"]', None
            assert spec is not None
            return key, self._encode_value(spec, entry, with_schema), None
        assert spec is not None
        return key, self._encode_value(spec, entry, with_schema), headers or None

    def iter_kafka_records(self, with_schema: bool = False) -> Iterator[dict[str, Any]]:
        """The stream as rows of Spark's Kafka source schema (headers None when a message has none)."""
        referenced = {e.original for e in self._stream if e.kind == "redelivery"}
        kept: dict[int, tuple] = {}
        offsets: dict[tuple[str, int], int] = defaultdict(int)
        null_key_partition = 0
        for index, entry in enumerate(self._stream):
            if entry.kind == "redelivery":
                assert entry.original is not None
                topic, key, value, headers = kept[entry.original]
            else:
                key, value, headers = self._encode(entry, with_schema)
                topic = self.topic(entry.table) if entry.table else ""
                if index in referenced:
                    kept[index] = (topic, key, value, headers)
            if key is not None:
                partition = kafka_partition(key, self.n_partitions)
            else:  # Debezium's null-key events (truncate) and keyless garbage: spread round-robin
                partition = null_key_partition
                null_key_partition = (null_key_partition + 1) % self.n_partitions
            offset = offsets[(topic, partition)]
            offsets[(topic, partition)] = offset + 1
            yield {
                "key": key,
                "value": value,
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "timestamp": _EPOCH_MS + timedelta(milliseconds=entry.kafka_ts_ms),
                "timestampType": 0,
                "headers": list(headers) if headers else None,
            }

    def to_kafka_records(self, with_schema: bool = False) -> list[dict[str, Any]]:
        return list(self.iter_kafka_records(with_schema))


# ---- Parquet in Spark's Kafka source schema ----------------------------------------------------
def kafka_arrow_schema() -> pyarrow.Schema:
    """Spark's Kafka source schema as an Arrow schema: the one the land stage writes."""
    from jobs.land.command import KAFKA_ARROW_SCHEMA

    return KAFKA_ARROW_SCHEMA


def write_parquet(path: str | Path, records: Iterable[Mapping[str, Any]], *, batch_rows: int = 50_000) -> int:
    """Write Kafka records (dicts as from ``to_kafka_records``) to one Parquet file; returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = kafka_arrow_schema()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with pq.ParquetWriter(str(target), schema) as writer:
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            if not batch:
                return
            columns = {name: [r[name] for r in batch] for name in schema.names}
            columns["headers"] = [
                [{"key": k, "value": v} for k, v in h] if h else None for h in columns["headers"]
            ]
            writer.write_table(pa.Table.from_pydict(columns, schema=schema))
            batch.clear()

        for record in records:
            batch.append(record)
            written += 1
            if len(batch) >= batch_rows:
                flush()
        flush()
        if written == 0:
            writer.write_table(schema.empty_table())
    return written
