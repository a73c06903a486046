"""Reconcile: source counts from a real SQLite database and from JSON files, the comparison, the balance."""
from __future__ import annotations

import json
import os
import sqlite3
import time

import pytest

from jobs.lake.layout import Lake
from jobs.model.record import make_table_id
from jobs.model.reports import DecodeReport, ReconciliationReport
from jobs.reconcile.stage import (
    ReconcileOptions,
    SourceCountsError,
    balance_problems,
    reconcile_run,
    source_checkpoints,
)


def load_source_counts(spec: str, table_ids: list[str]) -> dict[str, int | None]:
    """The rows each table id gets from the source (None: no count), and the source-only tables."""
    state = {t: {"state_rows": 0, "snapshot_id": None} for t in table_ids}
    found, _how = source_checkpoints(spec, state, "r1", ReconcileOptions())
    counts: dict[str, int | None] = dict.fromkeys(table_ids)
    counts.update({c.table_id: c.rows for c in found})
    return counts


def reconcile_counts(state: dict[str, dict], counts: dict[str, int | None], tmp_path) -> list[dict]:
    """reconcile_run of counts true at one moment, in a fresh lake whose one run took each table to its
    state rows before that moment."""
    from jobs.reconcile.checkpoints import Checkpoint, format_time, time_moment

    lake = Lake.at(str(tmp_path / "lake"))
    write_run(lake, "p", "r1", {t: (0, inserts(t, 0, info["state_rows"])) for t, info in state.items()},
              reach_time=T0 + 3600 * US)
    moment = time_moment(format_time(T0 + 1800 * US))
    new = [Checkpoint(t, n, moment, "file", "r1", table_id=t) for t, n in counts.items() if n is not None]
    rows = reconcile_run(lake, "p", "r1", new, state, ReconcileOptions())
    return [{k: getattr(r, k) for k in ("table", "state_rows", "source_rows", "status", "snapshot_id", "in_state")}
            for r in rows]


# names a SQL statement built by string formatting would break on: a quote inside, a reserved word
WEIRD = 'weird "name"'
RESERVED = "order"


@pytest.fixture
def source_db(tmp_path):
    path = tmp_path / "source.db"
    con = sqlite3.connect(path)
    con.execute(f'CREATE TABLE "{WEIRD.replace(chr(34), chr(34) * 2)}" (id INTEGER PRIMARY KEY)')
    con.execute(f'CREATE TABLE "{RESERVED}" (id INTEGER PRIMARY KEY)')
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    con.executemany(f'INSERT INTO "{WEIRD.replace(chr(34), chr(34) * 2)}" VALUES (?)', [(i,) for i in range(3)])
    con.executemany(f'INSERT INTO "{RESERVED}" VALUES (?)', [(i,) for i in range(5)])
    con.executemany("INSERT INTO customers VALUES (?)", [(i,) for i in range(7)])
    con.commit()
    con.close()
    return path


def test_sql_counts_quote_awkward_names_and_map_safe_table_ids(source_db):
    weird_id = make_table_id("shop", None, WEIRD)  # shop._.weird__name__<hash>  (made safe for paths)
    order_id = make_table_id("shop", None, RESERVED)
    # SQLite has no schemas in the CDC sense: the middle part is ignored there
    customers_id = make_table_id("shop", "public", "customers")
    missing_id = make_table_id("shop", None, "gone")

    counts = load_source_counts(f"sqlite:///{source_db}", [weird_id, order_id, customers_id, missing_id])

    assert counts == {weird_id: 3, order_id: 5, customers_id: 7, missing_id: None}


def test_sql_counts_hostile_table_id_is_unknown_not_injected(source_db):
    hostile = 'shop._.x"; DROP TABLE customers; --'
    counts = load_source_counts(f"sqlite:///{source_db}", [hostile, "shop._.customers"])
    assert counts == {hostile: None, "shop._.customers": 7}


