"""Checkpoints: counts-file forms, positions (each format's cut: tests/unit/formats/test_registry.py), and
verdicts on a lake's counts through time, checked against a brute-force count of the same steps (no Spark)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.fold import fingerprints as rule
from jobs.model import positions
from jobs.reconcile.checkpoints import (
    BEHIND,
    MATCH,
    MISMATCH,
    UNKNOWN,
    Checkpoint,
    CheckpointError,
    RunCounts,
    Tolerance,
    judge,
    merge_pending,
    parse_duration,
    parse_time,
    parse_tolerance,
    position_moment,
    read_counts_file,
    time_moment,
)
from jobs.reconcile.columns import ColumnRules


class ListSteps:
    """StepSource over lists: rel -> [(key, position, time_us, delta)]."""

    def __init__(self, steps: dict[str, list[tuple]]) -> None:
        self.steps = steps

    @staticmethod
    def _coord(step, kind):
        return step[1] if kind == "position" else step[2]

    def _below(self, step, kind, cut):
        c = self._coord(step, kind)
        return c is None or c < cut

    def total(self, rel):
        return sum(s[3] for s in self.steps[rel])

    def sum_below(self, rel, kind, cut):
        return sum(s[3] for s in self.steps[rel] if self._below(s, kind, cut))

    def within(self, rel, kind, low, high):
        out: dict = {}
        for s in self.steps[rel]:
            if not self._below(s, kind, low) and self._coord(s, kind) < high:
                out[self._coord(s, kind)] = out.get(self._coord(s, kind), 0) + s[3]
        return sorted(out.items())

    def group_below(self, rel, cut):
        below = [s[1] for s in self.steps[rel] if s[1] is not None and s[1] < cut]
        return max(below).split(".")[0] if below else None

    def keys_from(self, rel, kind, cut):
        return [(s[0], s[3]) for s in sorted(self.steps[rel], key=lambda s: self._coord(s, "position") or "")
                if not self._below(s, kind, cut)]


def p(n: int, width: int = 20) -> str:
    return positions.pad(n, width)


# a table "t" over two runs: run a takes it from 0 to 3 rows, run b from 3 to 2
STEPS = ListSteps({
    "a": [("k1", p(10), 10, 1), ("k2", p(20), 20, 1), ("k3", p(30), 30, 1), ("k2", p(40), 40, -1),
          ("k2", p(50), 50, 1)],
    "b": [("k4", p(60), 60, 1), ("k1", p(70), 70, -1), ("k3", p(80), 80, -1)],
})
LEDGER = [
    RunCounts("ra", reach_position=p(55), reach_time=55,
              tables={"t": {"rows_before": 0, "rows_after": 3, "steps": "a"}}),
    RunCounts("rb", reach_position=p(90), reach_time=90,
              tables={"t": {"rows_before": 3, "rows_after": 2, "steps": "b"}}),
]


def brute_count(cut: int) -> int:
    return sum(s[3] for rel in ("a", "b") for s in STEPS.steps[rel] if s[2] < cut)


def at(rows: int, low: int, high: int | None = None, taken_in="r") -> Checkpoint:
    moment = position_moment(None, f"canonical:{p(low)}", None if high is None else f"canonical:{p(high)}")
    return Checkpoint("t", rows, moment, "test", taken_in, table_id="t")


@pytest.mark.parametrize("position", [5, 10, 25, 40, 45, 50, 60, 65, 70, 85])
def test_exact_positions_inside_before_and_across_runs_agree_with_a_brute_count(position):
    truth = brute_count(position + 1)
    verdict = judge(at(truth, position), LEDGER, STEPS)
    assert (verdict.verdict, verdict.lake_rows) == (MATCH, truth)
    assert judge(at(truth + 1, position), LEDGER, STEPS).verdict == MISMATCH
    # judged by the first run that reaches it
    assert verdict.judged_run == ("ra" if position < 55 else "rb")


def test_a_moment_past_the_lake_is_behind_with_its_lag_then_judged_by_a_later_run():
    cp = Checkpoint("t", brute_count(61), time_moment("1970-01-01T00:00:00.000060Z"), "test", "ra", table_id="t",
                    taken_at=60)
    verdict = judge(cp, LEDGER[:1], STEPS, max_lag_s=0, judged_at=60 + 2_000_000)
    assert verdict.verdict == BEHIND
    assert verdict.lag["seconds"] == pytest.approx(5e-6) and verdict.lag["overdue"] is True
    assert judge(cp, LEDGER[:1], STEPS, max_lag_s=10, judged_at=60 + 2_000_000).lag["overdue"] is False
    later = judge(cp, LEDGER, STEPS)
    assert (later.verdict, later.lake_rows) == (MATCH, brute_count(61))


def test_a_bracket_matches_any_count_the_lake_held_inside_it():
    # between positions 25 and 45 the lake held 3 (after k3) and 2 (after k2 went)
    assert judge(at(2, 25, 45), LEDGER, STEPS).verdict == MATCH
    assert judge(at(3, 25, 45), LEDGER, STEPS).verdict == MATCH
    assert judge(at(1, 25, 45), LEDGER, STEPS).verdict == MISMATCH
    assert judge(at(2, 25, 45), LEDGER, STEPS).lake_rows == [2, 3]  # each count once, in order


def test_steps_that_do_not_add_up_or_a_truncate_make_the_count_unknown_never_a_verdict():
    broken = [RunCounts("ra", reach_position=p(55), tables={"t": {"rows_before": 0, "rows_after": 4, "steps": "a"}})]
    assert judge(at(2, 20), broken, STEPS).verdict == UNKNOWN
    truncated = [RunCounts("ra", reach_position=p(55), tables={
        "t": {"rows_before": 0, "rows_after": 3, "steps": "a", "exact_from": p(35)}})]
    assert judge(at(2, 20), truncated, STEPS).verdict == UNKNOWN
    assert judge(at(2, 40), truncated, STEPS).verdict == MATCH


def test_a_transaction_held_back_keeps_its_moment_behind():
    held = [RunCounts("ra", reach_position=p(55), held_position=p(35),
                      tables={"t": {"rows_before": 0, "rows_after": 3, "steps": "a"}})]
    assert judge(at(2, 40), held, STEPS).verdict == BEHIND
    assert judge(at(3, 30), held, STEPS).verdict == MATCH


def test_a_table_the_lake_never_published_counts_zero():
    cp = Checkpoint("gone", 5, position_moment(None, f"canonical:{p(20)}"), "test", "r", table_id="gone")
    verdict = judge(cp, LEDGER, STEPS)
    assert (verdict.verdict, verdict.lake_rows) == (MISMATCH, 0)


def test_previous_commit_positions_look_back_one_transaction_group():
    # Debezium PostgreSQL: position = previous commit's LSN . change LSN; tx2 (commit 200) follows tx1
    # (commit 100): its changes sort as 100.x, below a cut at LSN 150 though tx2 committed after it
    steps = ListSteps({"a": [("k1", f"{p(50)}.{p(60)}", 1, 1), ("k2", f"{p(100)}.{p(110)}", 2, 1)]})
    ledger = [RunCounts("ra", reach_position=f"{p(200)}.{p(210)}",
                        tables={"t": {"rows_before": 0, "rows_after": 2, "steps": "a"}})]
    cut = position_moment("debezium", "0/96")  # LSN 150, after tx1's commit, before tx2's
    assert cut.previous_commit
    assert judge(Checkpoint("t", 1, cut, "pg", "r", table_id="t"), ledger, steps).verdict == MATCH


def test_key_diff_names_keys_missing_and_extra_at_the_moment():
    cp = Checkpoint("t", 2, position_moment(None, f"canonical:{p(35)}"), "test", "r", table_id="t",
                    keys=("k1", "k9"))
    verdict = judge(cp, LEDGER, STEPS, keys_now=lambda table: ["k2", "k4"])
    assert verdict.verdict == MISMATCH
    # at 35 the lake held k1, k2, k3 (k4 came later, k1 and k3 went later)
    assert verdict.key_diff == {"missing_in_lake": ["k9"], "extra_in_lake": ["k2", "k3"]}


# ---- counts files -----------------------------------------------------------------------------
def test_every_counts_file_form_reads():
    listed = {
        "a": 5,
        "b": {"rows": 6, "as_of": "2026-11-02T10:00:00Z"},
        "c": {"rows": 7, "position": "mysql-bin.000003:1234"},
        "d": [{"rows": 1, "as_of": "2026-11-02T10:00:00"}, {"rows": 2, "position": ["0/10", "0/20"], "tolerance": "3"}],
    }
    found = read_counts_file(listed, "counts.json", "debezium", "r1")
    assert [(c.table, c.rows, c.moment.kind if c.moment else None) for c in found] == [
        ("a", 5, None), ("b", 6, "time"), ("c", 7, "position"), ("d", 1, "time"), ("d", 2, "position")]
    assert found[2].moment.low == f"{p(3)}.{p(1234)}"
    assert found[3].moment.low == parse_time("2026-11-02T10:00:00+00:00") + 1
    assert (found[4].moment.low, found[4].moment.high) == (p(16), p(32))


@pytest.mark.parametrize("listed, message", [
    ({"a": -1}, "'a': expected a row count"),
    ({"a": True}, "'a': expected a row count"),
    ({"a": {"rows": 1, "as_of": "yesterday"}}, "'a': 'yesterday' is not an ISO-8601 time"),
    ({"a": {"rows": 1, "asof": "2026-01-01"}}, "unknown field 'asof'"),
    ({"a": {"rows": 1, "as_of": "2026-01-01", "position": "1"}}, "not both"),
    ({"a": [{"rows": "3"}]}, "'a'\\[0\\]: \"rows\" must be a row count"),
    ({"a": {"rows": 1, "position": "0/1"}}, "format 'canal' has no source position"),
])
def test_a_bad_entry_names_the_table_the_field_and_the_fix(listed, message):
    with pytest.raises(CheckpointError, match=message):
        read_counts_file(listed, "counts.json", "canal", "r1")


def test_a_count_without_a_moment_is_judged_when_its_file_was_written_never_by_a_run_before_it():
    """A count taken at the end of the data was compared with the first of two runs' end: a false
    mismatch. It was true when it was read: a checkpoint at the counts file's modification time."""
    [cp] = read_counts_file({"t": brute_count(61)}, "counts.json", None, "ra", modified_at=60)
    assert (cp.moment.kind, cp.moment.assumed) == ("time", "the counts file's modification time")
    early = judge(cp, LEDGER[:1], STEPS)  # run a reaches 55
    assert early.verdict == BEHIND and "modification time" in early.reason
    later = judge(cp, LEDGER, STEPS)
    assert (later.verdict, later.lake_rows, later.judged_run) == (MATCH, brute_count(61), "rb")
    assert "modification time" in later.reason
    assert judge(replace(cp, rows=cp.rows + 1), LEDGER, STEPS).verdict == MISMATCH


