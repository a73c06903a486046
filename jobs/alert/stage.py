"""The alert stage: one data-quality email per run when something needs a human.

Reasons: a failed expectation, a state/source count mismatch, quarantine over its threshold,
decode counts that do not balance, values the typed state could not hold (published as null or
rounded), all read from the run's typed reports (jobs.model.reports). The email goes through the one
SMTP door (jobs.alert.smtp). Every value that may come from a message (table and column names,
observed values) is HTML-escaped.
"""
from __future__ import annotations

import hashlib
import html as html_lib
import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from jobs.alert.smtp import SmtpError, SmtpSource, one_line, send_email, smtp_settings
from jobs.model.reports import (
    COUNT_MISMATCH,
    EXPECTATION,
    LAG,
    QUARANTINE,
    UNBALANCED,
    UNCONVERTED,
    VALUE_MISMATCH,
    AlertReport,
    CheckpointVerdict,
    CountMismatch,
    DecodeReport,
    FailedExpectation,
    FoldReport,
    OverdueCheckpoint,
    QuarantineOverThreshold,
    Reason,
    RunReports,
    SentEmail,
    SuiteResult,
    TableReconciliation,
    Unbalanced,
    UnconvertedValues,
    ValueMismatch,
)
from jobs.reconcile.stage import MISMATCH, balance_problems

log = logging.getLogger(__name__)

SUBJECT_PREFIX = "[CDC data quality]"
_OBSERVED_MAX_CHARS = 500  # an observed value may be a long list of unexpected values


# ---- reasons -------------------------------------------------------------------------------------
def alert_reasons(reports: RunReports, quarantine_threshold: float) -> tuple[Reason, ...]:
    """Everything in this run's reports that should reach a human."""
    reasons: list[Reason] = []
    for suite in reports.validation.suites:
        reasons += _expectation_reasons(suite)
    for row in reports.reconciliation.tables:
        reasons += _count_reasons(row)
    reasons += _quarantine_reasons(reports.decode, quarantine_threshold)
    reasons += [Unbalanced(problem=problem) for problem in balance_problems(reports.decode)]
    reasons += _unconverted_reasons(reports.fold)
    return tuple(reasons)


def _expectation_reasons(suite: SuiteResult) -> list[Reason]:
    failed = [r for r in suite.results if not r.success]
    reasons: list[Reason] = []
    for result in failed:
        kwargs = result.kwargs or {}  # the expectation's own arguments, as Great Expectations names them
        reasons.append(FailedExpectation(
            suite=suite.suite, table=suite.table, expectation=result.expectation,
            column=kwargs.get("column") or _joined(kwargs.get("column_list")), kwargs=kwargs,
            observed=result.observed))
    if not failed and suite.success is False:
        # a suite can fail without a failed result (e.g. it could not run at all)
        reasons.append(FailedExpectation(suite=suite.suite, table=suite.table, expectation="(suite failed)",
                                         observed=suite.error))
    return reasons


def _count_reasons(row: TableReconciliation) -> list[Reason]:
    """A mismatch the lake has reached (one per checkpoint), and a checkpoint the lake has waited for
    longer than the maximum lag; a checkpoint the lake has not reached yet is no problem."""
    mismatched = [c for c in row.checkpoints if c.verdict == MISMATCH]
    if row.status == MISMATCH and not mismatched:  # a report without checkpoints
        mismatched = [CheckpointVerdict(source_rows=row.source_rows, lake_rows=row.state_rows)]
    reasons: list[Reason] = [
        CountMismatch(table=row.table, moment=cp.moment, source_rows=cp.source_rows, lake_rows=cp.lake_rows,
                      difference=cp.difference, missing_in_lake=cp.key_diff.missing_in_lake if cp.key_diff else None,
                      extra_in_lake=cp.key_diff.extra_in_lake if cp.key_diff else None, snapshot_id=row.snapshot_id)
        if cp.value_diff is None else _value_reason(row, cp) for cp in mismatched]
    reasons += [OverdueCheckpoint(table=row.table, moment=cp.moment, lake_time=cp.lag.lake_time,
                                  lag_seconds=cp.lag.seconds, waiting_seconds=cp.lag.waiting_seconds)
                for cp in row.pending if cp.lag is not None and cp.lag.overdue]
    return reasons


