"""The fold's count and value steps on in-memory change records: each applied event's change of the row
count and of its key's row hash, against the rule's Python form over the rows each event leaves (whole
images, and partial images merged over the row before them)."""
from __future__ import annotations

from pyspark.sql import functions as F

from jobs.fold import fingerprints as rule
from jobs.fold.core import Prior
from jobs.fold.describe import describe_changes
from jobs.fold.table import fold_one_table
from jobs.model import record as C
from tests.support.change_records import FoldChain, change, frame, pos

TYPES = {"id": "string", "name": "string", "qty": "string"}


def _hash(row: dict | None) -> int:
    return 0 if row is None else rule.text_hash(rule.row_text(row, TYPES))


def _steps(chain: FoldChain, records: list[dict]) -> dict[tuple, tuple[int, int]]:
    changes = frame(chain.spark, records)
    (info,) = describe_changes(changes).tables.values()
    fold = fold_one_table(changes.where(F.col("table_id") == info.table_id), info, chain.published,
                          lambda _plan: Prior(chain.state, chain.tombstones), run_id="run2", default_buckets=0)
    try:
        rows = fold.result.steps.collect()
    finally:
        fold.result.release()
    return {(r["key"], r["position"]): (r["delta"], rule.add(r["dh_hi"] * rule.HALF + r["dh_lo"])) for r in rows}


def test_each_applied_event_steps_by_its_rows_hash(spark):
    chain = FoldChain(spark)
    chain.run([change(C.INSERT, 1, pos(1), {"name": "a", "qty": 5}), change(C.INSERT, 2, pos(2), {"name": "b", "qty": 1})])
    one, one_qty, one_name = ({"id": "1", "name": "a", "qty": "5"}, {"id": "1", "name": "a", "qty": "7"},
                              {"id": "1", "name": "c", "qty": "7"})
    two, three = {"id": "2", "name": "b", "qty": "1"}, {"id": "3", "name": "x"}
    steps = _steps(chain, [
        change(C.UPDATE, 1, pos(3), {"qty": 7}, present=["id", "qty"]),  # partial images: merged
        change(C.UPDATE, 1, pos(4), {"name": "c"}, present=["id", "name"]),
        change(C.DELETE, 2, pos(5), None, before={"id": 2}),
        change(C.INSERT, 3, pos(6), {"name": "x"}),
        change(C.UPDATE, 3, pos(2), {"name": "late"}),  # before its key's insert in this run: applies, then replaced
    ])
    key = lambda k: f'{{"id":"{k}"}}'  # noqa: E731
    assert steps == {
        (key(1), pos(3)): (0, rule.add(_hash(one_qty), -_hash(one))),
        (key(1), pos(4)): (0, rule.add(_hash(one_name), -_hash(one_qty))),
        (key(2), pos(5)): (-1, rule.add(-_hash(two))),
        (key(3), pos(2)): (1, _hash({"id": "3", "name": "late"})),
        (key(3), pos(6)): (0, rule.add(_hash(three), -_hash({"id": "3", "name": "late"}))),
    }
    # the steps add up to the state's fingerprint change
    assert rule.add(*(dh for _d, dh in steps.values())) == rule.add(
        _hash(one_name), _hash(three), -_hash(one), -_hash(two))