def test_counts_without_a_moment_keep_their_tolerance():
    # the count was taken some time before the file was written: the tolerance absorbs what changed since
    truth = brute_count(61)
    [cp] = read_counts_file({"t": truth + 2}, "counts.json", None, "ra", modified_at=60,
                            default_tolerance=parse_tolerance("2,1%"))
    assert judge(cp, LEDGER, STEPS).verdict == MATCH
    assert judge(replace(cp, rows=truth + 3), LEDGER, STEPS).verdict == MISMATCH
    [own] = read_counts_file({"t": {"rows": truth + 1, "tolerance": "1"}}, "c.json", None, "ra", modified_at=60)
    assert judge(own, LEDGER, STEPS).verdict == MATCH
    # a count with a moment of its own is exact, whatever the tolerance
    exact = replace(at(truth + 1, 60), tolerance=Tolerance(5, 0.0))
    assert judge(exact, LEDGER, STEPS).verdict == MISMATCH


def test_durations():
    assert [parse_duration(t) for t in ("6h", "90m", "3600s", "1d", "2")] == [21600, 5400, 3600, 86400, 7200]
    with pytest.raises(CheckpointError):
        parse_duration("soon")


def test_a_rerun_replaces_its_own_capture_and_judges_again_what_it_judged():
    old = Checkpoint("t", 1, None, "f", "r1", table_id="t")
    pending = Checkpoint("t", 2, time_moment("2026-01-01T00:00:00Z"), "f", "r0", table_id="t")
    judged_here = Checkpoint("t", 3, time_moment("2026-01-01T00:00:00Z"), "f", "r0", table_id="t",
                             judged_in="r1", verdict={"verdict": MATCH})
    judged_before = Checkpoint("t", 4, time_moment("2026-01-01T00:00:00Z"), "f", "r0", table_id="t",
                               judged_in="r0", verdict={"verdict": MATCH})
    new = Checkpoint("t", 5, None, "f", "r1", table_id="t")
    todo = merge_pending([old, pending, judged_here, judged_before], [new], "r1")
    assert [c.rows for c in todo] == [2, 3, 5]
    assert all(c.judged_in is None for c in todo)