def test_sql_counts_missing_sqlite_file_is_an_error_not_an_empty_database(tmp_path):
    missing = tmp_path / "typo.db"
    with pytest.raises(SourceCountsError, match="no such SQLite database"):
        load_source_counts(f"sqlite:///{missing}", ["a._.b"])
    assert not missing.exists()


@pytest.mark.parametrize(
    "url",
    [
        "nosuchdialect://user:s3cret-pw@127.0.0.1:9/db",  # unknown dialect
        "postgresql+psycopg2://user:s3cret-pw@127.0.0.1:9/db",  # unreachable, or driver not installed
    ],
)
def test_sql_counts_errors_are_one_line_and_hide_the_password(url):
    with pytest.raises(SourceCountsError) as err:
        load_source_counts(url, ["a._.b"])
    message = str(err.value)
    assert "s3cret-pw" not in message
    assert "user:***@127.0.0.1:9/db" in message
    assert "\n" not in message


def _counts_file(tmp_path, counts: dict) -> str:
    path = tmp_path / "counts.json"
    path.write_text(json.dumps(counts))
    return str(path)


def test_json_counts_match_by_full_id_and_by_last_part_and_report_source_only_tables(tmp_path):
    spec = _counts_file(
        tmp_path,
        {"shop.public.orders": 10, "customers": 4, "nulls": None, "only_at_source": 2, "shop.public.empty": 0},
    )
    ids = ["shop.public.orders", "shop.public.customers", "shop.public.nulls", "shop.public.absent"]

    counts = load_source_counts(spec, ids)

    assert counts == {
        "shop.public.orders": 10,
        "shop.public.customers": 4,
        "shop.public.nulls": None,
        "shop.public.absent": None,  # not listed: unknown
        "only_at_source": 2,  # listed, no state table: must be reported
        "shop.public.empty": 0,
    }



def test_json_counts_full_id_wins_and_ambiguous_last_part_is_unknown(tmp_path):
    spec = _counts_file(tmp_path, {"orders": 1, "shop.a.orders": 2})
    counts = load_source_counts(spec, ["shop.a.orders", "shop.b.orders", "shop.c.orders"])
    # shop.a.orders is named in full; "orders" alone is then one candidate for b and one for c
    assert counts["shop.a.orders"] == 2
    assert counts["shop.b.orders"] == 1 and counts["shop.c.orders"] == 1

    spec = _counts_file(tmp_path, {"orders": 1})
    # with no full id, "orders" still names both tables; each gets the count it names
    assert load_source_counts(spec, ["shop.b.orders", "shop.c.orders"]) == {"shop.b.orders": 1, "shop.c.orders": 1}

    spec = _counts_file(tmp_path, {"b.orders": 5, "orders": 1})
    counts = load_source_counts(spec, ["shop.b.orders"])
    assert counts == {"shop.b.orders": 5}  # schema.table is more specific than table


def test_json_counts_match_names_in_another_case_when_none_matches_exactly(tmp_path):
    """As the SQL source is matched: a file listing ``Customers`` or ``ORDERS`` names the lake's
    ``customers`` and ``orders`` (and they are not reported as source-only tables); the exact spelling
    wins where both are listed."""
    spec = _counts_file(tmp_path, {"shop.public.Customers": 2, "ORDERS": 1, "items": 3, "ITEMS": 9})
    counts = load_source_counts(spec, ["shop.public.customers", "shop.public.orders", "shop.public.items"])
    assert counts == {"shop.public.customers": 2, "shop.public.orders": 1, "shop.public.items": 3}


def test_json_counts_key_made_safe_like_table_ids(tmp_path):
    spec = _counts_file(tmp_path, {WEIRD: 3})
    assert load_source_counts(spec, [make_table_id("shop", None, WEIRD)]) == {make_table_id("shop", None, WEIRD): 3}


