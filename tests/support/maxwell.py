"""Maxwell JSON messages written out by hand, for tests/unit/formats/test_maxwell.py and
tests/integration/test_maxwell_runs.py."""
from __future__ import annotations

import json


def maxwell_message(type_, data=None, old=None, position=None, xoffset=None, commit=None, **extra):
    """One message of shop.items; a field given as None is left out (``extra`` adds or replaces fields)."""
    msg = {"database": "shop", "table": "items", "type": type_, "ts": 1731661114, "xid": 10, "data": data}
    for name, value in (("old", old), ("position", position), ("xoffset", xoffset), ("commit", commit)):
        if value is not None:
            msg[name] = value
    msg.update(extra)
    return json.dumps(msg)
