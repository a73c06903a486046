"""The fold's semantics (jobs.fold.core, DESIGN "Phase semantics"), case by case, on change records built
in memory: describe -> plan -> fold over an in-memory published state, no lake, no catalog, no decoder."""
from __future__ import annotations

import pytest

from jobs.model import record as C
from tests.support.change_records import FoldChain, change, pos

I, U, D, S, T = C.INSERT, C.UPDATE, C.DELETE, C.SNAPSHOT, C.TRUNCATE


@pytest.fixture
def chain(spark):
    return FoldChain(spark)


def names(rows: dict) -> dict:
    """key -> name: what most cases look at."""
    return {k[0]: r["name"] for k, r in rows.items()}


# ---- one run: order, copies, images

def test_a_keys_events_apply_in_position_order_not_arrival_order(chain):
    rows = chain.run([
        change(I, 1, pos(1), {"name": "a"}),
        change(U, 1, pos(3), {"name": "c"}),
        change(U, 1, pos(2), {"name": "b"}),  # arrives last, happened before the update at 3
    ])
    assert names(rows) == {"1": "c"}


def test_without_positions_the_partition_order_decides(chain):
    rows = chain.run([change(I, 1, None, {"name": "a"}), change(U, 1, None, {"name": "b"})])
    assert names(rows) == {"1": "b"}


def test_a_redelivered_copy_counts_once_as_its_first_copy(chain):
    rows = chain.run([
        change(I, 1, pos(1), {"name": "a"}, event_id="x1"),
        change(U, 1, pos(2), {"name": "b"}, event_id="x2"),
        change(I, 1, pos(1), {"name": "a"}, event_id="x1"),  # the insert again, after the update
    ])
    assert names(rows) == {"1": "b"}


def test_a_delete_and_create_at_one_position_end_created(chain):
    rows = chain.run([
        change(I, 1, pos(1), {"name": "a"}),
        change(I, 1, pos(2), {"name": "b"}, offset=900),
        change(D, 1, pos(2), None, before={"id": 1, "name": "a"}, offset=900),
    ])
    assert names(rows) == {"1": "b"}


def test_insert_update_delete_in_one_run_leaves_no_row_and_a_tombstone(chain):
    rows = chain.run([
        change(I, 1, pos(1), {"name": "a"}), change(U, 1, pos(2), {"name": "b"}),
        change(D, 1, pos(3), None, before={"id": 1, "name": "b"}), change(I, 2, pos(4), {"name": "z"}),
    ])
    assert names(rows) == {"2": "z"}
    assert chain.deleted_keys() == {("1",)}


def test_a_partial_image_merges_column_by_column_over_the_prior_row(chain):
    chain.run([change(I, 1, pos(1), {"name": "a", "qty": 5})])
    rows = chain.run([change(U, 1, pos(2), {"qty": 7}, present=["id", "qty"])])
    assert rows[("1",)] == {"id": "1", "name": "a", "qty": "7"}


def test_an_update_of_an_unknown_key_with_a_partial_image_holds_only_what_it_carries(chain):
    rows = chain.run([change(U, 1, pos(1), {"qty": 7}, present=["id", "qty"])])
    assert rows[("1",)] == {"id": "1", "qty": "7"}


def test_declared_types_type_the_state_and_values_that_do_not_convert_are_null(chain):
    types = {"id": "int", "qty": "bigint", "at": "date"}
    rows = chain.run([
        change(I, 1, pos(1), {"qty": 5, "at": "2026-01-02"}, types=types),
        change(I, 2, pos(2), {"qty": "five", "at": "10000-01-01"}, types=types),
    ])
    assert {k: (r["qty"], str(r["at"])) for k, r in rows.items()} == {(1,): (5, "2026-01-02"), (2,): (None, "None")}


# ---- phases: full load and CDC

def test_cdc_events_at_or_before_the_full_load_position_are_in_the_load(chain):
    rows = chain.run([
        change(S, 1, pos(10), {"name": "loaded"}, phase=C.FULL_LOAD),
        change(U, 1, pos(5), {"name": "older"}),  # logged before the load read the row
        change(U, 2, pos(8), {"name": "older"}),
    ])
    assert names(rows) == {"1": "loaded"}


def test_a_cdc_event_without_a_position_is_never_taken_for_part_of_the_load(chain):
    rows = chain.run([change(S, 1, pos(10), {"name": "loaded"}, phase=C.FULL_LOAD),
                      change(I, 2, None, {"name": "new"})])
    assert names(rows) == {"1": "loaded", "2": "new"}


