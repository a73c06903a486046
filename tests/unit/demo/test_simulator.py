"""The simulated source: Debezium-shaped messages, positions in commit order, and a SQLite model
that the messages fold back to. No Spark needed."""
from __future__ import annotations

import base64
import json
import sqlite3
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.demo import generate as make_demo
from jobs.demo.simulator import (
    CONNECTORS,
    GARBAGE_KINDS,
    NEWKEY_HEADER,
    OLDKEY_HEADER,
    UNAVAILABLE_VALUE,
    SourceSimulator,
    TableSpec,
    connect_bytes_to_decimal,
    decimal_to_connect_bytes,
    encode_value,
    kafka_partition,
    murmur2,
    position_sort_key,
    write_parquet,
)

CUSTOMERS = TableSpec(
    "shop", "public", "customers",
    [("id", "int"), ("name", "text"), ("notes", "text"), ("active", "boolean"), ("created", "timestamp")],
    ["id"],
)
ORDERS = TableSpec(
    "shop", "public", "orders",
    [("id", "bigint"), ("customer_id", "int"), ("amount", "decimal(10,2)"), ("day", "date"), ("w", "double")],
    ["id"],
)
LINES = TableSpec(
    "shop", "public", "lines",
    [("order_id", "bigint"), ("line_no", "int"), ("sku", "text"), ("qty", "int")],
    ["order_id", "line_no"],
)
TABLES = [CUSTOMERS, ORDERS, LINES]


