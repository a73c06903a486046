"""A topic carries one shape of message: Debezium's full envelopes or ExtractNewRecordState's unwrapped
rows. A message that does not fit its topic's shape (a stray JSON object on a topic of envelopes) is
quarantined with a reason that says so and its raw bytes, never published as a row of a table named
after the topic; the shape is decided per topic (configured, remembered from an earlier run, or by
most of the topic's messages)."""
from __future__ import annotations

import json

from jobs.decode.stage import decide_topic_shapes, decode_counts, decode_messages, release
from jobs.formats import ENVELOPE, UNWRAPPED, DecodeOptions
from tests.support.decoders import raw_frame
from tests.support.topic_shapes import TOPIC, envelope, unwrapped


def decode(spark, values, topic=TOPIC, options=DecodeOptions()):
    decoded = decode_messages(raw_frame(spark, values, keys=[json.dumps({"id": i}) for i in range(len(values))],
                                        topic=topic), "debezium", options)
    try:
        tables = sorted({r["table_id"] for r in decoded.changes.collect()})
        quarantine = [r.asDict() for r in decoded.quarantine.orderBy("offset").collect()]
        # the counts observed as the messages were decoded (or counted again where some misfit) are those
        # of the messages' outcomes
        assert decoded.counts == decode_counts(decoded.outcomes)
        return tables, quarantine, decoded.counts, decoded.topic_shapes
    finally:
        release(decoded.materialized)


# ---- the decision (no Spark) ----------------------------------------------------------------------
def test_most_messages_decide_a_topic_and_a_tie_is_an_envelope():
    shapes = decide_topic_shapes({("a", ENVELOPE): 9, ("a", UNWRAPPED): 1, ("b", UNWRAPPED): 3,
                                  ("c", ENVELOPE): 2, ("c", UNWRAPPED): 2}, None, {})
    assert {t: s.shape for t, s in shapes.items()} == {"a": ENVELOPE, "b": UNWRAPPED, "c": ENVELOPE}
    assert shapes["a"].basis == "9 of 10 messages in this run"
    assert "topic 'a' carries envelope messages" in shapes["a"].misfit_reason()
    assert "this message is unwrapped" in shapes["a"].misfit_reason()


def test_configured_then_remembered_shapes_win_over_this_runs_messages():
    counts = {("a", UNWRAPPED): 1, ("b", UNWRAPPED): 1}
    remembered = decide_topic_shapes(counts, None, {"a": ENVELOPE})
    assert (remembered["a"].shape, remembered["a"].basis) == (ENVELOPE, "decided by an earlier run")
    assert remembered["b"].shape == UNWRAPPED
    configured = decide_topic_shapes(counts, ENVELOPE, {"a": UNWRAPPED})
    assert {s.shape for s in configured.values()} == {ENVELOPE}
    assert configured["a"].basis == "set by --message-shape or source.message_shape"


def test_the_fix_a_misfit_names_the_flag_and_the_pipeline_files_setting():
    """The same reason reaches a command-line user and a pipeline-file user (the DAG passes the file's
    source.message_shape as --message-shape): it names both."""
    [shape] = decide_topic_shapes({("a", UNWRAPPED): 1}, None, {"a": ENVELOPE}).values()
    assert shape.misfit_reason().endswith(
        "(set --message-shape, or source.message_shape in a pipeline file, if the topic's shape changed)")


# ---- the decoder ------------------------------------------------------------------------------------
def test_a_stray_object_on_a_topic_of_envelopes_is_quarantined_not_a_new_table(spark):
    values = [envelope(1), '{"unexpected": true}', envelope(2), envelope(3)]
    tables, quarantine, counts, decided = decode(spark, values)
    assert tables == ["shop.public.customers"]
    assert [(q["offset"], q["value"]) for q in quarantine] == [(1, b'{"unexpected": true}')]
    assert quarantine[0]["key"] == b'{"id": 1}'
    assert quarantine[0]["reason"].startswith(
        f"does not fit its topic's shape: topic '{TOPIC}' carries envelope messages (3 of 4 messages in this run)")
    assert counts.balanced and counts.total.quarantined == 1 and counts.total.decoded == 3
    assert "_.public.customers" not in counts.tables
    assert decided == {TOPIC: ENVELOPE}


def test_an_envelope_on_a_topic_of_unwrapped_rows_is_quarantined(spark):
    values = [unwrapped(1), unwrapped(2), envelope(3), unwrapped(4)]
    tables, quarantine, counts, decided = decode(spark, values, topic="shop.public.customers_flat")
    assert [q["offset"] for q in quarantine] == [2]
    assert "carries unwrapped messages" in quarantine[0]["reason"]
    assert counts.balanced and counts.total.decoded == 3
    assert decided == {"shop.public.customers_flat": UNWRAPPED}


def test_a_run_of_only_stray_objects_keeps_the_shape_an_earlier_run_decided(spark):
    values = ['{"unexpected": true}', '{"also": "wrong"}']
    # alone, they look like unwrapped rows
    tables, quarantine, _, decided = decode(spark, values)
    assert tables == ["_.public.customers"] and quarantine == [] and decided == {TOPIC: UNWRAPPED}
    # the topic's first run saw envelopes, and the lake remembers it
    tables, quarantine, counts, decided = decode(spark, values, options=DecodeOptions(topic_shapes={TOPIC: ENVELOPE}))
    assert tables == [] and [q["offset"] for q in quarantine] == [0, 1] and decided == {}
    assert all("decided by an earlier run" in q["reason"] for q in quarantine)
    # or the pipeline says so
    tables, quarantine, counts, decided = decode(spark, values, options=DecodeOptions(message_shape=ENVELOPE))
    assert tables == [] and len(quarantine) == 2 and counts.balanced


def test_topics_are_decided_apart(spark):
    frame = raw_frame(spark, [envelope(1), '{"unexpected": true}'], topic=TOPIC).unionByName(
        raw_frame(spark, [unwrapped(2), unwrapped(3)], topic="shop.public.flat"))
    decoded = decode_messages(frame, "debezium", DecodeOptions())
    try:
        assert decoded.topic_shapes == {TOPIC: ENVELOPE, "shop.public.flat": UNWRAPPED}
        assert [(q["topic"], q["offset"]) for q in decoded.quarantine.collect()] == [(TOPIC, 1)]
        assert decoded.changes.count() == 3
    finally:
        release(decoded.materialized)