def test_a_counts_file_read_again_does_not_judge_its_checkpoints_twice():
    moment = time_moment("2026-01-01T00:00:00Z")
    judged = Checkpoint("t", 3, moment, "file", "r1", table_id="t", judged_in="r1", verdict={"verdict": MATCH})
    pending = Checkpoint("t", 4, time_moment("2026-01-02T00:00:00Z"), "file", "r1", table_id="t")
    again = [Checkpoint("t", 3, moment, "file", "r2", table_id="t"),
             Checkpoint("t", 4, time_moment("2026-01-02T00:00:00Z"), "file", "r2", table_id="t"),
             Checkpoint("t", 5, moment, "file", "r2", table_id="t")]  # another count of the same moment is new
    todo = merge_pending([judged, pending], again, "r2")
    assert [(c.rows, c.taken_in) for c in todo] == [(4, "r1"), (5, "r2")]


def test_previous_commit_counts_never_fall_inside_a_transaction():
    # a quiet table loaded by one transaction of 3 rows long ago, then a busy table's transactions
    steps = ListSteps({
        "quiet": [(f"k{i}", f"{p(10)}.{p(11 + i)}", 1, 1) for i in range(3)],
        "busy": [("b1", f"{p(100)}.{p(101)}", 2, 1), ("b2", f"{p(200)}.{p(201)}", 3, 1)],
    })
    ledger = [RunCounts("ra", reach_position=f"{p(300)}.{p(301)}", tables={
        "quiet": {"rows_before": 0, "rows_after": 3, "steps": "quiet"},
        "busy": {"rows_before": 0, "rows_after": 2, "steps": "busy"}})]
    cut = position_moment("debezium", "250")  # the busy table's second transaction straddles it
    quiet = judge(Checkpoint("quiet", 2, cut, "pg", "r", table_id="quiet"), ledger, steps)
    assert (quiet.verdict, quiet.lake_rows) == (MISMATCH, 3)  # never 1 or 2: inside a transaction
    busy = judge(Checkpoint("busy", 1, cut, "pg", "r", table_id="busy"), ledger, steps)
    assert (busy.verdict, busy.lake_rows) == (MATCH, [1, 2])


