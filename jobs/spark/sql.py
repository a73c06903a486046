"""SQL text helpers for names and values that may come from messages."""
from __future__ import annotations


def sql_str(text: str) -> str:
    """A Spark SQL string literal for any text (column names, run ids) from anywhere."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_ident(name: str) -> str:
    """A Spark SQL identifier, backquoted, for any column or table name."""
    return "`" + name.replace("`", "``") + "`"
