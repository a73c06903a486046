"""Alibaba DataWorks real-time sync JSON (docs/formats/dataworks.md): a position is a ``sequenceId``."""
from jobs.formats.entry import FormatEntry
from jobs.model.positions import JUST_AFTER, Cut, integer, pad


def cut(text: str) -> Cut:
    """The changes up to ``sequenceId`` (both halves of a split update: positions <seq>.0 and <seq>.1)."""
    return Cut(pad(integer(text, "a DataWorks sequenceId")) + ".1" + JUST_AFTER)


ENTRY = FormatEntry("dataworks", "jobs.formats.dataworks.decoder:DataWorksDecoder", cut)