def test_a_full_load_row_without_a_position_never_overrides_a_cdc_change(chain):
    chain.run([change(I, 1, pos(3), {"name": "cdc"})])
    rows = chain.run([change(S, 1, None, {"name": "refresh"}, phase=C.FULL_LOAD),
                      change(S, 2, None, {"name": "refresh"}, phase=C.FULL_LOAD)])
    assert names(rows) == {"1": "cdc", "2": "refresh"}


def test_a_complete_newer_load_removes_the_rows_it_does_not_hold(chain):
    chain.run([change(S, k, pos(k), {"name": "v1"}, phase=C.FULL_LOAD) for k in (1, 2, 3)]
              + [change(U, 1, pos(5), {"name": "cdc"})])
    # a re-snapshot of keys 1 and 2 (key 3's delete was lost), completed by a CDC event after it
    rows = chain.run([change(S, k, pos(10 + k), {"name": "v2"}, phase=C.FULL_LOAD) for k in (1, 2)]
                     + [change(U, 2, pos(20), {"name": "after"})])
    assert names(rows) == {"1": "v2", "2": "after"}
    assert chain.last_report["full_load"] == {"start": pos(11), "end": pos(12), "complete": True}


def test_a_load_pending_at_the_end_of_a_run_is_completed_by_a_later_runs_cdc(chain):
    chain.run([change(S, k, pos(k), {"name": "v1"}, phase=C.FULL_LOAD) for k in (1, 2, 3)])
    chain.run([change(U, 1, pos(5), {"name": "cdc"})])
    chain.run([change(S, k, pos(10 + k), {"name": "v2"}, phase=C.FULL_LOAD) for k in (1,)])
    assert chain.last_report["full_load"]["complete"] is False
    chain.run([change(S, 2, pos(12), {"name": "v2"}, phase=C.FULL_LOAD)])  # the same load goes on
    rows = chain.run([change(I, 9, pos(30), {"name": "new"})])
    assert names(rows) == {"1": "v2", "2": "v2", "9": "new"}


def test_a_redelivered_load_is_no_new_load(chain):
    load = [change(S, k, pos(k), {"name": "v1"}, phase=C.FULL_LOAD, event_id=f"l{k}") for k in (1, 2)]
    chain.run([*load, change(I, 3, pos(5), {"name": "cdc"})])
    rows = chain.run([dict(r, offset=r["offset"] + 1000) for r in load] + [change(U, 3, pos(6), {"name": "x"})])
    assert names(rows) == {"1": "v1", "2": "v1", "3": "x"}


# ---- truncates

def test_a_truncate_empties_the_table_as_of_its_position(chain):
    chain.run([change(I, 1, pos(1), {"name": "a"})])
    rows = chain.run([
        change(I, 2, pos(2), {"name": "b"}),
        change(T, None, pos(3), None),
        change(I, 3, pos(4), {"name": "c"}),
        change(U, 2, pos(2), {"name": "late copy"}, offset=9000),  # before the truncate, arriving after it
    ])
    assert names(rows) == {"3": "c"}


def test_a_change_sharing_the_truncates_position_but_logged_after_it_survives(chain):
    rows = chain.run([
        change(I, 1, pos(1), {"name": "a"}),
        change(T, None, pos(2), None, offset=500),
        change(I, 2, pos(2), {"name": "same batch"}, offset=501),
    ])
    assert names(rows) == {"2": "same batch"}


def test_a_redelivered_truncate_empties_nothing_that_came_after_it(chain):
    truncate = change(T, None, pos(2), None, event_id="t")
    chain.run([change(I, 1, pos(1), {"name": "a"}), truncate, change(I, 2, pos(3), {"name": "b"})])
    rows = chain.run([dict(truncate, offset=7000), change(I, 3, pos(4), {"name": "c"})])
    assert names(rows) == {"2": "b", "3": "c"}


# ---- across runs: replays and tombstones

def test_a_redelivered_insert_in_a_later_run_does_not_bring_a_deleted_row_back(chain):
    insert = change(I, 1, pos(1), {"name": "a"}, event_id="i")
    chain.run([insert, change(D, 1, pos(2), None, before={"id": 1, "name": "a"})])
    rows = chain.run([dict(insert, offset=5000), change(I, 2, pos(3), {"name": "b"})])
    assert names(rows) == {"2": "b"}


def test_an_event_at_or_before_a_rows_published_position_is_a_replay(chain):
    chain.run([change(I, 1, pos(1), {"name": "a"}), change(U, 1, pos(4), {"name": "d"})])
    rows = chain.run([change(U, 1, pos(3), {"name": "replayed"}), change(U, 1, pos(4), {"name": "replayed"})])
    assert names(rows) == {"1": "d"}