def workload(seed: int = 11, connector: str = "postgresql", *, tables=TABLES, ops: int = 400,
             concurrency: int = 3, faults: bool = True) -> SourceSimulator:
    sim = SourceSimulator(seed, tables, connector)
    for spec in tables:
        sim.populate(spec.name, 30)
    sim.snapshot()
    sim.random_ops(ops, max_tx_size=4, concurrency=concurrency)
    if faults:
        sim.redeliver(0.05)
        sim.garbage(len(GARBAGE_KINDS))
        sim.random_ops(ops // 4, max_tx_size=2, concurrency=concurrency)
    return sim


def payload_of(value: bytes) -> dict:
    message = json.loads(value)
    return message["payload"] if "schema" in message else message


# ---- determinism ---------------------------------------------------------------------------------
@pytest.mark.parametrize("connector", CONNECTORS)
def test_same_seed_gives_the_same_messages_and_state(connector):
    first, second = workload(5, connector), workload(5, connector)
    assert first.to_kafka_records(with_schema=True) == second.to_kafka_records(with_schema=True)
    assert all(first.expected_state(t.name) == second.expected_state(t.name) for t in TABLES)
    other = workload(6, connector)
    assert other.to_kafka_records() != first.to_kafka_records()


# ---- positions -----------------------------------------------------------------------------------
@pytest.mark.parametrize("connector", CONNECTORS)
def test_positions_sort_in_commit_order(connector):
    sim = workload(3, connector, ops=600, faults=False)
    records = sim.to_kafka_records()
    changes = [(e, payload_of(r["value"])) for e, r in zip(sim.events, records) if e.kind == "change"]
    sources = [p["source"] for _, p in changes]
    keys = [position_sort_key(s) for s in sources]
    # emission order is commit order: sorting by position must not move anything
    assert sorted(range(len(keys)), key=keys.__getitem__) == list(range(len(keys)))
    tx_of = [e.tx_seq for e, _ in changes]
    for i in range(1, len(keys)):
        if tx_of[i] != tx_of[i - 1] and tx_of[i] is not None:
            assert keys[i - 1] < keys[i], (sources[i - 1], sources[i])
    # several rows of one transaction share its commit point
    by_tx: dict[int, list[dict]] = {}
    for (e, _), s in zip(changes, sources):
        if e.tx_seq is not None:
            by_tx.setdefault(e.tx_seq, []).append(s)
    multi = [group for group in by_tx.values() if len(group) > 1]
    assert multi, "the workload should have multi-row transactions"
    shared = {"postgresql": lambda s: (json.loads(s["sequence"])[0], s["txId"]),
              "sqlserver": lambda s: s["commit_lsn"], "mysql": lambda s: s["gtid"]}[connector]
    for group in multi:
        assert len({shared(s) for s in group}) == 1
    if connector == "postgresql":
        lsns = [s["lsn"] for s in sources if s["snapshot"] == "false"]
        # concurrent transactions interleave in the WAL: lsn alone is not commit order
        assert any(a > b for a, b in zip(lsns, lsns[1:]))
        assert all(isinstance(s["lsn"], int) for s in sources)
    if connector == "sqlserver":
        for (e, p), s in zip(changes, sources):
            if p["op"] == "u":
                assert s["event_serial_no"] == 2
            elif p["op"] == "r":
                assert s["change_lsn"] is None and s["event_serial_no"] is None
            elif not e.headers:
                assert s["event_serial_no"] == 1
            assert len(s["commit_lsn"]) == len("0000002a:00000758:0005")
    if connector == "mysql":
        assert all(s["file"].startswith("mysql-bin.") for s in sources)
        cdc = [s for s in sources if s["snapshot"] == "false"]
        assert all(s["ts_ms"] % 1000 == 0 for s in cdc)  # binlog timestamps have whole seconds
        assert any(s["row"] > 0 for s in cdc)  # rows sharing one rows event


def test_postgres_sequence_is_a_json_string_of_last_commit_and_lsn():
    sim = workload(4, "postgresql", ops=50, concurrency=1, faults=False)
    events = [e for e in sim.events if e.kind == "change" and e.source["snapshot"] == "false"]
    cdc = [e.source for e in events]
    sequences = [json.loads(s["sequence"]) for s in cdc]
    assert all(seq[1] == str(s["lsn"]) for seq, s in zip(sequences, cdc))
    first_tx = events[0].tx_seq
    # the first transaction streamed after the snapshot has no last commit yet; later ones do
    assert all((seq[0] is None) == (e.tx_seq == first_tx) for seq, e in zip(sequences, events))
    later = [(int(seq[0]), s["lsn"]) for seq, s, e in zip(sequences, cdc, events) if e.tx_seq != first_tx]
    assert [c for c, _ in later] == sorted(c for c, _ in later)
    # with one transaction at a time, the last commit is behind every change it precedes
    assert all(commit < lsn for commit, lsn in later)


# ---- snapshot ------------------------------------------------------------------------------------
def test_snapshot_reads_every_row_at_one_position_with_debezium_markers():
    sim = SourceSimulator(1, TABLES, "postgresql")
    for spec in TABLES:
        sim.populate(spec.name, 4)
    assert sim.snapshot() == 12
    reads = [e for e in sim.events if e.kind == "change"]
    assert {e.op for e in reads} == {"r"} and all(e.before is None for e in reads)
    assert len({(e.source["lsn"], e.source["sequence"], e.source["txId"]) for e in reads}) == 1
    markers = [e.source["snapshot"] for e in reads]
    assert markers == (["first", "true", "true", "last_in_data_collection"]
                       + ["first_in_data_collection", "true", "true", "last_in_data_collection"]
                       + ["first_in_data_collection", "true", "true", "last"])
    single = SourceSimulator(1, [ORDERS], "sqlserver")
    single.populate("orders", 3)
    single.snapshot("orders")
    assert [e.source["snapshot"] for e in single.events] == ["first", "true", "last"]


# ---- the SQLite model ----------------------------------------------------------------------------
def test_sqlite_state_follows_the_operations():
    sim = SourceSimulator(2, TABLES, "postgresql")
    for _ in range(5):
        sim.insert("orders")
    sim.insert("orders", {"id": 1000, "customer_id": 7, "amount": Decimal("12.30"), "day": date(2026, 1, 2),
                          "w": 1.5})
    assert sim.source_counts() == {"customers": 0, "orders": 6, "lines": 0}
    sim.delete("orders", 1000)
    sim.delete("orders")
    assert sim.source_counts()["orders"] == 4
    key = sim.expected_state("orders")[0]["id"]
    sim.update("orders", key, {"amount": Decimal("-5.5")})
    assert sim.expected_state("orders")[0]["amount"] == Decimal("-5.50")
    old, new = sim.change_key("orders", key, 5000)
    assert old == {"id": key} and new == {"id": 5000}
    ids = [row["id"] for row in sim.expected_state("orders")]
    assert 5000 in ids and key not in ids and len(ids) == 4
    with sim.transaction() as tx:
        sim.insert("lines", tx=tx)
        sim.insert("lines", tx=tx)
    assert sim.source_counts()["lines"] == 2
    sim.truncate("lines")
    assert sim.source_counts()["lines"] == 0
    assert sim.events[-1].op == "t" and sim.events[-1].key is None


def test_save_sqlite_names_tables_by_bare_name(tmp_path):
    sim = workload(8, "mysql", ops=100, faults=False)
    path = sim.save_sqlite(tmp_path / "source.db")
    with sqlite3.connect(path) as conn:
        counts = {t.name: conn.execute(f'SELECT COUNT(*) FROM "{t.name}"').fetchone()[0] for t in TABLES}
    assert counts == sim.source_counts() and all(counts.values())


def _fold(sim: SourceSimulator, records: list[dict], with_schema: bool) -> dict[str, dict[tuple, dict]]:
    """A plain reference fold of the Kafka records: dedupe, order by position, apply per key."""
    topic_table = {sim.topic(t): t for t in sim.tables}
    seen, events = set(), []
    for arrival, record in enumerate(records):
        if record["value"] is None or (record["key"], record["value"]) in seen:
            continue
        seen.add((record["key"], record["value"]))
        try:
            message = json.loads(record["value"])
        except ValueError:
            continue
        if not isinstance(message, dict) or not message:
            continue
        if with_schema:
            assert set(message) == {"schema", "payload"}
        payload = message.get("payload", message)
        op = payload.get("op")
        if op not in ("r", "c", "u", "d", "t") or (op in ("r", "c", "u") and payload.get("after") is None):
            continue
        events.append((position_sort_key(payload["source"]), arrival, topic_table[record["topic"]], payload))
    events.sort(key=lambda e: e[:2])
    state: dict[str, dict[tuple, dict]] = {t: {} for t in sim.tables}
    for _, _, table, payload in events:
        pk = sim.tables[table].primary_key
        rows = state[table]
        if payload["op"] == "t":
            rows.clear()
        elif payload["op"] == "d":
            rows.pop(tuple(payload["before"][k] for k in pk), None)
        else:
            after = payload["after"]
            key = tuple(after[k] for k in pk)
            prior = rows.get(key, {})
            rows[key] = {c: (prior.get(c) if v == UNAVAILABLE_VALUE else v) for c, v in after.items()}
    return state


@pytest.mark.parametrize("connector", CONNECTORS)
@pytest.mark.parametrize("with_schema", [False, True])
def test_messages_fold_back_to_the_sqlite_state(connector, with_schema):
    tables = [
        TableSpec("shop", "public", "customers", CUSTOMERS.columns, ["id"], replica_identity="default",
                  toasted=["notes"]),
        ORDERS,
        LINES,
    ]
    sim = workload(21, connector, tables=tables, ops=500)
    sim.incremental_snapshot("orders", limit=10)
    sim.random_ops(50, concurrency=2)
    if connector == "postgresql":
        sim.truncate("lines")
        sim.random_ops(30)
    folded = _fold(sim, sim.to_kafka_records(with_schema=with_schema), with_schema)
    for spec in tables:
        expected = {
            tuple(row[k] for k in spec.primary_key): {
                c: encode_value(spec.column_type(c), v, with_schema) for c, v in row.items()
            }
            for row in sim.expected_state(spec.name)
        }
        assert folded[spec.name] == expected, spec.name


# ---- message shapes ------------------------------------------------------------------------------
@pytest.mark.parametrize("connector", CONNECTORS)
def test_primary_key_change_is_delete_tombstone_create_with_key_headers(connector):
    sim = SourceSimulator(9, TABLES, connector)
    sim.insert("orders", {"id": 1, "customer_id": 3, "amount": Decimal("9.99"), "day": None, "w": 2.0})
    before = len(sim.events)
    sim.change_key("orders", 1, 2)
    new = sim.to_kafka_records()[before:]
    assert [r["value"] is None for r in new] == [False, True, False]
    delete, tombstone, create = new
    assert delete["key"] == tombstone["key"] == b'{"id":1}' and create["key"] == b'{"id":2}'
    assert delete["headers"] == [(NEWKEY_HEADER, b'{"id":2}')] == tombstone["headers"]
    assert create["headers"] == [(OLDKEY_HEADER, b'{"id":1}')]
    d, c = payload_of(delete["value"]), payload_of(create["value"])
    assert (d["op"], d["after"], c["op"], c["before"]) == ("d", None, "c", None)
    assert d["before"]["id"] == 1 and c["after"]["id"] == 2 and c["after"]["amount"] == "9.99"
    assert position_sort_key(d["source"]) == position_sort_key(c["source"])
    assert d["source"] == c["source"]  # one position, one transaction
    assert tombstone["partition"] == delete["partition"]


def test_replica_identity_default_sends_key_only_deletes_and_no_update_before():
    spec = TableSpec("db", "public", "t", [("id", "int"), ("a", "text"), ("big", "text")], ["id"],
                     replica_identity="default", toasted=["big"])
    sim = SourceSimulator(1, [spec], "postgresql")
    sim.insert("t", {"id": 1, "a": "x", "big": "long text"})
    sim.update("t", 1, {"a": "y"})
    sim.update("t", 1, {"big": "longer text"})
    sim.delete("t", 1)
    ins, upd1, upd2, dele, tomb = sim.events
    assert upd1.before is None and upd1.after == {"id": 1, "a": "y", "big": UNAVAILABLE_VALUE}
    assert upd2.after["big"] == "longer text"
    assert dele.before == {"id": 1, "a": None, "big": None} and tomb.kind == "tombstone"
    full = SourceSimulator(1, [spec], "mysql")  # replica identity is a PostgreSQL setting
    full.insert("t", {"id": 1, "a": "x", "big": "b"})
    full.update("t", 1, {"a": "y"})
    assert full.events[-1].before == {"id": 1, "a": "x", "big": "b"}


def test_with_schema_uses_debezium_logical_types():
    sim = SourceSimulator(1, [ORDERS, CUSTOMERS], "postgresql")
    sim.insert("orders", {"id": 7, "customer_id": 1, "amount": Decimal("12.34"), "day": date(1970, 1, 11),
                          "w": 0.5})
    sim.insert("customers", {"id": 3, "name": "Zoë", "notes": None, "active": True,
                             "created": datetime(1970, 1, 1, 0, 0, 1, 5)})
    order, customer = sim.to_kafka_records(with_schema=True)
    value = json.loads(order["value"])
    envelope = value["schema"]
    assert envelope["name"] == "dbserver1.public.orders.Envelope"
    assert [f["field"] for f in envelope["fields"]][:4] == ["before", "after", "source", "transaction"]
    assert {"op", "ts_ms"} <= {f["field"] for f in envelope["fields"]}
    after_fields = {f["field"]: f for f in envelope["fields"][1]["fields"]}
    assert after_fields["amount"] == {
        "type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"}, "field": "amount"}
    assert (after_fields["day"]["type"], after_fields["day"]["name"]) == ("int32", "io.debezium.time.Date")
    assert after_fields["id"] == {"type": "int64", "optional": False, "field": "id"}
    assert after_fields["customer_id"]["type"] == "int32" and after_fields["w"]["type"] == "double"
    after = value["payload"]["after"]
    assert after["amount"] == "BNI=" and after["day"] == 10 and after["w"] == 0.5
    key = json.loads(order["key"])
    assert key["payload"] == {"id": 7} and key["schema"]["name"] == "dbserver1.public.orders.Key"
    c = json.loads(customer["value"])
    c_fields = {f["field"]: f for f in c["schema"]["fields"][1]["fields"]}
    assert (c_fields["created"]["type"], c_fields["created"]["name"]) == ("int64", "io.debezium.time.MicroTimestamp")
    assert c_fields["active"]["type"] == "boolean" and c_fields["name"]["type"] == "string"
    assert c["payload"]["after"] == {"id": 3, "name": "Zoë", "notes": None, "active": True, "created": 1_000_005}
    plain = payload_of(sim.to_kafka_records(with_schema=False)[0]["value"])
    assert plain["after"]["amount"] == "12.34" and plain["transaction"] is None
    assert set(plain) >= {"before", "after", "source", "op", "ts_ms", "transaction"}


