"""bench.key_moves: one SharePlex run without and one with key changes, figures printed."""
from __future__ import annotations

import re

from bench import key_moves


def test_prints_the_key_moves_and_the_stage_timings_of_both_runs(spark, capsys):
    assert key_moves.main(["--ops", "300", "--share", "0.2"]) == 0
    # the job's own summary lines come first; the bench's figure lines start with the run's label
    lines = [line for line in capsys.readouterr().out.splitlines() if "key changes:" in line]
    pattern = (r"(without key changes|20% key changes): ([0-9,]+) messages, ([0-9,]+) key moves; "
               r"decode [0-9.]+ s, fold\+publish [0-9.]+ s, validate [0-9.]+ s")
    matches = [re.fullmatch(pattern, line) for line in lines]
    assert len(matches) == 2 and all(matches), lines
    # the first run changes no key; the second moves rows (figures only: nothing here is timed)
    assert matches[0].group(1) == "without key changes" and matches[0].group(3) == "0"
    assert int(matches[1].group(3).replace(",", "")) > 0