def test_rows_the_run_has_no_event_of_are_kept_as_they_were(chain):
    chain.run([change(I, k, pos(k), {"name": f"v{k}"}) for k in range(1, 6)])
    rows = chain.run([change(U, 3, pos(9), {"name": "new"})])
    assert names(rows) == {"1": "v1", "2": "v2", "3": "new", "4": "v4", "5": "v5"}


def test_a_delete_and_reinsert_across_runs_revives_the_key(chain):
    chain.run([change(I, 1, pos(1), {"name": "a"}), change(D, 1, pos(2), None, before={"id": 1})])
    rows = chain.run([change(I, 1, pos(3), {"name": "again"})])
    assert names(rows) == {"1": "again"} and chain.deleted_keys() == set()


# ---- key moves (partial images whose before image names another key)

def moved(old: int, new: int, at: int, image: dict) -> list[dict]:
    """A key change as decoders send it (SharePlex, OGG, DTS): the old key's delete and the new key's
    partial image, in one message (same offset and position)."""
    offset = 10_000 + at
    return [change(D, old, pos(at), None, before={"id": old}, offset=offset),
            change(U, new, pos(at), {"id": new, **image}, present=["id", *image], before={"id": old}, offset=offset)]


def test_a_partial_image_that_changes_the_key_moves_the_row_with_its_other_columns(chain):
    chain.run([change(I, 1, pos(1), {"name": "a", "qty": 5})])
    rows = chain.run(moved(1, 2, 2, {"qty": 6}))
    assert rows == {("2",): {"id": "2", "name": "a", "qty": "6"}}
    assert chain.last_report["key_moves"] == 1


def test_a_row_moved_through_a_chain_of_keys_in_one_run_keeps_its_columns(chain):
    chain.run([change(I, 1, pos(1), {"name": "a", "qty": 5})])
    rows = chain.run([*moved(1, 2, 2, {"qty": 6}), *moved(2, 3, 3, {"qty": 7})])
    assert rows == {("3",): {"id": "3", "name": "a", "qty": "7"}}


def test_a_redelivered_move_counts_once(chain):
    chain.run([change(I, 1, pos(1), {"name": "a", "qty": 5})])
    move = moved(1, 2, 2, {"qty": 6})
    rows = chain.run([*move, change(U, 2, pos(3), {"id": 2, "qty": 8}, present=["id", "qty"]),
                      *[dict(r, offset=r["offset"] + 500) for r in move]])
    assert rows == {("2",): {"id": "2", "name": "a", "qty": "8"}}


def test_a_partial_image_with_a_before_image_of_the_same_key_moves_nothing(chain):
    chain.run([change(I, 1, pos(1), {"name": "a", "qty": 5})])
    rows = chain.run([change(U, 1, pos(2), {"id": 1, "qty": 6}, present=["id", "qty"], before={"id": 1})])
    assert rows == {("1",): {"id": "1", "name": "a", "qty": "6"}}


# ---- transactions held across runs

def test_an_open_transaction_waits_for_its_end_and_a_redelivered_part_of_it_does_not(chain):
    first = change(I, 1, pos(1), {"name": "a"}, tx_id="t1", tx_last=False, event_id="t1a")
    rows = chain.run([first, change(I, 9, pos(0), {"name": "no tx"})], hold_transactions=True)
    assert names(rows) == {"9": "no tx"} and len(chain.held) == 1
    rows = chain.run([change(I, 2, pos(2), {"name": "b"}, tx_id="t1", tx_last=True)], hold_transactions=True)
    assert names(rows) == {"1": "a", "2": "b", "9": "no tx"} and chain.held == []
    chain.run([dict(first, offset=8000)], hold_transactions=True)  # the ended transaction's part, again
    assert chain.held == []


# ---- history (SCD2)

def test_every_applied_event_leaves_a_version_valid_until_the_next(spark):
    chain = FoldChain(spark, history=True)
    chain.run([change(I, 1, pos(1), {"name": "a"}), change(U, 1, pos(2), {"name": "b"}),
               change(D, 1, pos(3), None, before={"id": 1})])
    versions = sorted((v["_valid_from_position"], v["_valid_to_position"], v["_op"], v["_is_current"])
                      for v in chain.history_rows)
    assert versions == [(pos(1), pos(2), I, False), (pos(2), pos(3), U, False), (pos(3), None, D, False)]


