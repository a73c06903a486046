"""The JVM-side Debezium decoder (jobs/jvm/src/cdc/DebeziumUdf.java) against the Spark SQL one it
replaces on the hot path: for every message, the same outcome (status, reason, table, record count)
and the same change records, field for field, event ids included (records decoded by either must
dedupe against the other's, across versions of the pipeline). The corpus: every Debezium sample and
seed document, simulated PostgreSQL / SQL Server / MySQL streams with and without the schema section
(snapshots, incremental snapshots, key changes, truncates, unchanged TOAST values, redeliveries,
garbage), the benchmark's messages, and hand-made edge cases of JSON, types and positions."""
from __future__ import annotations

import base64
import dataclasses
import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from jobs import jvm
from jobs.canonical import CHANGE_RECORD_COLUMNS
from jobs.decode import decode_messages, release
from jobs.decoders import DecodeOptions
from jobs.decoders.debezium import JVM_DECODER
from jobs.raw import read_raw
from scripts.simulate_source import INVENTORY_TABLES, SourceSimulator, write_parquet
from tests.support.decoders import assert_same_both_ways, raw_frame

KEYED = DecodeOptions(primary_keys={"products": ("id",), "d.s.t": ("id",), "t": ("id", "v")})


def assert_same(raw, monkeypatch, options=DecodeOptions()) -> int:
    return assert_same_both_ways(raw, monkeypatch, "debezium", options)


def test_the_jvm_decoder_is_on_the_class_path_with_the_record_layout(spark):
    assert jvm.available(spark, JVM_DECODER), "the jar of scripts/build_jvm.sh is not on the driver's class path"
    assert spark._jvm.cdc.Outcomes.RECORD_FIELDS.split(",") == list(CHANGE_RECORD_COLUMNS)


def test_every_sample_and_seed_message(spark, shared_dir, monkeypatch):
    samples = sorted((shared_dir / "debezium").rglob("*"))
    values, topics = [], []
    for path in samples:
        if path.suffix == ".txt":
            lines = [line for line in path.read_text().splitlines() if line.strip()]
        elif path.suffix == ".json":
            lines = [json.dumps(json.loads(path.read_text()))]
        else:
            continue
        values += lines
        topics += [f"server1.inventory.{path.stem}"] * len(lines)
    for seed in ("002_e03e39008dc43f1c.txt", "003_25eac51771b90504.txt"):
        text = (shared_dir / "seeds" / seed).read_text()
        values += [re.sub(r'^\{"schema": \{ \.\.\. \},', "{", line) for line in text.splitlines()
                   if line.startswith("{")]
    frames = [raw_frame(spark, values[i::3], keys=['{"id": 1004}', None, '{"id":1}'][i:i + 1] * len(values[i::3]),
                        topic="server1.inventory.customers") for i in range(3)]
    raw = frames[0].unionByName(frames[1].selectExpr("*")).unionByName(frames[2])
    raw = raw.selectExpr("key", "value", "topic", "partition", "monotonically_increasing_id() AS offset",
                         "timestamp", "timestampType", "headers")
    assert assert_same(raw, monkeypatch) == len(values)
    assert assert_same(raw, monkeypatch, DecodeOptions(primary_keys={"customers": ("id",)})) == len(values)


@pytest.mark.parametrize("connector", ["postgresql", "sqlserver", "mysql"])
@pytest.mark.parametrize("with_schema", [False, True])
def test_simulated_streams(spark, tmp_path, monkeypatch, connector, with_schema):
    tables = list(INVENTORY_TABLES)
    # default replica identity: updates without before images, unchanged TOAST columns not sent
    tables[0] = dataclasses.replace(tables[0], replica_identity="default", toasted=("name",))
    sim = SourceSimulator(11, tables, connector, n_partitions=2)
    sim.populate("items", 15)
    sim.populate("stock", 10)
    sim.snapshot()
    sim.random_ops(60, max_tx_size=3, concurrency=2)
    sim.change_key("stock")
    sim.incremental_snapshot("items")
    if connector == "postgresql":  # the only connector that sends truncates
        sim.truncate("stock")
    sim.redeliver(0.1)
    sim.garbage(8)
    sim.random_ops(30, max_tx_size=2)
    write_parquet(tmp_path / "part-0.parquet", sim.to_kafka_records(with_schema=with_schema))
    raw = read_raw(spark, str(tmp_path))
    assert assert_same(raw, monkeypatch) > 100
    assert assert_same(raw, monkeypatch, DecodeOptions(primary_keys={"items": ("id",)})) > 100


