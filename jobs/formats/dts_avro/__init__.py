"""Alibaba DTS Avro (docs/formats/dts_avro.md): a position is a binlog position, as DTS writes it
(``<offset>@<file number>``) or as MySQL does (``mysql-bin.000003:1234``)."""
from functools import partial

from jobs.formats.entry import FormatEntry
from jobs.model.positions import binlog_cut

ENTRY = FormatEntry("dts_avro", "jobs.formats.dts_avro.decoder:DtsAvroDecoder",
                    partial(binlog_cut, file_digits=10), jvm_decoder="cdc.DtsAvroUdf")
