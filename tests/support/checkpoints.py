"""Checkpoints at the simulator's own commit points, judged against a lake the runs published.

The simulator logs, after every commit, its source time, the log position just past it and the
committed row count of every table (``SourceSimulator.commit_log``): the independent model the lake's
counts at those moments are held to.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from jobs.demo.simulator import SourceSimulator
from jobs.iceberg.catalog import state_summary
from jobs.lake.layout import Lake
from jobs.model.reports import CheckpointVerdict
from jobs.reconcile.checkpoints import BEHIND, MATCH, MISMATCH, Checkpoint, format_time, position_moment, time_moment
from jobs.reconcile.stage import ReconcileOptions, reconcile_run


def quiet_commits(sim: SourceSimulator) -> list[int]:
    """Indexes of the commits followed by none in the same second: a moment there is the same in every
    format, whatever its time resolution (Debezium's MySQL connector: seconds)."""
    log = sim.commit_log
    return [i for i in range(len(log) - 1) if log[i + 1].time_us // 1_000_000 > log[i].time_us // 1_000_000]


def table_id_of(lake: Path, pipeline: str, table: str) -> str:
    ids = [t for t in state_summary(Lake.at(str(lake)), pipeline) if t.split(".")[-1].lower() == table.lower()]
    assert len(ids) == 1, (table, ids)
    return ids[0]


def commit_checkpoints(sim: SourceSimulator, lake: Path, pipeline: str, points: Sequence[int], run_id: str,
                       by: str = "time", fmt: str | None = None, off_by: int = 0,
                       source: str = "simulator") -> list[Checkpoint]:
    """One checkpoint per table at each commit point: the simulator's count there (plus ``off_by``)."""
    out = []
    for table in sim.tables:
        table_id = table_id_of(lake, pipeline, table)
        for i in points:
            point = sim.commit_log[i]
            moment = (time_moment(format_time(point.time_us)) if by == "time"
                      else position_moment(fmt, point.position))
            out.append(Checkpoint(table, point.counts[table] + off_by, moment, source, run_id, table_id=table_id))
    return out


def judge_run(lake: Path, pipeline: str, run_id: str, new: list[Checkpoint]) -> list[CheckpointVerdict]:
    """reconcile_run as of ``run_id``: every checkpoint judged there (judged ones and pending ones)."""
    lake_ = Lake.at(str(lake))
    rows = reconcile_run(lake_, pipeline, run_id, new, state_summary(lake_, pipeline), ReconcileOptions())
    return [v for r in rows for v in (*r.checkpoints, *r.pending)]


def assert_commit_points_hold(sim: SourceSimulator, lake: Path, pipeline: str, runs: int, by: str = "time",
                              fmt: str | None = None, off_by: int = 1) -> dict[str, int]:
    """Checkpoints at the quiet commit points, given to the first run's reconcile: true counts never
    mismatch and counts ``off_by`` rows wrong never match; every one still pending after the first run is
    judged by the last (which reaches past all but the final commits); returns the verdicts' tally."""
    points = quiet_commits(sim)
    assert len(points) >= 5, "the workload has too few quiet commit points"
    true = commit_checkpoints(sim, lake, pipeline, points, "run0", by, fmt)
    wrong = commit_checkpoints(sim, lake, pipeline, points, "run0", by, fmt, off_by=off_by)
    first = judge_run(lake, pipeline, "run0", true + wrong)
    assert len(first) == len(true) + len(wrong)
    tally = {MATCH: 0, MISMATCH: 0, BEHIND: 0}
    for verdict in first:
        right = verdict.source_rows == _expected(sim, points, verdict)
        assert verdict.verdict in ((MATCH, BEHIND) if right else (MISMATCH, BEHIND)), verdict
        tally[verdict.verdict] += 1
    assert tally[MATCH] > 0 and tally[MISMATCH] == tally[MATCH]
    if runs > 1:
        # the last run judges what the first left pending, and counts it is given of moments long past
        # (inside the first run's changes; counted anew, elsewhere) from the ledger
        last = f"run{runs - 1}"
        early = commit_checkpoints(sim, lake, pipeline, points[:3], last, by, fmt, source="replica")
        later = judge_run(lake, pipeline, last, early)
        assert len(later) == tally[BEHIND] + len(early)
        for verdict in later:
            right = verdict.source_rows == _expected(sim, points, verdict)
            assert verdict.verdict == (MATCH if right else MISMATCH), verdict
        assert {v.judged_run for v in later if v.taken_in == last} == {"run0"}
    return tally


def _expected(sim: SourceSimulator, points: Sequence[int], verdict: CheckpointVerdict) -> int:
    """The simulator's count at the verdict's moment (its table and moment text name the commit point)."""
    for i in points:
        point = sim.commit_log[i]
        if verdict.moment in (format_time(point.time_us), point.position):
            table = next(t for t in sim.tables if verdict.table.split(".")[-1].lower() == t.lower())
            return point.counts[table]
    raise AssertionError(f"no commit point at {verdict.moment}")
