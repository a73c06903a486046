"""The landing's evidence of reach (jobs.reconcile.landed_reach): when a run's landing shows it consumed every
partition through its interval's end, from manifests as the landings write them."""
from __future__ import annotations

import json

import pytest

from jobs.lake.layout import Lake
from jobs.reconcile.checkpoints import parse_time
from jobs.reconcile.landed_reach import landing_reach, run_landing_reach

START, END = "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"
DELAY_S = 900


def kafka(topic: str, *partitions: dict, kind: str = "kafka") -> dict:
    return {"topic": topic, "source": {"kind": kind}, "interval": {"start": START, "end": END},
            "partitions": [{"partition": i, **p} for i, p in enumerate(partitions)]}


BUSY = {"end_reason": "timestamp"}  # stopped at a message at or after the end
NEXT = {"end_reason": "next_interval"}  # stopped where the interval landed after it starts
QUIET_READ_AFTER = {"end_reason": "high_watermark", "high_watermark_read_at": "2026-11-02T00:05:00Z"}


def test_every_partition_through_the_end_reaches_the_end_minus_the_capture_delay():
    reach = landing_reach([kafka("a", BUSY, QUIET_READ_AFTER), kafka("b", NEXT)], DELAY_S)
    # every change committed before end - delay is in the lake: at or before one microsecond less
    assert reach.through == parse_time(END) - DELAY_S * 1_000_000 - 1 and reach.why_not is None
    assert reach.as_dict()["landed_through"] == "2026-11-01T23:44:59.999999Z"


@pytest.mark.parametrize("partition, why", [
    ({"end_reason": "high_watermark", "high_watermark_read_at": "2026-11-01T23:59:59Z"}, "before the interval's end"),
    ({"end_reason": "high_watermark"}, "at an unknown time"),  # a manifest of a landing that did not record it
    ({"end_reason": "end_of_files"}, "does not show"),  # an export read to the end of the files there were
    ({"records": 4, "start_offset": 0, "end_offset": 4}, "does not show"),  # a landing from files
])
def test_a_partition_not_shown_read_past_the_end_is_no_evidence(partition, why):
    reach = landing_reach([kafka("a", BUSY), kafka("b", BUSY, partition)], DELAY_S)
    assert reach.through is None and "b[1]" in reach.why_not and why in reach.why_not


def test_no_landing_is_no_evidence():
    assert "no landed interval" in landing_reach([], DELAY_S).why_not
    assert "no partition" in landing_reach([kafka("a")], DELAY_S).why_not


def test_the_runs_landing_is_read_through_its_decode_report(tmp_path):
    """What the run decoded (decode.json's ``raw``: folders, or a glob over them) is what its landing
    shows; an input without a manifest (a folder of dumps) makes the run no evidence."""
    lake = Lake.at(str(tmp_path / "lake"))
    folders = []
    for topic in ("a", "b"):
        rel = lake.raw_dir("p", topic, "20261101T000000Z", "20261102T000000Z")
        lake.write_json(f"{rel}/_manifest.json", kafka(topic, BUSY, QUIET_READ_AFTER))
        folders.append(lake.join(rel))
    report = f"{Lake.report_dir('p', 'r1')}/decode.json"
    lake.write_json(report, {"raw": [lake.join("raw/p/*/interval=20261101T000000Z_20261102T000000Z")]})
    assert run_landing_reach(lake, "p", "r1", DELAY_S).through == parse_time(END) - DELAY_S * 1_000_000 - 1

    (tmp_path / "dump").mkdir()
    lake.write_json(report, {"raw": [*folders, str(tmp_path / "dump")]})
    reach = run_landing_reach(lake, "p", "r1", DELAY_S)
    assert reach.through is None and "dump" in reach.why_not and "not a landed interval" in reach.why_not
    assert "no decode report" in run_landing_reach(lake, "p", "r2", DELAY_S).why_not
    json.dumps(reach.as_dict())  # written into reconciliation.json
