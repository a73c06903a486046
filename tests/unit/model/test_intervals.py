"""Intervals and run ids (jobs.model.intervals): one parse, one check, one name, for the CLI, land and the DAG."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobs.model.intervals import IntervalError, checked, interval_name, iso, parse_interval_name, run_id_for, utc

DAY1, DAY2 = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC)


@pytest.mark.parametrize("text", ["2026-11-01T00:00:00Z", "2026-11-01T00:00:00", "2026-11-01T01:00:00+01:00",
                                  "2026-11-01", " 2026-11-01T00:00:00z "])
def test_every_spelling_of_an_instant_is_the_same_utc_time(text):
    assert utc(text) == DAY1 and utc(text).tzinfo is UTC


def test_an_aware_datetime_of_another_zone_is_moved_to_utc():
    berlin = datetime(2026, 11, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    assert utc(berlin) == DAY1 and type(utc(berlin)) is datetime


@pytest.mark.parametrize(("start", "end", "message"), [
    ("2026-11-02", "2026-11-01", "not before its end"),
    ("2026-11-01", "2026-11-01", "not before its end"),
    ("2026-11-01T00:00:00.5Z", "2026-11-02", "whole seconds"),
    ("yesterday", "2026-11-02", "start 'yesterday' is not an ISO-8601 time"),
])
def test_an_interval_that_cannot_name_a_folder_is_refused(start, end, message):
    with pytest.raises(IntervalError, match=message):
        checked(start, end)


def test_names_and_run_ids_round_trip():
    assert interval_name(DAY1) == "20261101T000000Z" and parse_interval_name("20261101T000000Z") == DAY1
    assert run_id_for(*checked(DAY1, DAY2)) == "20261101T000000Z_20261102T000000Z"
    assert iso(DAY1) == "2026-11-01T00:00:00Z"
