"""The alert stage without a server: its reasons from the run's typed reports, the email's text, and when
no email is owed or none can go (through a real server: tests/integration/test_alert_smtp.py)."""
from __future__ import annotations

import json

import pytest

from jobs.alert.stage import alert_reasons, problems_digest, render_alert_html, render_alert_text, run_alert
from jobs.model.reports import (
    AlertReport,
    DecodeReport,
    FoldReport,
    QuarantineOverThreshold,
    ReconciliationReport,
    RunReports,
    SentEmail,
    Unbalanced,
    ValidationReport,
)
from tests.support.alerts import SMTP_ENV, failing_reports
from tests.support.paths import REPO

RECIPIENTS = ["dq@example.com"]


@pytest.fixture(autouse=True)
def _no_smtp_env(monkeypatch):
    for name in SMTP_ENV:
        monkeypatch.delenv(name, raising=False)


def _reconciliation(*rows: dict) -> RunReports:
    return RunReports(reconciliation=ReconciliationReport.from_json({"tables": list(rows)}))


def test_quarantine_threshold_and_balance_reasons():
    decode = {"total": {"landed": 100, "decoded": 85, "quarantined": 10, "ignored": 5},
              "tables": {"t": {"landed": 100, "decoded": 85, "quarantined": 10, "ignored": 5}},
              "quarantine_reasons": {"bad json": 10}}
    reports = RunReports(decode=DecodeReport.from_json(decode))
    assert alert_reasons(reports, quarantine_threshold=0.05) == (QuarantineOverThreshold(
        quarantined=10, landed=100, ratio=0.1, threshold=0.05, by_reason={"bad json": 10}),)
    assert alert_reasons(reports, quarantine_threshold=0.1) == ()  # at the threshold is not over it

    decode["tables"]["t"]["landed"] = 99
    kinds = [r.kind for r in alert_reasons(RunReports(decode=DecodeReport.from_json(decode)), 0.5)]
    assert kinds == ["unbalanced", "unbalanced"]  # table t, and the tables' sum against the total
    # a decode report that lacks counts is a reason; a run without one (not decoded) is none
    lacking = RunReports(decode=DecodeReport.from_json({"total": {"landed": 1}}))
    assert alert_reasons(lacking, 0.0) == (Unbalanced(problem="counts in total lack decoded, quarantined, ignored"),)
    assert alert_reasons(RunReports(), 0.0) == ()

    # a suite that failed without a failed result (it could not run) is still a reason
    failed_suite = ValidationReport.from_json({"suites": [{"suite": "s", "table": "t", "success": False,
                                                           "results": [], "error": "boom"}]})
    [reason] = alert_reasons(RunReports(validation=failed_suite), 0.0)
    assert (reason.expectation, reason.observed) == ("(suite failed)", "boom")


def test_a_mismatch_names_its_checkpoints_and_keys_and_a_lag_only_when_overdue():
    row = {"table": "t", "state_rows": 4, "source_rows": 5, "status": "mismatch", "snapshot_id": 9,
           "checkpoints": [
               {"verdict": "match", "moment": "m0", "source_rows": 3, "lake_rows": 3},
               {"verdict": "mismatch", "moment": "m1", "source_rows": 5, "lake_rows": [3, 4], "difference": -1,
                "key_diff": {"missing_in_lake": ['{"id":"7"}', '{"id":"8"}'], "extra_in_lake": []}}],
           "pending": [{"verdict": "behind", "moment": "m2", "lag": {"seconds": 60.0, "overdue": False}},
                       {"verdict": "behind", "moment": "m3", "lag": {"seconds": 7200.0, "overdue": True,
                                                                     "lake_time": "l", "waiting_seconds": 9000.0}}]}
    mismatch, lag = alert_reasons(_reconciliation(row), 0.0)
    assert mismatch.to_json() == {
        "kind": "count_mismatch", "table": "t", "moment": "m1", "source_rows": 5, "lake_rows": [3, 4],
        "difference": -1, "missing_in_lake": ['{"id":"7"}', '{"id":"8"}'], "extra_in_lake": [], "snapshot_id": 9}
    assert lag.to_json() == {"kind": "lag", "table": "t", "moment": "m3", "lake_time": "l", "lag_seconds": 7200.0,
                             "waiting_seconds": 9000.0}
    # the keys read as a list in the email, not as JSON
    _subject, html = render_alert_html("shop", "r1", (mismatch,), "/lake")
    assert "<td>{&quot;id&quot;:&quot;7&quot;}, {&quot;id&quot;:&quot;8&quot;}</td>" in html
    # a report of a version without checkpoints: the table's own counts
    [old] = alert_reasons(_reconciliation({"table": "t", "state_rows": 4, "source_rows": 5, "status": "mismatch"}),
                          0.0)
    assert (old.source_rows, old.lake_rows, old.moment, old.missing_in_lake) == (5, 4, None, None)


