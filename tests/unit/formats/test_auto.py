"""``--format auto`` on one topic mixing every format: each message is decoded by the right decoder.

The messages are the real samples of each format (tests/resources/<format>/), the SharePlex seed example, and
Qlik / DTS Avro messages encoded as their documents describe. The check is that ``auto`` gives, per
message, exactly the records the format's own decoder gives, and quarantines what no decoder takes.
"""
from __future__ import annotations

from jobs.decode.stage import decode_counts, decode_messages
from jobs.demo.qlik import QlikColumn, QlikTable, avro_data, avro_metadata, change_sequence, headers
from jobs.formats import DecodeOptions
from jobs.formats.auto import NO_DECODER
from tests.support.decoders import raw_frame
from tests.support.dts_avro import chars, dts, integer
from tests.support.shareplex import seed_examples


def sample_lines(shared_dir, rel: str, n: int) -> list[str]:
    lines = [x for x in (shared_dir / rel).read_text().splitlines() if x.strip().startswith("{")]
    return lines[:n]


def mixed_topic(shared_dir) -> dict[str, list]:
    staff = QlikTable("hr", "staff", [QlikColumn("id", "INT4", 1), QlikColumn("name", "STRING")])
    return {
        "debezium": sample_lines(shared_dir, "debezium/flink/debezium-data-schema-include.txt", 2)
        + sample_lines(shared_dir, "debezium/flink/debezium-postgres-data-schema-exclude.txt", 2),
        "canal": sample_lines(shared_dir, "canal/flink/canal-data.txt", 2),
        "maxwell": sample_lines(shared_dir, "maxwell/flink/maxwell-data.txt", 2),
        "ogg": sample_lines(shared_dir, "ogg/flink/ogg-data.txt", 2),
        "dataworks": sample_lines(shared_dir, "dataworks/paimon/event-insert.txt", 1),
        "shareplex": [seed_examples(shared_dir)["insert"]],
        "qlik": [avro_metadata(staff), avro_data(staff, {"id": 1, "name": "Ada"},
                                                 headers("INSERT", change_sequence("2026110112000000", 1)))],
        "dts_avro": [dts("INSERT", after=[integer(1), chars("x")])],
    }


def records_of(spark, values, fmt):
    decoded = decode_messages(raw_frame(spark, values), fmt, DecodeOptions())
    rows = [r.asDict(recursive=True) for r in decoded.changes.collect()]
    return decoded, sorted(rows, key=lambda r: (r["offset"], r["event_id"]))


def test_auto_decodes_each_message_with_its_own_decoder(spark, shared_dir):
    topic = mixed_topic(shared_dir)
    garbage = ["plain text", '{"hello": "world"}', "{]"]
    values = [v for vs in topic.values() for v in vs] + garbage + [None]
    decoded, auto_records = records_of(spark, values, "auto")

    # the same messages alone through their own decoder, at the offsets they had in the mixed topic
    expected, start = [], 0
    for fmt, vs in topic.items():
        _, own = records_of(spark, vs, fmt)
        assert own, f"{fmt}: the sample decodes to nothing"
        expected += [{**r, "offset": r["offset"] + start} for r in own]
        start += len(vs)

    def comparable(r):
        return {k: v for k, v in r.items() if k != "event_id"} | {"format": r["format"]}

    assert sorted(map(str, map(comparable, auto_records))) == sorted(map(str, map(comparable, expected)))
    assert {r["format"] for r in auto_records} == set(topic)

    counts = decode_counts(decoded.outcomes)
    assert counts.balanced
    assert counts.quarantine_reasons == {NO_DECODER: 3}
    assert counts.total.landed == len(values)
    quarantined = {bytes(r["value"]).decode() for r in decoded.quarantine.collect()}
    assert quarantined == set(garbage)


def test_a_dataworks_heartbeat_is_ignored_not_taken_for_a_debezium_row(spark, shared_dir):
    # the heartbeat of the DataWorks document: no sequenceId, no columns, only its op names the format
    heartbeat = ('{"schema": {"dataColumn": null, "primaryKey": null, "source": null}, "payload": {"before": null, '
                 '"after": null, "sequenceId": null, "timestamp": {"eventTime": 1620457659000, "checkpointTime": '
                 '1620457659000}, "op": "MHEARTBEAT", "ddl": null}, "version": "0.0.1"}')
    insert = sample_lines(shared_dir, "dataworks/paimon/event-insert.txt", 1)
    decoded, records = records_of(spark, insert + [heartbeat, heartbeat], "auto")
    assert [r["format"] for r in records] == ["dataworks"]
    counts = decode_counts(decoded.outcomes)
    assert counts.balanced
    assert counts.ignored_reasons == {"heartbeat": 2}