@pytest.mark.parametrize(
    ("value", "scale", "encoded"),
    [(Decimal("12.34"), 2, "BNI="), (Decimal("0"), 2, "AA=="), (Decimal("1.27"), 2, "fw=="),
     (Decimal("1.28"), 2, "AIA="), (Decimal("-1.28"), 2, "gA=="), (Decimal("-1.29"), 2, "/38="),
     (Decimal("99999999.99"), 2, "AlQL4/8="),
     (Decimal("120.00"), 2, "LuA=")],  # the last one as a real MySQL connector sent it
)
def test_decimal_is_the_big_endian_twos_complement_unscaled_value(value, scale, encoded):
    assert decimal_to_connect_bytes(value, scale) == encoded
    assert connect_bytes_to_decimal(encoded, scale) == value
    raw = base64.b64decode(encoded)
    assert int.from_bytes(raw, "big", signed=True) == int(value.scaleb(scale))


# ---- Kafka framing -------------------------------------------------------------------------------
def test_murmur2_matches_kafka():
    # Kafka's UtilsTest.testMurmur2 vectors
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_kafka_records_have_consistent_partitions_offsets_and_timestamps():
    sim = workload(13, "postgresql", ops=300)
    records = sim.to_kafka_records()
    stamps = [r["timestamp"] for r in records]
    assert all(a < b for a, b in zip(stamps, stamps[1:]))
    assert all(s.tzinfo == UTC and s.microsecond % 1000 == 0 for s in stamps)
    offsets: dict[tuple, list[int]] = {}
    for r in records:
        offsets.setdefault((r["topic"], r["partition"]), []).append(r["offset"])
        assert r["timestampType"] == 0
        if r["key"] is not None:
            assert r["partition"] == kafka_partition(r["key"], sim.n_partitions)
    assert all(v == list(range(len(v))) for v in offsets.values())
    assert {r["topic"] for r in records} == {"dbserver1.public.customers", "dbserver1.public.orders",
                                             "dbserver1.public.lines"}
    for entry, record in zip(sim.events, records):
        if entry.kind == "redelivery":
            original = records[entry.original]
            assert (record["key"], record["value"], record["topic"], record["partition"], record["headers"]) == (
                original["key"], original["value"], original["topic"], original["partition"], original["headers"])
            assert record["offset"] > original["offset"]
    assert sim.redelivered_count == sum(e.kind == "redelivery" for e in sim.events) > 0


