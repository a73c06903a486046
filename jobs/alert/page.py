"""``report.html``: one run's data quality as a page a person reads, linked from the alert email.

Per table, the source's rows against the lake's as a bar chart (inline SVG: the page has no script,
no external asset, and opens from a lake folder or an object store), the verdict of every checkpoint
judged or still pending with its moment and lag, the keys that differ, the failed expectations, the
quarantine's reasons with counts and a few examples of the raw messages. Every value that may come
from a message (table and column names, raw bytes, observed values) is HTML-escaped.
"""
from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from jobs.model.intervals import interval_of, iso
from jobs.model.reports import (
    CheckpointVerdict,
    DecodeReport,
    KeyDiff,
    Lag,
    LandingReach,
    RunReports,
    TableReconciliation,
    ValidationReport,
    ValueDiff,
)

EXAMPLES_PER_REASON = 3
_EXAMPLE_CHARS = 300
_COLOURS = {"match": "#2e7d32", "mismatch": "#c62828", "behind": "#ef6c00", "unknown": "#616161"}
_STYLE = """body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #ccc;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f3f3f3}.num{text-align:right}
.badge{color:#fff;border-radius:3px;padding:1px 6px;font-size:12px}code{font-size:12px;word-break:break-all}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}"""


def _e(value: Any) -> str:
    if value is None:
        return "&ndash;"
    if not isinstance(value, str):
        value = json.dumps(value, sort_keys=True, default=str)
    return html.escape(value, quote=True)


def _badge(status: str) -> str:
    return f'<span class="badge" style="background:{_COLOURS.get(status, "#616161")}">{_e(status)}</span>'


def rows_chart(tables: Sequence[TableReconciliation]) -> str:
    """Horizontal bars per table: the source's rows (of the checkpoint that decided its status) and the
    lake's rows, on one scale."""
    bar, gap, label_w, width = 14, 10, 260, 520
    top = max([1] + [max(t.source_rows or 0, t.state_rows or 0) for t in tables])
    height = len(tables) * (2 * bar + gap) + 10
    parts = [f'<svg role="img" aria-label="source and lake rows per table" width="{label_w + width + 90}" '
             f'height="{height}" xmlns="http://www.w3.org/2000/svg" font-size="12">']
    for i, t in enumerate(tables):
        y = 5 + i * (2 * bar + gap)
        parts.append(f'<text x="0" y="{y + bar + 4}">{_e(t.table[-40:])}</text>')
        for j, (value, colour) in enumerate(((t.source_rows, "#1565c0"), (t.state_rows, "#90a4ae"))):
            w = 0 if value is None else max(1, round(width * value / top))
            parts.append(f'<rect x="{label_w}" y="{y + j * bar}" width="{w}" height="{bar - 2}" fill="{colour}"/>')
            parts.append(f'<text x="{label_w + w + 4}" y="{y + j * bar + bar - 4}">{_e(value)}</text>')
    parts.append("</svg>")
    legend = ('<div class="legend"><span style="background:#1565c0"></span>source rows'
              '<span style="background:#90a4ae"></span>lake rows</div>')
    return legend + "".join(parts)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _checkpoint_rows(tables: Sequence[TableReconciliation]) -> list[list[str]]:
    rows = []
    for t in tables:
        for c in (*t.checkpoints, *t.pending):
            assumed = f"<br><small>assumed: {_e(c.moment_assumed)}</small>" if c.moment_assumed else ""
            rows.append([
                _e(t.table), _badge(c.verdict), _e(c.moment) + assumed, _e(c.source_rows),
                _e(c.lake_rows), _e(c.difference), _e(_lag_text(c.lag)), _e(c.reason),
                _keys_text(c.key_diff) if c.key_diff else _value_keys_text(c.value_diff) if c.value_diff else "&ndash;",
            ])
    return rows


def _keys_text(keys: KeyDiff) -> str:
    sides = ((keys.missing_in_lake, "missing"), (keys.extra_in_lake, "only in the lake"))
    return "<br>".join(f"{label}: <code>{_e(', '.join(names or []) or None)}</code>" for names, label in sides)