# ---- a quiet source: the landing's evidence of reach ---------------------------------------------
def test_a_quiet_source_lets_a_checkpoint_after_its_last_change_be_judged_by_the_landing():
    """Only applied changes moved the lake's reach: a count as of just after the last change stayed
    behind forever. A run whose landing consumed every partition through its interval's end holds every
    change up to that end minus the capture delay (``landed_time``): the checkpoint is judged."""
    quiet = Checkpoint("t", brute_count(91), time_moment("1970-01-01T00:00:00.000095Z"), "test", "rb", table_id="t")
    assert judge(quiet, LEDGER, STEPS).verdict == BEHIND  # rb's last change is at 90
    landed = [LEDGER[0], replace(LEDGER[1], landed_time=99)]
    verdict = judge(quiet, landed, STEPS)
    assert (verdict.verdict, verdict.lake_rows, verdict.judged_run) == (MATCH, brute_count(91), "rb")
    assert judge(replace(quiet, rows=quiet.rows + 1), landed, STEPS).verdict == MISMATCH
    # evidence short of the moment reaches nothing
    assert judge(quiet, [LEDGER[0], replace(LEDGER[1], landed_time=94)], STEPS).verdict == BEHIND
    # a transaction held back before the moment keeps it behind, evidence or not
    held = [LEDGER[0], replace(LEDGER[1], landed_time=99, held_time=92)]
    assert judge(quiet, held, STEPS).verdict == BEHIND


def test_the_landing_reaches_a_position_through_the_time_its_count_was_read():
    """A SQL source's position bracket is past its last change on a quiet source; the source's clock read
    with the bracket's high end (``committed_by``) says every change below it committed by then: a
    landing reaching that time reaches the position. A position without that time (a counts file's) is
    reached only by a change at or past it."""
    cp = replace(at(brute_count(91), 92, 96), committed_by=97)
    assert judge(cp, LEDGER, STEPS).verdict == BEHIND  # rb's changes reach position 90
    landed = [LEDGER[0], replace(LEDGER[1], landed_time=97)]
    assert (judge(cp, landed, STEPS).verdict, judge(cp, landed, STEPS).lake_rows) == (MATCH, brute_count(91))
    assert judge(replace(cp, committed_by=None), landed, STEPS).verdict == BEHIND
    assert judge(cp, [LEDGER[0], replace(LEDGER[1], landed_time=96)], STEPS).verdict == BEHIND


