"""Real source databases for tests: PostgreSQL and MariaDB started on 127.0.0.1, and their own change
logs read back as Debezium messages positioned with the servers' LSNs and binlog positions.

    with postgres_server() as url:      # postgresql+psycopg2://cdc:...@127.0.0.1:PORT/shop
        ...
    with mariadb_server() as server:    # server.url, server.datadir (its binlog files)
        ...

PostgreSQL runs with ``wal_level=logical``: a ``test_decoding`` slot created before the first change
gives every change with its LSN and its transaction's commit time (``pg_changes``). MariaDB writes a
ROW binlog, read with its own ``mariadb-binlog`` (``binlog_changes``). Both servers run as their
system users when the tests run as root (PostgreSQL refuses root; MariaDB needs ``--user``), in a
fresh temporary folder, stopped by their PID.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tests.support.servers import LOCALHOST, ServerStartError, _server, free_port

PASSWORD = "s3cret-source-pw"


def _as(user: str) -> list[str]:
    return ["runuser", "-u", user, "--"] if os.geteuid() == 0 else []


def _own(path: Path, user: str) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, user, user)


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise ServerStartError("PostgreSQL is not installed (apt-get install postgresql)")
    return found[-1]


@contextlib.contextmanager
def postgres_server(timeout: float = 60.0) -> Iterator[str]:
    """A fresh PostgreSQL with database ``shop`` and user ``cdc``; yields its SQLAlchemy URL."""
    base = Path(tempfile.mkdtemp(prefix="pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    for folder in (base, sock):
        _own(folder, "postgres")
    try:
        subprocess.run([*_as("postgres"), _pg_bin("initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                        "--no-sync"], check=True, capture_output=True)
        port = free_port()
        argv = [*_as("postgres"), _pg_bin("postgres"), "-D", str(data), "-p", str(port), "-k", str(sock),
                "-c", f"listen_addresses={LOCALHOST}", "-c", "wal_level=logical", "-c", "fsync=off",
                "-c", "max_replication_slots=4", "-c", "max_wal_senders=4"]
        with _server("postgres", argv, port, lambda: _psql(sock, port, "SELECT 1", check=False) == 0, timeout):
            _psql(sock, port, f"CREATE USER cdc WITH PASSWORD '{PASSWORD}' REPLICATION SUPERUSER")
            _psql(sock, port, "CREATE DATABASE shop OWNER cdc")
            yield f"postgresql+psycopg2://cdc:{PASSWORD}@{LOCALHOST}:{port}/shop"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _client(argv: list[str], check: bool) -> int:
    """A server's own command-line client, run once: its exit status (an error names what it said)."""
    done = subprocess.run(argv, capture_output=True)
    if check and done.returncode:
        raise ServerStartError(done.stderr.decode(errors="replace"))
    return done.returncode


def _psql(sock: Path, port: int, sql: str, check: bool = True) -> int:
    return _client([*_as("postgres"), _pg_bin("psql"), "-h", str(sock), "-p", str(port), "-U", "postgres",
                    "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qc", sql], check)


@dataclass(frozen=True)
class MariaDB:
    url: str
    datadir: Path