def test_a_skipped_replay_leaves_no_version(spark):
    chain = FoldChain(spark, history=True)
    chain.run([change(I, 1, pos(5), {"name": "a"})])
    chain.run([change(U, 1, pos(4), {"name": "old"})])
    assert [v["_valid_from_position"] for v in chain.history_rows] == [pos(5)]


def test_keys_of_whole_and_of_partial_images_leave_the_same_versions(spark):
    """A key whose events all carry the whole row has its versions from the events themselves, one whose
    events merge partial images from the fold: either way a version per applied event with the row after
    it, none for a replay, and none of its own for a row moved in under a new key."""
    chain = FoldChain(spark, history=True)
    chain.run([change(I, k, pos(k), {"name": f"n{k}", "qty": k}) for k in (1, 2, 3)])
    first_run = len(chain.history_rows)
    chain.run([change(U, 1, pos(4), {"name": "whole", "qty": 40}), change(U, 1, pos(1), {"name": "replay"}),
               change(D, 1, pos(6), None, before={"id": 1}),
               change(U, 2, pos(5), {"id": 2, "qty": 50}, present=["id", "qty"]), change(U, 2, pos(2), {"qty": 0}),
               *moved(3, 4, 7, {"qty": 70})])
    versions = sorted(((v["id"], v["_valid_from_position"], v["_op"], v["name"], v["qty"], v["_is_current"])
                       for v in chain.history_rows[first_run:]), key=lambda v: (int(v[0]), v[1]))
    assert versions == [
        ("1", pos(4), U, "whole", "40", False), ("1", pos(6), D, None, None, False),
        ("2", pos(5), U, "n2", "50", True),
        ("3", pos(7), D, None, None, False),
        ("4", pos(7), U, "n3", "70", True),
    ]


def test_a_load_end_marker_completes_the_load_in_its_own_run(chain):
    chain.run([change(S, k, pos(k), {"name": "v1"}, phase=C.FULL_LOAD) for k in (1, 2, 3)])
    chain.run([change(I, 5, pos(5), {"name": "cdc"})])
    rows = chain.run([change(S, 1, pos(11), {"name": "v2"}, phase=C.FULL_LOAD),
                      change(C.LOAD_END, None, pos(11), {"scope": "table"}, phase=C.FULL_LOAD, key_map={})])
    assert names(rows) == {"1": "v2"}  # key 5's row and keys 2, 3 are older than the complete load


def test_an_incremental_snapshot_row_upserts_but_never_overrides_a_later_change(chain):
    chain.run([change(I, 1, pos(1), {"name": "a"}), change(U, 1, pos(5), {"name": "later"})])
    rows = chain.run([change(S, 1, pos(3), {"name": "chunk"}), change(S, 2, pos(3), {"name": "chunk"})])
    assert names(rows) == {"1": "later", "2": "chunk"}


def test_a_table_keyed_by_its_whole_row_takes_the_key_a_later_run_names(chain):
    whole_row = {"id": "1", "name": "a"}
    chain.run([change(I, None, pos(1), {"id": 1, "name": "a"}, key_map=whole_row)])
    assert set(chain.published.key_columns) == {"id", "name"}
    rows = chain.run([change(U, 1, pos(2), {"name": "b"})])
    assert names(rows) == {"1": "b"} and set(chain.last_report["rekeyed_from"]) == {"id", "name"}



def test_a_re_keyed_tables_deleted_wider_keys_leave_one_delete_under_the_narrower_key(chain):
    for n, name in enumerate(("a", "b")):
        whole_row = {"id": "1", "name": name}
        chain.run([change(I, None, pos(1 + n), {"id": 1, "name": name}, key_map=whole_row),
                   change(D, None, pos(3 + n), None, key_map=whole_row, before={"id": 1, "name": name})])
    assert len(chain.deleted_keys()) == 2
    chain.run([change(U, 1, pos(5), {"name": "c"})])  # names the key the source finds rows by: id
    assert [r["name"] for r in chain.state.collect()] == ["c"]  # one row: the two deletes are one prior

def test_records_between_an_unmarked_begin_and_its_end_wait_for_the_end(chain):
    begin = change(C.TX_BEGIN, None, pos(1), {}, key_map={})
    rows = chain.run([change(I, 1, pos(0), {"name": "before"}), begin, change(I, 2, pos(2), {"name": "in tx"})],
                     hold_transactions=True)
    assert names(rows) == {"1": "before"}
    rows = chain.run([change(I, 3, pos(3), {"name": "in tx"}), change(C.TX_END, None, pos(4), {}, key_map={})],
                     hold_transactions=True)
    assert names(rows) == {"1": "before", "2": "in tx", "3": "in tx"} and chain.held == []
