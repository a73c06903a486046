"""A run's reports with problems for the alert, and the environment its SMTP settings are read from."""
from __future__ import annotations

from jobs.model.reports import DecodeReport, ReconciliationReport, RunReports, ValidationReport

HOSTILE_TABLE = "<script>alert(1)</script>"
# every variable jobs.alert.smtp reads: a test sets those it means, none leaks in from the machine
SMTP_ENV = ("AIRFLOW_CONN_SMTP_DEFAULT", "SMTP_HOST", "SMTP_PORT", "SMTP_USER", "SMTP_PASSWORD", "SMTP_FROM",
            "SMTP_STARTTLS", "SMTP_SSL", "SMTP_TIMEOUT", "SMTP_VERIFY_CERTIFICATES", "AIRFLOW__EMAIL__FROM_EMAIL")


def failing_reports(mismatched: tuple[str, ...] = ("shop._.orders",)) -> RunReports:
    """Reports as their files hold them: a failed expectation on a table named like a script (and one that
    held), a count mismatch per table of ``mismatched`` (the others match, or were never counted), balanced
    counts."""
    validation = {"success": False, "suites": [{
        "suite": "state", "table": HOSTILE_TABLE, "success": False, "results": [
            {"expectation": "expect_column_values_to_not_be_null", "kwargs": {"column": "id<b>"},
             "success": False, "observed": {"unexpected_count": 2, "partial": ["<img src=x onerror=1>"]}},
            {"expectation": "expect_table_row_count_to_be_between", "kwargs": {}, "success": True, "observed": 5},
        ]}]}
    tables = [{"table": "shop._.orders", "state_rows": 5, "source_rows": 5, "status": "match", "snapshot_id": 1},
              {"table": "shop._.items", "state_rows": 2, "source_rows": 2, "status": "match", "snapshot_id": 2},
              {"table": "shop._.unknown", "state_rows": 2, "source_rows": None, "status": "unknown", "snapshot_id": 3}]
    for row in tables:
        if row["table"] in mismatched:
            row.update(source_rows=row["state_rows"] + 1, status="mismatch")
    decode = {"total": {"landed": 10, "decoded": 10, "quarantined": 0, "ignored": 0}, "tables": {}}
    return RunReports(decode=DecodeReport.from_json(decode), validation=ValidationReport.from_json(validation),
                      reconciliation=ReconciliationReport.from_json({"tables": tables}))


def write_reports(ctx, reports: RunReports) -> None:
    """The reports into the run's folder (jobs.stages.RunContext), as the stages before the alert leave them."""
    for report in (reports.decode, reports.fold, reports.validation, reports.reconciliation):
        if report is not None:
            ctx.write_report(report)
