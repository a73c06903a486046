"""Fuzzing every decoder (property-based, hypothesis, over mutations of real messages: tests/support/fuzz.py).

Each example decodes a batch of hostile variants of one format's messages (truncated and bit-flipped
bytes, wrong JSON types anywhere, missing and extra fields, another format's messages, deep nesting,
huge strings, invalid UTF-8, NaN / Infinity, duplicate keys, unknown ops, hostile table names, wrong
Avro branches) beside some of the originals. Whatever the input (tests/support/fuzz.py check_batch):
- the decode never fails, and every message has exactly one outcome;
- a quarantined message has a reason and its exact raw bytes; the counts balance;
- a decoded record is well formed: a table id that cannot leave the lake, a known op and phase, a key
  for a row change, an event id;
- a variant that means the same as its original (an extra field, other whitespace) decodes to the
  same outcome and the same records.
(A whole run over such messages: tests/integration/test_decoder_fuzzing_runs.py.)
Budget: ``CDC_FUZZ_EXAMPLES`` examples per format (default 4, from a fixed seed so that CI repeats
itself; ``make test-fuzz`` runs more from a random seed, with values of megabytes; a 25 MB value has a
test of its own).
"""
from __future__ import annotations

import json
import os
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from jobs.decode.stage import decode_counts, decode_messages, release
from jobs.formats import DecodeOptions
from tests.support.decoders import raw_frame
from tests.support.fuzz import FORMATS, HUGE_CHARS, MEANING_PRESERVING, MUTATIONS, check_batch, corpus, mutate

EXAMPLES = int(os.environ.get("CDC_FUZZ_EXAMPLES", "4"))
# the suite explores from a fixed seed, so that CI repeats itself; the opt-in budget from a random one
SEED = int(os.environ.get("CDC_FUZZ_SEED", "20261128")) if "CDC_FUZZ_EXAMPLES" not in os.environ else None
HUGE = int(os.environ.get("CDC_FUZZ_HUGE_CHARS", str(HUGE_CHARS)))
TRIED: Counter = Counter()


@pytest.fixture(scope="module", autouse=True)
def _tally():
    yield
    print(f"\nfuzzed inputs per format: {dict(sorted(TRIED.items()))}")


def fuzz_case(fmt: str):
    """One example: (corpus index, mutation, seed) per message of a batch."""
    size = len(corpus(fmt))
    return st.lists(st.tuples(st.integers(0, size - 1), st.sampled_from(MUTATIONS), st.integers(0, 2**32 - 1)),
                    min_size=30, max_size=80)


def build_batch(fmt: str, case) -> tuple[list[bytes], dict[int, int]]:
    messages = corpus(fmt)
    values: list[bytes] = []
    same_as: dict[int, int] = {}
    originals: dict[int, int] = {}  # corpus index -> its offset in the batch
    for index, kind, rnd_seed in case:
        values.append(mutate(messages[index], kind, random.Random(rnd_seed), fmt, HUGE))
        if kind in MEANING_PRESERVING:
            variant = len(values) - 1
            if index not in originals:
                originals[index] = len(values)
                values.append(messages[index])
            same_as[variant] = originals[index]
    return values, same_as


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_no_input_crashes_a_decoder_or_unbalances_its_counts(spark, fmt):
    @seed(SEED)
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(case=fuzz_case(fmt))
    def run(case):
        values, same_as = build_batch(fmt, case)
        check_batch(spark, fmt, values, same_as)
        TRIED[fmt] += len(values)

    run()


def test_a_value_of_tens_of_megabytes_is_decoded_not_quarantined(spark):
    """A large TEXT / JSON column's value (25 MB) is a row like any other: JSON parsers' own bounds
    (Jackson's 20M characters) would quarantine it as malformed JSON (found by the fuzz budget)."""
    big = "Z" * 25_000_000
    value = json.dumps({"op": "c", "after": {"id": 1, "doc": big}, "source": {
        "connector": "postgresql", "db": "d", "schema": "s", "table": "t", "lsn": 5}})
    decoded = decode_messages(raw_frame(spark, [value], keys=['{"id": 1}']), "debezium", DecodeOptions())
    try:
        assert decode_counts(decoded.outcomes).total.decoded == 1
        assert decoded.changes.select(F.length(F.col("after")["doc"]).alias("n")).first()["n"] == len(big)
    finally:
        release(decoded.materialized)
