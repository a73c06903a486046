"""Debezium JSON (docs/formats/debezium.md): a position is the connector's own -- a PostgreSQL LSN, a SQL
Server LSN, a MySQL / MariaDB binlog position or an Oracle ``scn:<n>``."""
import re

from jobs.formats.entry import FormatEntry
from jobs.model.positions import Cut, binlog_cut, pad, pg_lsn, scn_cut


def cut(text: str) -> Cut:
    text = text.strip()
    if re.fullmatch(r"[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{4}", text):  # SQL Server: the changes before it
        return Cut(text.upper())
    if text.lower().startswith("scn:"):  # Oracle
        return scn_cut(text)
    if ":" in text:  # MySQL / MariaDB binlog: the events before it
        return binlog_cut(text)
    # PostgreSQL: the transactions committed before it; positions start with the previous commit's LSN
    return Cut(pad(pg_lsn(text)), previous_commit=True)


ENTRY = FormatEntry("debezium", "jobs.formats.debezium.decoder:DebeziumDecoder", cut, shaped=True,
                    jvm_decoder="cdc.DebeziumUdf")
