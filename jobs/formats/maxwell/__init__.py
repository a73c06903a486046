"""Maxwell's daemon JSON (docs/formats/maxwell.md): a position is a binlog position
(``mysql-bin.000003:1234``)."""
from jobs.formats.entry import FormatEntry
from jobs.model.positions import binlog_cut

ENTRY = FormatEntry("maxwell", "jobs.formats.maxwell.decoder:MaxwellDecoder", binlog_cut)
