"""What a run brings (jobs.fold.describe.describe_changes), from one aggregate over its change records."""
from __future__ import annotations

from jobs.fold.describe import describe_changes
from jobs.model import record as C
from tests.support.change_records import change, frame, pos


def test_a_runs_reach_is_its_highest_position_and_time_of_any_op_a_heartbeat_too(spark):
    heartbeat = change(C.HEARTBEAT, None, pos(7), None, key_map={}, table_id=None, seconds=70)
    run = describe_changes(frame(spark, [
        change(C.INSERT, 1, pos(2), {"name": "a"}, seconds=20), heartbeat,
        change(C.UPDATE, 1, pos(5), {"name": "b"}, seconds=50),
    ]))
    assert list(run.tables) == ["db.t"] and run.tables["db.t"].records == 2
    # a naive time is local time to pyspark, as to datetime.timestamp()
    assert run.reach_position == pos(7) and run.reach_time == int(heartbeat["event_time"].timestamp()) * 1_000_000
