"""Qlik (Attunity) Replicate (docs/formats/qlik.md): a position is a ``changeSequence``."""
from jobs.formats.entry import FormatEntry
from jobs.model.positions import JUST_AFTER, Cut

POSITION_CHARS = 35  # a changeSequence: YYYYMMDDHHmmSShh + a 19-digit change number


def cut(text: str) -> Cut:
    """The changes up to the changeSequence."""
    return Cut(text.strip().rjust(POSITION_CHARS, "0") + JUST_AFTER)


ENTRY = FormatEntry("qlik", "jobs.formats.qlik.decoder:QlikDecoder", cut)
