"""What a landing saw of its source outside the interval, and the warning of an interval that landed
nothing while the source holds messages outside it (jobs.land.outside), as report.html shows it."""
from __future__ import annotations

import json
from pathlib import Path

from jobs.alert.page import render_report
from jobs.land.outside import combine, landing_summary, outside, quiet_interval_warning
from jobs.model.reports import RunReports

START, END = "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"


def test_outside_of_several_topics_adds_their_counts_and_keeps_the_nearest_times():
    a = outside(before=2, after=0, last_before="2026-10-31T22:00:00Z", earliest="2026-10-30T00:00:00Z")
    b = outside(before=1, after=None, first_after="2026-11-02T00:00:00.5Z", last_before="2026-10-31T22:00:00.25Z")
    assert combine([a, b]) == {"before": 3, "after": None, "last_before": "2026-10-31T22:00:00.250000Z",
                               "first_after": "2026-11-02T00:00:00.500000Z", "earliest": "2026-10-30T00:00:00Z",
                               "latest": None}
    assert combine([None, a]) is None  # a topic that cannot tell: no claim about the whole interval
    assert combine([]) is None


def test_the_warning_says_what_is_known_and_nothing_more():
    assert quiet_interval_warning(START, END, 0, outside(before=0, after=0)) is None  # an empty source
    assert quiet_interval_warning(START, END, 4, outside(before=9, after=9)) is None  # it landed something
    assert quiet_interval_warning(START, END, 0, None) is None
    unknown_count = quiet_interval_warning(START, END, 0, outside(before=0, after=None,
                                                                  first_after="2026-11-05T10:00:00Z"))
    assert unknown_count.startswith(f"0 messages in [{START}, {END}) but the source holds messages after it "
                                    "(the first at 2026-11-05T10:00:00Z): is this the interval you meant?")


def _landed(folder: Path, topic: str, records: int, before: int, after: int) -> str:
    rel = folder / topic / "interval=20261101T000000Z_20261102T000000Z"
    rel.mkdir(parents=True)
    (rel / "_manifest.json").write_text(json.dumps({
        "topic": topic, "interval": {"start": START, "end": END}, "totals": {"records": records},
        "outside": outside(before=before, after=after, first_after="2026-11-02T03:00:00Z" if after else None)}))
    return str(rel)


def test_report_page_shows_an_interval_that_landed_nothing_while_the_source_holds_messages(tmp_path):
    raw = [_landed(tmp_path, "shop.orders", 0, 0, 7), _landed(tmp_path, "shop.customers", 0, 0, 2)]
    landing = landing_summary(raw)
    assert landing == {"start": START, "end": END, "records": 0,
                       "outside": outside(before=0, after=9, first_after="2026-11-02T03:00:00Z")}
    assert landing_summary(f"{tmp_path}/*/interval=20261101T000000Z_20261102T000000Z") == landing  # a --raw glob
    page = render_report("demo", "20261101T000000Z_20261102T000000Z", RunReports(), {}, landing)
    warning = quiet_interval_warning(START, END, 0, landing["outside"])
    assert warning in page and 'class="quiet"' in page
    busy = render_report("demo", "r", RunReports(), {}, {**landing, "records": 3})
    assert 'class="quiet"' not in busy
    assert landing_summary([str(tmp_path / "nowhere")]) is None  # folders without a manifest: nothing to say
