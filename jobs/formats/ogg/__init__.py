"""Oracle GoldenGate JSON (docs/formats/ogg.md): a position is the trail position ``pos`` (digits)."""
from jobs.formats.entry import FormatEntry
from jobs.model.positions import JUST_AFTER, Cut, integer, pad

POSITION_DIGITS = 38  # the widest integer decimal(38,0) holds; OGG writes 20 digits, some producers more


def cut(text: str) -> Cut:
    """The changes up to the trail position."""
    return Cut(pad(integer(text, "an OGG trail position (digits)"), POSITION_DIGITS) + JUST_AFTER)


ENTRY = FormatEntry("ogg", "jobs.formats.ogg.decoder:OggDecoder", cut)
