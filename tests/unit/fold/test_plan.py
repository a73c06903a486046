"""A table's plan (jobs.fold.plan), decided from what the run brings and what the catalog holds: no Spark."""
from __future__ import annotations

import json

import pytest

from jobs.fold.plan import (
    WHOLE_ROW_KEY,
    FullLoad,
    PlanError,
    PublishedTable,
    TableChanges,
    complete_load,
    plan_table,
    replayed_load_floor,
)
from jobs.model.buckets import BucketField, BucketLayout
from jobs.model.properties import FULL_LOAD_POSITION_PROP, KEY_COLUMNS_PROP, PENDING_LOAD_PROP, TRUNCATE_POSITION_PROP
from tests.support.paths import REPO


def changes(**fields) -> TableChanges:
    base = {"table_id": "db.t", "columns": ["id", "name"], "key_columns": ["id"], "records": 3}
    return TableChanges(**{**base, **fields})


_PROPS = {"truncated_through": TRUNCATE_POSITION_PROP, "loaded_through": FULL_LOAD_POSITION_PROP,
          "pending_load": PENDING_LOAD_PROP}


def published(columns=None, keys=("id",), buckets=16, **properties) -> PublishedTable:
    """A published table; ``properties`` by their meaning (truncated_through, loaded_through, pending_load)."""
    columns = {"id": "int", "name": "string", "_cdc_position": "string"} if columns is None else columns
    layout = BucketLayout((BucketField(keys[0], columns[keys[0]], buckets),)) if buckets and keys else None
    return PublishedTable(columns=columns, key_columns=tuple(keys), buckets=buckets, layout=layout,
                          properties={_PROPS[k]: v for k, v in properties.items()})


def test_a_new_table_takes_the_runs_columns_keys_and_the_default_layout():
    plan = plan_table(changes(types={"id": "integer"}), PublishedTable(), default_buckets=8)
    assert dict(plan.columns) == {"id": "int", "name": "string"}
    assert plan.key_columns == ("id",)
    assert (plan.buckets, plan.whole_table) == (8, True)
    assert plan.added_columns == ()  # a new table adds nothing to a published schema
    assert json.loads(plan.properties[KEY_COLUMNS_PROP]) == ["id"]


def test_no_buckets_asked_for_a_new_table_leaves_it_unbucketed():
    assert plan_table(changes(), PublishedTable(), default_buckets=0).buckets is None


def test_an_existing_layout_keeps_its_bucket_count_and_rewrites_only_touched_buckets():
    plan = plan_table(changes(), published(buckets=4), default_buckets=16)
    assert (plan.buckets, plan.whole_table) == (4, False)


def test_a_layout_is_kept_through_an_int_key_widened_to_bigint_and_made_anew_for_a_new_key():
    widened = plan_table(changes(types={"id": "bigint"}), published(buckets=4), default_buckets=16)
    assert widened.layout == BucketLayout((BucketField("id", "bigint", 4),))  # Iceberg hashes both as a long
    rekeyed = plan_table(changes(key_columns=["name"]), published(keys=("id", "name"), buckets=4), 16)
    assert rekeyed.layout is None and rekeyed.whole_table


def test_an_unbucketed_table_is_laid_out_anew_when_buckets_are_asked_for():
    plan = plan_table(changes(), published(buckets=None), default_buckets=16)
    assert (plan.buckets, plan.whole_table) == (16, True)


@pytest.mark.parametrize(("was", "declared", "now", "promoted"), [
    ("int", "bigint", "bigint", True),
    ("float", "double", "double", True),
    ("decimal(10,2)", "decimal(12,2)", "decimal(12,2)", True),
    ("bigint", "int", "bigint", False),  # narrowing: the published type is kept
    ("decimal(10,2)", "decimal(12,3)", "decimal(10,2)", False),  # another scale is no promotion
    ("int", "varchar(20)", "int", False),  # an exotic declared type is a string, which int does not widen to
])
def test_a_declared_type_change_is_promoted_where_iceberg_can_and_always_reported(was, declared, now, promoted):
    plan = plan_table(changes(types={"name": declared}), published(columns={"id": "int", "name": was}), 16)
    assert plan.columns["name"] == now
    assert [t.as_dict() for t in plan.type_changes] == [{
        "column": "name", "published": was, "declared": plan.type_changes[0].declared,
        "action": "promoted" if promoted else "kept published type"}]


