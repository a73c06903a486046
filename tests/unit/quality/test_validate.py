"""Great Expectations suites on Spark DataFrames: failures are found, counted and reported JSON-safe."""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark import StorageLevel

from jobs.model.record import OPS, PHASES
from jobs.quality import validate
from jobs.quality.validate import (
    build_data_docs,
    check_changes,
    expand_state_suite,
    load_suite,
    narrow_projection,
    profile_changes,
    render_data_docs,
    suite_file,
    validate_state,
    validation_report,
)

CHANGES = "table_id string, op string, phase string, event_id string, format string"


def _by_column(result: dict) -> dict:
    """Results keyed by (expectation type, column or tuple of columns)."""
    out = {}
    for r in result["results"]:
        kwargs = r["kwargs"]
        column = kwargs["column"] if "column" in kwargs else tuple(kwargs["column_list"])
        out[(r["expectation"], column)] = r
    return out


def _strict_json(obj: dict) -> dict:
    """json.dumps with no fallback for odd types and no NaN, then back: what a report writer gets."""
    return json.loads(json.dumps(obj, allow_nan=False))


# ---- suites (no Spark) -----------------------------------------------------------------------
def test_suites_are_gx1_json_and_follow_the_canonical_vocabulary():
    changes = load_suite("changes")
    assert all(set(e) >= {"type", "kwargs"} and "expectation_type" not in e for e in changes["expectations"])
    sets = {e["kwargs"]["column"]: e["kwargs"]["value_set"] for e in changes["expectations"]
            if e["type"] == "expect_column_values_to_be_in_set"}
    assert sets == {"op": list(OPS), "phase": list(PHASES)}
    not_null = {e["kwargs"]["column"] for e in changes["expectations"]
                if e["type"] == "expect_column_values_to_not_be_null"}
    assert not_null == {"table_id", "format"}  # the event id is computed by the decode, never null


def test_state_template_expands_per_table():
    suite = load_suite("state")
    compound = expand_state_suite(suite, ["a", "b"])
    assert [(e["type"], e["kwargs"].get("column", e["kwargs"].get("column_list"))) for e in compound] == [
        ("expect_column_values_to_not_be_null", "a"),
        ("expect_column_values_to_not_be_null", "b"),
        ("expect_compound_columns_to_be_unique", ["a", "b"]),
    ]
    single = expand_state_suite(suite, ["id"])
    assert [(e["type"], e["kwargs"]) for e in single] == [
        ("expect_column_values_to_not_be_null", {"column": "id"}),
        ("expect_column_values_to_be_unique", {"column": "id"}),
    ]
    with pytest.raises(ValueError, match="key column"):
        expand_state_suite(suite, [])


def test_suites_come_from_the_package_unless_a_folder_is_named_when_they_are_read(tmp_path, monkeypatch):
    monkeypatch.delenv("CDC_EXPECTATIONS_DIR", raising=False)
    shipped = suite_file("state")
    assert Path(str(shipped)) == Path(validate.__file__).parent / "suites" / "state.json"
    assert load_suite("state") == json.loads(shipped.read_text(encoding="utf-8"))

    (tmp_path / "state.json").write_text(json.dumps({"name": "mine", "expectations": []}))
    monkeypatch.setenv("CDC_EXPECTATIONS_DIR", str(tmp_path))  # after import: read when a suite is loaded
    assert load_suite("state") == {"name": "mine", "expectations": []}
    with pytest.raises(FileNotFoundError):
        load_suite("changes")  # the named folder replaces the package's whole: no fallback per suite


# ---- change records: the suite from the decode's record profile ------------------------------------
def _by_gx(df) -> dict:
    """The change suite run by GX over the records themselves (what the profile stands in for)."""
    suite = load_suite("changes")
    return validate.run_suite(df, suite["name"], suite["expectations"], table=None)


def _checked(df) -> dict:
    return _strict_json(check_changes(profile_changes(df)))


