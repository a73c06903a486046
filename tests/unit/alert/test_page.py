"""report.html's text, without a browser (tests/integration/test_report_page.py renders it in Chromium)."""
from __future__ import annotations

import json
import re

from jobs.alert.page import render_report
from jobs.model.reports import DecodeReport, FoldReport, ReconciliationReport, RunReports, ValidationReport
from tests.support.paths import REPO

EMPTY = (RunReports(), {})


def _title_and_heading(page: str) -> tuple[str, str]:
    return re.search(r"<title>(.*?)</title>", page).group(1), re.search(r"<h1>(.*?)</h1>", page).group(1)


def test_the_title_names_the_interval_an_interval_run_covers():
    title, heading = _title_and_heading(render_report("shop", "20261113T000000Z_20261114T000000Z", *EMPTY))
    interval = "[2026-11-13T00:00:00Z, 2026-11-14T00:00:00Z)"
    assert interval in title and interval in heading
    assert "shop" in title and "shop" in heading


def test_a_free_form_run_id_gets_no_interval():
    for run_id in ("manual-1", "20261113T000000Z_20261112T000000Z", "20261113T000000Z_x"):
        title, heading = _title_and_heading(render_report("shop", run_id, *EMPTY))
        assert "interval" not in title + heading and run_id in title and run_id in heading


def test_an_assumed_moment_says_so():
    pending = {"verdict": "behind", "moment": "2026-11-03T00:00:00Z", "moment_assumed": "the counts file's "
               "modification time", "source_rows": 10, "reason": "a count without a moment, judged as of ..."}
    reconciliation = ReconciliationReport.from_json({"tables": [{"table": "t", "status": "behind", "state_rows": 4,
                                                                 "source_rows": 10, "checkpoints": [],
                                                                 "pending": [pending]}]})
    page = render_report("shop", "r1", RunReports(reconciliation=reconciliation), {})
    assert "2026-11-03T00:00:00Z<br><small>assumed: the counts file&#x27;s modification time</small>" in page


def test_a_value_mismatch_shows_its_buckets_and_the_keys_escaped():
    judged = {"verdict": "mismatch", "moment": "m1", "source_rows": 5, "lake_rows": 5, "difference": 0,
              "value_diff": {"buckets": 64, "differing": 1, "keys": {"differ": ['{"id":"<7>"}']}}}
    reconciliation = ReconciliationReport.from_json({"tables": [{"table": "t", "status": "mismatch", "state_rows": 5,
                                                                 "source_rows": 5, "checkpoints": [judged]}]})
    page = render_report("shop", "r1", RunReports(reconciliation=reconciliation), {})
    assert "values differ in 1 of 64 buckets of keys<br>rows differ: <code>{&quot;id&quot;:&quot;&lt;7&gt;&quot;}</code>" \
        in page
    assert "Values that differ" not in page  # no row's columns: no section

    judged["value_diff"]["rows"] = [
        {"key": '{"id":"<7>"}', "columns": [{"column": "st<a>tus", "source": "<paid>", "lake": "open"},
                                          {"column": "price", "source": "1.5", "lake": "1.5000001",
                                           "within_tolerance": True}]},
        {"key": '{"id":"8"}', "not_compared": "the source changed the row after the moment"}]
    reconciliation = ReconciliationReport.from_json({"tables": [{"table": "t", "status": "mismatch", "state_rows": 5,
                                                                 "source_rows": 5, "checkpoints": [judged]}]})
    page = render_report("shop", "r1", RunReports(reconciliation=reconciliation), {})
    assert ("<tr><td>t</td><td>m1</td><td><code>{&quot;id&quot;:&quot;&lt;7&gt;&quot;}</code></td><td>st&lt;a&gt;tus"
            "</td><td><code>&lt;paid&gt;</code></td><td><code>open</code></td><td></td></tr>") in page
    assert "<td><code>1.5</code></td><td><code>1.5000001</code></td><td>within tolerance</td>" in page
    assert "<i>the source changed the row after the moment</i>" in page


def test_the_landings_evidence_of_reach_is_shown():
    landed = {"landed_through": "2026-11-02T23:44:59.999999Z", "interval_end": "2026-11-03T00:00:00Z",
              "capture_delay_s": 900, "why_not": None}
    page = render_report("shop", "r1", _landing(landed), {})
    assert "every change up to 2026-11-02T23:44:59.999999Z (a capture delay of 900 s)" in page
    not_shown = {**landed, "landed_through": None, "why_not": "orders[1] stopped at a <b>high</b> watermark"}
    page = render_report("shop", "r1", _landing(not_shown), {})
    assert "no evidence that the lake reached past its last change: orders[1] stopped at a &lt;b&gt;high" in page


def _landing(landing: dict) -> RunReports:
    return RunReports(reconciliation=ReconciliationReport.from_json({"tables": [], "landing": landing}))


def test_the_page_of_a_real_run_from_the_reports_it_wrote():
    """The demo's re-run (tests/resources/reports/README.md): a mismatch, a pending count with its lag,
    three quarantine reasons, every suite held."""
    def read(kind, run="demo-rerun"):
        return kind.from_json(json.loads((REPO / "tests/resources/reports" / run / kind.FILE).read_text()))

    reports = RunReports(decode=read(DecodeReport, "demo-first"), fold=read(FoldReport),
                         validation=read(ValidationReport, "demo-first"), reconciliation=read(ReconciliationReport))
    page = render_report("demo", "20261101T000000Z_20261103T000000Z", reports, {})
    assert "Messages: landed <b>2991</b>, decoded <b>2674</b>, quarantined <b>3</b>, ignored <b>314</b>" in page
    assert page.count('class="badge" style="background:#c62828">mismatch') == 2  # the table, its checkpoint
    assert "<td>293</td><td>292</td><td>-1</td>" in page  # source, lake, lake - source
    assert "135596 s (overdue)" in page and "Every expectation held." in page
    assert "unknown operation type &#x27;XX&#x27;" in page