def test_a_type_the_run_does_not_declare_is_no_type_change():
    plan = plan_table(changes(types={}), published(columns={"id": "bigint", "name": "int"}), 16)
    assert plan.type_changes == () and plan.columns == {"id": "bigint", "name": "int"}


def test_a_key_columns_type_change_rewrites_every_bucket():
    plan = plan_table(changes(types={"id": "bigint"}), published(columns={"id": "int", "name": "string"}), 16)
    assert plan.whole_table and plan.columns["id"] == "bigint"


def test_columns_a_full_image_no_longer_names_are_kept_and_reported_dropped():
    plan = plan_table(changes(columns=["id", "qty"], full_image_columns=["id", "qty"]),
                      published(columns={"id": "int", "name": "string", "_cdc_op": "string"}), 16)
    assert list(plan.columns) == ["id", "name", "qty"]  # published order, then the new column
    assert (plan.added_columns, plan.dropped_columns) == (("qty",), ("name",))


def test_partial_images_alone_drop_no_column():
    plan = plan_table(changes(columns=["id"], full_image_columns=None), published(), 16)
    assert plan.dropped_columns == ()


def test_a_run_naming_fewer_key_columns_rekeys_the_table_whole():
    plan = plan_table(changes(key_columns=["id"]), published(keys=("id", "name")), 16)
    assert (plan.key_columns, plan.rekeyed_from, plan.whole_table) == (("id",), ("id", "name"), True)
    assert plan.report()["rekeyed_from"] == ["id", "name"]


def test_the_published_key_stays_when_the_run_names_it_whole_or_not_at_all():
    assert plan_table(changes(key_columns=["id", "name"]), published(keys=("id",)), 16).key_columns == ("id",)
    unkeyed = plan_table(changes(key_columns=[]), published(keys=("id",)), 16)
    assert (unkeyed.key_columns, unkeyed.rekeyed_from) == (("id",), None)


def test_a_table_without_any_key_is_not_planned():
    with pytest.raises(PlanError, match="no key columns"):
        plan_table(changes(key_columns=[]), PublishedTable(), 16)


def test_a_key_naming_no_column_of_the_table_is_refused_with_the_setting_that_gives_it():
    with pytest.raises(PlanError, match=r"key column\(s\) id in none of the table's rows \(its columns: "
                       r"order_id, line_no\); a key given by --primary-keys \(tables\[\]\.primary_keys"):
        plan_table(changes(columns=["order_id", "line_no"], key_columns=["id"]), PublishedTable(), 16)
    # a column the published table has is one of the table's, though this run's rows leave it out
    plan = plan_table(changes(columns=["name"], key_columns=["id"]), published(), 16)
    assert plan.key_columns == ("id",)


def test_a_table_keyed_by_its_whole_row_says_so():
    plan = plan_table(changes(key_columns=["id", "name"]), PublishedTable(), 16)
    assert plan.key_source == WHOLE_ROW_KEY


def test_a_redelivered_truncate_applied_before_empties_nothing():
    info = changes(has_truncate=True, truncate_position="005", truncate_lineage=(0, 7))
    plan = plan_table(info, published(truncated_through="009"), 16)
    assert not plan.changes.has_truncate and plan.changes.truncate_position is None
    assert not plan.whole_table
    assert (plan.skip_all_through, plan.properties[TRUNCATE_POSITION_PROP]) == ("009", "009")


