"""Property: for random histories of a small table, the fold's state equals the source's own state.

A model source applies random inserts, full and partial updates and deletes to a dict (the oracle: the
source's own state, not the fold's code). Its log is delivered as a connector would: a snapshot of the
table taken mid-history (whose CDC events before it are delivered too, and must be skipped as part of
the load), then the changes; rows spread over partitions by key, the partitions interleaved at random,
copies redelivered at random later, everything cut into 1-3 runs at random.

Budget: ``CDC_FOLD_EXAMPLES`` (default 3).
"""
from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.model import record as C
from tests.support.change_records import FoldChain, change, pos

EXAMPLES = int(os.environ.get("CDC_FOLD_EXAMPLES", "3"))
COLUMNS = ("name", "qty")


def source_log(rng: random.Random, ops: int) -> tuple[list[dict], dict[str, dict]]:
    """(the log as change records in source order, the source's state after it)."""
    state: dict[str, dict] = {}
    log = []
    for n in range(1, ops + 1):
        key = str(rng.randint(1, 6))
        if key not in state:
            row = {c: f"{c}{n}" for c in COLUMNS}
            state[key] = row
            log.append(("insert", key, dict(row), None))
        elif rng.random() < 0.25:
            log.append(("delete", key, None, dict(state.pop(key))))
        else:
            changed = {c: f"{c}{n}" for c in rng.sample(COLUMNS, rng.randint(1, 2))}
            state[key] = {**state[key], **changed}
            partial = rng.random() < 0.5
            log.append(("update", key, changed if partial else dict(state[key]), partial))
    return log, state


def delivered(rng: random.Random, log: list, snapshot_at: int) -> list[dict]:
    """The records a connector delivers: the state at ``snapshot_at`` as a full load at that position,
    then every change (those at or before it too, as a connector that starts streaming early does)."""
    at_snapshot: dict[str, dict] = {}
    for kind, key, image, _ in log[:snapshot_at]:
        if kind == "delete":
            at_snapshot.pop(key, None)
        else:
            at_snapshot[key] = {**at_snapshot.get(key, {}), **image}
    records = [change(C.SNAPSHOT, k, pos(snapshot_at), row, phase=C.FULL_LOAD, partition=int(k) % 3)
               for k, row in sorted(at_snapshot.items())]
    for n, (kind, key, image, extra) in enumerate(log, start=1):
        part = int(key) % 3
        if kind == "insert":
            records.append(change(C.INSERT, key, pos(n), image, partition=part))
        elif kind == "delete":
            records.append(change(C.DELETE, key, pos(n), None, before={"id": key, **extra}, partition=part))
        else:
            records.append(change(C.UPDATE, key, pos(n), image, partition=part,
                                  present=["id", *image] if extra else None))
    return records


def arrival(rng: random.Random, records: list[dict], redeliver: float) -> list[dict]:
    """Partitions interleaved at random (each in its own order), copies of some records again later."""
    queues = {p: [r for r in records if r["partition"] == p] for p in range(3)}
    out = []
    while any(queues.values()):
        p = rng.choice([p for p, q in queues.items() if q])
        out.append(queues[p].pop(0))
        if rng.random() < redeliver:
            out.append(dict(out[-1], redelivered=True))
    # a copy arrives later in its partition: a higher offset than everything before it
    for offset, r in enumerate(out):
        r["offset"] = offset
        r.pop("redelivered", None)
    return out


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), ops=st.integers(5, 30), runs=st.integers(1, 3),
       redeliver=st.sampled_from([0.0, 0.1, 0.3]))
def test_the_folded_state_equals_the_sources(spark, seed, ops, runs, redeliver):
    rng = random.Random(seed)
    log, truth = source_log(rng, ops)
    stream = arrival(rng, delivered(rng, log, snapshot_at=rng.randint(0, ops // 2)), redeliver)
    cuts = sorted(rng.sample(range(1, len(stream)), min(runs - 1, len(stream) - 1)))
    chain = FoldChain(spark)
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):
        chain.run(stream[start:end])
    expected = {(k,): {"id": k, **row} for k, row in truth.items()}
    assert {k: {c: v for c, v in r.items() if v is not None} for k, r in chain.rows().items()} == expected