@pytest.mark.parametrize("bad", [{"t": "12"}, {"t": -1}, {"t": True}, {"t": 1.5}, [1, 2], {"t": {"rows": 1, "as_of": "x"}}])
def test_json_counts_reject_non_counts(tmp_path, bad):
    with pytest.raises(SourceCountsError):
        load_source_counts(_counts_file(tmp_path, bad), ["a._.t"])


def test_json_counts_unreadable_file(tmp_path):
    path = tmp_path / "counts.json"
    path.write_text("{not json")
    with pytest.raises(SourceCountsError, match="cannot read"):
        load_source_counts(str(path), ["a._.t"])


def test_reconcile_counts_statuses_and_order(tmp_path):
    state = {
        "s._.b": {"state_rows": 5, "snapshot_id": 11},
        "s._.a": {"state_rows": 3, "snapshot_id": 10, "iceberg_table": "p.s___a"},
        "s._.c": {"state_rows": 0, "snapshot_id": None},
        "s._.d": {"state_rows": 2, "snapshot_id": 12},
    }
    source = {"s._.a": 3, "s._.b": 6, "s._.c": None, "source_only": 4, "source_only_empty": 0}

    rows = reconcile_counts(state, source, tmp_path)

    assert [r["table"] for r in rows] == sorted(r["table"] for r in rows)
    by_table = {r["table"]: r for r in rows}
    assert by_table["s._.a"] == {
        "table": "s._.a", "state_rows": 3, "source_rows": 3, "status": "match", "snapshot_id": 10, "in_state": True,
    }
    assert by_table["s._.b"]["status"] == "mismatch"
    assert by_table["s._.c"]["status"] == "unknown"
    assert by_table["s._.d"]["status"] == "unknown" and by_table["s._.d"]["source_rows"] is None
    assert by_table["source_only"] == {
        "table": "source_only", "state_rows": 0, "source_rows": 4, "status": "mismatch", "snapshot_id": None,
        "in_state": False,
    }
    # the lake never published it and the source table is empty: they agree
    assert by_table["source_only_empty"]["status"] == "match"


def test_reconcile_end_to_end_from_sqlite(source_db, tmp_path):
    state = {"shop._.order": {"state_rows": 5, "snapshot_id": 1}, "shop._.customers": {"state_rows": 6, "snapshot_id": 2}}
    rows = reconcile_counts(state, load_source_counts(f"sqlite:///{source_db}", sorted(state)), tmp_path)
    assert [(r["table"], r["status"]) for r in rows] == [("shop._.customers", "mismatch"), ("shop._.order", "match")]


def _counts(landed, decoded, quarantined, ignored):
    return {"landed": landed, "decoded": decoded, "quarantined": quarantined, "ignored": ignored, "records": decoded}


def test_balance_problems_balanced_report_is_clean():
    report = {"total": _counts(10, 7, 2, 1), "tables": {"a": _counts(6, 5, 1, 0), "b": _counts(4, 2, 1, 1)}}
    assert balance_problems(DecodeReport.from_json(report)) == []
    assert balance_problems(None) == []  # no decode report


def test_balance_problems_names_total_table_and_sum():
    report = {"total": _counts(10, 7, 2, 0), "tables": {"a": _counts(6, 5, 1, 0), "b": _counts(5, 2, 1, 1)}}
    problems = balance_problems(DecodeReport.from_json(report))
    assert any(p.startswith("in total: landed 10 != decoded 7") for p in problems)
    assert any(p.startswith("for table b: landed 5") for p in problems)
    assert not any("table a" in p for p in problems)
    assert any("add up to 11, total says 10" in p for p in problems)


def test_balance_problems_missing_counts():
    """A count the report lacks (an older or broken decode.json) is a problem, not a zero."""
    problems = balance_problems(DecodeReport.from_json({"total": {"landed": 1, "decoded": 1}, "tables": {}}))
    assert problems == ["counts in total lack quarantined, ignored"]
    no_total = balance_problems(DecodeReport.from_json({"tables": {"a": _counts(1, 1, 0, 0), "b": "?"}}))
    assert no_total == ["counts in total are missing", "counts for table b are missing"]


