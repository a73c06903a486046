"""An unreachable database whose URL holds a password, for the tests of operational failures (one line,
no traceback, no secret): tests/unit/test_errors.py and tests/integration/test_operational_errors.py."""
from __future__ import annotations

SECRET = "s3cr3t-pw"
# nothing listens on port 9 (discard) of this machine's loopback
DOWN_DB = f"postgresql+psycopg2://cdc:{SECRET}@127.0.0.1:9/source"
