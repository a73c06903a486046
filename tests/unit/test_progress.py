"""jobs.progress: the line each stage ends with, from its typed report."""
import json

import pytest

from jobs.model.reports import (
    AlertReport,
    DecodeReport,
    ExpireReport,
    FoldReport,
    ReconciliationReport,
    ValidationReport,
)
from jobs.progress import STAGE_REPORTS, stage_done, stage_report
from tests.support.paths import REPO

REPORTS = REPO / "tests/resources/reports"


def test_each_stage_says_what_it_did():
    decode = DecodeReport.from_json({"total": {"landed": 12345, "decoded": 12000, "quarantined": 3, "ignored": 342},
                                     "tables": {"a": {}, "b": {}}})
    assert stage_done("decode", 12.34, decode) == (
        "decode: 12,345 messages: 12,000 decoded, 3 quarantined, 342 ignored; 2 tables (12.3 s)")
    merge = FoldReport.from_json({"tables": {"a": {"state_rows": 1000}, "b": {"state_rows": 24},
                                             "c": {"error": "plan", "records": 2}}, "held": {"records": 7}})
    assert stage_done("fold_publish", 3, merge) == (
        "fold_publish: 2 tables committed, 1,024 rows in their state, 7 records held for the next run; "
        "not published: c (plan) (3.0 s)")
    recon = ReconciliationReport.from_json({"tables": [{"status": "match"}, {"status": "behind"},
                                                       {"status": "match"}]})
    assert stage_done("reconcile", 1, recon) == "reconcile: 3 tables: 1 behind, 2 match (1.0 s)"
    assert stage_done("alert", 0.5, AlertReport(skipped="no problems")) == "alert: no email: no problems (0.5 s)"
    validation = ValidationReport.from_json({"suites": [{"success": True}, {"success": False}]})
    assert stage_done("validate", 2, validation) == "validate: 2 suites, 1 failed (2.0 s)"
    assert stage_done("expire", 1, None) == "expire: done (1.0 s)"


@pytest.mark.parametrize("run, closing", [
    ("demo-first", {
        "decode": "2,991 messages: 2,674 decoded, 3 quarantined, 314 ignored; 4 tables",
        "fold_publish": "3 tables committed, 1,327 rows in their state",
        "validate": "4 suites, all passed", "reconcile": "3 tables: 3 match", "alert": "email sent (1 problem)"}),
    ("demo-next", {
        "decode": "0 messages: 0 decoded, 0 quarantined, 0 ignored; 0 tables",
        "fold_publish": "0 tables committed, 0 rows in their state", "validate": "1 suites, all passed",
        "reconcile": "3 tables: 1 behind, 2 unknown", "alert": "no email: no problems",
        "expire": "0 snapshots expired, 0 bytes deleted"}),
])
def test_the_lines_of_real_runs_from_the_reports_they_wrote(run, closing):
    """The lines the demo's runs printed (tests/resources/reports/README.md), from their report files."""
    said = {}
    for stage in STAGE_REPORTS:
        kind = stage_report(stage)
        path = REPORTS / run / kind.FILE
        if path.exists():
            said[stage] = stage_done(stage, 1, kind.from_json(json.loads(path.read_text())))
    assert said == {stage: f"{stage}: {what} (1.0 s)" for stage, what in closing.items()}


def test_a_stage_without_a_report_has_no_kind():
    assert stage_report("transform") is None and stage_report("decode") is DecodeReport
    assert stage_report("expire") is ExpireReport


def test_a_rerun_of_a_published_run_says_its_tables_are_unchanged_not_committed():
    """merge.json of a re-run marks the tables the run had already committed ``already_published``: nothing
    was committed again, and the closing line says so."""
    rerun = FoldReport.from_json({"tables": {t: {"already_published": True, "snapshot_id": 1, "state_rows": 10}
                                             for t in "abc"}})
    assert stage_done("fold_publish", 1, rerun) == (
        "fold_publish: 3 tables unchanged (already published by this run), 30 rows in their state (1.0 s)")
    # a re-run that finished what a killed attempt left: one table committed now, two unchanged
    partly = FoldReport.from_json({"tables": {"a": {"state_rows": 5}, "b": {"already_published": True, "state_rows": 1},
                                              "c": {"already_published": True, "state_rows": 1}}})
    assert stage_done("fold_publish", 1, partly) == (
        "fold_publish: 1 table committed, 2 tables unchanged (already published by this run), "
        "7 rows in their state (1.0 s)")
    real = FoldReport.from_json(json.loads((REPORTS / "demo-rerun/merge.json").read_text()))
    assert stage_done("fold_publish", 1, real) == (
        "fold_publish: 3 tables unchanged (already published by this run), 1,327 rows in their state (1.0 s)")