@pytest.mark.parametrize("fmt", ["debezium", "debezium_schema"])
def test_benchmark_messages(spark, tmp_path, monkeypatch, fmt):
    from bench.generate import write_snapshot

    write_snapshot(fmt, 3000, tmp_path)
    assert assert_same(read_raw(spark, str(tmp_path)), monkeypatch) == 3000


SOURCE = {"connector": "postgresql", "db": "d", "schema": "s", "table": "t", "lsn": 7, "ts_ms": 1730000000000}


def _env(op="c", before=None, after=None, source=SOURCE, **extra) -> str:
    return json.dumps({"op": op, "before": before, "after": after, "source": source, **extra})


def _decimal_field(name, scale="2", precision=None):
    params = {"scale": scale, **({"connect.decimal.precision": precision} if precision else {})}
    return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "field": name, "parameters": params}


def _with_schema(fields, payload) -> str:
    schema = {"type": "struct", "fields": [{"type": "struct", "fields": fields, "optional": True, "field": "after"},
                                           {"type": "struct", "fields": fields, "optional": True, "field": "before"}]}
    return json.dumps({"schema": schema, "payload": payload})


def _b64(n: int, width: int) -> str:
    return base64.b64encode(n.to_bytes(width, "big", signed=True)).decode()


EDGE_VALUES = [
    # JSON as Spark reads it: numbers through a double, nested values as compact JSON, duplicates
    '{"op":"c","after":{"id":1,"a":1.50,"b":1e5,"c":12345678901234567890,"d":-0,"e":-0.0,"f":true,"g":null,'
    '"h":[1,2.50,{"x":null}],"i":"s\\u00e9","j":1.0E-7,"k":123456789.123456789,"l":NaN,"m":-Infinity},'
    '"source":{"connector":"postgresql","db":"d","schema":"s","table":"t","lsn":8}}',
    '{"op":"c","op":"u","before":{"id":1},"after":{"id":1,"a":1},"source":{"connector":"postgresql",'
    '"db":"d","schema":"s","table":"t","lsn":9},"after":{"id":1,"a":2}}',
    "{'op':'c','after':{'id':'1'},'source':{'connector':'postgresql','db':'d','schema':'s','table':'t','lsn':1}}",
    '{"op":"c","after":{"id":1},"source":{"connector":"postgresql","table":"t","lsn":1}} trailing',
    # wrong JSON types: the parse keeps what it read, the message is malformed
    '{"op":"c","ts_ms":"x","after":{"id":"1"},"source":{"table":"t"}}',
    '{"op":"c","after":"str","source":{"table":"t"}}',
    '{"op":"c","after":{"id":1},"after":"str","source":{"table":"t","lsn":3,"connector":"postgresql"}}',
    '{"op":"c","transaction":{"id":"t1","total_order":"z"},"after":{"id":1},"source":{"table":"t"}}',
    '{"payload":{"op":5,"ts_ms":1.5,"after":{"id":1},"source":{"table":"t"}},"schema":{"fields":[]}}',
    '{"payload":"text","schema":null}',
    '{"op":"c","after":{"id":1}, xx', "  ", "null", "5", "[1,2]", '"text"', "{}",
    b'{"op":"c","after":{"id":1},"source":{"connector":"postgresql","db":"d","schema":"s","table":"t","lsn":1}}'
 + b"\xff",
    b'{"op":"c","after":{"id":"1","v":"\xff\xfe"},"source":{"connector":"postgresql","table":"t","lsn":2}}',
    # flat rows (ExtractNewRecordState), heartbeats, transaction metadata, logical messages
    '{"id":3,"name":"x","__deleted":"TRUE","__op":"u","__db":"inv","__table":"items"}',
    '{"id":4,"__op":"r"}', '{"__op":"c","__table":"x"}', '{"ts_ms":1730000000000}',
    '{"schema":{"type":"struct","fields":[{"type":"int32","field":"id"},{"type":"int32","name":'
    '"io.debezium.time.Date","field":"day"}]},"payload":{"id":5,"day":20000}}',
    '{"schema":{"type":"struct"},"payload":null}',
    '{"status":"BEGIN","id":"571:1","ts_ms":1730000000000,"event_count":null}',
    '{"status":"END","id":"571:1","ts_ms":1730000000001,"event_count":2,"data_collections":[]}',
    '{"status":"END","ts_ms":1}', '{"status":"BEGIN","id":"x","event_count":"many"}',
    '{"op":"m","source":{"connector":"postgresql","db":"d","table":"","lsn":5},"message":{"prefix":"p",'
    '"content":"YQ=="}}',
    '{"op":"m","source":{"connector":"postgresql","db":"d","lsn":5}}', '{"op":"m"}',
    # ops, snapshots, phases
    _env("r", after={"id": 1}, source={**SOURCE, "snapshot": True}),
    _env("r", after={"id": 2}, source={**SOURCE, "snapshot": "LAST"}),
    _env("r", after={"id": 3}, source={**SOURCE, "snapshot": "last_in_data_collection"}),
    _env("c", after={"id": 4}, source={**SOURCE, "snapshot": "first"}),
    _env("r", after={"id": 5}, source={**SOURCE, "snapshot": "incremental"}),
    _env("r", after={"id": 6}, source={**SOURCE, "snapshot": "false"}),
    _env("r", after={"id": 7}, source={k: v for k, v in SOURCE.items() if k != "snapshot"}),
    _env("u", after=None), _env("d"), _env("u", after={"id": 1}), _env("t"), _env("X", after={"id": 1}),
    _env(None, after={"id": 1}), _env("c", after={"id": 1}, source={"connector": "postgresql"}),
    _env("d", before={"id": 8, "v": "x"}), _env("u", before={"id": 8, "v": "x"}, after={"id": 8, "v": "y"}),
    _env("c", after={"id": 9, "v": "__debezium_unavailable_value", "w": None}),
    _env("c", after={"id": 9}, transaction={"id": "tx9", "total_order": 3, "data_collection_order": 1}),
    _env("c", after={"id": 9}, source={**SOURCE, "txId": 77, "ts_ms": "bad"}, ts_ms=1730000000123),
    _env("c", after={"id": 9}, source={**SOURCE, "ts_ms": None}, ts_ms=None),
    _env("c", after={"id": 9}, source={**SOURCE, "db": "販売", "schema": "Order Details", "table": "a.b/../c"}),
    _env("c", after={"id": 9}, source={**SOURCE, "db": "d" * 150, "schema": "s" * 90, "table": "t" * 70}),
    # schema change events
    json.dumps({"source": {**SOURCE, "table": "t"}, "ddl": "ALTER TABLE t ADD c int",
                "tableChanges": [{"type": "ALTER", "id": "t", "table": {"columns": [{"name": "c", "scale": 1.50}]}}]}),
    json.dumps({"schema": {"type": "struct", "fields": []}, "payload": {
        "source": {"connector": "mysql", "db": "inv", "table": None, "file": "b.000003", "pos": 154},
        "ddl": "CREATE DATABASE inv", "tableChanges": []}}),
    # positions of every connector, awkward ones included
    _env("u", before={"id": 1}, after={"id": 1}, source={**SOURCE, "lsn": -9223372036854775808,
                                                         "sequence": '[null,"-5"]'}),
    _env("u", before={"id": 1}, after={"id": 1}, source={**SOURCE, "lsn": "abc", "sequence": ' [ "12", "x"]'}),
    _env("u", before={"id": 1}, after={"id": 1}, source={**SOURCE, "lsn": 123456789012345678901234,
                                                         "sequence": '["1.5"]'}),
    _env("u", before={"id": 1}, after={"id": 1}, source={**SOURCE, "connector": "PostgreSQL", "lsn": " 42 "}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "sqlserver", "db": "d", "table": "t",
                                                         "commit_lsn": "0000002a:00000010:0001", "change_lsn": None,
                                                         "event_serial_no": 2}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "mysql", "db": "d", "table": "t",
                                                         "file": "binlog", "pos": 4, "row": 1}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "mysql", "db": "d", "table": "t",
                                                         "file": "mysql-bin.000012", "pos": "1e3"}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "oracle", "db": "d", "table": "t",
                                                         "scn": "9", "commit_scn": None}),
    _env("u", before={"id": 1}, after={"id": 1}, source={"connector": "db2", "db": "d", "table": "t"}),
    # the schema section's types and conversions
    _with_schema([_decimal_field("a"), _decimal_field("b", "0"), _decimal_field("c", "3", "5"),
                  _decimal_field("d", "-1"), _decimal_field("e", " 2 "), _decimal_field("f", "x"),
                  _decimal_field("g", 2.7), {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal",
                                            "field": "v"}, {"type": "int64", "field": "n"}],
                 {"op": "c", "source": SOURCE, "after": {
                     "a": _b64(-1, 1), "b": _b64(123456789, 8), "c": "12.5", "d": _b64(-305, 2), "e": "MDk=",
                     "f": "MDk=", "g": "", "v": {"scale": "2", "value": _b64(-12345, 4)}, "n": 5}}),
    _with_schema([_decimal_field("a"), {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal",
                                        "field": "v"}],
                 {"op": "c", "source": SOURCE, "after": {"a": "12", "v": {"value": "AQ=="}}}),
    _with_schema([_decimal_field("a"), _decimal_field("b"), {"type": "struct", "name":
                                                             "io.debezium.data.VariableScaleDecimal", "field": "v"}],
                 {"op": "c", "source": SOURCE, "after": {"a": "0E00", "b": "-1.5e3", "v": "not a struct"}}),
    _with_schema([{"type": "int64", "name": n, "field": "x"} for n in ("io.debezium.time.Timestamp",)]
                 + [{"type": "int32", "name": "io.debezium.time.Date", "field": "d"},
                    {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "mt"},
                    {"type": "int64", "name": "io.debezium.time.NanoTimestamp", "field": "nt"},
                    {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "field": "z1"},
                    {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "field": "z2"},
                    {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "field": "z3"},
                    {"type": "int32", "name": "io.debezium.time.Time", "field": "t1"},
                    {"type": "int64", "name": "io.debezium.time.MicroTime", "field": "t2"},
                    {"type": "int64", "name": "io.debezium.time.NanoTime", "field": "t3"},
                    {"type": "int32", "name": "io.debezium.time.Year", "field": "y"},
                    {"type": "string", "name": "io.debezium.data.Json", "field": "j"},
                    {"type": "array", "field": "arr"}, {"type": "weird", "field": "w"},
                    {"type": "boolean", "field": "flag"}, {"type": "bytes", "field": "raw"}],
                 {"op": "c", "source": SOURCE, "after": {
                     "x": -62135596800001, "d": -719163, "mt": 253402300799999999, "nt": -1,
                     "z1": "2021-01-01T10:00:00.123456789+02:00", "z2": "2021-01-01", "z3": "garbage",
                     "t1": -1, "t2": 86400000000, "t3": 52200123456789, "y": 2024, "j": '{"a": 1}', "arr": [1, 2],
                     "w": "w", "flag": True, "raw": "AAE="}}),
    _with_schema([{"type": "int64", "name": "io.debezium.time.Timestamp", "field": "x"},
                  {"type": "int32", "name": "io.debezium.time.Date", "field": "d"}],
                 {"op": "c", "source": SOURCE, "after": {"x": "1.5", "d": " 12 "}}),
    json.dumps({"schema": "not a document", "payload": {"op": "c", "source": SOURCE, "after": {"id": 1}}}),
    json.dumps({"schema": {"fields": "oops"}, "payload": {"op": "c", "source": SOURCE, "after": {"id": 1}}}),
    json.dumps({"schema": {"type": "struct", "fields": [{"field": "after", "fields": [{"field": "id",
                "type": "INT64"}, {"field": "", "type": "int8"}, {"field": "p", "name":
                "org.apache.kafka.connect.data.Decimal", "parameters": None}]}]},
                "op": "c", "source": SOURCE, "after": {"id": 1, "p": "AQ=="}}),
]