def test_topic_names_per_connector():
    expected = {"postgresql": "s.public.orders", "mysql": "s.shop.orders", "sqlserver": "s.shop.public.orders"}
    for connector, topic in expected.items():
        assert SourceSimulator(1, [ORDERS], connector, server="s").topic("orders") == topic


def test_garbage_values_are_malformed_in_each_announced_way():
    sim = workload(17, "sqlserver", ops=60, faults=False)
    before = len(sim.events)
    sim.garbage(5)
    assert sim.garbage_count == 5
    values = [r["value"] for r in sim.to_kafka_records()[before:]]
    assert values[0] == b"{]"
    with pytest.raises(ValueError):
        json.loads(values[0])
    assert json.loads(values[1]) == {}
    assert isinstance(json.loads(values[2]), list)
    unknown, no_after = json.loads(values[3]), json.loads(values[4])
    assert unknown["op"] == "XX" and unknown["source"]["connector"] == "sqlserver" and unknown["after"]
    assert no_after["op"] == "u" and no_after["after"] is None and no_after["before"]
    assert [e.garbage_kind for e in sim.events[before:]] == list(GARBAGE_KINDS)


# ---- Parquet ---------------------------------------------------------------------------------------
SPARK_KAFKA_SCHEMA = pa.schema([
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestampType", pa.int32()),
    ("headers", pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))),
])