def _value_keys_text(diff: ValueDiff) -> str:
    """A value mismatch: how many buckets of keys differ, and the keys where the snapshot kept them."""
    lines = [f"values differ in {_e(diff.differing)} of {_e(diff.buckets)} buckets of keys"]
    if diff.keys is not None:
        sides = ((diff.keys.differ, "rows differ"), (diff.keys.missing_in_lake, "missing"),
                 (diff.keys.extra_in_lake, "only in the lake"))
        lines += [f"{label}: <code>{_e(', '.join(names))}</code>" for names, label in sides if names]
    return "<br>".join(lines)


def _value_rows(tables: Sequence[TableReconciliation]) -> str:
    """The columns of the rows a value verdict names, source and lake side by side (nothing without any)."""
    rows = []
    for t in tables:
        for c in t.checkpoints:
            for r in (c.value_diff.rows if c.value_diff else ()):
                if not r.columns:
                    rows.append([_e(t.table), _e(c.moment), f"<code>{_e(r.key)}</code>", "&ndash;",
                                 f'<i>{_e(r.not_compared)}</i>', "", ""])
                for v in r.columns or ():
                    rows.append([_e(t.table), _e(c.moment), f"<code>{_e(r.key)}</code>", _e(v.column),
                                 f"<code>{_e(v.source)}</code>", f"<code>{_e(v.lake)}</code>",
                                 "within tolerance" if v.within_tolerance else ""])
    if not rows:
        return ""
    return ("<h2>Values that differ</h2><p>Each column of a differing row whose value differs at the moment, as "
            "the fingerprints' canonical texts; a sensitive column's values are masked.</p>"
            + _table(["Table", "Moment", "Key", "Column", "Source value", "Lake value", "Note"], rows))


def _lag_text(lag: Lag | None) -> str | None:
    if lag is None or lag.seconds is None:
        return None
    return f"{lag.seconds:.0f} s" + (" (overdue)" if lag.overdue else "")


def render_report(pipeline: str, run_id: str, reports: RunReports, quarantine_examples: dict[str, list[dict]],
                  landing: dict | None = None) -> str:
    """The page (a whole HTML document) from the run's reports; ``landing``: what the run's landed folders
    say of its interval (jobs.land.outside.landing_summary), for an interval that landed nothing."""
    reconciliation, decode = reports.reconciliation, reports.decode or DecodeReport()
    tables = reconciliation.tables
    title, heading = _titles(pipeline, run_id)
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>{title}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{heading}</h1>",
        "<p>Messages: " + ", ".join(f"{k} <b>{_e(getattr(decode.total, k))}</b>" for k in ("landed", "decoded",
                                                                                         "quarantined", "ignored"))
        + "</p>",
        quiet_interval(landing),
        "<h2>Source rows against the lake's</h2>",
        f"<p>Source counts from: {_e(reconciliation.source)}. A count is compared with the lake's at the "
        "moment it was taken; <i>behind</i> means the lake has not reached that moment yet. A count that came "
        "without a moment is judged at an <i>assumed</i> one: when its file was written, or when the source was "
        "queried.</p>",
        _landing(reconciliation.landing),
        rows_chart(tables) if tables else "<p>No table.</p>",
        _table(["Table", "Status", "Lake rows now", "Source rows", "Pending", "Last verdict before this run"],
               [[_e(t.table), _badge(t.status), _e(t.state_rows), _e(t.source_rows), _e(len(t.pending)),
                 _previous(t.previous)] for t in tables]),
        "<h2>Checkpoints</h2>",
        _table(["Table", "Verdict", "Moment", "Source rows", "Lake rows", "Lake &minus; source", "Lag", "Note",
                "Keys that differ"], _checkpoint_rows(tables)) if any(
            (t.checkpoints or t.pending) for t in tables) else "<p>No source count.</p>",
        _value_rows(tables),
        "<h2>Failed expectations</h2>",
        _expectations(reports.validation),
        "<h2>Quarantine</h2>",
        _quarantine(decode, quarantine_examples),
        "</body></html>",
    ]
    return "\n".join(parts)


