"""The Oracle GoldenGate JSON decoder against the real messages in tests/resources/ogg.

Expected values are those the tools' own test suites expect (tests/resources/ogg/SOURCE.md).
"""
from __future__ import annotations

from datetime import datetime

import pytest

from jobs.formats import DecodeOptions
from jobs.lake.raw import read_raw
from tests.support.decoders import FLINK_PRODUCT_ROWS, decoded_rows, flink_row_kinds, raw_frame, with_exact_numbers
from tests.support.ogg import ogg_message as _ogg

MALFORMED = "malformed JSON, not a JSON object, or a field of the wrong JSON type"

# Flink OggJsonSerDeSchemaTest / SeaTunnel OggJsonSerDeSchemaTest and KafkaFormatIT: the 20 rows
FLINK_EXPECTED = FLINK_PRODUCT_ROWS
# SeaTunnel KafkaFormatIT.checkOggFormat: the inserts' weights as re-emitted strings
SEATUNNEL_WEIGHTS = ["3.140000104904175", "8.100000381469727", "0.800000011920929", "0.75", "0.875", "1",
                     "5.300000190734863", "0.10000000149011612", "22.200000762939453"]


def _decode_raw(raw, options=DecodeOptions()):
    return decoded_rows(raw, "ogg", options)[:3]


@pytest.mark.parametrize("path, table_id", [
    ("ogg/flink/ogg-data.txt", "_.OGG.TBL_TEST"),
    ("ogg/seatunnel/ogg-data-filter-table.txt", "_.OGG.TBL_TEST"),
    ("ogg/seatunnel/ogg_data.txt", "_.OGG.OGG_TEST"),
])
def test_flink_and_seatunnel_files_decode_to_their_rows(spark, shared_dir, path, table_id):
    records, quarantine, counts = _decode_raw(read_raw(spark, str(shared_dir / path)))
    assert quarantine == []
    assert counts["total"] == {"landed": 16, "decoded": 16, "quarantined": 0, "ignored": 0, "records": 16}
    got = flink_row_kinds(records)
    assert [g[:4] for g in got] == [e[:4] for e in FLINK_EXPECTED]
    assert [g[4] for g in got] == pytest.approx([e[4] for e in FLINK_EXPECTED], rel=1e-6)
    assert [r["after"]["weight"] for r in records[:9]] == SEATUNNEL_WEIGHTS
    # metadata test: table, primary-keys[0] = id, event-timestamp (op_ts, UTC) 1589384406000 ms
    first = records[0]
    assert first["table_id"] == table_id and first["key"] == {"id": "101"}
    assert first["event_time"] == datetime(2020, 5, 13, 15, 40, 6)
    assert first["position"] == "143".zfill(38) and first["column_types"] is None
    positions = [r["position"] for r in records]
    assert positions == sorted(positions) and len(set(positions)) == 16
    assert all(r["phase"] == "CDC" for r in records) and len({r["event_id"] for r in records}) == 16
    # a full update image merges like a partial one: present_columns are the columns it carries
    assert sorted(records[9]["present_columns"]) == ["description", "id", "name", "weight"]


def test_numbers_keep_their_digits(spark):
    """The formatter sends NUMBER columns as JSON numbers; read into a string through a double they would
    lose digits (12345678901234567890.12 -> 1.2345678901234567E19)."""
    before = {"ID": 1, "AMOUNT": "@BIG@", "RATE": "@FINE@", "NOTE": "7.10"}
    after = {"ID": 1, "AMOUNT": "@INT@", "RATE": 3.140000104904175, "NOTE": None}
    text = with_exact_numbers(_ogg("U", before=before, after=after, pos="00000000020000001000"))
    records, quarantine, _ = _decode_raw(raw_frame(spark, [text]))
    assert quarantine == []
    assert records[0]["before"] == {"ID": "1", "AMOUNT": "12345678901234567890.12", "RATE": "0.1234567890123456789",
                                    "NOTE": "7.10"}
    assert records[0]["after"] == {"ID": "1", "AMOUNT": "123456789012345678901234567890",
                                   "RATE": "3.140000104904175", "NOTE": None}


