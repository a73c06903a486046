"""Two attempts of one run at once, each a `python -m jobs transform` process, then a re-run, the state
checked against the source simulator's own replay (an independent model): the rounds of
tests/integration/test_concurrent_attempts.py and scripts/concurrent_attempts.py.

A round is one run id of a stream cut in parts (each round the next part, on the same lake), in one of
these interleavings of its attempts A and B:

- ``together``: A and B start at the same moment;
- ``retry while stalled``: A stops itself (failpoint ``publish.files-written``: every table's files
  written, the run's commit not made) and B starts, as an Airflow retry beside a stuck attempt; A goes on
  once B has ended;
- ``stalled past its lease``: the same, but B starts only once A's lease has lapsed (A renews nothing
  while stopped); A goes on once B has ended;
- ``killed``: A is killed (SIGKILL of its process group) at that failpoint, then B starts.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from jobs.demo.simulator import SourceSimulator, write_parquet
from jobs.iceberg.catalog import open_catalog
from jobs.lake.layout import Lake
from jobs.lake.lease import Holder, LeaseHeld, LeaseLost
from jobs.model.properties import ATTEMPT_PROP, RUN_ID_PROP
from tests.support.paths import REPO
from tests.support.replay import TABLES, assert_state_equals_source

PIPELINE = "att"
KINDS = ("together", "retry while stalled", "stalled past its lease", "killed")
LAPSING_LEASE_SECONDS = 4.0  # the stalled attempt's lease in "stalled past its lease": a short wait


@dataclass
class Attempt:
    name: str  # A or B
    pid: int
    exit_code: int | None = None
    last_line: str = ""
    attempt_id: str | None = None  # from the lease file, where it took the lease
    committed: list[str] = field(default_factory=list)  # the tables whose snapshot of the run it committed

    @property
    def outcome(self) -> str:
        if self.exit_code == -signal.SIGKILL:
            return "killed"
        if self.committed:
            return f"committed {len(self.committed)} tables" + ("" if self.exit_code == 0 else f", then {self.failure}")
        if self.exit_code == 0:
            return "found the run published"
        return self.failure

    @property
    def failure(self) -> str:
        if LeaseHeld.__name__ in self.last_line:
            return "refused by the lease"
        if LeaseLost.__name__ in self.last_line:
            return "lost its lapsed lease, stopped before committing"
        return f"failed: {self.last_line}"


@dataclass
class Round:
    kind: str
    run_id: str
    attempts: list[Attempt]
    rerun_exit: int | None = None
    exact: bool = False
    mismatch: str = ""


def source_parts(seed: int, rounds: int, ops: int) -> tuple[SourceSimulator, list[list[dict]], list[dict]]:
    """A Debezium stream (snapshot, then transactions, redeliveries) cut in ``rounds`` parts, and the
    source's tables as of the end of each part."""
    sim = SourceSimulator(seed, list(TABLES), "postgresql", n_partitions=3)
    sim.populate("items", 40)
    sim.populate("stock", 30)
    sim.snapshot()
    parts, states, sent = [], [], 0
    for i in range(rounds):
        if i:
            sim.random_ops(ops, max_tx_size=3, concurrency=2)
            sim.redeliver(0.05)
        records = sim.to_kafka_records(with_schema=True)
        parts.append(records[sent:])
        sent = len(records)
        states.append({t: sim.expected_state(t) for t in sim.tables})
    return sim, parts, states


def transform_args(raw: Path, lake: Path, run_id: str) -> list[str]:
    return ["transform", "--format", "debezium", "--raw", str(raw), "--lake", str(lake), "--pipeline", PIPELINE,
            "--run-id", run_id, "--quiet"]


