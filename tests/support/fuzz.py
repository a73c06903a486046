"""Hostile variants of real messages, for the decoders' fuzz tests (tests/unit/formats/test_fuzzing.py,
and whole runs in tests/integration/test_decoder_fuzzing_runs.py), and ``check_batch``, the properties
every decode of hostile input keeps (also for the hand-made and generated edge cases of
tests/unit/formats/test_debezium.py and test_dts_avro.py).

A corpus per format comes from the source simulator's stream rendered in that format
(jobs/demo/streams.py), so every variant starts from a message the decoder reads. ``mutate``
turns one into a hostile variant by a named kind, driven by a seeded ``random.Random`` (hypothesis
draws the seed, so a failure shrinks and replays). JSON formats are mutated in their parsed form
(a chosen field, anywhere in the object) and as text (duplicate keys, NaN, deep nesting); DTS Avro in
its decoded record (re-encoded) and as bytes.
"""
from __future__ import annotations

import io
import json
import random
import re
from functools import cache
from typing import Any

# kinds whose variant means the same as the message it came from: it must decode to the same records
MEANING_PRESERVING = ("extra_field", "reformat")
MUTATIONS = ("truncate", "bit_flip", "wrong_type", "drop_field", "other_format", "deep_nesting",
             "huge_string", "invalid_utf8", "nan_infinity", "duplicate_key", "unknown_op", "hostile_name",
             "junk_bytes", *MEANING_PRESERVING)
FORMATS = ("debezium", "qlik", "dataworks", "dts_avro", "shareplex", "canal", "maxwell", "ogg")

_WRONG_VALUES: tuple[Any, ...] = (None, True, False, 0, -1, 2**70, -(2**63) - 1, 1.5, 1e308, "", "x", "-1",
                                  [], {}, [1, "a", None], {"a": {"b": [1]}})
_HOSTILE_NAMES = ("../../../etc/passwd", "a/b\\c", "..", ".", "a.b.c.d", "\u0000\n\t", "<script>x</script>",
                  "名前", "x" * 300, "' OR 1=1 --", "%2e%2e%2f", "")
_OP_FIELDS = ("op", "type", "op_type", "operation", "optype", "opType")
_PLACEHOLDER = "@@FUZZ@@"
HUGE_CHARS = 256 * 1024  # in the suite; the opt-in budget (make test-fuzz) sends tens of MB


SAFE_TABLE_ID = re.compile(r"[A-Za-z0-9_$-]+\.[A-Za-z0-9_$-]+\.[A-Za-z0-9_$-]+")
_LINEAGE = ("topic", "partition", "offset", "kafka_ts")


def check_batch(spark, fmt: str, values: list[bytes], same_as: dict[int, int] | None = None, *, keys=None,
                headers=None, topic: str = "t", options=None) -> dict[int, Any]:
    """Decode ``values`` (offsets 0..n-1; ``keys``, ``headers`` and ``topic`` as tests.support.decoders.raw_frame
    takes them) as ``fmt`` and check what holds whatever the input:
    - the decode never fails, and every message has exactly one outcome;
    - a quarantined message has a reason and its exact raw bytes; the counts balance;
    - a decoded record is well formed: a table id that cannot leave the lake, a known op and phase, a key
      for a row change, an event id;
    - ``same_as``: the offset of a meaning-preserving variant -> the offset of its original; the two
      decode to the same outcome and the same records.
    Returns each offset's outcome row (offset, status, reason, table_id)."""
    from jobs.decode.stage import decode_counts, decode_messages, release
    from jobs.formats import DECODED, IGNORED, QUARANTINED, DecodeOptions
    from jobs.model import record as C
    from tests.support.decoders import raw_frame

    row_changes = (C.SNAPSHOT, C.INSERT, C.UPDATE, C.DELETE)
    values = [v if v is None or isinstance(v, bytes) else v.encode() for v in values]
    raw = raw_frame(spark, values, keys=keys, topic=topic, headers=headers)
    decoded = decode_messages(raw, fmt, options or DecodeOptions())
    try:
        outcomes = {r["offset"]: r for r in decoded.outcomes.select("offset", "status", "reason", "table_id").collect()}
        quarantine = {r["offset"]: r for r in decoded.quarantine.collect()}
        records: dict[int, list[str]] = {}
        for r in decoded.changes.collect():
            record = r.asDict(recursive=True)
            assert SAFE_TABLE_ID.fullmatch(record["table_id"] or ""), record
            assert record["op"] in C.OPS and record["phase"] in C.PHASES and record["event_id"]
            if record["op"] in row_changes:
                assert record["key"] is not None, record
            content = {k: v for k, v in record.items() if k not in _LINEAGE}
            records.setdefault(r["offset"], []).append(json.dumps(content, sort_keys=True, default=str))
        counts = decode_counts(decoded.outcomes)
    finally:
        release(decoded.materialized)
    assert sorted(outcomes) == list(range(len(values))), "a message without exactly one outcome"
    for offset, o in outcomes.items():
        assert o["status"] in (DECODED, QUARANTINED, IGNORED)
        if o["status"] == QUARANTINED:
            assert o["reason"], values[offset][:200]
            assert quarantine[offset]["value"] == values[offset]
        if o["status"] == DECODED and o["table_id"] is not None:
            assert SAFE_TABLE_ID.fullmatch(o["table_id"]), o["table_id"]
    assert set(quarantine) == {o for o, r in outcomes.items() if r["status"] == QUARANTINED}
    assert counts.balanced and counts.total.landed == len(values)
    for variant, original in (same_as or {}).items():
        assert (outcomes[variant]["status"], outcomes[variant]["reason"]) == \
            (outcomes[original]["status"], outcomes[original]["reason"]), values[variant][:300]
        assert sorted(records.get(variant, [])) == sorted(records.get(original, [])), values[variant][:300]
    return outcomes