def _value_reason(row: TableReconciliation, cp: CheckpointVerdict) -> ValueMismatch:
    keys = cp.value_diff.keys
    values = dict(table=row.table, moment=cp.moment, source_rows=cp.source_rows,
                  differing_buckets=cp.value_diff.differing, keys_differ=keys.differ if keys else None,
                  missing_in_lake=keys.missing_in_lake if keys else None,
                  extra_in_lake=keys.extra_in_lake if keys else None, snapshot_id=row.snapshot_id)
    columns = {r.key: ", ".join(c.column for c in r.columns) for r in cp.value_diff.rows if r.columns}
    # (a verdict without columns keeps the reason, and so the digest, it always had)
    return ValueMismatch.of(**values, **({"columns_differ": columns} if columns else {}))


def _quarantine_reasons(decode: DecodeReport | None, threshold: float) -> list[Reason]:
    landed, quarantined = (decode.total.landed or 0, decode.total.quarantined or 0) if decode else (0, 0)
    if landed <= 0 or quarantined / landed <= threshold:
        return []
    return [QuarantineOverThreshold(quarantined=quarantined, landed=landed, ratio=round(quarantined / landed, 6),
                                    threshold=threshold, by_reason=dict(decode.quarantine_reasons or {}))]


def _unconverted_reasons(fold: FoldReport | None) -> list[Reason]:
    # counts only: the values themselves (merge.json keeps an example) may be personal data
    return [UnconvertedValues(table=table, column=column, type=lost.type, nulled=lost.nulled, rounded=lost.rounded)
            for table, report in sorted((fold.tables if fold else {}).items())
            for column, lost in sorted((report.unconverted_values or {}).items())]


def _joined(columns) -> str | None:
    return ", ".join(str(c) for c in columns) if isinstance(columns, list) and columns else None


# ---- rendering -----------------------------------------------------------------------------------
def _readable(value) -> str:
    """A cell as a person reads it, never raw JSON: a mapping as ``name: value`` lines (counts, such as
    the quarantine's by reason, the largest first), a list comma-separated; cut short."""
    if isinstance(value, dict):
        counts = all(isinstance(v, int) for v in value.values())
        items = sorted(value.items(), key=lambda kv: (-kv[1], str(kv[0])) if counts else str(kv[0]))
        text = "\n".join(f"{k}: {_inline(v)}" for k, v in items)
    elif isinstance(value, (list, tuple)):
        text = ", ".join(_inline(v) for v in value)
    else:
        text = _inline(value)
    return text if len(text) <= _OBSERVED_MAX_CHARS else text[:_OBSERVED_MAX_CHARS] + "…"


def _inline(value) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _esc(value) -> str:
    if value is None:
        return "&ndash;"
    return html_lib.escape(_readable(value), quote=True).replace("\n", "<br>")


_SECTIONS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (EXPECTATION, "Failed expectations",
     [("suite", "Suite"), ("table", "Table"), ("expectation", "Expectation"), ("column", "Column"),
      ("observed", "Observed")]),
    (COUNT_MISMATCH, "Row counts that do not match the source at the moment it was counted",
     [("table", "Table"), ("moment", "Moment"), ("source_rows", "Source rows"), ("lake_rows", "Lake rows"),
      ("difference", "Lake - source"), ("missing_in_lake", "Keys missing in the lake"),
      ("extra_in_lake", "Keys only in the lake"), ("snapshot_id", "Snapshot")]),
    (VALUE_MISMATCH, "Rows whose values do not match the source at the moment it was counted (the counts do)",
     [("table", "Table"), ("moment", "Moment"), ("source_rows", "Rows"), ("differing_buckets", "Buckets of keys "
      "that differ"), ("keys_differ", "Keys whose rows differ"), ("columns_differ", "Columns that differ "
      "(values on the report)"), ("missing_in_lake", "Keys missing in the lake"),
      ("extra_in_lake", "Keys only in the lake"), ("snapshot_id", "Snapshot")]),
    (LAG, "Source counts the lake has not reached for longer than the maximum lag",
     [("table", "Table"), ("moment", "Moment"), ("lake_time", "Lake reaches"), ("lag_seconds", "Lag (s)"),
      ("waiting_seconds", "Waiting (s)")]),
    (QUARANTINE, "Quarantine over its threshold",
     [("quarantined", "Quarantined"), ("landed", "Landed"), ("ratio", "Ratio"), ("threshold", "Threshold"),
      ("by_reason", "By reason")]),
    (UNBALANCED, "Counts that do not balance (landed = decoded + quarantined + ignored)",
     [("problem", "Problem")]),
    (UNCONVERTED, "Values the state's column type cannot hold (see merge.json; the change records keep them)",
     [("table", "Table"), ("column", "Column"), ("type", "Type"), ("nulled", "Published as null"),
      ("rounded", "Published rounded")]),
]