def test_hand_made_edge_cases(spark, monkeypatch):
    values = [v if isinstance(v, bytes) else v.encode() for v in EDGE_VALUES]
    keys = ['{"id": 1}' if i % 3 == 0 else None if i % 3 == 1 else '{"schema":{},"payload":{"id":"9"}}'
            for i in range(len(values))]
    old_key = [{"key": "__debezium.oldkey", "value": b'{"id": 0}'}]
    headers = {i: old_key for i in range(len(values)) if i % 2 == 0}
    raw = raw_frame(spark, values, keys=keys, headers=headers, topic="server1.inventory.items")
    assert assert_same(raw, monkeypatch) == len(values)
    assert assert_same(raw, monkeypatch, KEYED) == len(values)
    heartbeats = raw_frame(spark, ['{"ts_ms": 1}', '{"x": 1}', "{}"], topic="__debezium-heartbeat.server1")
    assert assert_same(heartbeats, monkeypatch) == 3
    keyed_oddly = raw_frame(spark, [_env("u", before={"id": 1, "v": "a"}, after={"id": 1, "v": "b"})] * 5,
                            keys=['"1"', "[1]", '{"schema": null, "payload": {"id": 2}}', '{"payload": "{\\"id\\": 3}",'
                                  ' "schema": 1}', "{bad"], topic="t")
    assert assert_same(keyed_oddly, monkeypatch) == 5


