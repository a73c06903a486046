"""Two attempts of one run id at once, for N rounds: the closing figures of the concurrent-attempts test.

    .venv/bin/python scripts/concurrent_attempts.py --rounds 8 [--seed 81] [--ops 60] [--workdir DIR]

Each round is the next part of a simulated Debezium stream (a PostgreSQL source, two tables), run as two
`python -m jobs transform` processes on one local lake in one of the interleavings of
tests/support/attempts.py, taken in turn: started together; a retry beside an attempt stalled just
before its commit; the stalled attempt outliving its lease; the first attempt killed there. Then the
run id is re-run (a third process) and the lake is checked against the simulator's own replay of the
source as of the part's end. One line per round says each attempt's outcome (committed, refused by the
lease, lost its lease and stopped before committing, killed, found the run published, or failed and
why) and whether the re-run ended exact; the last line sums them up. Exit 1 if a round did not end
exact. Each attempt is a JVM: on 2 cores a round takes one to three minutes.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.attempts import KINDS, describe, play_round, source_parts, transform_args  # noqa: E402
from tests.support.replay import run_cli  # noqa: E402


def _rerun(raw: Path, lake: Path, run_id: str) -> int:
    done: subprocess.CompletedProcess = run_cli(transform_args(raw, lake, run_id))
    if done.returncode:
        print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "", file=sys.stderr)
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seed", type=int, default=81)
    parser.add_argument("--ops", type=int, default=60, help="source operations per round")
    parser.add_argument("--workdir", type=Path, help="where the lake and the raw parts go (default: a temporary "
                                                     "folder, removed at the end)")
    parser.add_argument("--json", type=Path, help="also write the rounds and their outcomes here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cdc-attempts-"))
    try:
        sim, parts, states = source_parts(args.seed, args.rounds, args.ops)
        rounds = []
        for i in range(args.rounds):
            rounds.append(play_round(KINDS[i % len(KINDS)], f"run{i}", parts[i], states[i], sim, workdir, _rerun))
            print(describe(rounds[-1]), flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    outcomes = Counter(a.outcome for r in rounds for a in r.attempts)
    exact = sum(r.exact and r.rerun_exit == 0 for r in rounds)
    print(f"{len(rounds)} rounds of 2 attempts at once: {exact} ended exact after a re-run; attempts: "
          + ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())))
    if args.json:
        args.json.write_text(json.dumps([{"run_id": r.run_id, "kind": r.kind, "rerun_exit": r.rerun_exit,
                                          "exact": r.exact, "mismatch": r.mismatch,
                                          "attempts": {a.name: a.outcome for a in r.attempts}} for r in rounds],
                                        indent=2) + "\n")
    return 0 if exact == len(rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