def test_good_change_records_pass(spark):
    df = spark.createDataFrame([("a._.t", "INSERT", "CDC", "e1", "debezium"),
                                ("a._.t", "SNAPSHOT", "FULL_LOAD", "e2", "qlik"),
                                ("a._.u", "HEARTBEAT", "CDC", "e3", "canal")], CHANGES)
    result = _checked(df)
    assert result["success"] and result["suite"] == "change_records" and result["table"] is None
    assert len(result["results"]) == 4 and all(r["success"] for r in result["results"])
    assert {r["observed"]["unexpected_count"] for r in result["results"]} == {0}
    assert result["statistics"]["evaluated_expectations"] == 4


def test_unknown_op_and_null_table_id_fail_with_counts(spark):
    df = spark.createDataFrame([(None, "INSERT", "CDC", "e1", "x"),
                                (None, "DELETE", "CDC", "e2", "x"),
                                ("a._.t", "UPSERT", "CDC", "e3", "x"),
                                ("a._.t", "UPDATE", "CDC", "e4", "x"),
                                ("a._.t", "INSERT", "CDC", "e5", "x")], CHANGES)
    result = _checked(df)
    assert not result["success"]
    by_column = _by_column(result)
    failed = {key for key, r in by_column.items() if not r["success"]}
    assert failed == {("expect_column_values_to_not_be_null", "table_id"),
                      ("expect_column_values_to_be_in_set", "op")}
    null_table = by_column[("expect_column_values_to_not_be_null", "table_id")]["observed"]
    assert (null_table["element_count"], null_table["unexpected_count"], null_table["unexpected_percent"]) == (5, 2, 40.0)
    bad_op = by_column[("expect_column_values_to_be_in_set", "op")]["observed"]
    assert (bad_op["unexpected_count"], bad_op["unexpected_percent"]) == (1, 20.0)
    assert bad_op["partial_unexpected_list"] == ["UPSERT"]
    assert result["statistics"]["unsuccessful_expectations"] == 2
    assert validation_report([result]).success is False


def test_the_profile_gives_what_gx_finds_over_the_records_themselves(spark):
    """The oracle is GX: the change suite run by GX over the records counts what the profile says."""
    rows = [(None, "INSERT", "CDC", "e1", "x"), ("a._.t", None, "CDC", "e2", None),
            ("a._.t", "UPSERT", None, "e3", "x"), ("a._.t", "UPSERT", "LOAD", "e4", "x"),
            ("b._.t", "DELETE", "FULL_LOAD", "e5", "x"), ("b._.t", "MERGE", "CDC", "e6", None)]
    df = spark.createDataFrame(rows, CHANGES)
    by_gx = _by_column(_strict_json(_by_gx(df)))
    by_profile = _by_column(_checked(df))
    assert set(by_gx) == set(by_profile)
    figures = ("element_count", "missing_count", "unexpected_count", "unexpected_percent")
    for key, gx_result in by_gx.items():
        mine = by_profile[key]
        assert mine["success"] == gx_result["success"], key
        assert {f: mine["observed"].get(f) for f in figures if f in gx_result["observed"]} == \
            {f: gx_result["observed"][f] for f in figures if f in gx_result["observed"]}, key
        assert set(mine["observed"]["partial_unexpected_list"]) == set(gx_result["observed"]["partial_unexpected_list"])


