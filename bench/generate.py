"""Benchmark topic snapshots: a realistic change stream rendered in one format, written in bounded memory.

The stream (the same for every format, from one seed): three tables of unequal traffic (50 / 30 / 20 %),
10 % full-load rows first, then 60 % updates, 20 % inserts and 10 % deletes of skewed keys (most changes
hit the oldest keys), plus 1 % redelivered messages (a recent message again, same bytes). Rows have five
columns (id, name, qty, price, updated_at). Messages go to one topic per table, three partitions by key,
in the Kafka source schema the land stage writes (``jobs.land.command.KAFKA_ARROW_SCHEMA``). Only a batch of
rendered messages and a short ring of recent ones are held in memory, whatever the size.
"""
from __future__ import annotations

import io
import itertools
import json
import random
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TABLES = ("orders", "customers", "items")
TABLE_WEIGHTS = (0.5, 0.3, 0.2)
PARTITIONS = 3
FULL_LOAD_SHARE = 0.10
MIX = (("u", 0.60), ("c", 0.20), ("d", 0.10))  # of all messages, with the full load's 10 %
REDELIVERED_SHARE = 0.01
START_MS = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp() * 1000)
FORMATS = ("debezium", "debezium_schema", "canal", "qlik", "dts_avro")
# the decoder each benchmark format is read with
DECODER = {"debezium": "debezium", "debezium_schema": "debezium", "canal": "canal", "qlik": "qlik",
           "dts_avro": "dts_avro"}


def changes(n: int, seed: int = 7) -> Iterator[tuple[int, str, int, dict | None, int, int]]:
    """(table index, op r/c/u/d, key, row after (None for a delete), position, event time ms): the full
    load of a stream of ``n`` messages, then changes without end (bounded state: a key counter per table)."""
    rng = random.Random(seed)
    next_key = [0, 0, 0]
    n_load = int(n * FULL_LOAD_SHARE)
    ops, weights = zip(*MIX)

    def row(table: int, key: int, version: int, ts: int) -> dict:
        return {"id": key, "name": f"{TABLES[table][:-1]}-{key:08d}-v{version % 1000}", "qty": (key * 7 + version) % 500,
                "price": f"{(key % 100_000) / 100 + version % 7:.2f}", "updated_at": ts}

    ts = START_MS
    for _ in range(n_load):
        t = rng.choices((0, 1, 2), TABLE_WEIGHTS)[0]
        k = next_key[t]
        next_key[t] += 1
        yield t, "r", k, row(t, k, 0, ts), 0, ts
    for i in itertools.count():
        ts += 1
        t = rng.choices((0, 1, 2), TABLE_WEIGHTS)[0]
        op = rng.choices(ops, weights)[0]
        if op == "c" or next_key[t] == 0:
            op, k = "c", next_key[t]
            next_key[t] += 1
        else:
            k = int(next_key[t] * rng.random() ** 3)  # skewed: the oldest keys are the hottest
        yield t, op, k, None if op == "d" else row(t, k, i, ts), i + 1, ts


# ---- rendering: (key bytes, value bytes) per change ----------------------------------------------
def _debezium(schema: bool) -> Callable[..., tuple[bytes, bytes]]:
    row_fields = [{"type": "int32", "optional": False, "field": "id"}, {"type": "string", "optional": True, "field": "name"},
                  {"type": "int32", "optional": True, "field": "qty"}, {"type": "string", "optional": True, "field": "price"},
                  {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "field": "updated_at"}]
    source_fields = [{"type": f, "optional": True, "field": n} for f, n in (
        ("string", "version"), ("string", "connector"), ("string", "name"), ("int64", "ts_ms"), ("string", "snapshot"),
        ("string", "db"), ("string", "sequence"), ("string", "schema"), ("string", "table"), ("int64", "txId"),
        ("int64", "lsn"))]
    schemas = {t: json.dumps({"type": "struct", "name": f"bench.public.{t}.Envelope", "optional": False, "fields": [
        {"type": "struct", "fields": row_fields, "optional": True, "name": f"bench.public.{t}.Value", "field": "before"},
        {"type": "struct", "fields": row_fields, "optional": True, "name": f"bench.public.{t}.Value", "field": "after"},
        {"type": "struct", "fields": source_fields, "optional": False, "name": "io.debezium.connector.postgresql.Source",
         "field": "source"},
        {"type": "string", "optional": False, "field": "op"}, {"type": "int64", "optional": True, "field": "ts_ms"}]})
        for t in TABLES}
    snapshot_lsn = 1_000_000

    def render(t: int, op: str, k: int, after: dict | None, pos: int, ts: int) -> tuple[bytes, bytes]:
        lsn = snapshot_lsn if op == "r" else snapshot_lsn + 100 * pos
        source = (f'{{"version":"2.7.0.Final","connector":"postgresql","name":"bench","ts_ms":{ts},'
                  f'"snapshot":"{"true" if op == "r" else "false"}","db":"bench","sequence":"[\\"{lsn}\\",\\"{lsn}\\"]",'
                  f'"schema":"public","table":"{TABLES[t]}","txId":{500 + pos},"lsn":{lsn}}}')
        after_json = json.dumps(after, separators=(",", ":")) if after else "null"
        before_json = f'{{"id":{k}}}' if op == "d" else "null"  # REPLICA IDENTITY DEFAULT: the key only
        payload = f'{{"before":{before_json},"after":{after_json},"source":{source},"op":"{op}","ts_ms":{ts + 3}}}'
        value = f'{{"schema":{schemas[TABLES[t]]},"payload":{payload}}}' if schema else payload
        return f'{{"id":{k}}}'.encode(), value.encode()

    return render


