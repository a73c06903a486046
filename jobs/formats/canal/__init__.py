"""Canal JSON (docs/formats/canal.md): its messages carry no log position of the source's (``es`` is a
time, ``id`` a batch number), so a checkpoint names its moment as a time or a ``canonical:`` position."""
from jobs.formats.entry import FormatEntry

ENTRY = FormatEntry("canal", "jobs.formats.canal.decoder:CanalDecoder")