def render_alert_html(pipeline: str, run_id: str, reasons: Sequence[Reason], report_location: str) -> tuple[str, str]:
    """(subject, html body): a small table per kind of problem, every value escaped."""
    count = len(reasons)
    subject = one_line(
        f"{SUBJECT_PREFIX} {one_line(pipeline)} run {one_line(run_id)}: {count} problem{'' if count == 1 else 's'}"
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head>",
        "<body style=\"font-family:sans-serif\">",
        f"<h2>CDC data quality: {_esc(pipeline)} run {_esc(run_id)}</h2>",
        f"<p>{count} problem{'' if count == 1 else 's'} found. Report: "
        f"<a href=\"{_esc(report_location)}\">{_esc(report_location)}</a></p>",
    ]
    for kind, title, columns in _SECTIONS:
        rows = [r for r in reasons if r.kind == kind]
        if not rows:
            continue
        parts.append(f"<h3>{html_lib.escape(title)} ({len(rows)})</h3>")
        parts.append("<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\" style=\"border-collapse:collapse\">")
        parts.append("<tr>" + "".join(f"<th>{html_lib.escape(label)}</th>" for _, label in columns) + "</tr>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{_esc(getattr(row, key))}</td>" for key, _ in columns) + "</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return subject, "\n".join(parts)


def render_alert_text(pipeline: str, run_id: str, reasons: Sequence[Reason], report_location: str) -> str:
    """The plain-text alternative of the same email."""
    lines = [f"CDC data quality: {pipeline} run {run_id}: {len(reasons)} problem(s)", f"Report: {report_location}", ""]
    for kind, title, columns in _SECTIONS:
        rows = [r for r in reasons if r.kind == kind]
        if rows:
            lines.append(f"{title}:")
            for row in rows:
                cells = [f"{label}: {one_line(_readable(getattr(row, key)).replace(chr(10), '; '))}"
                         for key, label in columns]
                lines.append("  - " + "; ".join(cells))
            lines.append("")
    return "\n".join(lines)


def run_alert(pipeline: str, run_id: str, reports: RunReports, alert_to: list[str], report_location: str,
              quarantine_threshold: float = 0.0, smtp: SmtpSource | None = None,
              previous: AlertReport | None = None) -> AlertReport:
    """Compute the reasons and send at most one email per run and problems; failures are reported, never
    raised.

    ``smtp``: where the server's settings come from (default jobs.alert.smtp.smtp_settings: the
    environment); ``previous``: the run's alert.json of an earlier attempt, whose ``emails`` say what was
    sent already."""
    reasons = alert_reasons(reports, quarantine_threshold)
    recipients = tuple(addr.strip() for addr in alert_to or [] if addr and addr.strip())
    report = AlertReport(reasons=reasons, recipients=recipients, digest=problems_digest(reasons),
                         emails=previous.emails if previous else ())
    if not reasons:
        return replace(report, skipped="no problems")
    subject, html_body = render_alert_html(pipeline, run_id, reasons, report_location)
    report = replace(report, subject=subject)
    if not recipients:
        return replace(report, skipped="no recipients")
    done = next((e for e in report.emails if e.digest == report.digest), None)
    if done is not None:  # a re-run of the run id: these problems were mailed already
        return replace(report, skipped=f"already sent at {done.sent_at} for the same problems")
    text_body = render_alert_text(pipeline, run_id, reasons, report_location)
    try:
        send_email(smtp or smtp_settings, list(recipients), subject, html_body, text_body)
    except SmtpError as exc:
        log.warning("data-quality alert not sent: %s", exc)
        return replace(report, error=str(exc))
    sent_at = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    email = SentEmail(digest=report.digest, sent_at=sent_at, recipients=recipients, subject=subject)
    return replace(report, sent=True, emails=(*report.emails, email))


# what identifies a problem, not how long it has lasted: a re-run measures the wait again
_MEASURES = ("waiting_seconds", "lag_seconds")


def problems_digest(reasons: Sequence[Reason]) -> str:
    """The identity of a set of problems: the same run with the same problems is mailed once."""
    identity = [{k: v for k, v in r.to_json().items() if k not in _MEASURES} for r in reasons]
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()
