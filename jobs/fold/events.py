"""A key's events inside the fold: their struct, their order, and the SQL that applies them over a row."""
from __future__ import annotations

import operator
from collections.abc import Callable
from functools import reduce
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.model import record as C


def op_rank() -> Column:
    """Inside one position and offset a delete goes first: a delete + create pair ends created."""
    return F.when(F.col("op") == C.DELETE, F.lit(1)).otherwise(F.lit(2))


def key_join(left: DataFrame, right: DataFrame, keys: list[str], how: str) -> DataFrame:
    return left.alias("_l").join(right.select(*keys).alias("_r"), aliased_keys_match("_l", "_r", keys), how)


# an event inside the fold (``o`` orders a key's events; ``copy`` tells redelivered copies apart)
def event_struct(o: Column, op: Column, after: Column, present: Column, position: Column, event_time: Column,
                 copy: Column, leaves: tuple[Column, Column], stays: Column | None = None) -> Column:
    """``leaves``: whether the event leaves a row where its image is whole (``x``) and that row's hash (``h``:
    whole_image_sql); ``stays``: the event is the image half of a key change that moves nothing
    (stays_under_key)."""
    x, h = leaves
    return F.struct(o.alias("o"), op.alias("op"), after.alias("after"), present.alias("present"),
                    position.alias("position"), event_time.alias("event_time"), copy.alias("copy"),
                    (F.lit(False) if stays is None else stays).alias("stays"), x.alias("x"), h.alias("h"))


def in_order(events: Column) -> Column:
    return F.array_sort(events, lambda l, r: F.when(l["o"] < r["o"], -1).when(l["o"] > r["o"], 1).otherwise(0))


def aliased_keys_match(left: str, right: str, keys: list[str]) -> Column:
    """The key columns of the frames aliased ``left`` and ``right`` equal, null-safe."""
    return reduce(operator.and_, [F.col(f"{left}.{k}").eqNullSafe(F.col(f"{right}.{k}")) for k in keys])


PRIOR_META = ["_prior_row", "_prior_pos", "_prior_op", "_prior_ts", "_prior_run"]
# the internal op of a moved row's arrival at its new key (never published: its update follows it)
MOVE = "MOVE"


# ---- the SQL of a key's fold, each part a function of the parts it is made of

class Accumulated(NamedTuple):
    """A field a key's fold carries from its prior state through its events: its start and its step (SQL
    over the accumulator ``acc`` and the event ``e``)."""

    init: str
    step: str


def named_struct_sql(fields: dict[str, str]) -> str:
    """``named_struct`` of the fields (name -> SQL), in order."""
    return "named_struct(" + ", ".join(f"'{name}', {sql}" for name, sql in fields.items()) + ")"


def aggregate_sql(events: str, applies: str, init: dict[str, str], step: dict[str, str]) -> str:
    """A fold over the events of the array column ``events`` that ``applies`` (SQL over ``e``): from the
    struct of ``init``, each applied event makes the struct of ``step`` (SQL over ``acc`` and ``e``)."""
    return (f"aggregate(filter({events}, e -> {applies}), {named_struct_sql(init)}, "
            f"(acc, e) -> {named_struct_sql(step)})")


# which of a key's events apply over its prior state (SQL over ``e`` and ``_prior_pos``)
APPLIES_SQL = """CASE
    -- a full-load row without a position (Qlik REFRESH) predates every positioned change:
    -- redelivered or landed late, it never overrides a row a CDC event has changed
    WHEN e.position IS NULL THEN NOT (e.op = 'SNAPSHOT' AND _prior_pos IS NOT NULL)
    ELSE _prior_pos IS NULL OR e.position > _prior_pos END"""
# the row after an event (SQL over ``acc.row`` and ``e``): a delete removes it, a partial image
# merges over the prior row
ROW_AFTER_SQL = """CASE WHEN e.op = 'DELETE' THEN CAST(NULL AS MAP<STRING, STRING>)
                     WHEN e.present IS NULL THEN e.after
                     ELSE map_concat(coalesce(acc.row, CAST(map() AS MAP<STRING, STRING>)), e.after) END"""


# the type of a key's steps: each applied event's position and time, whether the key holds a row after it
# (``x``) and that row's hash (jobs.fold.fingerprints)
STEPS_TYPE = "ARRAY<STRUCT<pos: STRING, ts: TIMESTAMP, x: BOOLEAN, h: STRUCT<hi: BIGINT, lo: BIGINT>>>"


def steps_sql(row_after: str, row_hash: Callable[[str], str]) -> Accumulated:
    """The steps of a key whose events merge partial images (``_cdc_full`` false): each applied event with
    the row after it (``row_after``) hashed (``row_hash``: the SQL of a row image's hash). A key of whole
    images needs no fold for them (full_image_steps_sql): its accumulator stays empty, and a key with many
    events is not copied once per event."""
    return Accumulated(
        f"CAST(array() AS {STEPS_TYPE})",
        f"CASE WHEN _cdc_full THEN acc.steps ELSE concat(acc.steps, array({_step_sql(row_after, row_hash)})) END")


def full_row_after_sql(event: str) -> str:
    """The row after an event (the SQL ``event``: a struct, or a record's columns with ``''``) of a key whose
    every event carries its whole row: its image (none after a delete), whatever came before it."""
    return f"CASE WHEN {event}op = 'DELETE' THEN CAST(NULL AS MAP<STRING, STRING>) ELSE {event}after END"


FULL_ROW_AFTER_SQL = full_row_after_sql("e.")


def whole_image_sql(row_hash: Callable[[str], str]) -> tuple[str, str]:
    """Whether a record leaves a row where its image is whole (full_row_after_sql), and that row's hash
    (``row_hash``: the SQL of a row image's hash; 0 for a partial image, whose row only the fold knows). SQL
    over the record's columns, computed before the fold, where it is generated code: a lambda is interpreted."""
    return (f"({full_row_after_sql('')}) IS NOT NULL",
            row_hash(f"CASE WHEN present_columns IS NULL THEN {full_row_after_sql('')} END"))


def full_image_steps_sql(applied: str) -> str:
    """The steps of a key whose every event carries its whole row, from its ``applied`` events (SQL of their
    array): each step is the event's own, from what it carries (whole_image_sql), without the fold and
    without a lambda."""
    fields = ", ".join(f"{applied}.{f}" for f in ("position", "event_time", "x", "h"))
    return f"CAST(arrays_zip({fields}) AS {STEPS_TYPE})"


def _step_sql(row_after: str, row_hash: Callable[[str], str]) -> str:
    """One step (STEPS_TYPE) of the event ``e``, the key holding ``row_after`` after it."""
    return (f"named_struct('pos', e.position, 'ts', e.event_time, 'x', ({row_after}) IS NOT NULL, "
            f"'h', {row_hash(f'({row_after})')})")