def test_a_value_mismatch_says_the_counts_agree_and_names_the_keys_whose_rows_differ():
    row = {"table": "t", "state_rows": 5, "source_rows": 5, "status": "mismatch", "snapshot_id": 9,
           "checkpoints": [{"verdict": "mismatch", "moment": "m1", "source_rows": 5, "lake_rows": 5, "difference": 0,
                            "value_diff": {"buckets": 64, "differing": 1, "source": {"3": "00000000000000ff"},
                                           "lake": {"3": "00000000000000fe"},
                                           "keys": {"differ": ['{"id":"7"}'], "missing_in_lake": [],
                                                    "extra_in_lake": []}}}]}
    [reason] = alert_reasons(_reconciliation(row), 0.0)
    assert reason.to_json() == {
        "kind": "value_mismatch", "table": "t", "moment": "m1", "source_rows": 5, "differing_buckets": 1,
        "keys_differ": ['{"id":"7"}'], "missing_in_lake": [], "extra_in_lake": [], "snapshot_id": 9}
    _subject, html = render_alert_html("shop", "r1", (reason,), "/lake")
    assert "Rows whose values do not match the source" in html and "{&quot;id&quot;:&quot;7&quot;}" in html
    assert "Row counts that do not match" not in html
    # with the differing columns: their names, not their values (maybe personal data: on the report only)
    diff = row["checkpoints"][0]["value_diff"]
    diff["rows"] = [{"key": '{"id":"7"}', "columns": [{"column": "status", "source": "paid", "lake": "open"},
                                                      {"column": "<b>", "source": "1", "lake": "2"}]}]
    [reason] = alert_reasons(_reconciliation(row), 0.0)
    assert reason.columns_differ == {'{"id":"7"}': "status, <b>"}
    _subject, html = render_alert_html("shop", "r1", (reason,), "/lake")
    assert "status, &lt;b&gt;" in html and "paid" not in html and "open" not in html


def test_the_alert_of_a_real_rerun_from_the_reports_it_wrote():
    """The demo's re-run (tests/resources/reports/README.md): its reasons and their digest, from the reports
    it read, are those its alert.json holds."""
    def read(kind, run="demo-rerun"):
        return kind.from_json(json.loads((REPO / "tests/resources/reports" / run / kind.FILE).read_text()))

    reports = RunReports(decode=read(DecodeReport, "demo-first"), fold=read(FoldReport),
                         validation=read(ValidationReport, "demo-first"), reconciliation=read(ReconciliationReport))
    written = read(AlertReport)
    assert alert_reasons(reports, 0.0) == written.reasons
    assert problems_digest(written.reasons) == written.digest == written.emails[-1].digest
    text = render_alert_text("demo", "r", written.reasons, "/lake")
    assert "Lag (s): 135596.167; Waiting (s): 43200.0" in text


def test_the_digest_is_the_problems_not_how_long_they_waited():
    row = {"table": "t", "status": "behind", "pending": [{"verdict": "behind", "moment": "m", "lag": {
        "seconds": 7200.0, "overdue": True, "lake_time": "l", "waiting_seconds": 9000.0}}]}
    waited_longer = json.loads(json.dumps(row).replace("9000.0", "9900.0").replace("7200.0", "8100.0"))
    first, later = (alert_reasons(_reconciliation(r), 0.0) for r in (row, waited_longer))
    assert first != later and problems_digest(first) == problems_digest(later)
    assert problems_digest(first) != problems_digest(alert_reasons(_reconciliation({**row, "table": "u"}), 0.0))


def test_subject_cannot_inject_headers():
    subject, _ = render_alert_html("shop\r\nBcc: evil@example.com", "r1\n", [Unbalanced(problem="x")], "/lake")
    assert "\r" not in subject and "\n" not in subject
    assert subject == "[CDC data quality] shop Bcc: evil@example.com run r1: 1 problem"


def test_no_email_is_owed_without_problems_or_recipients_and_none_can_go_without_a_server(monkeypatch):
    nothing = run_alert("shop", "r1", RunReports(), RECIPIENTS, "/lake")
    assert (nothing.sent, nothing.skipped, nothing.error, nothing.reasons) == (False, "no problems", None, ())
    unsent = run_alert("shop", "r1", failing_reports(), [" ", ""], "/lake")
    assert (unsent.sent, unsent.skipped, unsent.error) == (False, "no recipients", None)
    assert unsent.subject == "[CDC data quality] shop run r1: 2 problems"

    unconfigured = run_alert("shop", "r1", failing_reports(), RECIPIENTS, "/lake")
    assert unconfigured.sent is False and "no SMTP server configured" in unconfigured.error
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", "smtp://u:hunter2-secret@host:notaport")
    broken = run_alert("shop", "r1", failing_reports(), RECIPIENTS, "/lake")
    assert "AIRFLOW_CONN_SMTP_DEFAULT" in broken.error and "hunter2-secret" not in broken.error


def test_the_same_problems_mailed_by_an_earlier_attempt_are_not_mailed_again():
    asked = []
    reports = failing_reports()
    digest = problems_digest(alert_reasons(reports, 0.0))
    earlier = AlertReport(emails=(SentEmail(digest=digest, sent_at="2026-11-02T00:00:00Z"),))

    again = run_alert("shop", "r1", reports, RECIPIENTS, "/lake", smtp=lambda: asked.append(1), previous=earlier)

    assert again.skipped == "already sent at 2026-11-02T00:00:00Z for the same problems" and asked == []
    assert again.emails == earlier.emails and again.digest == digest