def test_a_new_truncate_rewrites_the_table_and_moves_the_truncate_fence():
    plan = plan_table(changes(has_truncate=True, truncate_position="012"), published(truncated_through="009"), 16)
    assert plan.changes.has_truncate and plan.whole_table
    # the fence of earlier runs skips what they truncated; the run's own truncate is the fold's to apply
    assert (plan.skip_all_through, plan.properties[TRUNCATE_POSITION_PROP]) == ("009", "012")


def test_the_full_load_position_only_grows():
    older = plan_table(changes(full_load_position="003", load_start_position="001"),
                       published(loaded_through="008"), 16)
    assert older.skip_cdc_through == "008" and older.properties[FULL_LOAD_POSITION_PROP] == "008"
    newer = plan_table(changes(full_load_position="010", load_start_position="009"),
                       published(loaded_through="008"), 16)
    assert newer.skip_cdc_through == "010"


def test_a_load_followed_by_cdc_of_its_table_is_complete_and_replaces_the_table():
    info = changes(load_start_position="002", full_load_position="004", cdc_max_position="006")
    plan = plan_table(info, published(), 16)
    assert plan.full_load == FullLoad("002", "004", complete=True)
    assert plan.replace_before == "002" and plan.whole_table
    assert PENDING_LOAD_PROP not in plan.properties


def test_a_load_without_anything_after_it_is_pending_and_replaces_nothing_yet():
    plan = plan_table(changes(load_start_position="002", full_load_position="004"), published(), 16)
    assert plan.full_load == FullLoad("002", "004", complete=False) and plan.replace_before is None
    assert json.loads(plan.properties[PENDING_LOAD_PROP]) == {"start": "002", "end": "004"}


def test_a_pending_load_continues_in_the_next_run_and_an_end_marker_completes_it():
    pending = json.dumps({"start": "002", "end": "004"})
    info = changes(load_start_position="005", full_load_position="007", load_end_marker="007")
    plan = plan_table(info, published(pending_load=pending), 16)
    assert plan.full_load == FullLoad("002", "007", complete=True)
    assert plan.properties[PENDING_LOAD_PROP] == ""  # cleared


def test_cdc_between_two_loads_starts_a_new_load():
    pending = json.dumps({"start": "002", "end": "004"})
    info = changes(load_start_position="006", full_load_position="007", cdc_before_position="005")
    assert complete_load(pending, info) == FullLoad("006", "007", complete=False)


def test_a_redelivered_cdc_event_older_than_the_pending_load_does_not_split_it():
    pending = json.dumps({"start": "002", "end": "004"})
    info = changes(load_start_position="006", full_load_position="007", cdc_before_position="003")
    assert complete_load(pending, info).start == "002"


def test_a_pending_load_is_completed_by_a_later_runs_cdc_alone():
    pending = json.dumps({"start": "002", "end": "004"})
    assert complete_load(pending, changes(cdc_max_position="009")) == FullLoad("002", "004", complete=True)
    assert complete_load(pending, changes(cdc_max_position="003")) == FullLoad("002", "004", complete=False)
    assert complete_load(None, changes(cdc_max_position="009")) is None


def test_load_rows_at_or_before_an_applied_load_are_replays_unless_that_load_is_pending():
    info = changes(load_start_position="003", full_load_position="005")
    assert replayed_load_floor(info, published(loaded_through="004")) == "004"
    assert replayed_load_floor(info, published(loaded_through="002")) is None
    assert replayed_load_floor(info, published(loaded_through="004", pending_load='{"x": 1}')) is None


def test_the_report_is_json_ready_and_says_what_the_plan_decided():
    plan = plan_table(changes(key_moves=2, load_start_position="1", full_load_position="2"), published(), 16)
    report = plan.report()
    assert json.loads(json.dumps(report)) == report
    assert report["key_moves"] == 2 and report["full_load"] == {"start": "1", "end": "2", "complete": False}


def test_planning_needs_no_spark():
    import subprocess
    import sys

    probe = "import sys, jobs.fold.plan; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], cwd=REPO).returncode == 0