def test_sql_counts_find_a_made_safe_name_spelt_in_another_case(tmp_path):
    # the messages spell the name as the tool saw it; a case-insensitive source lists it its own way
    path = tmp_path / "ci.db"
    con = sqlite3.connect(path)
    con.execute('CREATE TABLE "Order Details" (id INTEGER PRIMARY KEY)')
    con.executemany('INSERT INTO "Order Details" VALUES (?)', [(i,) for i in range(4)])
    con.commit()
    con.close()
    spelt_otherwise = make_table_id("shop", None, "ORDER DETAILS")
    assert load_source_counts(f"sqlite:///{path}", [spelt_otherwise]) == {spelt_otherwise: 4}


def test_counts_find_names_made_safe_or_cut_in_either_source(tmp_path):
    """A name that needed replacing, spelt in another case by a counts file, and a name so long that its
    table id was cut, in a counts file and in a SQL source, are all found."""
    long_name = "T" * 240
    ids = [make_table_id("shop", None, "ORDER DETAILS"), make_table_id("shop", None, long_name)]
    assert ids[1] != f"shop._.{long_name}", "an id too long for a folder name is cut"
    spec = _counts_file(tmp_path, {"order details": 5, long_name: 7})
    assert load_source_counts(spec, ids) == {ids[0]: 5, ids[1]: 7}

    path = tmp_path / "long.db"
    con = sqlite3.connect(path)
    con.execute(f'CREATE TABLE "{long_name}" (id INTEGER PRIMARY KEY)')
    con.executemany(f'INSERT INTO "{long_name}" VALUES (?)', [(i,) for i in range(3)])
    con.commit()
    con.close()
    assert load_source_counts(f"sqlite:///{path}", [ids[1]]) == {ids[1]: 3}


def test_a_run_without_a_count_of_a_table_shows_the_last_verdict_beside_unknown(tmp_path):
    from jobs.lake.ledger import CHECKPOINTS
    from jobs.reconcile import checkpoints as cps
    from jobs.reconcile.checkpoints import Checkpoint, time_moment

    lake = Lake.at(str(tmp_path / "lake"))
    judged = Checkpoint("t", 3, time_moment("2026-11-01T23:00:00Z"), "file", "r1", table_id="t", judged_in="r1",
                        verdict={"table": "t", "verdict": "match", "moment": "2026-11-01T23:00:00Z", "source_rows": 3})
    lake.write_text(f"{lake.counts_dir('p')}/{CHECKPOINTS}", cps.dumps([judged]))
    state = {"t": {"state_rows": 3, "snapshot_id": 1}, "u": {"state_rows": 1, "snapshot_id": 2}}
    # a quiet day: no new count; its table is unknown, and shows what the last count got (no new alert)
    [t, u] = reconcile_run(lake, "p", "r2", [], state, ReconcileOptions())
    assert t.status == "unknown" and t.checkpoints == () and t.source_rows is None
    assert t.previous.to_json() == {**judged.verdict, "judged_run": "r1"}
    assert u.status == "unknown" and u.previous is None  # never counted
    # the run that judged it shows it as its own verdict, not as a previous one
    [again, _] = reconcile_run(lake, "p", "r1", [], state, ReconcileOptions())
    assert again.previous is None