def test_keys_partial_updates_key_changes_and_malformed(spark):
    values = [
        _ogg("U", after={"ID": 1, "V": "b"}, pos="00000000020000001000"),  # compressed: no before
        _ogg("U", before={"ID": 1}, after={"V": "c"}, pos="00000000020000002000"),  # after lacks the key
        _ogg("U", before={"ID": 1, "V": "c"}, after={"ID": 2, "V": "c"}, pos="00000000020000003000"),
        _ogg("T", pos="00000000020000004000", table="PDB1.SRC.OTHER"),
        _ogg("U", before={"ID": 5, "V": "x"}, after={"ID": 5, "V": "y"}, pos="30000", pks=None),
        _ogg("DELETE", before={"ID": 5, "V": "y"}, pos="00000000010000000001", pks=None),
        _ogg("I", after={"ID": 9, "V": "z"}, pos="999999999999999999999999"),
        None, "{not json", "[1]", _ogg(None, after={"ID": 1}), _ogg("X", after={"ID": 1}),
        _ogg("I", after={"ID": 1}, table=""), _ogg("I"), _ogg("D"),
        _ogg("U", after={"ID": 1}, pks=None), _ogg("I", after="a string"),
    ]
    records, quarantine, counts = _decode_raw(raw_frame(spark, values))
    assert [(r["op"], r["table_id"], r["key"]) for r in records] == [
        ("UPDATE", "_.SRC.ITEMS", {"ID": "1"}),
        ("UPDATE", "_.SRC.ITEMS", {"ID": "1"}),
        ("DELETE", "_.SRC.ITEMS", {"ID": "1"}), ("INSERT", "_.SRC.ITEMS", {"ID": "2"}),
        ("TRUNCATE", "PDB1.SRC.OTHER", None),
        # keyless: the whole row is the key, an update replaces one row by another
        ("DELETE", "_.SRC.ITEMS", {"ID": "5", "V": "x"}), ("INSERT", "_.SRC.ITEMS", {"ID": "5", "V": "y"}),
        ("DELETE", "_.SRC.ITEMS", {"ID": "5", "V": "y"}),
        ("INSERT", "_.SRC.ITEMS", {"ID": "9"}),
    ]
    assert records[0]["before"] is None and sorted(records[0]["present_columns"]) == ["ID", "V"]
    assert records[1]["after"] == {"ID": "1", "V": "c"} and sorted(records[1]["present_columns"]) == ["ID", "V"]
    assert records[3]["after"] == {"ID": "2", "V": "c"} and records[2]["before"] == {"ID": "1", "V": "c"}
    assert records[3]["before"] == {"ID": "1", "V": "c"}  # the old key: the fold moves its row
    assert records[2]["event_id"] != records[3]["event_id"]
    positions = [r["position"] for r in records]
    assert positions[5] < positions[7] < positions[0] < positions[1] < positions[8], "numeric order"
    assert records[0]["event_time"] == datetime(2024, 1, 2, 3, 4, 5, 123456)
    assert [q["reason"] for q in quarantine] == [
        MALFORMED, MALFORMED,
        "not an OGG message: no 'op_type'",
        "unknown operation type 'X'",
        "no source table ('table')",
        "'after' is null for op_type 'I'",
        "delete has neither a 'before' nor an 'after' image",
        "update of a table without a known key has no 'before' image: give --primary-keys (tables[].primary_keys in a pipeline file)",
        MALFORMED,
    ]
    assert quarantine[0]["value"] == b"{not json"
    assert counts["ignored_reasons"] == {"tombstone": 1} and counts["balanced"]

    # --primary-keys wins over the message's primary_keys
    records, _, _ = _decode_raw(raw_frame(spark, values[2:3]), DecodeOptions(primary_keys={"ITEMS": ("V",)}))
    assert [(r["op"], r["key"]) for r in records] == [("UPDATE", {"V": "c"})]