@cache
def corpus(fmt: str) -> tuple[bytes, ...]:
    """Real messages of ``fmt``: a small simulated workload's stream (snapshot, changes, key changes,
    transactions), Debezium with and without the schema section."""
    from jobs.demo.simulator import INVENTORY_TABLES, SourceSimulator
    from jobs.demo.streams import FORMAT_RECORDS

    sim = SourceSimulator(7, list(INVENTORY_TABLES), "mysql", n_partitions=2)
    sim.populate("items", 6)
    sim.populate("stock", 4)
    sim.snapshot()
    sim.random_ops(24, max_tx_size=3, concurrency=2)
    if fmt == "debezium":
        records = [*sim.to_kafka_records(with_schema=False), *sim.to_kafka_records(with_schema=True)]
    else:
        records = FORMAT_RECORDS[fmt](sim)
    return tuple(r["value"] for r in records if r["value"])


def mutate(value: bytes, kind: str, rnd: random.Random, fmt: str, huge_chars: int = HUGE_CHARS) -> bytes:
    """A hostile variant of ``value`` (a real ``fmt`` message) of mutation ``kind``."""
    if kind == "truncate":
        return value[:rnd.randrange(len(value))]
    if kind == "bit_flip":
        out = bytearray(value)
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(out))
            out[i] ^= 1 << rnd.randrange(8)
        return bytes(out)
    if kind == "junk_bytes":
        at = rnd.randrange(len(value) + 1)
        return value[:at] + bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 16))) + value[at:]
    if kind == "other_format":
        other = rnd.choice([f for f in FORMATS if f != fmt])
        return rnd.choice(corpus(other))
    if fmt == "dts_avro":
        return _mutate_avro(value, kind, rnd, huge_chars)
    return _mutate_json(value, kind, rnd, huge_chars)


# ---- JSON ----------------------------------------------------------------------------------------
def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a parsed JSON document (dict keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _set(doc: Any, path: tuple, value: Any) -> None:
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def _drop(doc: Any, path: tuple) -> None:
    target = doc
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]