def test_a_column_repeated_in_a_row_image_takes_its_last_value(spark, monkeypatch):
    """The one place the decoders differ, on purpose: Spark SQL's from_json keeps both entries of a
    repeated JSON key in a map, and lookups then see the first; the JVM decoder keeps one entry, the
    last value in the first one's place (as spark.sql.mapKeyDedupPolicy=LAST_WIN builds maps)."""
    value = _env("u", before={"id": 1}, after={"id": 1}).replace('"after": {"id": 1}', '"after": {"id": 1, "a": 1, "a": 2}')
    monkeypatch.setenv("CDC_JVM_DECODERS", "1")
    decoded = decode_messages(raw_frame(spark, [value], keys=['{"id": 1}']), "debezium", DecodeOptions())
    (record,) = decoded.changes.select(F.map_entries("after").alias("entries")).collect()
    release(decoded.materialized)
    assert [tuple(e) for e in record["entries"]] == [("id", "1"), ("a", "2")]


# ---- generated messages: every JSON type in every field the decoders read ----------------------------
def _json_values(draw_text):
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                        st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(
                            ["", "x", "1", "-5", " 12 ", "1.5", "1e3", "true", "__debezium_unavailable_value",
                             "MDk=", "/s8=", "2021-01-01T10:00:00Z", "[\"1\",\"2\"]", "é", "a.b", "mysql-bin.000007"]))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(draw_text, inner, max_size=3)), max_leaves=4)


