"""bench.rewrite: the bytes a run removes and writes, per layout and way of publishing (figures only)."""
from __future__ import annotations

import json

from bench import rewrite
from jobs import publish


def test_a_delta_removes_nothing_where_a_rewrite_replaces_the_touched_buckets(spark, tmp_path, capsys):
    deltas = publish.DELTAS
    assert rewrite.main(["--rows", "3000", "--changed", "0.002", "--buckets", "4",
                         "--results", str(tmp_path)]) == 0
    assert publish.DELTAS == deltas  # the bench's setting does not outlive it
    out = capsys.readouterr().out
    saved = json.loads(next(tmp_path.glob("rewrite-*.json")).read_text())
    runs = {(r["layout"], r["run"]): r for r in saved["runs"]}
    assert set(runs) == {(layout, run) for layout in ("4 buckets, rewrite", "4 buckets, delta") for run in (0, 1)}
    # the same keys change in both; copy-on-write rewrites the buckets those keys fall in, the delta
    # rewrites nothing and writes position deletes
    changed = {r["keys_changed"] for (_, run), r in runs.items() if run == 1}
    assert len(changed) == 1 and 0 < min(changed) < 3000
    assert 0 < runs[("4 buckets, rewrite", 1)]["bytes_removed"] <= runs[("4 buckets, rewrite", 1)]["table_bytes"]
    delta = runs[("4 buckets, delta", 1)]
    assert delta["mode"] == "delta" and delta["bytes_removed"] == 0 and delta["position_deletes"] == min(changed)
    assert "4 buckets, delta" in out and "rewritten MB" in out