def _start(raw: Path, lake: Path, run_id: str, **env: str) -> subprocess.Popen:
    environment = {**{k: v for k, v in os.environ.items() if k not in ("CDC_KILL_AT", "CDC_PAUSE_AT", "CDC_LEASE_SECONDS")},
                   "CDC_JIT": "c1", "CDC_SPARK_MASTER": "local[1]", "PYTHONPATH": str(REPO), **env}
    return subprocess.Popen([sys.executable, "-m", "jobs", *transform_args(raw, lake, run_id)], cwd=REPO,
                            env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _stopped_or_ended(proc: subprocess.Popen, timeout: float = 600) -> bool:
    """Wait until the process stops itself (True) or ends (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
                return True
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    if proc.poll() is None:
        raise TimeoutError(f"attempt {proc.pid} neither stopped nor ended in {timeout} s")
    return False


def _finish(proc: subprocess.Popen, name: str) -> Attempt:
    _, err = proc.communicate(timeout=600)
    lines = [line for line in err.strip().splitlines() if line.strip()]
    return Attempt(name, proc.pid, proc.returncode, lines[-1] if lines else "")


def run_attempts(kind: str, raw: Path, lake: Path, run_id: str) -> list[Attempt]:
    """Attempts A and B of ``run_id`` in the interleaving ``kind``; their exit codes and last lines."""
    if kind == "together":
        a, b = _start(raw, lake, run_id), _start(raw, lake, run_id)
        return [_finish(a, "A"), _finish(b, "B")]
    pause = {"CDC_KILL_AT" if kind == "killed" else "CDC_PAUSE_AT": "publish.files-written"}
    if kind == "stalled past its lease":
        pause["CDC_LEASE_SECONDS"] = str(LAPSING_LEASE_SECONDS)
    a = _start(raw, lake, run_id, **pause)
    if kind == "killed":
        first = _finish(a, "A")
        return [first, _finish(_start(raw, lake, run_id), "B")]
    stopped = _stopped_or_ended(a)
    if stopped and kind == "stalled past its lease":
        time.sleep(LAPSING_LEASE_SECONDS + 1)
    b = _finish(_start(raw, lake, run_id), "B")
    if stopped:
        os.kill(a.pid, signal.SIGCONT)
    return [_finish(a, "A"), b]


def _attribute(attempts: list[Attempt], lake: Path, run_id: str) -> None:
    """Which attempt took the lease (its lease file names its process), and which tables' snapshot of the
    run each one committed (the snapshot names its attempt)."""
    holders = {h.pid: h for h in (Holder.from_bytes(p.read_bytes()) for p in (lake / "leases" / PIPELINE).glob("*.json"))
               if h.run_id == run_id}
    catalog = open_catalog(Lake.at(str(lake)))
    committed: dict[str, list[str]] = {}
    for ident in catalog.list_tables(PIPELINE):
        for snapshot in catalog.load_table(ident).snapshots():
            summary = snapshot.summary.additional_properties
            if summary.get(RUN_ID_PROP) == run_id:
                committed.setdefault(summary.get(ATTEMPT_PROP), []).append(ident[-1])
    for attempt in attempts:
        if attempt.pid in holders:
            attempt.attempt_id = holders[attempt.pid].attempt
            attempt.committed = sorted(committed.get(attempt.attempt_id, []))


def play_round(kind: str, run_id: str, part: list[dict], state: dict, sim: SourceSimulator, workdir: Path,
               rerun: Callable[[Path, Path, str], int]) -> Round:
    """One round: the attempts, then ``rerun`` (a re-run of the run id: its exit code), then the lake
    against the source as of the part's end."""
    raw = workdir / f"raw-{run_id}"
    write_parquet(raw / "part-0.parquet", part)
    lake = workdir / "lake"
    attempts = run_attempts(kind, raw, lake, run_id)
    _attribute(attempts, lake, run_id)
    result = Round(kind, run_id, attempts, rerun(raw, lake, run_id))
    try:
        assert_state_equals_source(sim, lake, PIPELINE, with_schema=True, expected_states=state)
        result.exact = True
    except AssertionError as exc:
        result.mismatch = str(exc).splitlines()[0]
    return result


def describe(round_: Round) -> str:
    attempts = "; ".join(f"{a.name}: {a.outcome}" for a in round_.attempts)
    verdict = "exact" if round_.exact else f"NOT EXACT ({round_.mismatch})"
    return f"{round_.run_id} [{round_.kind}] {attempts}; re-run exit {round_.rerun_exit}: {verdict}"
