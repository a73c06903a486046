"""The generated snapshot bench.warm's tests run over (tests/unit/test_bench_warm.py and
tests/integration/test_bench_warm.py)."""
from __future__ import annotations

from pathlib import Path

from bench.generate import write_snapshot

WARM_MESSAGES = 3_000


def write_warm_snapshot(folder: Path) -> Path:
    """WARM_MESSAGES Debezium messages in two files of ``folder``; the folder."""
    write_snapshot("debezium", WARM_MESSAGES, folder, batch_rows=1_000, rows_per_file=1_500)
    return folder
