"""Each format's cut places a source position back where its decoder put the change.

A sample message is decoded by the format's real decoder; the position text the source itself would
give for that change (what a counts file or a SQL source names: the Debezium LSN, the binlog
``file:pos``, the SCN, the changeSequence ...) goes through the format's own cut
(jobs/formats/<format>/__init__.py, via jobs.formats.registry.bound); the cuts of that text and of its
neighbour in the source bracket the decoded position. Whether a count at the text holds the change
(an SCN, a trail position, a sequence id: the changes up to it) or not (an LSN, a binlog position: the
changes before it) says which neighbour: the previous position or the next one (docs/operations/reconciliation.md,
"What a position is, per format").
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from pyspark.sql import functions as F

from jobs.formats import DecodeOptions
from jobs.formats.decoders import get_decoder
from jobs.formats.registry import ENTRIES, bound
from jobs.model.positions import CANONICAL_PREFIX, JUST_AFTER, PositionError
from tests.support.decoders import raw_frame
from tests.support.dts_avro import chars, dts, integer
from tests.support.maxwell import maxwell_message
from tests.support.qlik import cdc_messages, seq
from tests.support.shareplex import seed_examples


@dataclass(frozen=True)
class RoundTrip:
    fmt: str
    messages: list  # the sample's message values (text or bytes), in order
    message: int  # which of them holds the change (its first record)
    source: str  # the record's position as the source writes it
    neighbour: str  # the source's position just before it (counted) or just after it (not counted)
    counted: bool  # whether a count at ``source`` holds the change


def _lines(shared_dir, path: str) -> list[str]:
    """A sample file's messages (its JSON lines; a licence header is not one)."""
    return [line.strip() for line in (shared_dir / path).read_text().splitlines() if line.strip().startswith("{")]


def _oracle_change(scn: int, commit_scn: int) -> str:
    """A Debezium Oracle connector's insert as its documentation shows it (no public sample carries an SCN)."""
    source = {"connector": "oracle", "db": "ORCLPDB1", "schema": "INVENTORY", "table": "CUSTOMERS",
              "scn": str(scn), "commit_scn": str(commit_scn), "ts_ms": 1583246520000, "snapshot": "false"}
    return json.dumps({"before": None, "after": {"ID": 1004}, "source": source, "op": "c", "ts_ms": 1583246521000})


def _cases(shared_dir) -> dict[str, RoundTrip]:
    dts_row = [integer(1), chars("x")]
    return {
        # Flink's sample: the update of product 107 at binlog mysql-bin.000003:717 (the 11th message)
        "debezium MySQL": RoundTrip("debezium", _lines(shared_dir, "debezium/flink/debezium-data-schema-include.txt"),
                                    10, "mysql-bin.000003:717", "mysql-bin.000003:718", counted=False),
        # the update at LSN 34131104 (0/208CCA0, as pg_current_wal_lsn() prints it)
        "debezium PostgreSQL": RoundTrip(
            "debezium", _lines(shared_dir, "debezium/flink/debezium-postgres-data-schema-include.txt"), 9,
            "0/208CCA0", "0/208CCA1", counted=False),
        # the SQL Server connector's create of the seed document: commit LSN 00000027:00000758:0005
        "debezium SQL Server": RoundTrip("debezium", [_seed_003_create(shared_dir)], 0, "00000027:00000758:0005",
                                         "00000027:00000758:0006", counted=False),
        "debezium Oracle": RoundTrip("debezium", [_oracle_change(289, 290)], 0, "scn:290", "scn:289", counted=True),
        "maxwell": RoundTrip("maxwell", [maxwell_message("insert", data={"id": 1}, position="mysql-bin.000010:500",
                                                         xoffset=3)], 0, "mysql-bin.000010:500", "mysql-bin.000010:501",
                             counted=False),
        "dts_avro": RoundTrip("dts_avro", [dts("INSERT", after=dts_row, rid=12, pos="72469@78")], 0,
                              "72469@78", "72470@78", counted=False),
        # the seed document's insert, at SCN 14589063118712
        "shareplex": RoundTrip("shareplex", [seed_examples(shared_dir)["insert"]], 0, "14589063118712",
                               "14589063118711", counted=True),
        # Flink's sample: the first insert, at trail position 143
        "ogg": RoundTrip("ogg", _lines(shared_dir, "ogg/flink/ogg-data.txt"), 0, "00000000000000000000143",
                         "00000000000000000000142", counted=True),
        "dataworks": RoundTrip("dataworks", _lines(shared_dir, "dataworks/paimon/event-update-in-one.txt"), 0,
                               "1731663842292000001", "1731663842292000000", counted=True),
        # sales.orders' first change (its metadata message second), at changeSequence seq(1)
        "qlik": RoundTrip("qlik", cdc_messages(avro=False), 0, seq(1), seq(0), counted=True),
    }


def _seed_003_create(shared_dir) -> str:
    text = (shared_dir / "seeds/003_25eac51771b90504.txt").read_text()
    document, _ = json.JSONDecoder().raw_decode(text[text.index('{\n  "schema"'):])
    return json.dumps(document)


def _decoded_position(spark, fmt: str, messages: list, message: int) -> str | None:
    """The position of the first change record of ``messages[message]``, by the format's decoder alone."""
    decoder = get_decoder(fmt)
    raw = raw_frame(spark, messages)
    outcomes = decoder.decode(raw, DecodeOptions(memory=tuple(decoder.remember(raw))))
    return outcomes.where(F.col("offset") == message).select(F.get("records", 0)["position"]).first()[0]


CASES = ["debezium MySQL", "debezium PostgreSQL", "debezium SQL Server", "debezium Oracle", "maxwell", "dts_avro",
         "shareplex", "ogg", "dataworks", "qlik"]


@pytest.mark.parametrize("case", CASES)
def test_the_formats_cut_of_a_changes_source_position_brackets_its_decoded_position(spark, shared_dir, case):
    trip = _cases(shared_dir)[case]
    position = _decoded_position(spark, trip.fmt, trip.messages, trip.message)
    assert position is not None
    own, other = bound(trip.fmt, trip.source).at, bound(trip.fmt, trip.neighbour).at
    if trip.counted:  # the changes up to the source position: the cut lies just after the change
        assert other <= position < own
    else:  # the changes before it: the cut lies just before the change
        assert own <= position < other
    # the lake's own text of the position places the cut just after it, in every format
    assert bound(trip.fmt, CANONICAL_PREFIX + position).at == position + JUST_AFTER


def test_every_format_with_a_source_position_has_a_round_trip():
    with_cut = {name for name, entry in ENTRIES.items() if entry.cut is not None}
    assert with_cut == {c.split()[0] for c in CASES}


def test_a_format_without_source_positions_takes_the_lakes_own(spark, shared_dir):
    """Canal's ``es`` is a time and its ``id`` a batch number: no source names such a position."""
    position = _decoded_position(spark, "canal", _lines(shared_dir, "canal/flink/canal-data.txt"), 0)
    with pytest.raises(PositionError, match="format 'canal' has no source position of its own"):
        bound("canal", position)
    assert bound("canal", CANONICAL_PREFIX + position).at == position + JUST_AFTER