def test_the_change_suite_refuses_an_expectation_the_profile_cannot_evaluate(tmp_path, monkeypatch):
    (tmp_path / "changes.json").write_text(json.dumps({"name": "change_records", "expectations": [
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "event_id"}}]}))
    monkeypatch.setenv("CDC_EXPECTATIONS_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="expect_column_values_to_be_unique cannot be evaluated from the decode"):
        check_changes([])


def test_examples_are_asked_of_gx_only_for_expectations_that_found_unexpected_values(spark, monkeypatch):
    """A suite runs with counts only; GX's query for a batch's first unexpected values (a scan of the whole
    batch when there are none) runs only for the expectations whose counts found some."""
    calls = []
    real_run_gx = validate._run_gx

    def recording_run_gx(narrow, suite_name, expectations, result_format):
        calls.append(([e["type"] for e in expectations], result_format["partial_unexpected_count"]))
        return real_run_gx(narrow, suite_name, expectations, result_format)

    monkeypatch.setattr(validate, "_run_gx", recording_run_gx)
    good = spark.createDataFrame([("a._.t", "INSERT", "CDC", "e1", "debezium")], CHANGES)
    assert _by_gx(good)["success"]
    assert calls == [([e["type"] for e in load_suite("changes")["expectations"]], 0)]

    calls.clear()
    bad_op = spark.createDataFrame([("a._.t", "UPSERT", "CDC", "e1", "debezium"),
                                    ("a._.t", "INSERT", "CDC", "e2", "debezium")], CHANGES)
    result = _by_column(_strict_json(_by_gx(bad_op)))
    assert [c[1] for c in calls] == [0, validate.RESULT_FORMAT["partial_unexpected_count"]]
    assert calls[1][0] == ["expect_column_values_to_be_in_set"]
    op = result[("expect_column_values_to_be_in_set", "op")]["observed"]
    assert (op["unexpected_count"], op["partial_unexpected_list"]) == (1, ["UPSERT"])
    passed = result[("expect_column_values_to_be_in_set", "phase")]["observed"]
    assert (passed["element_count"], passed["unexpected_count"], passed["partial_unexpected_list"]) == (2, 0, [])


# ---- state ------------------------------------------------------------------------------------------
def test_state_with_duplicate_and_null_keys_fails(spark):
    df = spark.createDataFrame([(1, "a"), (1, "b"), (None, "c"), (2, "d"), (3, "e")], "id int, v string")
    result = _strict_json(validate_state(df, "db.s.t", ["id"]))
    assert not result["success"] and result["table"] == "db.s.t" and result["suite"] == "table_state"
    by_column = _by_column(result)
    nulls = by_column[("expect_column_values_to_not_be_null", "id")]
    assert not nulls["success"] and nulls["observed"]["unexpected_count"] == 1
    unique = by_column[("expect_column_values_to_be_unique", "id")]
    # both rows of the duplicated key are unexpected; the null key is not counted as a duplicate
    assert not unique["success"] and unique["observed"]["unexpected_count"] == 2
    assert unique["observed"]["partial_unexpected_list"] == [1, 1]


def test_compound_key_with_awkward_column_names(spark):
    """Spaces, quotes, backticks and a dot: the dotted name is the top-level column, not a struct path."""
    schema = "`order id` int, `we\"ird``col` string, `a.b` int, a struct<b:int>"
    rows = [(1, "x", 1, (1,)), (1, "y", 1, (2,)), (2, "x", 1, (3,))]
    unique_pairs = spark.createDataFrame(rows, schema)
    passed = _strict_json(validate_state(unique_pairs, "t", ["order id", 'we"ird`col']))
    assert passed["success"], passed
    assert [r["expectation"] for r in passed["results"]] == [
        "expect_column_values_to_not_be_null", "expect_column_values_to_not_be_null",
        "expect_compound_columns_to_be_unique"]

    # the new row repeats (2, x) and the struct field a.b = 3 of row 3, but not the column `a.b`
    duplicated = spark.createDataFrame(rows + [(2, "x", 2, (3,))], schema)
    triple = _strict_json(validate_state(duplicated, "t", ["order id", 'we"ird`col', "a.b"]))
    assert triple["success"], "'a.b' was read as the struct field a.b, not as the column `a.b`"
    pair = _strict_json(validate_state(duplicated, "t", ["order id", 'we"ird`col']))
    compound = _by_column(pair)[("expect_compound_columns_to_be_unique", ("order id", 'we"ird`col'))]
    assert not compound["success"] and compound["observed"]["unexpected_count"] == 2
    assert compound["observed"]["partial_unexpected_list"] == [{"order id": 2, 'we"ird`col': "x"}] * 2


def test_result_is_json_safe_for_decimal_timestamp_and_binary_keys(spark):
    when = dt.datetime(2024, 1, 2, 3, 4, 5, 600000)
    df = spark.createDataFrame(
        [(Decimal("1.50"), when, bytearray(b"\x00\xff")), (Decimal("1.50"), when, bytearray(b"\x00\xff"))],
        "amount decimal(10,2), at timestamp, raw binary")
    result = validate_state(df, "t", ["amount", "at", "raw"])
    text = json.dumps(validation_report([result]).to_json(), allow_nan=False)  # no default=: must already be plain
    unique = _by_column(json.loads(text)["suites"][0])[("expect_compound_columns_to_be_unique", ("amount", "at", "raw"))]
    assert not unique["success"] and unique["observed"]["unexpected_count"] == 2
    assert unique["observed"]["partial_unexpected_list"][0] == {
        "amount": "1.50", "at": "2024-01-02T03:04:05.600000", "raw": "00ff"}


def test_missing_key_column_is_a_failed_expectation_not_a_crash(spark):
    df = spark.createDataFrame([(1,)], "id int")
    result = _strict_json(validate_state(df, "t", ["nope"]))
    assert not result["success"]
    assert all(not r["success"] and "'nope'" in r["exception"] for r in result["results"])
    assert result["results"][0]["observed"] == {"missing_columns": ["nope"]}


def test_repeated_calls_leave_no_gx_objects_and_no_cached_data(spark):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "`k 1` int, v string")
    first = validate_state(df, "t", ["k 1"])
    second = validate_state(df, "t", ["k 1"])
    assert first["success"] and second["success"]
    context, source = validate._context()
    assert source.assets == [] and list(context.suites.all()) == []
    narrow, _ = narrow_projection(df, ["k 1"])
    # GX's Spark source would persist the batch it validates (its default): every state table would stay cached
    assert narrow.storageLevel == StorageLevel.NONE