def _canal() -> Callable[..., tuple[bytes, bytes]]:
    mysql_types = '{"id":"int(11)","name":"varchar(64)","qty":"int(11)","price":"decimal(10,2)","updated_at":"bigint(20)"}'
    sql_types = '{"id":4,"name":12,"qty":4,"price":3,"updated_at":-5}'
    kinds = {"r": "INIT", "c": "INSERT", "u": "UPDATE", "d": "DELETE"}

    def render(t: int, op: str, k: int, after: dict | None, pos: int, ts: int) -> tuple[bytes, bytes]:
        image = after or {"id": k, "name": None, "qty": None, "price": None, "updated_at": None}
        data = json.dumps({c: None if v is None else str(v) for c, v in image.items()}, separators=(",", ":"))
        old = f'[{{"qty":"{(image["qty"] or 0) + 1}"}}]' if op == "u" else "null"
        value = (f'{{"data":[{data}],"database":"bench","es":{ts},"id":{pos},"isDdl":false,"mysqlType":{mysql_types},'
                 f'"old":{old},"pkNames":["id"],"sql":"","sqlType":{sql_types},"table":"{TABLES[t]}","ts":{ts + 5},'
                 f'"type":"{kinds[op]}"}}')
        return f'{{"id":{k}}}'.encode(), value.encode()

    return render


def qlik_tables() -> list[Any]:
    from jobs.demo.qlik import QlikColumn, QlikTable

    return [QlikTable("bench", t, [QlikColumn("id", "INT4", 1), QlikColumn("name", "STRING", length=64),
                                   QlikColumn("qty", "INT4"), QlikColumn("price", "NUMERIC", precision=10, scale=2),
                                   QlikColumn("updated_at", "INT8")]) for t in TABLES]


def _qlik() -> Callable[..., tuple[bytes, bytes]]:
    from jobs.demo.qlik import change_sequence, headers, json_data

    tables = qlik_tables()
    operations = {"c": "INSERT", "u": "UPDATE", "d": "DELETE"}

    def render(t: int, op: str, k: int, after: dict | None, pos: int, ts: int) -> tuple[bytes, bytes]:
        when = datetime.fromtimestamp(ts / 1000, UTC)
        if op == "r":
            hdrs = headers("REFRESH")
        else:
            hdrs = headers(operations[op], change_sequence(when.strftime("%Y%m%d%H%M%S00"), pos),
                           timestamp=when.strftime("%Y-%m-%d %H:%M:%S.%f"))
        data = after or {"id": k, "name": None, "qty": None, "price": None, "updated_at": None}
        return f'{{"id":{k}}}'.encode(), json_data(tables[t], data, hdrs).encode()

    return render


def _dts_avro() -> Callable[..., tuple[bytes, bytes]]:
    import fastavro

    from jobs.formats.dts_avro.decoder import record_schema

    schema = record_schema()
    ns = "com.alibaba.dts.formats.avro."
    fields = [{"name": n, "dataTypeNumber": d} for n, d in (("id", 3), ("name", 253), ("qty", 3), ("price", 246),
                                                              ("updated_at", 8))]
    operations = {"r": "INIT", "c": "INSERT", "u": "UPDATE", "d": "DELETE"}
    tags = {"pk_uk_info": '{"PRIMARY":["id"]}'}

    def image(row: dict) -> list:
        return [(ns + "Integer", {"precision": 32, "value": str(row["id"])}),
                (ns + "Character", {"charset": "utf8mb4", "value": row["name"].encode()}),
                (ns + "Integer", {"precision": 32, "value": str(row["qty"])}),
                (ns + "Decimal", {"value": row["price"], "precision": 10, "scale": 2}),
                (ns + "Integer", {"precision": 64, "value": str(row["updated_at"])})]

    def render(t: int, op: str, k: int, after: dict | None, pos: int, ts: int) -> tuple[bytes, bytes]:
        key_only = [(ns + "Integer", {"precision": 32, "value": str(k)}), None, None, None, None]
        record = {
            "version": 1, "id": pos, "sourceTimestamp": ts // 1000,
            "sourcePosition": "" if op == "r" else f"{4 + pos * 100}@7", "safeSourcePosition": "", "sourceTxid": "0",
            "source": {"sourceType": "MySQL", "version": "8.0.36"}, "operation": operations[op],
            "objectName": f"bench.{TABLES[t]}", "processTimestamps": None, "tags": tags, "fields": fields,
            "beforeImages": key_only if op in ("u", "d") else None,
            "afterImages": image(after) if after else None, "bornTimestamp": ts,
        }
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, record)
        return f'{{"id":{k}}}'.encode(), buf.getvalue()

    return render


