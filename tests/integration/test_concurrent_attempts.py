"""Two attempts of one run id at once, as `python -m jobs transform` processes on one lake, in the
interleavings of tests/support/attempts.py (started together; a retry beside an attempt stalled just
before its commit; the stalled attempt outliving its lease): one round each, each the next part of a
stream, each re-run after its attempts ended. Every re-run ends exact against the source simulator's
own replay, and each attempt did what the lease lets it: one commits, the other is refused, or stops
before committing once its lease lapsed and was taken."""
from __future__ import annotations

from pathlib import Path

from jobs import cli
from tests.support.attempts import describe, play_round, source_parts, transform_args
from tests.support.replay import TABLES

COMMITTED = f"committed {len(TABLES)} tables"
EXPECTED = {
    "together": {COMMITTED, "refused by the lease"},
    "retry while stalled": {"A": COMMITTED, "B": "refused by the lease"},
    "stalled past its lease": {"A": "lost its lapsed lease, stopped before committing", "B": COMMITTED},
}
# a round per interleaving but the killed attempt (tests/integration/test_killed_runs.py kills runs at
# every failpoint; scripts/concurrent_attempts.py plays all four, for as many rounds as asked)
ROUNDS = tuple(EXPECTED)


def _rerun(raw: Path, lake: Path, run_id: str) -> int:
    return cli.main(transform_args(raw, lake, run_id))  # in this process: the test's Spark, no JVM start


def test_two_attempts_of_a_run_at_once_end_exact_after_a_rerun(spark, tmp_path, capsys):
    sim, parts, states = source_parts(81, len(ROUNDS), 60)
    rounds = [play_round(kind, f"run{i}", parts[i], states[i], sim, tmp_path, _rerun) for i, kind in enumerate(ROUNDS)]
    with capsys.disabled():
        print("\n" + "\n".join(describe(r) for r in rounds))
    for r in rounds:
        assert r.rerun_exit == 0 and r.exact, describe(r)
        outcomes = {a.name: a.outcome for a in r.attempts}
        expected = EXPECTED[r.kind]
        assert (set(outcomes.values()) if isinstance(expected, set) else outcomes) == expected, describe(r)
