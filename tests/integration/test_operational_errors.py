"""An operational failure that only a process of its own shows ends the command with one line that names
what failed and what to check, exit code 1, no traceback and no secret (the in-process cases:
tests/unit/test_operational_errors.py)."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.support.operational import DOWN_DB, SECRET
from tests.support.paths import REPO


def test_an_unreachable_catalog_is_one_line_exit_1(small_raw, tmp_path):
    # pyiceberg reads its catalogs' settings from the environment once, at import: a process of its own
    env = {**os.environ, "CDC_ICEBERG_CATALOG": "down", "PYICEBERG_CATALOG__DOWN__TYPE": "sql",
           "PYICEBERG_CATALOG__DOWN__URI": DOWN_DB, "CDC_JIT": "c1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "jobs", "run", "--format", "debezium", "--raw", str(small_raw),
                           "--lake", str(tmp_path / "lake"), "--pipeline", "p", "--run-id", "r1"],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and SECRET not in done.stderr + done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert "failed in fold_publish" in last and "Iceberg catalog named by CDC_ICEBERG_CATALOG" in last