COLUMNS = st.sampled_from(["id", "v", "name", "__op", "__deleted", "__table", "ts_ms", "op", "source", "a"])
LOGICAL = st.sampled_from([None, "org.apache.kafka.connect.data.Decimal", "io.debezium.data.VariableScaleDecimal",
                           "io.debezium.time.Date", "io.debezium.time.Timestamp", "io.debezium.time.MicroTimestamp",
                           "io.debezium.time.NanoTimestamp", "io.debezium.time.ZonedTimestamp", "io.debezium.time.Time",
                           "io.debezium.time.MicroTime", "io.debezium.time.NanoTime", "io.debezium.time.Year"])


@st.composite
def debezium_messages(draw):
    """A Debezium-like message: an envelope whose fields are mostly of their type and sometimes not,
    with or without a schema section, bare or beside its schema, or a flat row; and its Kafka key."""
    values = _json_values(COLUMNS)
    image = st.one_of(st.none(), st.dictionaries(COLUMNS, values, max_size=4), values)
    source = st.fixed_dictionaries({}, optional={
        "connector": st.sampled_from(["postgresql", "sqlserver", "mysql", "oracle", "PostgreSQL", "x"]),
        "db": st.sampled_from(["d", "販売", "", "a.b"]), "schema": st.sampled_from(["s", "Order Details"]),
        "table": st.sampled_from(["t", "items", ""]), "snapshot": st.sampled_from(["true", "last", "incremental", True,
                                                                                  "false", "LAST"]),
        "ts_ms": st.one_of(st.integers(-2**40, 2**45), values), "lsn": st.one_of(st.integers(-2**63, 2**64), values),
        "sequence": st.sampled_from(['["100","200"]', '[null,"5"]', "x", ' [ "7"']), "txId": values,
        "commit_lsn": st.sampled_from(["0000002a:00000010:0001", "abc", None]), "change_lsn": values,
        "event_serial_no": values, "file": st.sampled_from(["mysql-bin.000003", "binlog", "12"]), "pos": values,
        "row": values, "scn": values, "commit_scn": values})
    envelope = draw(st.fixed_dictionaries({}, optional={
        "op": st.one_of(st.sampled_from(["r", "c", "u", "d", "t", "m", "X"]), values),
        "before": image, "after": image, "source": st.one_of(source, values), "ts_ms": values,
        "transaction": st.one_of(st.fixed_dictionaries({}, optional={"id": values, "total_order": values}), values),
        "message": st.one_of(st.fixed_dictionaries({}, optional={"prefix": values, "content": values}), values),
        "status": st.sampled_from(["BEGIN", "END", "begin"]), "id": values, "event_count": values,
        "ddl": values, "tableChanges": values}))
    fields = draw(st.lists(st.fixed_dictionaries(
        {"field": COLUMNS, "type": st.sampled_from(["int32", "int64", "string", "bytes", "struct", "float64"])},
        optional={"name": LOGICAL, "parameters": st.fixed_dictionaries({}, optional={
            "scale": st.sampled_from(["2", "0", 3, "x"]), "connect.decimal.precision": st.sampled_from(["5", "40"])})}),
        max_size=4))
    schema = {"type": "struct", "fields": [{"field": draw(st.sampled_from(["after", "before", "other"])),
                                            "type": "struct", "fields": fields}]}
    shape = draw(st.sampled_from(["bare", "with schema", "payload only", "flat"]))
    if shape == "with schema":
        document = {"schema": schema, "payload": envelope}
    elif shape == "payload only":
        document = {"payload": envelope}
    elif shape == "flat":
        document = draw(st.dictionaries(COLUMNS, values, max_size=5))
    else:
        document = envelope
    key = draw(st.one_of(st.none(), st.just('{"id": 1}'), st.builds(json.dumps, st.dictionaries(COLUMNS, values,
                                                                                               max_size=2))))
    return json.dumps(document), key


# one example of 300 messages by default (each example costs four Spark decodes); CDC_PROPERTY_EXAMPLES
# raises it (make test-properties)
@pytest.mark.slow
@settings(max_examples=max(1, int(os.environ.get("CDC_PROPERTY_EXAMPLES", "3")) // 3), deadline=None,
          database=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(messages=st.lists(debezium_messages(), min_size=300, max_size=300))
def test_generated_messages(spark, monkeypatch, messages):
    """Generated messages: both decoders give the same outcomes and records."""
    values = [v for v, _ in messages]
    keys = [k for _, k in messages]
    raw = raw_frame(spark, values, keys=keys, topic="server1.inventory.items")
    assert assert_same(raw, monkeypatch) == len(values)
    assert assert_same(raw, monkeypatch, KEYED) == len(values)
