"""Workloads through ``jobs run`` and their published state checked against the source simulator's
independent SQLite replay: shared by the integration tests (test_workload_replay, test_every_format_replay,
test_history, test_run_splits, test_properties, ...)."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from jobs.demo.simulator import INVENTORY_TABLES, SourceSimulator, encode_value, write_parquet
from jobs.iceberg.catalog import open_catalog
from jobs.lake.layout import Lake
from tests.support.paths import REPO
from tests.support.pipeline_runs import jobs_run

TABLES = INVENTORY_TABLES


def make_workload(seed: int, connector: str, ops: int, replica_identity_default: bool = False) -> SourceSimulator:
    tables = list(TABLES)
    if replica_identity_default:
        # updates without before images and unchanged TOAST columns sent as "unavailable"
        tables[0] = dataclasses.replace(tables[0], replica_identity="default", toasted=("name",))
    sim = SourceSimulator(seed, tables, connector, n_partitions=3)
    sim.populate("items", 40)
    sim.populate("stock", 30)
    sim.snapshot()
    sim.random_ops(ops // 2, max_tx_size=3, concurrency=2)
    sim.redeliver(0.05)
    sim.garbage(5)
    sim.random_ops(ops - ops // 2, max_tx_size=3, concurrency=2)
    sim.redeliver(0.03)
    return sim


def run_one(raw: Path, lake: Path, run_id: str, fmt: str = "debezium", pipeline: str = "wl",
            extra: Sequence[str] = ()) -> None:
    """One `jobs run` of a raw folder, in this process, asserted to succeed."""
    assert jobs_run(fmt, raw, lake, pipeline, run_id, *extra) == 0


def run_parts(tmp: Path, parts: Iterable[list], fmt: str = "debezium", pipeline: str = "wl",
              extra: Sequence[str] = ()) -> Path:
    """One `jobs run` per part of the messages, in order (raw folders raw0, raw1, ..., run ids run0,
    run1, ...), each asserted to succeed; the lake."""
    lake = tmp / "lake"
    for i, part in enumerate(parts):
        raw = tmp / f"raw{i}"
        raw.mkdir()
        write_parquet(raw / "part-0.parquet", part)
        run_one(raw, lake, f"run{i}", fmt, pipeline, extra)
    return lake


def published_rows(lake: Path | str, pipeline: str, table: str, catalog=None) -> list[dict]:
    """The state rows of ``table`` without the fold's columns; ``catalog``: another than the lake's own."""
    catalog = catalog or open_catalog(Lake.at(str(lake)))
    (ident,) = [t for t in catalog.list_tables(pipeline) if t[-1].endswith(f"__{table}")]
    rows = catalog.load_table(ident).scan().to_arrow().to_pylist()
    return [{k: v for k, v in r.items() if not k.startswith("_cdc_")} for r in rows]


def normalise(value):
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return value


def assert_state_equals_source(sim: SourceSimulator, lake: Path | str, pipeline: str, with_schema: bool,
                               expected_states: dict[str, list[dict]] | None = None, catalog=None) -> None:
    """``expected_states``: the source's state at an earlier moment, where not the current one;
    ``catalog``: the tables' catalog where it is not the lake's embedded one."""
    for table, spec in sim.tables.items():
        expected = expected_states[table] if expected_states else sim.expected_state(table)
        actual = published_rows(lake, pipeline, table, catalog)
        if not with_schema:
            # without a schema section the messages carry no types: state holds the values as sent
            expected = [
                {c: (None if v is None else str(encode_value(spec.column_type(c), v, False)).replace("True", "true")
                     .replace("False", "false")) for c, v in row.items()}
                for row in expected
            ]
        key = lambda r: tuple(str(r[k]) for k in spec.primary_key)  # noqa: E731, B023 (used in this iteration)
        exp = sorted(({k: normalise(v) for k, v in r.items()} for r in expected), key=key)
        act = sorted(({k: normalise(v) for k, v in r.items()} for r in actual), key=key)
        assert len(act) == len(exp), f"{table}: {len(act)} rows published, {len(exp)} in the source"
        doubles = {c for c in spec.column_names if spec.column_type(c).kind == "double"}
        for a, e in zip(act, exp):
            assert a.keys() == e.keys()
            for c in a:
                if c in doubles and a[c] is not None and e[c] is not None:
                    assert float(a[c]) == pytest.approx(float(e[c])), f"{table}.{c}: {a} != {e}"
                else:
                    assert a[c] == e[c], f"{table}.{c}: {a} != {e}"


def same_value(kind: str, actual, expected, ms_only: bool) -> bool:
    if actual is None or expected is None:
        return actual is None and expected is None
    if kind in ("int", "bigint"):
        return int(actual) == int(expected)
    if kind == "decimal":
        return Decimal(str(actual)) == Decimal(str(expected))
    if kind == "double":
        return float(actual) == pytest.approx(float(expected))
    if kind == "boolean":
        return str(actual).lower() in ("true", "1") if expected else str(actual).lower() in ("false", "0")
    if kind == "date":
        return str(actual)[:10] == expected.isoformat()
    if kind == "timestamp":
        got = actual if isinstance(actual, datetime) else datetime.fromisoformat(str(actual))
        want = expected.replace(tzinfo=None)
        if ms_only:
            want = want.replace(microsecond=want.microsecond // 1000 * 1000)
        return got.replace(tzinfo=None) == want
    return actual == expected


def assert_state_means_source(sim: SourceSimulator, lake, fmt: str,
                              expected_states: dict[str, list[dict]] | None = None) -> None:
    for table, spec in sim.tables.items():
        rows = expected_states[table] if expected_states else sim.expected_state(table)
        expected = {tuple(str(r[k]) for k in spec.primary_key): r for r in rows}
        # Oracle-style tools (SharePlex, OGG) name tables in upper case
        name = table.upper() if fmt in ("shareplex", "ogg") else table
        actual = {tuple(str(r[k]) for k in spec.primary_key): r for r in published_rows(lake, "wl", name)}
        assert actual.keys() == expected.keys(), f"{table}: keys differ"
        for key, row in expected.items():
            for column, value in row.items():
                got = actual[key][column]
                assert same_value(spec.column_type(column).kind, got, value, fmt == "dataworks"), \
                    f"{table} {key}.{column}: published {got!r}, source {value!r}"


def expected_versions(sim: SourceSimulator) -> dict[str, dict[tuple, list]]:
    """table -> key -> [(op, row image or None)], in the source's commit order (mysql binlog)."""
    ops = {"r": "SNAPSHOT", "c": "INSERT", "u": "UPDATE", "d": "DELETE"}
    out: dict[str, dict[tuple, list]] = defaultdict(lambda: defaultdict(list))
    for e in sim.events:
        if e.kind != "change":
            continue
        spec = sim.tables[e.table]
        key = tuple(str(e.key[k]) for k in spec.primary_key)
        image = None if e.op == "d" else {c: normalise(e.after[c]) for c in spec.column_names}
        out[e.table][key].append((ops[e.op], image))
    return out


def history_rows(lake, table: str) -> list[dict]:
    catalog = open_catalog(Lake.at(str(lake)))
    (ident,) = [t for t in catalog.list_tables("wl") if t[-1].endswith(f"__{table}__history")]
    return catalog.load_table(ident).scan().to_arrow().to_pylist()


def run_cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # the command line as a user runs it: adaptive execution on, as in production (conftest turns it off);
    # a fresh JVM for a few thousand messages, so the JIT's quick compiler only (CDC_JIT, jobs.spark.session)
    env = {"CDC_JIT": "c1", **{k: v for k, v in (os.environ if env is None else env).items()
                               if k != "CDC_SPARK_ADAPTIVE"}, "PYTHONPATH": str(REPO), "CDC_SPARK_MASTER": "local[2]"}
    return subprocess.run([sys.executable, "-m", "jobs", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