# ---- values: fingerprints through time, against a brute-force sum of the same value steps ------------
class ValueSteps(ListSteps):
    """ListSteps with value steps: rel -> [(key, position, time_us, delta, bucket, dh)]."""

    def value_sums_below(self, rel, kind, cut):
        out: dict = {}
        for s in self.steps[rel]:
            if self._below(s, kind, cut) and s[4] is not None:
                out[s[4]] = out.get(s[4], 0) + s[5]
        return out

    def value_points(self, rel, kind, low, high):
        return sorted(((self._coord(s, kind), s[3], s[4], s[5]) for s in self.steps[rel]
                       if not self._below(s, kind, low) and self._coord(s, kind) < high), key=lambda v: v[0])

    def value_keys_from(self, rel, kind, cut):
        return [(s[0], s[5], s[4]) for s in self.steps[rel] if not self._below(s, kind, cut) and s[5]]


VALUE_STEPS = ValueSteps({
    "a": [("k1", p(10), 10, 1, 1, 100), ("k2", p(20), 20, 1, 2, 200), ("k1", p(30), 30, 0, 1, 5),
          ("k2", p(40), 40, -1, 2, -200)],
    "b": [("k3", p(60), 60, 1, 3, 300), ("k1", p(70), 70, 0, 1, -7)],
})


def _fingerprints(before: list[int]) -> dict:
    return {"buckets": rule.BUCKETS, "key_columns": ["id"], "before": [rule.hex_of(v) for v in before]}


VALUE_LEDGER = [
    RunCounts("ra", reach_position=p(55), tables={"t": {"rows_before": 0, "rows_after": 1, "steps": "a",
                                                        "fingerprints": _fingerprints([0] * rule.BUCKETS)}}),
    RunCounts("rb", reach_position=p(90), tables={"t": {"rows_before": 1, "rows_after": 2, "steps": "b",
                                                        "fingerprints": _fingerprints(
                                                            [0, 105, 0] + [0] * (rule.BUCKETS - 3))}}),
]


def brute_fingerprints(cut: int) -> tuple[str, ...]:
    sums = [0] * rule.BUCKETS
    for rel in ("a", "b"):
        for s in VALUE_STEPS.steps[rel]:
            if s[2] < cut:
                sums[s[4]] = rule.add(sums[s[4]], s[5])
    return tuple(rule.hex_of(v) for v in sums)


def valued(position: int, fingerprints: tuple[str, ...], rows: int | None = None) -> Checkpoint:
    rows = sum(s[3] for rel in ("a", "b") for s in VALUE_STEPS.steps[rel] if s[2] < position + 1) \
        if rows is None else rows
    return replace(at(rows, position), fingerprints=fingerprints)


@pytest.mark.parametrize("position", [5, 15, 35, 45, 65, 75])
def test_values_at_exact_positions_agree_with_a_brute_sum_and_one_wrong_bucket_is_a_value_mismatch(position):
    truth = brute_fingerprints(position + 1)
    assert judge(valued(position, truth), VALUE_LEDGER, VALUE_STEPS).verdict == MATCH
    wrong = list(truth)
    wrong[1] = rule.hex_of(int(wrong[1], 16) + 1)
    verdict = judge(valued(position, tuple(wrong)), VALUE_LEDGER, VALUE_STEPS)
    assert verdict.verdict == MISMATCH and verdict.lake_rows == valued(position, truth).rows  # the counts agree
    assert verdict.value_diff["differing"] == 1 and list(verdict.value_diff["source"]) == ["1"]
    assert "the values do not" in verdict.reason


def test_values_in_a_bracket_match_at_a_cut_where_the_count_also_holds():
    # between 25 and 45: after k1's update (rows 2) and after k2 went (rows 1)
    assert judge(replace(at(2, 25, 45), fingerprints=brute_fingerprints(31)), VALUE_LEDGER, VALUE_STEPS).verdict \
        == MATCH
    assert judge(replace(at(1, 25, 45), fingerprints=brute_fingerprints(41)), VALUE_LEDGER, VALUE_STEPS).verdict \
        == MATCH
    # the values of one cut with the count of another: no cut holds both
    assert judge(replace(at(1, 25, 45), fingerprints=brute_fingerprints(31)), VALUE_LEDGER, VALUE_STEPS).verdict \
        == MISMATCH


