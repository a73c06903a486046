"""report.html in a real browser: headless Chromium loads the page, its DOM holds every hostile value
as text (no element a message could inject), and a screenshot is kept as a test artifact
(``test-artifacts/report.png``, or ``$CDC_TEST_ARTIFACTS``)."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from jobs.alert.page import quarantine_examples, render_report
from jobs.model.reports import DecodeReport, ReconciliationReport, RunReports, ValidationReport
from tests.support.paths import REPO

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
ARTIFACTS = Path(os.environ.get("CDC_TEST_ARTIFACTS", REPO / "test-artifacts"))


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("headless Chromium is not installed (apt-get install chromium; make setup-dev does)")
    return found


def _browse(page: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="chromium-")
    try:
        return subprocess.run(
            [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", *args, page.as_uri()],
            capture_output=True, text=True, timeout=120, check=True)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _reports() -> tuple[RunReports, dict]:
    reconciliation = {"source": "postgresql postgresql+psycopg2://cdc:***@db/shop", "tables": [
        {"table": "shop.public.orders", "state_rows": 1200, "source_rows": 1200, "status": "match",
         "checkpoints": [{"verdict": "match", "moment": "[0/16B3748, 0/16B37A0]", "source_rows": 1200,
                          "lake_rows": [1199, 1200], "table": "shop.public.orders"}], "pending": []},
        {"table": f"shop.public.{HOSTILE}", "state_rows": 41, "source_rows": 40, "status": "mismatch",
         "checkpoints": [{"verdict": "mismatch", "moment": "mysql-bin.000003:1234", "source_rows": 40,
                          "lake_rows": 41, "difference": 1, "table": HOSTILE,
                          "key_diff": {"missing_in_lake": [], "extra_in_lake": ['{"id":"3"}', HOSTILE]}}],
         "pending": []},
        {"table": "shop.public.customers", "state_rows": 300, "source_rows": 320, "status": "behind",
         "checkpoints": [], "pending": [{"verdict": "behind", "moment": "2026-11-03T00:00:00Z", "source_rows": 320,
                                         "lag": {"seconds": 7200, "overdue": True}}]},
    ]}
    validation = {"suites": [{"suite": "state", "table": HOSTILE, "results": [
        {"success": False, "expectation": "expect_column_values_to_not_be_null", "kwargs": {"column": HOSTILE},
         "observed": {"unexpected_count": 2}}]}]}
    decode = {"total": {"landed": 10, "decoded": 7, "quarantined": 3, "ignored": 0},
              "quarantine_reasons": {"malformed JSON": 2, HOSTILE: 1}}

    class Batches:
        def to_batches(self, columns):
            import pyarrow as pa

            rows = [{"reason": "malformed JSON", "topic": "t", "partition": 0, "offset": i,
                     "value": HOSTILE.encode() + b"\xff"} for i in range(5)]
            rows.append({"reason": HOSTILE, "topic": HOSTILE, "partition": 1, "offset": 9, "value": None})
            yield pa.RecordBatch.from_pylist(rows)

    reports = RunReports(decode=DecodeReport.from_json(decode), validation=ValidationReport.from_json(validation),
                         reconciliation=ReconciliationReport.from_json(reconciliation))
    return reports, quarantine_examples(Batches())


def test_report_page_renders_in_chromium_with_every_value_escaped(tmp_path):
    reports, examples = _reports()
    assert [len(v) for v in examples.values()] == [3, 1]  # a few examples per reason, not all
    page = tmp_path / "report.html"
    page.write_text(render_report(f"shop{HOSTILE}", "run-1", reports, examples), encoding="utf-8")

    dom = _browse(page, "--dump-dom").stdout
    # the browser built the page: the chart, the checkpoint table, the hostile text shown as text
    assert "<svg" in dom and "mysql-bin.000003:1234" in dom and "overdue" in dom
    assert "&lt;script&gt;alert" in dom and "<script" not in dom.lower()
    assert "<img" not in dom.lower() and "onerror=" not in dom.replace("onerror=alert(1)&gt;", "")

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    _browse(page, f"--screenshot={shot}", "--window-size=1200,1400", "--hide-scrollbars")
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", header[16:24]) == (1200, 1400)
