"""The benchmark's generated snapshots: the documented mix, and every format decodes without loss."""
from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from bench.generate import DECODER, FORMATS, changes, write_snapshot
from jobs.decode import decode_counts, decode_messages
from jobs.decoders import DecodeOptions


def test_change_mix_and_skew():
    events = list(itertools.islice(changes(40_000), 40_000))
    ops = Counter(op for _, op, *_ in events)
    share = {op: ops[op] / len(events) for op in ops}
    assert share["r"] == pytest.approx(0.10, abs=0.001)
    assert share["u"] == pytest.approx(0.60, abs=0.02)
    assert share["c"] == pytest.approx(0.20, abs=0.02)
    assert share["d"] == pytest.approx(0.10, abs=0.02)
    tables = Counter(t for t, *_ in events)
    assert tables[0] > tables[1] > tables[2]
    # skewed keys: the oldest tenth of orders' keys takes far more than a tenth of its updates
    updated = [k for t, op, k, *_ in events if t == 0 and op == "u"]
    top = max(updated)
    assert sum(k < top / 10 for k in updated) > 0.3 * len(updated)
    positions = [pos for _, op, _, _, pos, _ in events if op != "r"]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_decodes_without_loss(spark, tmp_path, fmt):
    stats = write_snapshot(fmt, 2_000, tmp_path, batch_rows=700, rows_per_file=1_400)
    assert stats["messages"] == 2_000 and stats["files"] == 2
    assert json.loads((tmp_path / "_bench.json").read_text())["messages"] == 2_000
    decoded = decode_messages(spark.read.parquet(str(tmp_path)), DECODER[fmt], DecodeOptions())
    counts = decode_counts(decoded.outcomes)
    assert counts["total"]["landed"] == 2_000 and counts["total"]["quarantined"] == 0
    # only Qlik's metadata messages (one per table) carry no change
    assert counts["total"]["ignored"] == (3 if fmt == "qlik" else 0)
