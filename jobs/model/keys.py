"""How a key is named as text: JSON of its columns' values as text, the form count steps, key diffs and the
source's keys share (jobs.fold.core.key_json is the same in Spark)."""
from __future__ import annotations

import json
from typing import Any

# how a user gives a table's key, named by the reasons and errors that ask for one: they reach command-line and
# pipeline-file users alike
KEY_SETTING = "--primary-keys (tables[].primary_keys in a pipeline file)"


def key_text(columns: tuple[str, ...], values) -> str:
    """A key as the count steps name it (jobs.fold.core.key_json): JSON of the values as text."""
    return json.dumps({c: (None if v is None else _text(v)) for c, v in zip(columns, values)},
                      separators=(",", ":"), ensure_ascii=False)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