@contextlib.contextmanager
def mariadb_server(timeout: float = 60.0) -> Iterator[MariaDB]:
    """A fresh MariaDB writing a ROW binlog, with database ``shop`` and user ``cdc``@127.0.0.1."""
    if not shutil.which("mariadbd"):
        raise ServerStartError("MariaDB is not installed (apt-get install mariadb-server)")
    base = Path(tempfile.mkdtemp(prefix="mariadb-"))
    data, sock = base / "data", base / "mysqld.sock"
    user = "mysql" if os.geteuid() == 0 else os.environ.get("USER", "root")
    _own(base, "mysql")
    try:
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", f"--user={user}",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True)
        port = free_port()
        argv = ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}", f"--port={port}",
                f"--bind-address={LOCALHOST}", f"--user={user}", "--log-bin=mysql-bin", "--server-id=1",
                "--binlog-format=ROW", "--innodb-flush-log-at-trx-commit=0", "--skip-name-resolve"]
        with _server("mariadb", argv, port, lambda: _mariadb(sock, "SELECT 1", check=False) == 0, timeout):
            _mariadb(sock, "CREATE DATABASE shop; "
                           f"CREATE USER 'cdc'@'{LOCALHOST}' IDENTIFIED BY '{PASSWORD}'; "
                           f"GRANT ALL ON *.* TO 'cdc'@'{LOCALHOST}'")
            yield MariaDB(f"mysql+pymysql://cdc:{PASSWORD}@{LOCALHOST}:{port}/shop", data)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _mariadb(sock: Path, sql: str, check: bool = True) -> int:
    return _client(["mariadb", "--no-defaults", f"--socket={sock}", "-uroot", "-e", sql], check)


# ---- change logs as Debezium messages -----------------------------------------------------------
@dataclass(frozen=True)
class Change:
    """One row change read from a server's log: ``op`` c/u/d, the row's images, where and when."""

    table: str
    op: str
    before: dict | None
    after: dict | None
    source: dict  # Debezium's source block fields for the connector


_TD_ROW = re.compile(r"table (\w+)\.(\w+): (INSERT|UPDATE|DELETE): (.*)")
_TD_VALUE = re.compile(r"(\w+)\[[^\]]+\]:('(?:[^']|'')*'|\S+)")


def _td_columns(text: str) -> dict:
    out = {}
    for name, raw in _TD_VALUE.findall(text):
        out[name] = None if raw == "null" else raw[1:-1].replace("''", "'") if raw.startswith("'") else raw
    return out


def pg_tables_with_slot(conn, *create_statements: str, slot: str = "cdc") -> None:
    """Create tables, then a ``test_decoding`` slot that sees every change made after them (a slot cannot be
    created in a transaction that has written: the tables are committed first)."""
    for statement in create_statements:
        conn.exec_driver_sql(statement)
    conn.commit()
    conn.exec_driver_sql(f"SELECT pg_create_logical_replication_slot('{slot}', 'test_decoding')")
    conn.commit()


def pg_changes(conn, slot: str) -> list[Change]:
    """The slot's changes since it was made, each with its own LSN and Debezium's ``sequence`` (the
    previous transaction's commit LSN, then the change's), its transaction id and commit time."""
    rows = conn.exec_driver_sql(
        f"SELECT lsn::text, xid::text, data FROM pg_logical_slot_get_changes('{slot}', NULL, NULL, "
        "'include-timestamp', 'on')").all()
    out, pending, last_commit = [], [], None
    for lsn_text, xid, data in rows:
        lsn = _lsn(lsn_text)
        m = _TD_ROW.fullmatch(data)
        if m:
            schema, table, kind, columns = m.groups()
            values = _td_columns(columns)
            pending.append((schema, table, kind, values, lsn, xid))
        elif data.startswith("COMMIT"):
            at = datetime.fromisoformat(data.split("(at ", 1)[1].rstrip(")")).astimezone(UTC)
            for schema, table, kind, values, change_lsn, txid in pending:
                op = {"INSERT": "c", "UPDATE": "u", "DELETE": "d"}[kind]
                source = {"connector": "postgresql", "db": "shop", "schema": schema, "table": table,
                          "lsn": change_lsn, "txId": int(txid), "ts_ms": int(at.timestamp() * 1000),
                          "sequence": json.dumps([None if last_commit is None else str(last_commit), str(change_lsn)])}
                out.append(Change(table, op, values if op == "d" else None, None if op == "d" else values, source))
            pending, last_commit = [], lsn
    return out


def _lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


_AT = re.compile(r"# at (\d+)")
_HEADER_TIME = re.compile(r"#(\d{6}\s+\d{1,2}:\d{2}:\d{2}) server id")
_ROWS = re.compile(r"### (INSERT INTO|UPDATE|DELETE FROM) `(\w+)`\.`(\w+)`")
_COLUMN = re.compile(r"###\s+@(\d+)=(.*)")


