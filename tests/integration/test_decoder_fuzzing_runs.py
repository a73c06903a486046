"""Fuzzed messages through a whole run, per format: the decoders' fuzz tests (tests/unit/formats/test_fuzzing.py)
decode hostile variants of real messages (tests/support/fuzz.py); here a whole ``jobs run`` takes what a
decoder lets through."""
from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from tests.support.decoders import raw_frame
from tests.support.fuzz import FORMATS, MUTATIONS, corpus, mutate
from tests.support.pipeline_runs import jobs_run
from tests.support.tiers import breadth

TRIED: Counter = Counter()


@pytest.fixture(scope="module", autouse=True)
def _tally():
    yield
    print(f"\nfuzzed inputs per format: {dict(sorted(TRIED.items()))}")


# CI: a typed format and a string one given its keys; make test-long: every format
@pytest.mark.parametrize("fmt", breadth(FORMATS, in_ci=("debezium", "shareplex")))
def test_no_fuzzed_input_crashes_a_whole_run(spark, tmp_path, fmt):
    """A whole `jobs run` (fold, publish, validation, reconciliation) over a format's messages with
    hostile variants among them completes, and its counts balance: what a decoder lets through (odd
    column names, huge values, NaN) must not break a later stage."""
    rnd = random.Random(f"{fmt}-run")
    messages = list(corpus(fmt))
    values = messages + [mutate(rnd.choice(messages), rnd.choice(MUTATIONS), rnd, fmt, 64 * 1024) for _ in range(150)]
    raw = tmp_path / "raw"
    raw_frame(spark, values, keys=[None] * len(values)).write.parquet(str(raw))
    extra = ["--primary-keys=ITEMS=id", "--primary-keys=STOCK=item_id,site"] if fmt == "shareplex" else []
    assert jobs_run(fmt, raw, tmp_path / "lake", "fz", "r1", *extra) == 0
    decoded = json.loads((tmp_path / "lake/reports/fz/run=r1/decode.json").read_text())
    assert decoded["balanced"] and decoded["total"]["landed"] == len(values)
    TRIED[f"{fmt} (whole run)"] += len(values)