def test_values_are_not_compared_without_a_moment_nor_without_value_steps():
    assumed = replace(valued(35, ("0" * 16,) * rule.BUCKETS),
                      moment=replace(at(2, 35).moment, assumed="the counts file's modification time"))
    verdict = judge(assumed, VALUE_LEDGER, VALUE_STEPS)
    assert "values not compared: a count without a moment" in verdict.reason
    old = [replace(r, tables={"t": {k: v for k, v in r.tables["t"].items() if k != "fingerprints"}})
           for r in VALUE_LEDGER]
    verdict = judge(valued(35, ("0" * 16,) * rule.BUCKETS), old, VALUE_STEPS)
    assert verdict.verdict == MATCH and "values not compared: run ra kept no value steps" in verdict.reason


def test_a_counts_file_may_carry_fingerprints_and_a_bad_list_is_refused():
    listed = {"t": {"rows": 2, "position": "canonical:" + p(35), "fingerprints": list(brute_fingerprints(36))}}
    [cp] = read_counts_file(listed, "counts.json", None, "r")
    assert cp.fingerprints == brute_fingerprints(36)
    assert judge(replace(cp, table_id="t"), VALUE_LEDGER, VALUE_STEPS).verdict == MATCH
    with pytest.raises(CheckpointError, match=r"\"fingerprints\" must be a list of 64 fingerprints"):
        read_counts_file({"t": {"rows": 2, "fingerprints": ["zz"]}}, "counts.json", None, "r")


def test_a_checkpoint_with_row_hashes_keeps_its_keys_once_and_reads_back_the_same():
    cp = replace(at(2, 35), keys=('{"id":"1"}', '{"id":"2"}'), fingerprints=("0" * 16,) * rule.BUCKETS,
                 row_hashes={'{"id":"1"}': "00000000000000aa", '{"id":"2"}': "00000000000000bb"})
    assert cp.as_dict()["keys"] is None
    assert Checkpoint.from_dict(cp.as_dict()) == cp
    plain = replace(at(2, 35), keys=('{"id":"1"}',))
    assert Checkpoint.from_dict(plain.as_dict()) == plain


# ---- the columns of a value mismatch's keys ---------------------------------------------------------
class Rows:
    """A RowReader over dicts: each side's rows now, and the table's column rules."""

    def __init__(self, source, lake, rules=None) -> None:
        self._source, self._lake, self._rules = source, lake, rules or ColumnRules()

    def source(self, table, keys):
        return None if self._source is None else {k: v for k, v in self._source.items() if k in keys}

    def lake(self, table, keys):
        return {k: v for k, v in self._lake.items() if k in keys}

    def rules(self, table):
        return self._rules


def _wrong_k1(position: int, source_k1: int) -> Checkpoint:
    """A checkpoint whose source had k1's row hash ``source_k1`` (the lake's then: the brute sum's)."""
    fps = [int(h, 16) for h in brute_fingerprints(position + 1)]
    fps[1] = source_k1  # k1 is bucket 1's only key
    return replace(valued(position, tuple(rule.hex_of(v) for v in fps)),
                   row_hashes={"k1": rule.hex_of(source_k1), "k3": rule.hex_of(300)})


LAKE_NOW = {"k1": 98, "k3": 300}  # after every step: k1 100 + 5 - 7, k3 300


def _judged(cp: Checkpoint, rows: Rows):
    return judge(cp, VALUE_LEDGER, VALUE_STEPS, hashes_now=lambda _t, _buckets: dict(LAKE_NOW), rows_now=rows)


def test_a_differing_row_names_its_columns_with_both_values_and_a_tolerance_makes_it_a_match():
    cp = _wrong_k1(75, 99)
    source = {"k1": (rule.hex_of(99), {"id": "1", "v": "2.0", "note": "a"})}
    lake = {"k1": {"id": "1", "v": "2.0000001", "note": "a"}, "k3": {"id": "3", "v": "1", "note": None}}
    verdict = _judged(cp, Rows(source, lake))
    assert verdict.verdict == MISMATCH and verdict.value_diff["keys"]["differ"] == ["k1"]
    assert verdict.value_diff["rows"] == [{"key": "k1", "columns": [
        {"column": "v", "source": "2.0", "lake": "2.0000001", "within_tolerance": False}]}]
    tolerant = _judged(cp, Rows(source, lake, ColumnRules(tolerances={"v": 1e-6})))
    assert tolerant.verdict == MATCH and "within the declared tolerance" in tolerant.reason
    too_tight = _judged(cp, Rows(source, lake, ColumnRules(tolerances={"v": 1e-8})))
    assert too_tight.verdict == MISMATCH
    masked = _judged(cp, Rows(source, lake, ColumnRules(sensitive=frozenset({"v"}))))
    assert masked.value_diff["rows"][0]["columns"][0] | {"within_tolerance": False} == {
        "column": "v", "source": "(masked)", "lake": "(masked)", "within_tolerance": False}