def test_parquet_has_exactly_sparks_kafka_source_schema(tmp_path):
    sim = workload(19, "postgresql", ops=120)
    records = sim.to_kafka_records()
    path = tmp_path / "topic" / "part-00000.parquet"
    assert write_parquet(path, records, batch_rows=100) == len(records)
    assert pq.read_schema(path).remove_metadata() == SPARK_KAFKA_SCHEMA
    back = pq.read_table(path).to_pylist()
    assert len(back) == len(records)
    for original, read in zip(records, back):
        assert read["headers"] == (
            [{"key": k, "value": v} for k, v in original["headers"]] if original["headers"] else None)
        assert {k: v for k, v in read.items() if k != "headers"} == {
            k: v for k, v in original.items() if k != "headers"}
    empty = tmp_path / "empty.parquet"
    assert write_parquet(empty, []) == 0
    assert pq.read_schema(empty).remove_metadata() == SPARK_KAFKA_SCHEMA


# ---- the demo ------------------------------------------------------------------------------------
def test_make_demo_is_quick_deterministic_and_complete(tmp_path, capsys):
    started = time.monotonic()
    out, db = tmp_path / "topics", tmp_path / "source.db"
    assert make_demo.main(["--out", str(out), "--source-db", str(db), "--seed", "7"]) == 0
    assert time.monotonic() - started < 15
    summary = capsys.readouterr().out.strip()
    assert "\n" not in summary and "3 malformed" in summary
    files = sorted(out.glob("*/part-*.parquet"))
    assert [f.parent.name for f in files] == ["shop.public.customers", "shop.public.order_lines",
                                             "shop.public.orders"]
    rows = [row for f in files for row in pq.read_table(f).to_pylist()]
    assert 2000 <= len(rows) <= 5000
    assert all(pq.read_schema(f).remove_metadata() == SPARK_KAFKA_SCHEMA for f in files)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    stamps = [r["timestamp"] for r in rows]
    assert start <= min(stamps) and max(stamps) < start + timedelta(days=2)
    assert max(stamps) > start + timedelta(days=1, hours=12)  # spread over both days
    headers = {h["key"] for r in rows for h in (r["headers"] or [])}
    assert headers == {NEWKEY_HEADER, OLDKEY_HEADER}
    assert sum(r["value"] is None for r in rows) > 10  # tombstones
    assert b'"amount":"' in b"".join(r["value"] or b"" for r in rows)  # decimals as strings
    with sqlite3.connect(db) as conn:
        counts = {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
                  for t in ("customers", "orders", "order_lines")}
    sim = make_demo.build_demo(7, 3000)
    assert counts == sim.source_counts()
    assert sim.garbage_count == 3 and sim.redelivered_count > 0
    assert sorted(r["value"] or b"" for r in rows) == sorted(
        r["value"] or b"" for r in sim.to_kafka_records(with_schema=False))