# ---- data docs -----------------------------------------------------------------------------------
def test_data_docs_escape_names_from_messages(tmp_path):
    result = {
        "suite": "table_state", "table": "db.<b>s</b>.t", "success": False,
        "statistics": {"evaluated_expectations": 1, "successful_expectations": 0},
        "results": [{"expectation": "expect_column_values_to_not_be_null", "kwargs": {"column": "<script>x</script>"},
                     "success": False, "observed": {"partial_unexpected_list": ["<img src=x onerror=alert(1)>"]},
                     "exception": None}],
    }
    page = build_data_docs([result], tmp_path / "docs")
    text = page.read_text(encoding="utf-8")
    assert text == render_data_docs([result])
    assert "<script>" not in text and "<img" not in text and "<b>s" not in text
    assert "&lt;script&gt;x&lt;/script&gt;" in text and "FAILED" in text


def test_the_validate_stage_alone_needs_the_decodes_record_profile(spark, tmp_path):
    from jobs.lake.layout import Lake
    from jobs.model.reports import DecodeReport
    from jobs.stages import RunContext, run_validate

    ctx = RunContext(Lake.at(str(tmp_path / "lake")), "p", "r1")
    with pytest.raises(FileNotFoundError, match="no record profile of run r1"):
        run_validate(spark, ctx)  # never decoded
    # a report of an older version: no profile
    ctx.write_report(DecodeReport.from_json({"total": {"landed": 1}}))
    with pytest.raises(FileNotFoundError, match="or by an older version"):
        run_validate(spark, ctx)


def test_great_expectations_is_imported_in_the_background_and_the_validation_waits_for_it():
    """A fresh process (GX not imported yet): the transform's first call imports what the run and GX share,
    then starts GX's import in a thread of its own; the validation's first use of GX waits for that thread."""
    import subprocess
    import sys

    script = (
        "import sys, threading\n"
        "from jobs.quality import validate as v\n"
        "assert 'great_expectations' not in sys.modules\n"
        "assert 'sqlalchemy' not in sys.modules\n"
        "v.import_gx_in_background()\n"
        "started = v._gx_import\n"
        "# the run's own imports that GX's reaches too, done by this thread before it returns\n"
        "assert {'sqlalchemy', 'pyarrow.parquet', 'pyspark.sql.classic.dataframe'} <= set(sys.modules)\n"
        "assert started is not None and started.daemon and started is not threading.main_thread()\n"
        "v.import_gx_in_background()\n"
        "assert v._gx_import is started  # one import, however often asked\n"
        "v._context()\n"
        "assert not started.is_alive() and 'great_expectations' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[3], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