RENDERERS: dict[str, Callable[[], Callable[..., tuple[bytes, bytes]]]] = {
    "debezium": lambda: _debezium(False), "debezium_schema": lambda: _debezium(True), "canal": _canal,
    "qlik": _qlik, "dts_avro": _dts_avro,
}


def topic_of(fmt: str, table: int) -> str:
    return f"bench.public.{TABLES[table]}" if fmt.startswith("debezium") else f"bench.{TABLES[table]}"


def write_snapshot(fmt: str, n: int, out: Path, seed: int = 7, batch_rows: int = 100_000,
                   rows_per_file: int = 1_000_000) -> dict:
    """``n`` messages of ``fmt`` as Parquet files under ``out``; returns {messages, bytes, files}."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs.land.command import KAFKA_ARROW_SCHEMA

    out.mkdir(parents=True, exist_ok=True)
    render = RENDERERS[fmt]()
    rng = random.Random(seed + 1)
    offsets = [[0] * PARTITIONS for _ in TABLES]
    recent: deque = deque(maxlen=1000)
    batch: list[tuple] = []
    stats = {"messages": 0, "value_bytes": 0, "files": 0}
    writer = None
    in_file = 0

    def flush() -> None:
        nonlocal writer, in_file
        if not batch:
            return
        if writer is None:
            writer = pq.ParquetWriter(str(out / f"part-{stats['files']:05d}.parquet"), KAFKA_ARROW_SCHEMA)
            stats["files"] += 1
        cols = list(zip(*batch))
        table = pa.Table.from_arrays([pa.array(cols[0], pa.binary()), pa.array(cols[1], pa.binary()),
                                      pa.array(cols[2], pa.string()), pa.array(cols[3], pa.int32()),
                                      pa.array(cols[4], pa.int64()),
                                      pa.array(cols[5], pa.timestamp("ms", tz="UTC")).cast(KAFKA_ARROW_SCHEMA.field("timestamp").type),
                                      pa.array([0] * len(batch), pa.int32()),
                                      pa.nulls(len(batch), KAFKA_ARROW_SCHEMA.field("headers").type)],
                                     schema=KAFKA_ARROW_SCHEMA)
        writer.write_table(table)
        in_file += len(batch)
        batch.clear()
        if in_file >= rows_per_file:
            writer.close()
            writer, in_file = None, 0

    def emit(t: int, key: bytes, value: bytes, ts: int) -> None:
        p = zlib.crc32(key) % PARTITIONS
        batch.append((key, value, topic_of(fmt, t), p, offsets[t][p],
                      datetime.fromtimestamp(ts / 1000, UTC)))
        offsets[t][p] += 1
        stats["messages"] += 1
        stats["value_bytes"] += len(value)
        if len(batch) >= batch_rows:
            flush()

    if fmt == "qlik":  # Replicate sends each table's metadata message first
        from jobs.demo.qlik import json_metadata

        for t, table in enumerate(qlik_tables()):
            emit(t, b"", json_metadata(table).encode(), START_MS)
    target = n - stats["messages"]
    produced = 0
    for t, op, k, after, pos, ts in changes(target, seed):
        if produced >= target:
            break
        key, value = render(t, op, k, after, pos, ts)
        emit(t, key, value, ts)
        recent.append((t, key, value, ts))
        produced += 1
        if produced < target and rng.random() < REDELIVERED_SHARE and len(recent) > 1:
            rt, rkey, rvalue, _ = recent[rng.randrange(len(recent))]
            emit(rt, rkey, rvalue, ts)  # at-least-once: an earlier message again
            produced += 1
    flush()
    if writer is not None:
        writer.close()
    (out / "_bench.json").write_text(json.dumps({"format": fmt, **stats}))
    return stats


def ensure_snapshot(fmt: str, n: int, root: Path, rows_per_file: int = 1_000_000) -> tuple[Path, dict]:
    """The snapshot for (fmt, n) under ``root``, generated once and reused (files of ``rows_per_file``
    messages: a larger value makes one large file of the interval, as some landers write)."""
    out = root / (f"{fmt}-{n}" if rows_per_file == 1_000_000 else f"{fmt}-{n}-files-of-{rows_per_file}")
    marker = out / "_bench.json"
    if marker.exists():
        stats = json.loads(marker.read_text())
        if stats.get("messages") == n:
            return out, stats
    for f in out.glob("*.parquet"):
        f.unlink()
    return out, write_snapshot(fmt, n, out, rows_per_file=rows_per_file)


if __name__ == "__main__":  # a quick look: python -m bench.generate debezium 1000 /tmp/x
    import sys

    print(write_snapshot(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])))
