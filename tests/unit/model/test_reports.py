"""jobs.model.reports: every report through JSON and back, and the reports earlier versions left in lakes
(tests/resources/reports/README.md says where the real ones come from)."""
from __future__ import annotations

import json
from dataclasses import fields

import pytest

from jobs.lake.layout import Lake
from jobs.model import reports as R
from tests.support.paths import REPO

RESOURCES = REPO / "tests/resources/reports"
KINDS = {k.FILE: k for k in (R.DecodeReport, R.FoldReport, R.ValidationReport, R.ReconciliationReport,
                             R.AlertReport, R.RunReport, R.ExpireReport)}
WRITTEN = sorted(RESOURCES.glob("*/*.json"))
# a table's error, history and earlier key; a verdict's difference, note, judging run, lag and keys; a
# lag's wait (with a maximum lag only)
WRITTEN_WHEN_THEY_APPLY = {"error", "history", "rekeyed_from", "difference", "reason", "judged_run", "lag", "key_diff",
                           "value_diff", "waiting_seconds", "topics"}


def _written(report: R.Report) -> str:
    """The file's text as a stage writes it (jobs.lake.layout.Lake.write_json)."""
    return json.dumps(report.to_json(), indent=2, sort_keys=True, default=str) + "\n"


def _records(value):
    """Every record inside a value (itself included)."""
    if isinstance(value, R.Record):
        yield value
        for name in vars(value):
            yield from _records(getattr(value, name))
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _records(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _records(v)


def test_every_kind_of_report_has_real_files_of_the_previous_version():
    assert {c for c in vars(R).values() if isinstance(c, type) and issubclass(c, R.Report) and c is not R.Report} \
        == set(KINDS.values())
    assert {path.name for path in WRITTEN} == set(KINDS)


@pytest.mark.parametrize("path", WRITTEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_report_the_previous_version_wrote_reads_typed_and_writes_back_byte_for_byte(path, tmp_path):
    report = KINDS[path.name].from_json(json.loads(path.read_text()))
    assert _written(report) == path.read_text()
    # every key it holds has a field (none left untyped); it lacks only keys written when they apply
    assert [(type(r).__name__, r.extra) for r in _records(report) if r.extra] == []
    assert set().union(*(r.absent for r in _records(report))) <= WRITTEN_WHEN_THEY_APPLY
    # written and read by a run's report folder, as the stages do
    lake = Lake.at(str(tmp_path))
    lake.write_json(f"r/{report.FILE}", report.to_json())
    assert (tmp_path / "r" / report.FILE).read_text() == path.read_text()


def _real(run: str, kind: type[R.Report]) -> dict:
    return json.loads((RESOURCES / run / kind.FILE).read_text())


def test_reports_of_older_versions_read_with_defaults_and_are_written_as_they_were():
    """What the keys added since mean for a report an older version wrote: its defaults, and the report
    written again without them (older: the same files less the keys the commits named added)."""
    decode = _real("demo-first", R.DecodeReport)
    for key in ("record_profile", "topic_shapes", "changes_kept"):  # e9b1e5f, 0291ebb
        del decode[key]
    merge = _real("demo-first", R.FoldReport)
    for table in merge["tables"].values():
        del table["unconverted_values"], table["counts"]  # be22553, the ledger's
    del merge["reach"]
    reconciliation = _real("demo-rerun", R.ReconciliationReport)
    del reconciliation["landing"]  # 594fea0
    for row in reconciliation["tables"]:
        del row["previous"], row["overdue"], row["in_state"]
    alert = _real("demo-rerun", R.AlertReport)
    del alert["emails"], alert["digest"]  # 7387678

    older = [R.DecodeReport.from_json(decode), R.FoldReport.from_json(merge),
             R.ReconciliationReport.from_json(reconciliation), R.AlertReport.from_json(alert)]

    assert [r.to_json() for r in older] == [decode, merge, reconciliation, alert]
    decoded, folded, reconciled, alerted = older
    assert decoded.record_profile is None and decoded.topic_shapes == {} and not decoded.has("record_profile")
    assert decoded.total.landed == 2991 and decoded.tables["shop.public.orders"].quarantined == 2
    assert all(t.unconverted_values == {} and t.counts is None for t in folded.tables.values())
    assert folded.reach == R.Reach() and not folded.has("reach")
    assert reconciled.landing is None and [t.previous for t in reconciled.tables] == [None] * 3
    assert reconciled.tables[0].checkpoints[1].verdict == "mismatch"
    assert alerted.emails == () and alerted.digest is None and alerted.sent


def test_a_verdict_keeps_only_the_keys_it_was_judged_with():
    """A verdict without a lag, a reason or a key difference writes none of them (reconciliation.json
    shows no null there); one with them writes them."""
    pending = _real("demo-next", R.ReconciliationReport)["tables"][2]["pending"][0]
    assert set(pending) >= {"lag", "reason"} and "difference" not in pending and "key_diff" not in pending
    verdict = R.CheckpointVerdict.from_json(pending)
    assert verdict.to_json() == pending
    assert verdict.lag.seconds is not None and verdict.difference is None and verdict.key_diff is None
    assert verdict.updated(key_diff=R.KeyDiff(missing_in_lake=("k",))).to_json()["key_diff"] == {
        "missing_in_lake": ["k"], "extra_in_lake": []}


def test_a_key_this_version_does_not_know_is_kept_as_read():
    newer = {**_real("demo-next", R.RunReport), "spark_ui": "http://x"}
    newer["timings_s"]["land"] = 1.5
    run = R.RunReport.from_json(newer)
    assert run.extra == {"spark_ui": "http://x"} and run.timings_s["land"] == 1.5
    assert run.to_json() == newer
    reason = R.AlertReport.from_json({"reasons": [{"kind": "freshness", "table": "t"}]}).reasons[0]
    assert type(reason) is R.Reason and reason.kind == "freshness" and reason.to_json() == {"kind": "freshness",
                                                                                            "table": "t"}


def test_a_broken_report_reads_as_far_as_it_goes():
    """Where an object should be and is not: a record that may not be None is as if absent (its default, so
    that readers need not test it), one in a mapping or that may be None is None."""
    decode = R.DecodeReport.from_json({"total": "lost", "tables": {"a": {"landed": 1}, "b": 7}})
    assert decode.total == R.MessageCounts() and not decode.has("total")
    assert decode.tables["b"] is None and decode.tables["a"].landed == 1
    assert R.FoldReport.from_json({"held": None}).held == R.HeldRecords()
    row = R.TableReconciliation.from_json({"previous": None, "landing": 3})
    assert row.previous is None and row.has("previous") and row.extra == {"landing": 3}


def test_a_record_of_some_fields_writes_those_only_and_updated_adds_one():
    assert R.RunReport.of(timings_s={"decode": 1.0}).to_json() == {"timings_s": {"decode": 1.0}}  # transform's
    assert R.RunReport(timings_s={}, alert_sent=True).to_json() == {"timings_s": {}, "alert_sent": True}
    expire = R.ExpireReport.from_json(_real("demo-next", R.ExpireReport))
    returned = R.ExpireReport.from_json({k: v for k, v in expire.to_json().items() if k != "run_id"})
    assert "run_id" not in returned.to_json() and returned.updated(run_id="r").to_json()["run_id"] == "r"


_EVERY_FIELD = [
    R.DecodeReport(
        total=R.MessageCounts(landed=5, decoded=3, quarantined=1, ignored=1, records=4),
        tables={"t": R.MessageCounts(landed=5, decoded=3, quarantined=1, ignored=1, records=4, topics=("a", "b"))},
        quarantine_reasons={"bad": 1}, ignored_reasons={"tombstone": 1}, balanced=False, pipeline="p", run_id="r",
        format="debezium", raw=["/a", "/b"], remembered_documents=2, topic_shapes={"t": "envelope"},
        record_profile=({"values": {"op": "INSERT"}, "records": 3, "nulls": {"table_id": 0}},),
        changes_kept="changes/p/run=r"),
    R.FoldReport(pipeline="p", run_id="r", tables={
        "t": R.TableReport(
            table_id="t", records=3, iceberg_table="p.t", snapshot_id=7, state_rows=2, already_published=True,
            mode="delta", files_added=1,
            files_removed=1, bytes_added=10, bytes_removed=9, buckets=16, buckets_rewritten=1, position_deletes=2,
            delete_files_added=1, delete_files_removed=1, key_columns=("id",), key_source="message key",
            rekeyed_from=("a",), type_changes=({"column": "c", "action": "promoted"},), added_columns=("n",),
            dropped_columns=("o",), full_load_position="1", full_load={"start": "1", "end": "2", "complete": True},
            key_moves=1, unconverted_values={"c": R.UnconvertedColumn(type="int", nulled=1, rounded=2, example="x")},
            counts={"rows_before": 1, "steps": "s", "exact_from": None}, history={"snapshot_id": 8}),
        "u": R.TableReport.of(error="no key", records=2)},
        held=R.HeldRecords(transactions=1, records=2, path="held/p", released_from="held/q", from_position="9",
                           from_time=5),
        reach=R.Reach(reach_position="9", reach_time=6, held_position="9", held_time=5)),
    R.ValidationReport(success=False, suites=(R.SuiteResult(
        suite="state", table="t", success=False, statistics={"seconds": 0.1}, error="could not run",
        results=(R.ExpectationResult(expectation="e", kwargs={"column": "id"}, success=False,
                                     observed={"unexpected_count": 1}, exception="x"),
                 R.ExpectationResult(expectation="f", success=True))),)),
    R.ReconciliationReport(
        pipeline="p", run_id="r", source="counts file", max_lag_s=3600.0,
        landing=R.LandingReach(landed_through="2026-11-02T00:00:00Z", interval_end="2026-11-02T00:15:00Z",
                               capture_delay_s=900.0, why_not="the landing read no partition past its end"),
        tables=(R.TableReconciliation(
            table="t", state_rows=2, source_rows=3, status="mismatch", snapshot_id=7, in_state=True, overdue=True,
            checkpoints=(R.CheckpointVerdict(
                table="t", verdict="mismatch", moment="1", moment_kind="position", exact=True, source_rows=3,
                lake_rows=[2, 3], source="file", taken_in="r", taken_at="2026-11-01T00:00:00Z", difference=-1,
                reason="why", judged_run="r", key_diff=R.KeyDiff(missing_in_lake=("a",), extra_in_lake=("b",)),
                value_diff=R.ValueDiff(buckets=64, differing=1, source={"3": "00000000000000ff"},
                                       lake={"3": "00000000000000fe"},
                                       keys=R.ValueKeys(differ=("k",), missing_in_lake=("m",), extra_in_lake=("x",)),
                                       rows=(R.ValueRow(key="k", columns=(R.ValueColumn(
                                           column="c", source="1", lake="2", within_tolerance=True),),
                                           not_compared="n"),),
                                       columns_not_compared="why")),),
            pending=(R.CheckpointVerdict(verdict="behind", moment_assumed="when read", lag=R.Lag(
                checkpoint="9", lake_position="8", lake_time="t", landed_through="u", seconds=1.5, overdue=True,
                waiting_seconds=4000.0)),),
            previous=R.CheckpointVerdict(verdict="match", judged_run="q")),)),
    R.AlertReport(
        sent=True, recipients=("a@x",), error="e", skipped="s", subject="s", digest="d",
        emails=(R.SentEmail(digest="d", sent_at="2026-11-01T00:00:00Z", recipients=("a@x",), subject="s"),),
        reasons=(R.FailedExpectation(suite="s", table="t", expectation="e", column="c", kwargs={"column": "c"},
                                     observed=1),
                 R.CountMismatch(table="t", moment="m", source_rows=3, lake_rows=2, difference=-1,
                                 missing_in_lake=("k",), extra_in_lake=(), snapshot_id=7),
                 R.ValueMismatch(table="t", moment="m", source_rows=3, differing_buckets=1, keys_differ=("k",),
                                 missing_in_lake=("a",), extra_in_lake=("b",), columns_differ={"k": "c"}, snapshot_id=7),
                 R.OverdueCheckpoint(table="t", moment="m", lake_time="l", lag_seconds=1.0, waiting_seconds=2.0),
                 R.QuarantineOverThreshold(quarantined=1, landed=5, ratio=0.2, threshold=0.1, by_reason={"bad": 1}),
                 R.Unbalanced(problem="p"),
                 R.UnconvertedValues(table="t", column="c", type="int", nulled=1, rounded=2))),
    R.RunReport(timings_s={"decode": 1.5}, alert_sent=True),
    R.ExpireReport(run_id="r", pipeline="p", as_of="a", older_than="o", orphans_before="b", retain_days=1,
                   retain_last=2, dry_run=True, tables=(R.ExpiredTable(
                       table="t", snapshots_expired=1, snapshots_kept=2, files_deleted={"data": 3}, bytes_deleted=4,
                       runs_expired=("r0",), orphans_deleted=5, orphan_bytes_deleted=6, count_steps_deleted=7),)),
]


@pytest.mark.parametrize("report", _EVERY_FIELD, ids=lambda r: r.FILE)
def test_every_report_goes_through_json_and_back_unchanged(report):
    text = _written(report)
    again = type(report).from_json(json.loads(text))
    assert again == report
    assert _written(again) == text


def test_the_round_trips_set_every_field_of_every_record():
    """Each field of each kind of record is off its default in one of the reports above, so each field's
    way through JSON is tested."""
    set_somewhere: dict[type, set[str]] = {}
    for report in _EVERY_FIELD:
        for record in _records(report):
            default = type(record)()
            set_somewhere.setdefault(type(record), set()).update(
                name for name in _data_fields(record) if getattr(record, name) != getattr(default, name))
    concrete = {c for c in vars(R).values() if isinstance(c, type) and issubclass(c, R.Record)} - {
        R.Record, R.Report, R.Reason, R.DecodeCounts}
    assert set(set_somewhere) == concrete
    assert {k.__name__: set(_data_fields(k())) - names for k, names in set_somewhere.items()
            if set(_data_fields(k())) - names} == {}


def _data_fields(record: R.Record) -> list[str]:
    return [f.name for f in fields(record) if f.init and f.name not in ("extra", "absent")]
