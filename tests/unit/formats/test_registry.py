"""The formats' registry (jobs.formats.registry): every format's entry from its folder, read without
Spark; each entry's cut of a source position; each entry's decoder, imported when asked."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from jobs.formats.registry import ENTRIES, bound, entry, names
from jobs.model.positions import PositionError, pad
from tests.support.paths import REPO


def _python(code: str) -> str:
    """``code``'s last printed line, run by a new interpreter (nothing imported before it)."""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()[-1]


def test_the_registry_the_pipeline_schema_and_the_cuts_load_without_pyspark():
    code = ("import json, sys, jobs.config, jobs.formats.registry as r; r.bound('debezium', '0/16B3748'); "
            "print(json.dumps([jobs.config.FORMATS, sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('pyspark', 'py4j'))]))")
    formats, loaded = json.loads(_python(code))
    assert loaded == []
    assert tuple(formats) == names() and "auto" in formats and "debezium" in formats


def test_each_decoder_is_its_entrys_and_loads_before_any_spark_session():
    """The CLI's --help and Airflow's DAG parsing may import a decoder before a session exists."""
    code = ("import json; from jobs.formats.decoders import get_decoder; from jobs.formats.registry import entry, names; "
            "print(json.dumps({n: get_decoder(n).entry is entry(n) and get_decoder(n).name == n for n in names()}))")
    assert json.loads(_python(code)) == {name: True for name in ENTRIES}


def test_an_unknown_format_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown format 'debezum'; known: auto, canal, dataworks, debezium"):
        entry("debezum")


def test_only_debezium_has_several_shapes_and_two_formats_decode_on_the_jvm():
    assert {n for n, e in ENTRIES.items() if e.shaped} == {"debezium"}
    assert {n: e.jvm_decoder for n, e in ENTRIES.items() if e.jvm_decoder} == {
        "debezium": "cdc.DebeziumUdf", "dts_avro": "cdc.DtsAvroUdf"}


@pytest.mark.parametrize("fmt, text, cut", [
    ("debezium", "0/16B3748", pad(0x16B3748)),
    ("debezium", "23803720", pad(23803720)),
    ("debezium", "mysql-bin.000003:1234", f"{pad(3)}.{pad(1234)}"),
    ("debezium", "0000002a:00000c48:0003", "0000002A:00000C48:0003"),
    ("debezium", "scn:999", pad(1000)),
    ("debezium", "SCN:999", pad(1000)),
    ("maxwell", "master.000007:4", f"{pad(7)}.{pad(4)}"),
    ("dts_avro", "72469@78", f"{pad(78, 10)}.{pad(72469)}"),
    ("dts_avro", "mysql-bin.000078:72469", f"{pad(78, 10)}.{pad(72469)}"),
    ("shareplex", "12345", pad(12346)),
    ("shareplex", "scn:12345", pad(12346)),
    ("ogg", "143", pad(143, 38) + "\x00"),
    ("dataworks", "1731663842292000001", pad(1731663842292000001) + ".1\x00"),
    ("qlik", "20261102100000000000000000000000001", "20261102100000000000000000000000001\x00"),
    ("canal", "canonical:00001.00002", "00001.00002\x00"),
])
def test_a_source_position_is_placed_by_its_formats_cut(fmt, text, cut):
    assert bound(fmt, text).at == cut


def test_a_postgresql_lsn_is_placed_within_the_transaction_it_falls_in():
    # Debezium PostgreSQL positions start with the previous commit's LSN (jobs.reconcile.checkpoints)
    assert bound("debezium", "0/16B3748").previous_commit
    assert not bound("debezium", "mysql-bin.000003:1234").previous_commit


@pytest.mark.parametrize("fmt, text, message", [
    ("debezium", "0/XYZ", "is not a PostgreSQL LSN"),
    ("maxwell", "mysql-bin", "is not a binlog position"),
    ("shareplex", "scn:-1", "is not an Oracle SCN"),
    ("ogg", "1e3", "is not an OGG trail position"),
    ("dataworks", "", "a position is a non-empty string"),
    ("canal", "1589373515000", "format 'canal' has no source position of its own"),
    (None, "5", "format None has no source position of its own"),
])
def test_a_position_its_format_cannot_place_is_refused_with_what_it_expects(fmt, text, message):
    with pytest.raises(PositionError, match=message):
        bound(fmt, text)
