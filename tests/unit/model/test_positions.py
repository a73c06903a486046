"""What the formats' cuts share (jobs.model.positions): readings of LSNs, binlog positions and SCNs, and
``place``: a lake's own position in any format, a source's by the format's cut. Each format's cut:
tests/unit/formats/test_registry.py and test_positions_round_trip.py."""
from __future__ import annotations

import pytest

from jobs.model.positions import (
    JUST_AFTER,
    Cut,
    PositionError,
    binlog,
    binlog_cut,
    pad,
    pg_lsn,
    place,
    scn_cut,
)


@pytest.mark.parametrize("text, lsn", [("0/16B3748", 0x16B3748), ("1/0", 1 << 32), (" 23803720 ", 23803720),
                                       ("FFFFFFFF/FFFFFFFF", 2**64 - 1)])
def test_a_postgresql_lsn_in_either_form(text, lsn):
    assert pg_lsn(text) == lsn


@pytest.mark.parametrize("text, position", [("mysql-bin.000003:1234", (3, 1234)), ("binlog.7:4", (7, 4)),
                                            ("72469@78", (78, 72469))])
def test_a_binlog_position_as_mysql_or_dts_writes_it(text, position):
    assert binlog(text) == position


def test_a_binlog_cut_pads_the_file_number_as_wide_as_the_format_does():
    assert binlog_cut("mysql-bin.000003:1234") == Cut(f"{pad(3)}.{pad(1234)}")
    assert binlog_cut("72469@78", file_digits=10).at == f"{pad(78, 10)}.{pad(72469)}"


def test_an_scn_cut_holds_the_commits_at_or_before_it():
    assert scn_cut("5") == scn_cut("scn:5") == Cut(pad(6))


def test_place_reads_the_lakes_own_position_in_any_format_and_a_sources_by_the_formats_cut():
    def refuse(text: str) -> Cut:
        raise AssertionError("a canonical position is not the format's to place")

    assert place("ogg", "canonical:0042.7", refuse) == Cut("0042.7" + JUST_AFTER)
    assert place("maxwell", "a:1:2", lambda text: Cut(text.upper())) == Cut("A:1:2")
    with pytest.raises(PositionError, match="a position is a non-empty string"):
        place("maxwell", "  ", refuse)
    with pytest.raises(PositionError, match="format 'canal' has no source position of its own: give the lake's "
                                            "position as 'canonical:<_cdc_position>' or the moment as as_of"):
        place("canal", "1589373515000", None)
