"""report.html's text, without a browser (tests/integration/test_report_page.py renders it in Chromium)."""
from __future__ import annotations

import re

from jobs.report_page import render_report

EMPTY = ({"tables": []}, {"suites": []}, {}, {})


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
