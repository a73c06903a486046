"""Great Expectations suites on Spark DataFrames: failures are found and reported JSON-safe."""
import json

from jobs.validate import expand_template, load_suite, validate_changes, validate_state, validation_report

CHANGES = "table_id string, op string, phase string, event_id string, format string"


def test_good_change_records_pass(spark):
    df = spark.createDataFrame([("a._.t", "INSERT", "CDC", "e1", "debezium"),
                                ("a._.t", "SNAPSHOT", "FULL_LOAD", "e2", "debezium")], CHANGES)
    result = validate_changes(df)
    assert result["success"] and all(r["success"] for r in result["results"])
    json.dumps(result)


def test_unknown_op_and_null_table_fail(spark):
    df = spark.createDataFrame([(None, "INSERT", "CDC", "e1", "x"), ("a._.t", "UPSERT", "CDC", "e2", "x"),
                                ("a._.t", "DELETE", "CDC", "e3", "x")], CHANGES)
    result = validate_changes(df)
    assert not result["success"]
    failed = {(r["expectation"], r["kwargs"].get("column")): r for r in result["results"] if not r["success"]}
    assert set(failed) == {("expect_column_values_to_not_be_null", "table_id"),
                           ("expect_column_values_to_be_in_set", "op")}
    assert failed[("expect_column_values_to_be_in_set", "op")]["observed"]["unexpected_count"] == 1
    assert failed[("expect_column_values_to_be_in_set", "op")]["observed"]["partial_unexpected_list"] == ["UPSERT"]


def test_state_keys_null_and_duplicate_fail_with_awkward_names(spark):
    df = spark.createDataFrame([(1, "x", 1), (1, "x", 2), (None, "y", 3), (2, "y", 4)],
                               "`order id` int, `we.ird\"col` string, v int")
    result = validate_state(df, "db.s.t", ["order id", 'we.ird"col'])
    assert not result["success"] and result["table"] == "db.s.t"
    by_type = {(r["expectation"], str(r["kwargs"].get("column", r["kwargs"].get("column_list")))): r
               for r in result["results"]}
    assert not by_type[("expect_column_values_to_not_be_null", "order id")]["success"]
    assert by_type[("expect_column_values_to_not_be_null", 'we.ird"col')]["success"]
    compound = by_type[("expect_compound_columns_to_be_unique", str(["order id", 'we.ird"col']))]
    assert not compound["success"]
    json.dumps(validation_report([result]))


def test_single_key_state_passes_and_uses_the_column_form(spark):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id int, v string")
    result = validate_state(df, "t", ["id"])
    assert result["success"]
    assert [r["expectation"] for r in result["results"]] == [
        "expect_column_values_to_not_be_null", "expect_column_values_to_be_unique"]


def test_state_template_expands_per_key():
    exps = expand_template(load_suite("state"), ["a", "b"])
    assert [e["kwargs"].get("column") for e in exps[:2]] == ["a", "b"]
    assert exps[2]["kwargs"]["column_list"] == ["a", "b"]
