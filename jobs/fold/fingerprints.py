"""A key's value fingerprint steps inside the fold: the hash (jobs.reconcile.fingerprint) of each row the fold
makes, from the row images it folds (maps of canonical strings) typed as the state holds them."""
from __future__ import annotations

from collections.abc import Mapping

from jobs.fold.values import from_canonical_sql
from jobs.reconcile.fingerprint import spark_md5_number, spark_row_text
from jobs.spark.sql import sql_str


def map_hash_sql(row_map: str, types: Mapping[str, str]) -> str:
    """Spark SQL of the hash of the row whose image is the map ``row_map`` (0 for no row): each column of
    ``types`` as the state types it."""
    values = {c: from_canonical_sql(f"try_element_at({row_map}, {sql_str(c)})", t) for c, t in types.items()}
    return f"CASE WHEN {row_map} IS NULL THEN 0BD ELSE {spark_md5_number(spark_row_text(values, types), 16)} END"


def hashed_steps_sql(steps: str, types: Mapping[str, str]) -> str:
    """The fold's steps (``steps``: an array of (pos, ts, d, row)) with the hash of each one's row instead."""
    return (f"transform({steps}, _st -> named_struct('pos', _st.pos, 'ts', _st.ts, 'd', _st.d, "
            f"'h', {map_hash_sql('_st.row', types)}))")


def step_deltas_sql(steps: str, prior_hash: str) -> str:
    """Each step's change of the key's hash: its row's hash less the one before (the prior row's first)."""
    return (f"transform({steps}, (_st, _si) -> named_struct('pos', _st.pos, 'ts', _st.ts, 'd', _st.d, "
            f"'dh', CAST(_st.h - CASE WHEN _si = 0 THEN {prior_hash} ELSE {steps}[_si - 1].h END AS DECIMAL(21,0))))")
