"""A source position, as a person or a source database writes it, placed among a format's positions.

Every decoder writes a record's ``position`` so that string order is source order (docs/formats).
A checkpoint names its moment in the source's own terms -- a PostgreSQL LSN ``0/16B3748``, a binlog
``mysql-bin.000003:1234``, an Oracle SCN -- and the format's own cut (``cut`` of its registry entry,
jobs/formats/<format>/__init__.py; jobs.formats.registry.bound) turns that into a **cut** among the
format's positions: the changes strictly before the cut are in the source's count, the rest are not.
This module holds what the formats' cuts share: the cut, the readings of LSNs and binlog positions,
and ``place``.

``canonical:<text>`` names a position exactly as the lake writes it (``_cdc_position`` of a state
row): the cut lies just after it. Pure Python, no Spark.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

CANONICAL_PREFIX = "canonical:"
# sorts after a position and before any longer position it is a prefix of ("." < every digit)
JUST_AFTER = "\x00"


class PositionError(ValueError):
    """A position text the format cannot place."""


@dataclass(frozen=True)
class Cut:
    """Changes at positions ``< at`` are before the cut. ``previous_commit``: the format's positions start
    with the log position of the *previous* transaction's commit (Debezium PostgreSQL's ``sequence``),
    so the transaction that straddles the cut sorts below it: the count at the cut is then looked for
    from the start of the last transaction group below it (jobs.reconcile.checkpoints)."""

    at: str
    previous_commit: bool = False


def pad(number: int, width: int = 20) -> str:
    """Python twin of jobs.formats.base.pad_unsigned for a non-negative integer."""
    return str(number).rjust(width, "0")


def integer(text: str, what: str) -> int:
    """A whole number of at most 38 digits (``what`` it is, for the error)."""
    text = text.strip()
    if not re.fullmatch(r"[0-9]{1,38}", text):
        raise PositionError(f"{text!r} is not {what}")
    return int(text)


def pg_lsn(text: str) -> int:
    """A PostgreSQL LSN: ``X/Y`` in hex (as pg_current_wal_lsn() prints it) or a decimal number."""
    text = text.strip()
    m = re.fullmatch(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})", text)
    if m:
        return (int(m.group(1), 16) << 32) | int(m.group(2), 16)
    return integer(text, "a PostgreSQL LSN (X/Y or a decimal number)")


def binlog(text: str) -> tuple[int, int]:
    """A MySQL / MariaDB binlog position: ``<file>.<number>:<offset>`` (``mysql-bin.000003:1234``) or
    DTS's ``<offset>@<file number>``."""
    text = text.strip()
    m = re.fullmatch(r".*?([0-9]+):([0-9]+)", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.fullmatch(r"([0-9]+)@([0-9]+)", text)
    if m:
        return int(m.group(2)), int(m.group(1))
    raise PositionError(f"{text!r} is not a binlog position (file.000003:1234)")


def binlog_cut(text: str, file_digits: int = 20) -> Cut:
    """The cut at a binlog position (the events before it): its file number and offset, padded as the
    format's positions pad them."""
    number, offset = binlog(text)
    return Cut(f"{pad(number, file_digits)}.{pad(offset)}")


def scn_cut(text: str) -> Cut:
    """The cut at an Oracle SCN ``<n>`` or ``scn:<n>``: AS OF SCN n holds the commits at or before n."""
    return Cut(pad(integer(re.sub(r"(?i)^scn:", "", text.strip()), "an Oracle SCN") + 1))


def place(fmt: str | None, text: str, cut: Callable[[str], Cut] | None) -> Cut:
    """The cut a checkpoint's position ``text`` stands for among ``fmt``'s positions, by the format's own
    ``cut`` (jobs.formats.registry: its folder's entry); ``canonical:<text>`` in any format."""
    if not isinstance(text, str) or not text.strip():
        raise PositionError("a position is a non-empty string")
    if text.startswith(CANONICAL_PREFIX):
        return Cut(text[len(CANONICAL_PREFIX):] + JUST_AFTER)
    if cut is None:
        raise PositionError(f"format {fmt!r} has no source position of its own: give the lake's position as "
                            f"'{CANONICAL_PREFIX}<_cdc_position>' or the moment as as_of")
    return cut(text)
