"""A source position, as a person or a source database writes it, placed among a format's positions.

Every decoder writes a record's ``position`` so that string order is source order (docs/formats).
A checkpoint names its moment in the source's own terms -- a PostgreSQL LSN ``0/16B3748``, a binlog
``mysql-bin.000003:1234``, an Oracle SCN -- and ``bound`` turns that into a **cut** among the format's
positions: the changes strictly before the cut are in the source's count, the rest are not.

``canonical:<text>`` names a position exactly as the lake writes it (``_cdc_position`` of a state
row): the cut lies just after it. Pure Python, no Spark.
"""
from __future__ import annotations

import re
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


def _integer(text: str, what: str) -> int:
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
    return _integer(text, "a PostgreSQL LSN (X/Y or a decimal number)")


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


def _debezium(text: str) -> Cut:
    text = text.strip()
    if re.fullmatch(r"[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{4}", text):  # SQL Server LSN
        return Cut(text.upper())
    if text.lower().startswith("scn:"):  # Oracle: AS OF SCN s holds the commits at or before s
        return Cut(pad(_integer(text[4:], "an Oracle SCN") + 1))
    if ":" in text:  # MySQL / MariaDB binlog
        number, offset = binlog(text)
        return Cut(f"{pad(number)}.{pad(offset)}")
    return Cut(pad(pg_lsn(text)), previous_commit=True)


def _maxwell(text: str) -> Cut:
    number, offset = binlog(text)
    return Cut(f"{pad(number)}.{pad(offset)}")


def _dts_avro(text: str) -> Cut:
    number, offset = binlog(text)
    return Cut(f"{pad(number, 10)}.{pad(offset)}")


def _shareplex(text: str) -> Cut:
    return Cut(pad(_integer(text.removeprefix("scn:"), "an Oracle SCN") + 1))


def _ogg(text: str) -> Cut:
    return Cut(pad(_integer(text, "an OGG trail position (digits)"), 38) + JUST_AFTER)


def _dataworks(text: str) -> Cut:
    return Cut(pad(_integer(text, "a DataWorks sequenceId")) + ".1" + JUST_AFTER)


def _qlik(text: str) -> Cut:
    return Cut(text.strip().rjust(35, "0") + JUST_AFTER)


# what a checkpoint's ``position`` is, per format (docs/operations.md, "Checkpoints")
_BY_FORMAT = {
    "debezium": _debezium,
    "maxwell": _maxwell,
    "dts_avro": _dts_avro,
    "shareplex": _shareplex,
    "ogg": _ogg,
    "dataworks": _dataworks,
    "qlik": _qlik,
}


def bound(fmt: str | None, text: str) -> Cut:
    """The cut a checkpoint's position text stands for among ``fmt``'s positions."""
    if not isinstance(text, str) or not text.strip():
        raise PositionError("a position is a non-empty string")
    if text.startswith(CANONICAL_PREFIX):
        return Cut(text[len(CANONICAL_PREFIX):] + JUST_AFTER)
    placer = _BY_FORMAT.get(fmt or "")
    if placer is None:
        raise PositionError(f"format {fmt!r} has no source position of its own: give the lake's position as "
                            f"'{CANONICAL_PREFIX}<_cdc_position>' or the moment as as_of")
    return placer(text)