def binlog_changes(datadir: Path, columns: dict[str, Sequence[str]]) -> list[Change]:
    """Every row change of the server's binlog files, positioned ``file``/``pos`` (the rows event's own
    offset) and ``row``, its time from the event header; ``columns`` names each table's columns in order."""
    out = []
    for path in sorted(datadir.glob("mysql-bin.[0-9]*")):
        text = subprocess.run(["mariadb-binlog", "--no-defaults", "--base64-output=decode-rows", "-v", str(path)],
                              check=True, capture_output=True, text=True, env={**os.environ, "TZ": "UTC"}).stdout
        out += _binlog_rows(path.name, text, columns)
    return out


def _binlog_rows(file: str, text: str, columns: dict[str, Sequence[str]]) -> list[Change]:
    out: list[Change] = []
    pos, when, row, current = 0, None, 0, None
    for line in text.splitlines():
        if m := _AT.match(line):
            pos, row = int(m.group(1)), 0
        elif m := _HEADER_TIME.match(line):
            when = datetime.strptime(" ".join(m.group(1).split()), "%y%m%d %H:%M:%S").replace(tzinfo=UTC)
        elif m := _ROWS.match(line):
            kind, db, table = m.groups()
            current = {"kind": kind, "db": db, "table": table, "images": [{}], "row": row}
            row += 1
            source = {"connector": "mysql", "db": db, "table": table, "file": file, "pos": pos,
                      "row": current["row"], "ts_ms": int(when.timestamp() * 1000), "server_id": 1}
            op = {"INSERT INTO": "c", "UPDATE": "u", "DELETE FROM": "d"}[kind]
            out.append(Change(table, op, None, None, source))
        elif line.startswith("### SET") and current and current["kind"] == "UPDATE":
            current["images"].append({})
        elif (m := _COLUMN.match(line)) and current:
            names = columns[current["table"]]
            value = m.group(2).strip()
            value = None if value == "NULL" else value[1:-1].replace("\\'", "'") if value.startswith("'") else value
            current["images"][-1][names[int(m.group(1)) - 1]] = value
            last = out[-1]
            images = current["images"]
            before, after = {"c": (None, images[0]), "u": (images[0], images[-1]), "d": (images[0], None)}[last.op]
            out[-1] = Change(last.table, last.op, before, after, last.source)
    return out


def debezium_records(changes: Sequence[Change], key_columns: dict[str, Sequence[str]], topic_prefix: str = "shop",
                     partitions: int = 2) -> list[dict]:
    """The changes as Debezium messages (no schema) in Spark's Kafka source schema, keyed and
    partitioned by key, offsets consecutive per partition."""
    from jobs.demo.simulator import kafka_partition

    records, offsets = [], {}
    for change in changes:
        image = change.after or change.before
        key = json.dumps({k: _typed(image[k]) for k in key_columns[change.table]}).encode()
        value = json.dumps({"before": _typed_row(change.before), "after": _typed_row(change.after),
                            "source": change.source, "op": change.op, "ts_ms": change.source["ts_ms"]}).encode()
        topic = f"{topic_prefix}.{change.source.get('schema', change.source['db'])}.{change.table}"
        partition = kafka_partition(key, partitions)
        offset = offsets.get((topic, partition), 0)
        offsets[(topic, partition)] = offset + 1
        records.append({"key": key, "value": value, "topic": topic, "partition": partition, "offset": offset,
                        "timestamp": datetime.fromtimestamp(change.source["ts_ms"] / 1000, UTC), "timestampType": 0,
                        "headers": None})
    return records


def _typed(value):
    return int(value) if isinstance(value, str) and re.fullmatch(r"-?\d+", value) else value


def _typed_row(row: dict | None) -> dict | None:
    return None if row is None else {k: _typed(v) for k, v in row.items()}