def _titles(pipeline: str, run_id: str) -> tuple[str, str]:
    """The page's title and heading: the interval an interval run covers, so that a run of another day
    than the one meant cannot pass unnoticed; a free-form run id names none."""
    interval = interval_of(run_id)
    if interval is None:
        return f"CDC run {_e(run_id)} of {_e(pipeline)}", f"Pipeline {_e(pipeline)}, run {_e(run_id)}"
    covered = f"[{iso(interval[0])}, {iso(interval[1])})"
    return (f"{_e(pipeline)} {covered}: CDC run {_e(run_id)}",
            f"Pipeline {_e(pipeline)}, interval {covered}<br><small>run {_e(run_id)}</small>")


def _landing(landing: LandingReach | None) -> str:
    """What the run's landing showed of the lake's reach (jobs.reconcile.landed_reach)."""
    if landing is None:
        return ""
    if landing.landed_through:
        return (f"<p>The landing read every partition past its interval's end ({_e(landing.interval_end)}): "
                f"the lake holds every change up to {_e(landing.landed_through)} (a capture delay of "
                f"{_e(landing.capture_delay_s)} s), so a quiet source's counts before then are judged.</p>")
    return f"<p>The landing is no evidence that the lake reached past its last change: {_e(landing.why_not)}.</p>"


def quiet_interval(landing: dict | None) -> str:
    """A line no reader misses when the run landed nothing while its source holds messages outside its
    interval (``landing``: jobs.land.outside.landing_summary of its landed folders)."""
    from jobs.land.outside import quiet_interval_warning

    warning = quiet_interval_warning(landing["start"], landing["end"], landing["records"],
                                     landing.get("outside")) if landing else None
    if not warning:
        return ""
    return ('<p class="quiet" style="background:#fff3e0;border-left:4px solid #ef6c00;padding:6px 10px;'
            f'font-weight:600">{_e(warning)}</p>')


def _previous(verdict: CheckpointVerdict | None) -> str:
    """An earlier run's verdict on the table's newest judged count, for a run that brought no count of it."""
    if verdict is None:
        return ""
    return (f"{_badge(verdict.verdict)} {_e(verdict.source_rows)} rows at {_e(verdict.moment)} "
            f"(run {_e(verdict.judged_run)})")


def _expectations(validation: ValidationReport) -> str:
    rows = []
    for suite in validation.suites:
        for result in (r for r in suite.results if not r.success):
            kwargs = result.kwargs or {}  # the expectation's own arguments, as Great Expectations names them
            rows.append([_e(suite.suite), _e(suite.table), _e(result.expectation),
                         _e(kwargs.get("column") or kwargs.get("column_list")),
                         f"<code>{_e(str(result.observed)[:_EXAMPLE_CHARS])}</code>"])
    if not rows:
        return "<p>Every expectation held.</p>"
    return _table(["Suite", "Table", "Expectation", "Column", "Observed"], rows)


def _quarantine(decode: DecodeReport, examples: dict[str, list[dict]]) -> str:
    reasons = decode.quarantine_reasons or {}
    if not reasons:
        return "<p>No message was quarantined.</p>"
    rows = []
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        shown = "".join(
            f"<div>{_e(x['topic'])} [{_e(x['partition'])}] @{_e(x['offset'])}: "
            f"<code>{_e(x['value'])}</code></div>" for x in examples.get(reason, []))
        rows.append([_e(reason), f'<span class="num">{_e(count)}</span>', shown or "&ndash;"])
    return _table(["Reason", "Messages", "Examples (raw value)"], rows)


def quarantine_examples(dataset, per_reason: int = EXAMPLES_PER_REASON) -> dict[str, list[dict]]:
    """A few quarantined messages per reason, read batch by batch until each reason has its examples
    (never the whole quarantine); raw values as text, cut short."""
    found: dict[str, list[dict]] = {}
    for batch in dataset.to_batches(columns=["reason", "topic", "partition", "offset", "value"]):
        for row in batch.to_pylist():
            bucket = found.setdefault(row["reason"] or "", [])
            if len(bucket) < per_reason:
                raw = row["value"]
                text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
                bucket.append({**row, "value": None if text is None else text[:_EXAMPLE_CHARS]})
    return found