def test_a_row_changed_after_the_moment_on_either_side_is_named_without_its_columns():
    source = {"k1": (rule.hex_of(99), {"v": "2.0"})}
    lake = {"k1": {"v": "2.5"}}
    # the source's row now is not the one its snapshot hashed
    moved = _judged(_wrong_k1(75, 99), Rows({"k1": (rule.hex_of(12), {"v": "9"})}, lake,
                                            ColumnRules(tolerances={"v": 10.0})))
    assert moved.verdict == MISMATCH  # a tolerance cannot vouch for a row it could not compare
    assert moved.value_diff["rows"] == [{"key": "k1", "not_compared": "the source changed the row after the moment"}]
    # at 65 k1 has a step after the moment (at 70): the lake's row now is not its row then
    later = _judged(_wrong_k1(65, 104), Rows(source, lake))
    assert later.value_diff["keys"]["differ"] == ["k1"]
    assert later.value_diff["rows"] == [{"key": "k1", "not_compared": "the lake changed the row after the moment"}]
    unread = _judged(_wrong_k1(75, 99), Rows(None, lake))
    assert unread.value_diff["columns_not_compared"] == "the source's rows cannot be read"


def test_a_large_tables_drill_down_compares_the_keys_of_the_buckets_its_snapshot_kept_only():
    buckets_of = {"k1": 1, "k3": 3}
    asked = []

    def hashes_now(_table, buckets):
        asked.append(buckets)
        return {k: h for k, h in LAKE_NOW.items() if buckets is None or buckets_of[k] in buckets}

    # at 55: k3 comes later (at 60, bucket 3) and k1 changes later (at 70): only bucket 1's keys were kept
    cp = replace(_wrong_k1(55, 104), row_hashes={"k1": rule.hex_of(104)}, row_hash_buckets=(1,))
    verdict = judge(cp, VALUE_LEDGER, VALUE_STEPS, hashes_now=hashes_now)
    assert asked == [frozenset({1})]
    assert verdict.value_diff["keys"] == {"differ": ["k1"], "missing_in_lake": [], "extra_in_lake": []}
    # kept in the lake without the keys: the row hashes of some buckets are not the table's keys
    assert cp.as_dict()["keys"] is None and Checkpoint.from_dict(cp.as_dict()) == replace(cp, keys=None)
    assert Checkpoint.from_dict(cp.as_dict()).row_hash_buckets == (1,)


def test_a_tolerance_cannot_vouch_for_buckets_whose_keys_were_not_compared():
    fps = [int(h, 16) for h in brute_fingerprints(76)]
    fps[1], fps[3] = 99, 301  # k1 (tolerated below) and k3 differ
    cp = replace(valued(75, tuple(rule.hex_of(v) for v in fps)), row_hashes={"k1": rule.hex_of(99)},
                 row_hash_buckets=(1,))
    rows = Rows({"k1": (rule.hex_of(99), {"v": "2.0"})}, {"k1": {"v": "2.0000001"}},
                ColumnRules(tolerances={"v": 1e-3}))
    verdict = judge(cp, VALUE_LEDGER, VALUE_STEPS, hashes_now=lambda _t, _b: {"k1": 98}, rows_now=rows)
    assert verdict.value_diff["rows"][0]["columns"][0]["within_tolerance"]
    assert verdict.verdict == MISMATCH  # bucket 3 differs too, its keys unseen
    only_k1 = replace(cp, fingerprints=tuple(rule.hex_of(v) for v in fps[:3] + [300] + fps[4:]))
    assert judge(only_k1, VALUE_LEDGER, VALUE_STEPS, hashes_now=lambda _t, _b: {"k1": 98},
                 rows_now=rows).verdict == MATCH