def _mutate_json(value: bytes, kind: str, rnd: random.Random, huge_chars: int) -> bytes:
    try:
        doc = json.loads(value)
    except ValueError:
        return value[:rnd.randrange(len(value))]
    paths = _paths(doc)
    if not isinstance(doc, dict) or not paths:
        return json.dumps([doc, None]).encode()
    path = rnd.choice(paths)
    text_value = None
    if kind == "reformat":
        return json.dumps(doc, indent=rnd.choice([None, 1, 4]), separators=rnd.choice([(",", ":"), (" , ", " : ")]),
                          ensure_ascii=rnd.random() < 0.5).encode()
    if kind == "extra_field":
        doc[f"zz_extra_{rnd.randrange(1000)}"] = rnd.choice(_WRONG_VALUES)
    elif kind == "wrong_type":
        _set(doc, path, rnd.choice(_WRONG_VALUES))
    elif kind == "drop_field":
        _drop(doc, path)
    elif kind == "unknown_op":
        ops = [p for p in paths if isinstance(p[-1], str) and p[-1] in _OP_FIELDS] or [path]
        _set(doc, rnd.choice(ops), rnd.choice(["", "X", "merge", "UPSERT", "r2", "\u00e9"]))
    elif kind == "hostile_name":
        strings = [p for p in paths if isinstance(_get(doc, p), str)] or [path]
        _set(doc, rnd.choice(strings), rnd.choice(_HOSTILE_NAMES))
    elif kind == "huge_string":
        _set(doc, path, "Z" * huge_chars)
    elif kind in ("deep_nesting", "nan_infinity"):
        _set(doc, path, _PLACEHOLDER)
        depth = rnd.choice([64, 600, 3000])
        text_value = ("[" * depth + "1" + "]" * depth if kind == "deep_nesting"
                      else rnd.choice(["NaN", "Infinity", "-Infinity", "1e999"]))
    elif kind == "invalid_utf8":
        strings = [p for p in paths if isinstance(_get(doc, p), str)] or [path]
        _set(doc, rnd.choice(strings), _PLACEHOLDER)
        text = json.dumps(doc).encode()
        return text.replace(_PLACEHOLDER.encode(), rnd.choice([b"\xff\xfe", b"\xc3", b"a\xed\xa0\x80b", b"\x80"]), 1)
    elif kind == "duplicate_key":
        key = rnd.choice(list(doc))
        text = json.dumps(doc)
        return ("{" + json.dumps(key) + ": " + json.dumps(rnd.choice(_WRONG_VALUES)) + ", " + text[1:]).encode()
    text = json.dumps(doc)
    if text_value is not None:
        text = text.replace(json.dumps(_PLACEHOLDER), text_value, 1)
    return text.encode()


def _get(doc: Any, path: tuple) -> Any:
    for part in path:
        doc = doc[part]
    return doc


# ---- DTS Avro ------------------------------------------------------------------------------------
@cache
def _dts_schema() -> Any:
    from jobs.formats.dts_avro.decoder import record_schema

    return record_schema()


def _mutate_avro(value: bytes, kind: str, rnd: random.Random, huge_chars: int) -> bytes:
    import fastavro

    if kind in ("duplicate_key", "deep_nesting"):  # JSON's: Avro bytes get byte-level damage instead
        kind = rnd.choice(["truncate", "bit_flip", "junk_bytes"])
        return mutate(value, kind, rnd, "dts_avro", huge_chars)
    record = fastavro.schemaless_reader(io.BytesIO(value), _dts_schema(), return_record_name=True)
    images = [name for name in ("beforeImages", "afterImages") if isinstance(record.get(name), list)]
    if kind in MEANING_PRESERVING:  # Avro has no extra fields nor layout: the record written again
        pass
    elif kind == "wrong_type" and images:  # a value of another branch than its column's
        image = record[rnd.choice(images)]
        i = rnd.randrange(len(image))
        image[i] = rnd.choice([None, ("com.alibaba.dts.formats.avro.Integer", {"precision": 8, "value": "x1"}),
                               ("com.alibaba.dts.formats.avro.Float", {"value": 1.5, "precision": 0, "scale": 0}),
                               ("com.alibaba.dts.formats.avro.Decimal", {"value": "1e5", "precision": 1, "scale": 9}),
                               ("com.alibaba.dts.formats.avro.Character", {"charset": "nope", "value": b"\xff"})])
    elif kind == "drop_field":
        if record.get("fields"):
            record["fields"] = record["fields"][:-1]  # images then hold more values than fields
        else:
            record["objectName"] = None
    elif kind == "unknown_op":
        # an enum: another of its symbols (a symbol past them is a bit flip's work)
        record["operation"] = rnd.choice(["HEARTBEAT", "BEGIN", "COMMIT", "DDL", "INIT", "DELETE", "CHECKPOINT"])
    elif kind == "hostile_name":
        record["objectName"] = rnd.choice(_HOSTILE_NAMES)
    elif kind == "huge_string" and images:
        record[images[0]][0] = ("com.alibaba.dts.formats.avro.Character",
                                {"charset": "utf8", "value": b"Z" * huge_chars})
    elif kind == "invalid_utf8" and images:
        record[images[0]][0] = ("com.alibaba.dts.formats.avro.Character",
                                {"charset": "utf8mb4", "value": rnd.choice([b"\xff\xfe", b"\xc3", b"a\xed\xa0\x80b"])})
    elif kind == "nan_infinity" and images:
        record[images[0]][0] = ("com.alibaba.dts.formats.avro.Float",
                                {"value": rnd.choice([float("nan"), float("inf"), float("-inf")]), "precision": 0,
                                 "scale": 0})
    else:
        return mutate(value, "bit_flip", rnd, "dts_avro", huge_chars)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _dts_schema(), record)
    return buf.getvalue()