@pytest.mark.parametrize("command, content, says", [
    ("run", '{"orders": {"rows": -1, "as_of": "2026-11-01T00:00:00Z"}}', "'orders': \"rows\" must be a row count"),
    ("reconcile", '{"orders": [3, {"rows": 1, "as_of": "noon"}]}', "'orders'[1]: 'noon' is not an ISO-8601 time"),
    ("run", '{"orders": {"rows": 3, "position": "mysql-bin.000003"}}', "'orders': 'mysql-bin.000003' is not"),
    ("run", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("reconcile", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("run", '{"orders": 3', "cannot read a JSON object"),
])
def test_a_bad_counts_file_is_refused_before_any_work_in_one_line(tmp_path, capsys, content, says, command):
    """Read only at reconcile, a bad counts file failed after the run had published (and one nested
    100,000 deep with a RecursionError naming no file): the command's argument check reads it first and
    exits 2 with one line naming the file and what is wrong. (A position is placed among the format's
    positions where the format is known: ``run --format`` other than auto.)"""
    from jobs import cli

    counts = tmp_path / "counts.json"
    counts.write_text(content)
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "m.jsonl").write_text("{}\n")
    argv = [command, "--lake", str(tmp_path / "lake"), "--pipeline", "p", "--run-id", "r1",
            "--source-counts", str(counts)]
    if command == "run":
        argv += ["--format", "maxwell", "--raw", str(tmp_path / "raw")]

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(counts) in err and says in err, err
    assert not (tmp_path / "lake").exists()  # nothing was done


def test_the_early_check_places_positions_only_where_the_format_is_known(tmp_path):
    from jobs.reconcile.stage import check_source_counts

    spec = _counts_file(tmp_path, {"orders": {"rows": 3, "position": "0/1A97EC8"}})
    check_source_counts(spec, "debezium")
    check_source_counts(spec, None)  # --format auto: the format is decided at decode
    with pytest.raises(SourceCountsError, match="'orders': format 'canal' has no source position"):
        check_source_counts(spec, "canal")
    check_source_counts("postgresql://reader:pw@127.0.0.1:9/shop", None)  # parsed, not connected
    with pytest.raises(SourceCountsError, match="no such SQLite database file"):
        check_source_counts(f"sqlite:///{tmp_path / 'typo.db'}", None)


# ---- the lake's counts through time, written as merge writes them (ledger.json and Parquet steps) ----
US = 1_000_000
T0 = 1_793_491_200 * US  # 2026-11-01T00:00:00Z


def write_run(lake: Lake, pipeline: str, run_id: str, tables: dict[str, tuple[int, list[tuple]]],
              reach_time: int | None = None, reach_position: str | None = None) -> None:
    """A run in the ledger: per table its rows before and its steps (key, position, time, delta)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jobs.lake import ledger as count_ledger

    entries = {}
    for table, (before, steps) in tables.items():
        rel = count_ledger.steps_dir(pipeline, run_id, table)
        lake.make_dirs(rel)
        columns = list(zip(*steps)) if steps else [[], [], [], []]
        pq.write_table(pa.table({"key": pa.array(columns[0], pa.string()), "position": pa.array(columns[1], pa.string()),
                                 "event_time_us": pa.array(columns[2], pa.int64()),
                                 "delta": pa.array(columns[3], pa.int64())}), lake.join(f"{rel}/part-0.parquet"))
        entries[table] = {"rows_before": before, "rows_after": before + sum(s[3] for s in steps), "steps": rel}
    count_ledger.record_run(lake, pipeline, {"run_id": run_id, "reach_time": reach_time,
                                             "reach_position": reach_position, "tables": entries})


def inserts(table: str, first_second: int, n: int) -> list[tuple]:
    return [(f'{{"id":"{table}{i}"}}', None, T0 + (first_second + i) * US, 1) for i in range(n)]


def test_a_count_taken_at_the_end_of_the_data_is_behind_for_the_first_interval_not_a_mismatch(tmp_path):
    """The issue's case: counts without a moment, taken when all the data was in (the file written then),
    reconciled by the first of two daily intervals emailed three false mismatches."""
    lake, day = Lake.at(str(tmp_path / "lake")), 86_400
    tables = ("customers", "orders", "lines")
    counts = _counts_file(tmp_path, {t: 10 for t in tables})
    os.utime(counts, (T0 / US + 2 * day, T0 / US + 2 * day))  # written at the end of the second day

    write_run(lake, "p", "day1", {t: (0, inserts(t, 0, 4)) for t in tables}, reach_time=T0 + 3 * US)
    state = {t: {"state_rows": 4, "snapshot_id": 1} for t in tables}
    new, _how = source_checkpoints(counts, state, "day1", ReconcileOptions())
    first = reconcile_run(lake, "p", "day1", new, state, ReconcileOptions())
    assert [r.status for r in first] == ["behind"] * 3
    [pending] = first[0].pending
    assert pending.moment_assumed == "the counts file's modification time"
    assert pending.moment == "2026-11-03T00:00:00Z"

    write_run(lake, "p", "day2", {t: (4, inserts(t, day, 6)) for t in tables}, reach_time=T0 + (day + 5) * US)
    state = {t: {"state_rows": 10, "snapshot_id": 2} for t in tables}
    new, _how = source_checkpoints(counts, state, "day2", ReconcileOptions())  # the same file: the same count
    assert reconcile_run(lake, "p", "day2", new, state, ReconcileOptions())[0].status == "behind"
    # a third run whose changes pass the moment judges it: every table holds its 10 rows there
    write_run(lake, "p", "day3", {t: (10, inserts(t, 2 * day + 1, 1)) for t in tables},
              reach_time=T0 + (2 * day + 1) * US)
    state = {t: {"state_rows": 11, "snapshot_id": 3} for t in tables}
    third = reconcile_run(lake, "p", "day3", [], state, ReconcileOptions())
    assert [(r.status, r.source_rows) for r in third] == [("match", 10)] * 3
    assert third[0].checkpoints[0].lake_rows == 10 and third[0].checkpoints[0].taken_in == "day1"


def test_a_sql_source_that_names_no_moment_is_judged_as_of_when_it_was_queried(source_db):
    from jobs.reconcile.checkpoints import Tolerance, parse_tolerance

    state = {"shop._.customers": {"state_rows": 7, "snapshot_id": 1}}
    before = time.time_ns() // 1000
    [cp], how = source_checkpoints(f"sqlite:///{source_db}", state, "r1",
                                   ReconcileOptions(tolerance=parse_tolerance("1")))
    after = time.time_ns() // 1000
    assert cp.moment.assumed == "the time the source was queried" and "queried" in how
    assert before < cp.moment.low <= cp.moment.high <= after + 1  # a bracket of this machine's clock
    assert cp.tolerance == Tolerance(1, 0.0)


def _landed(lake: Lake, topics: list[str], start: str, end: str, partition: dict) -> list[str]:
    """Landed intervals of ``topics`` as the Kafka landing commits them (a manifest), two partitions
    each: one stopped at a later message, the other as ``partition`` says."""
    from jobs.model.intervals import interval_name, utc

    folders = []
    for topic in topics:
        rel = lake.raw_dir("p", topic, interval_name(utc(start)), interval_name(utc(end)))
        lake.write_json(f"{rel}/_manifest.json", {
            "topic": topic, "source": {"kind": "kafka"}, "interval": {"start": start, "end": end},
            "partitions": [{"partition": 0, "end_reason": "timestamp"}, {"partition": 1, **partition}]})
        folders.append(lake.join(rel))
    return folders


def test_a_quiet_source_is_judged_through_the_landing_with_the_capture_delay(tmp_path):
    """The reconcile stage: a count as of an hour after the source's last change stayed behind forever
    (only applied changes move the lake's reach); the run whose Kafka landing read every partition
    past its interval's end reaches that end minus the capture delay, and judges it."""
    from jobs.stages import RunContext, run_reconcile

    lake, day = Lake.at(str(tmp_path / "lake")), 86_400
    ctx = RunContext(lake, "p", "20261102T000000Z_20261103T000000Z")
    write_run(lake, "p", ctx.run_id, {"orders": (0, inserts("orders", day, 5))}, reach_time=T0 + (day + 4) * US)
    counts = _counts_file(tmp_path, {"orders": {"rows": 5, "as_of": "2026-11-02T01:00:00Z"}})
    read_after_end = {"end_reason": "high_watermark", "high_watermark_read_at": "2026-11-03T00:02:00Z"}
    ctx.write_report(DecodeReport.of(raw=_landed(lake, ["orders"], "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z",
                                                 read_after_end)))

    [row] = run_reconcile(ctx, counts, ReconcileOptions(capture_delay_s=900))

    assert (row.status, row.checkpoints[0].lake_rows) == ("match", 5)
    report = ctx.read_report(ReconciliationReport)
    assert report.landing.to_json() == {"landed_through": "2026-11-02T23:44:59.999999Z", "interval_end":
                                        "2026-11-03T00:00:00Z", "capture_delay_s": 900, "why_not": None}

    # a landing that stopped at a high watermark read before the end is no evidence: behind, and why
    read_early = {"end_reason": "high_watermark", "high_watermark_read_at": "2026-11-02T23:00:00Z"}
    ctx.write_report(DecodeReport.of(raw=_landed(lake, ["orders"], "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z",
                                                 read_early)))
    [row] = run_reconcile(ctx, counts, ReconcileOptions(capture_delay_s=900))
    assert row.status == "behind" and row.pending[0].lag.landed_through is None
    assert "before the interval's end" in ctx.read_report(ReconciliationReport).landing.why_not


def test_the_capture_delay_is_a_pipeline_setting_and_a_flag_with_a_default(tmp_path):
    from datetime import UTC, datetime

    from jobs import cli
    from jobs.config import PipelineConfigError
    from jobs.settings import RunSettings
    from tests.support.pipelines import pipeline

    def options(cfg):
        return RunSettings.from_pipeline(cfg, (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC))
                                         ).reconcile.options("debezium")

    def flags(argv):
        return RunSettings.from_args(cli.build_parser().parse_args(argv)).reconcile.options(None)

    cfg, _ = pipeline(tmp_path, reconcile={"capture_delay": "2m"})
    assert options(cfg).capture_delay_s == 120
    cfg, _ = pipeline(tmp_path / "default")
    assert options(cfg).capture_delay_s == ReconcileOptions().capture_delay_s == 900
    with pytest.raises(PipelineConfigError, match="reconcile.capture_delay: .*'soon' is not a duration"):
        pipeline(tmp_path / "bad", reconcile={"capture_delay": "soon"})

    argv = ["reconcile", "--lake", "/lake", "--pipeline", "p", "--run-id", "r"]
    assert flags([*argv, "--capture-delay", "90s"]).capture_delay_s == 90
    assert flags(argv).capture_delay_s == 900


def test_a_checkpoint_judged_by_an_earlier_run_is_kept_without_its_keys_and_row_hashes(tmp_path):
    from jobs.lake.ledger import CHECKPOINTS
    from jobs.reconcile import checkpoints as cps
    from jobs.reconcile.checkpoints import Checkpoint, time_moment

    lake = Lake.at(str(tmp_path / "lake"))
    rel = f"{lake.counts_dir('p')}/{CHECKPOINTS}"
    judged = Checkpoint("t", 2, time_moment("2026-11-01T23:00:00Z"), "db", "r1", table_id="t", judged_in="r1",
                        verdict={"table": "t", "verdict": "match", "source_rows": 2},
                        keys=('{"id":"1"}', '{"id":"2"}'), fingerprints=("0" * 16,) * 64,
                        row_hashes={'{"id":"1"}': "00000000000000aa", '{"id":"2"}': "00000000000000bb"})
    lake.write_text(rel, cps.dumps([judged]))
    reconcile_run(lake, "p", "r2", [], {"t": {"state_rows": 2, "snapshot_id": 1}}, ReconcileOptions())
    [kept] = cps.loads(lake.read_text(rel))
    assert kept.verdict == judged.verdict and kept.fingerprints == judged.fingerprints
    assert (kept.keys, kept.row_hashes, kept.row_hash_buckets) == (None, None, None)
    assert "00000000000000aa" not in lake.read_text(rel)
