"""The shared change-record builder, the status rule and the decoders' base class (jobs.formats)."""
from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import functions as F

from jobs.formats.base import (
    NO_TABLE,
    BaseDecoder,
    RecordBuilder,
    decided_outcome,
    event_id,
    marker_record,
    status_of,
)
from jobs.formats.decoders import get_decoder
from jobs.formats.registry import names
from jobs.model.record import CHANGE_RECORD_COLUMNS, CHANGE_RECORD_SCHEMA

MESSAGE = ("db.s.t", "00000000000000000042", "ts|1", "t", 3, 7, datetime(2026, 11, 1, tzinfo=UTC))
MESSAGE_SCHEMA = ("table_id string, position string, identity string, topic string, partition int, "
                  "offset bigint, timestamp timestamp")
BEFORE, AFTER = {"id": "1", "v": "a"}, {"id": "1", "v": "b"}


def _message(spark):
    return spark.createDataFrame([MESSAGE], MESSAGE_SCHEMA)


def _builder(**fields) -> RecordBuilder:
    return RecordBuilder("test", F.col("table_id"), F.col("position"), F.lit(None).cast("timestamp"), **fields)


def _map(d: dict) -> F.Column:
    return F.create_map(*[F.lit(x) for kv in d.items() for x in kv])


def test_a_record_has_the_canonical_fields_in_order_and_types(spark):
    record = _builder().record("UPDATE", "CDC", _map({"id": "1"}), _map(BEFORE), _map(AFTER))
    built = _message(spark).select(record.alias("r")).schema["r"].dataType
    assert built.names == list(CHANGE_RECORD_COLUMNS)
    canonical = {f.name: f.dataType.simpleString() for f in CHANGE_RECORD_SCHEMA.fields}
    # a field the format leaves empty is the canonical type's null, not a null of no type
    assert {f.name: f.dataType.simpleString() for f in built.fields} == canonical


def test_a_record_carries_the_message_fields_and_its_lineage(spark):
    builder = _builder(tx_id=F.lit("tx-9"), tx_seq=F.lit(5).cast("bigint"), tx_last=F.lit(True),
                       column_types=_map({"id": "int"}))
    record = builder.record("INSERT", "CDC", _map({"id": "1"}), None, _map(AFTER), F.array(F.lit("id")))
    r = _message(spark).select(record.alias("r")).first()["r"].asDict()
    assert (r["format"], r["table_id"], r["op"], r["phase"]) == ("test", "db.s.t", "INSERT", "CDC")
    assert (r["key"], r["before"], r["after"]) == ({"id": "1"}, None, AFTER)
    assert (r["present_columns"], r["position"]) == (["id"], "00000000000000000042")
    assert (r["tx_id"], r["tx_seq"], r["tx_last"], r["column_types"]) == ("tx-9", 5, True, {"id": "int"})
    assert (r["topic"], r["partition"], r["offset"]) == ("t", 3, 7)
    assert r["kafka_ts"] is not None


def test_the_event_id_hashes_the_position_or_the_identity_given_for_it(spark):
    key, before, after = _map({"id": "1"}), _map(BEFORE), _map(AFTER)
    by_position = _builder().record("UPDATE", "CDC", key, before, after)["event_id"]
    by_identity = _builder(identity=F.col("identity")).record("UPDATE", "CDC", key, before, after)["event_id"]
    expected = [event_id(F.col("table_id"), F.lit("UPDATE"), F.col(c), key, before, after)
                for c in ("position", "identity")]
    row = _message(spark).select(by_position, by_identity, *expected).first()
    assert (row[0], row[1]) == (row[2], row[3])
    assert row[0] != row[1]
    # ids are persisted and matched across versions: this one must never change
    assert row[0] == "8D601A59BAE6AC463BE97FF4"


def test_a_marker_without_a_table_belongs_to_no_table(spark):
    detail = _map({"status": "BEGIN", "id": "tx-9"})
    marker = marker_record("test", F.lit(None), "TX_BEGIN", "CDC", F.lit(None).cast("string"), F.lit("tx-9"),
                           F.lit(None), F.lit(False), F.lit(None).cast("timestamp"), detail)
    no_map = F.lit(None).cast("map<string,string>")
    expected = event_id(F.lit(NO_TABLE), F.lit("TX_BEGIN"), F.lit(None).cast("string"), no_map, no_map, detail)
    row = _message(spark).select(marker.alias("m"), expected.alias("id")).first()
    m = row["m"].asDict()
    assert (m["table_id"], m["op"], m["key"], m["before"]) == (NO_TABLE, "TX_BEGIN", None, None)
    assert (m["after"], m["tx_id"], m["tx_last"], m["event_id"]) == ({"status": "BEGIN", "id": "tx-9"}, "tx-9",
                                                                      False, row["id"])


def test_status_of_a_reason(spark):
    reasons = spark.createDataFrame([(None,), ("tombstone",), ("heartbeat",), ("malformed JSON",)], "reason string")
    reason = F.col("reason")
    with_heartbeats = [r[0] for r in reasons.select(status_of(reason, ["heartbeat"])).collect()]
    assert with_heartbeats == ["decoded", "ignored", "ignored", "quarantined"]
    assert [r[0] for r in reasons.select(status_of(reason)).collect()] == [
        "decoded", "ignored", "quarantined", "quarantined"]
    # only a decoded message keeps its records
    outcomes = reasons.withColumns({c: F.lit(None) for c in ("key", "value", "headers", "topic", "partition",
                                                              "offset", "timestamp")})
    records = F.array(_builder().record("TRUNCATE", "CDC", None, None, None))
    kept = [r["records"] is not None for r in outcomes.withColumns(
        {"table_id": F.lit("db.s.t"), "position": F.lit(None).cast("string")})
        .select(*decided_outcome(reason, ["heartbeat"], F.col("table_id"), records)).collect()]
    assert kept == [True, False, False, False]


def test_every_decoder_has_the_base_hooks():
    decoders = {fmt: get_decoder(fmt) for fmt in names()}
    assert all(isinstance(d, BaseDecoder) for d in decoders.values())
    # only the formats whose later messages need earlier documents remember any
    assert {fmt for fmt, d in decoders.items() if type(d).remember is not BaseDecoder.remember} == {"qlik", "auto"}
    assert decoders["maxwell"].remember(None) == []
