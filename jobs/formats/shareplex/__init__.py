"""SharePlex JSON (docs/formats/shareplex.md): a position is an Oracle SCN (``<n>`` or ``scn:<n>``)."""
from jobs.formats.entry import FormatEntry
from jobs.model.positions import scn_cut

ENTRY = FormatEntry("shareplex", "jobs.formats.shareplex.decoder:SharePlexDecoder", scn_cut)
