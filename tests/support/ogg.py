"""Oracle GoldenGate JSON messages written out by hand, for tests/unit/formats/test_ogg.py and
tests/integration/test_ogg_runs.py."""
from __future__ import annotations

import json


def ogg_message(op, before=None, after=None, pos=None, table="SRC.ITEMS", pks=("ID",), **extra):
    """One message; a field given as None is left out (``extra`` adds or replaces fields)."""
    msg = {"table": table, "op_type": op, "op_ts": "2024-01-02 03:04:05.123456",
           "current_ts": "2024-01-02T03:04:06.000000", "pos": pos}
    if pks is not None:
        msg["primary_keys"] = list(pks)
    if before is not None:
        msg["before"] = before
    if after is not None:
        msg["after"] = after
    msg.update(extra)
    return json.dumps({k: v for k, v in msg.items() if v is not None})
