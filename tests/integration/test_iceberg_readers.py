"""Other tools read the published tables as they are: one small lake goes through every kind of commit the
pipeline makes (a full load, two merge-on-read runs with position deletes, a compaction, a widened and an added
column, an expiry), and after each the commands of docs/operations/reading-the-lake.md read the table with
pyiceberg, DuckDB, polars' native reader, daft and DataFusion: the current rows, a key's rows, and (but
DataFusion) the rows a run left, its snapshot found by the run id in its summary. Each is compared with a model
of the rows kept here alongside the runs (a dict of key -> row), never with the pipeline's own reader. The lake
is published by jobs.iceberg.write.publish_state in the layout the fold gives a table keyed by ``id``."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from jobs import cli
from jobs.fold.buckets import touched_buckets
from jobs.iceberg.attach import CATALOG_NAME, catalog_properties
from jobs.iceberg.catalog import BUCKET_COLUMN, load_table, open_catalog
from jobs.iceberg.expire import expire_table
from jobs.iceberg.layout import with_bucket
from jobs.iceberg.read import FILE_COLUMN, ROW_COLUMN, read_state
from jobs.iceberg.write import Bucketing, publish_state
from jobs.lake.layout import Lake
from jobs.model.buckets import BucketField, BucketLayout
from jobs.model.properties import KEY_COLUMNS_PROP
from tests.support.paths import REPO

DOC = REPO / "docs" / "operations" / "reading-the-lake.md"
PIPELINE, TABLE_ID, NAME = "shop", "shop.public.items", "shop.shop__public__items"
BUCKETS, ROWS = 8, 300
KEY = 42  # the key looked up: changed by the first merge-on-read run, widened later
ENGINES = ("pyiceberg", "duckdb", "polars", "daft", "datafusion")
TIME_TRAVELLERS = ("pyiceberg", "duckdb", "polars", "daft")  # DataFusion via pyiceberg-core reads the current one


def documented(block: str) -> str:
    """The code of the page's block marked ``<!-- reader: <block> -->``, as written."""
    blocks = re.findall(r"^<!-- reader: ([\w-]+) -->\n```\w*\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)
    found = [code for name, code in blocks if name == block]
    assert len(found) == 1, f"{DOC.name}: {len(found)} blocks marked reader: {block}"
    return found[0]


def _arrow(result) -> pa.Table:
    """A reader's result as Arrow: a pyarrow table (pyiceberg), a DuckDB relation, a polars LazyFrame, a daft or
    a DataFusion DataFrame."""
    if isinstance(result, pa.Table):
        return result
    for method in ("fetch_arrow_table", "to_arrow_table"):  # DuckDB, DataFusion
        if hasattr(result, method):
            return getattr(result, method)()
    if hasattr(result, "collect"):  # polars
        return result.collect().to_arrow()
    return result.to_arrow()  # daft


def _rows(result, columns) -> list[dict]:
    return sorted(({c: r[c] for c in columns} for r in _arrow(result).to_pylist()), key=lambda r: r["id"])


@dataclass
class Step:
    """What one step left: the model's rows, and what each reader read then."""

    name: str
    run_id: str  # the run whose snapshot is read back by its run id
    columns: tuple[str, ...]
    expected: list[dict]
    then_columns: tuple[str, ...]
    expected_then: list[dict]
    published: object = None
    read: dict[str, dict] = field(default_factory=dict)  # engine -> rows, one, then (or error)
    files: dict[str, int] = field(default_factory=dict)


class ReadersLake:
    """The lake, the model of its one table (key -> row, columns in order) and what each step left."""

    def __init__(self, spark, root):
        self.spark, self.lake = spark, Lake.at(str(root))
        self.catalog = open_catalog(self.lake)
        self.columns = {"id": "int", "name": "string", "qty": "int"}
        self.model: dict[int, dict] = {}
        self.history: dict[str, tuple[tuple[str, ...], list[dict]]] = {}  # run id -> its columns and rows
        self.steps: list[Step] = []
        self.duckdb: dict = {}

    # ---- the runs -------------------------------------------------------------------------------
    def _frame(self, rows):
        ddl = ", ".join(f"`{c}` {t}" for c, t in self.columns.items())
        return self.spark.createDataFrame([tuple(r.get(c) for c in self.columns) for r in rows], ddl)

    def _layout(self) -> BucketLayout:
        return BucketLayout((BucketField("id", self.columns["id"], BUCKETS),))

    def publish(self, run_id: str, changed: set[int] | None = None, rewrite: bool = False):
        """The model's rows as a run publishes them: the whole table (``changed`` None); the touched buckets
        rewritten whole (``rewrite``); or merge-on-read, the changed keys' rows appended and the rows they
        replace deleted by position (read with their positions, as the fold's merge does)."""
        properties = {KEY_COLUMNS_PROP: json.dumps(["id"])}
        rows = sorted(self.model.values(), key=lambda r: r["id"])
        replaced = None
        if changed is None:
            bucketing, state = Bucketing(BUCKETS, self._layout()), self._frame(rows)
        else:
            keys = self.spark.createDataFrame([({"id": str(k)},) for k in sorted(changed)], "key map<string,string>")
            touched = touched_buckets(keys, self._layout(), {"id": self.columns["id"]})
            bucketing = Bucketing(BUCKETS, self._layout(), touched)
            if rewrite:
                state = with_bucket(self._frame(rows), self._layout()).where(F.col(BUCKET_COLUMN).isin(sorted(touched)))
            else:
                state = self._frame([self.model[k] for k in sorted(changed) if k in self.model])
                table = load_table(self.catalog, PIPELINE, TABLE_ID)
                replaced = (read_state(self.spark, table, touched, positions=True)
                            .where(F.col("id").isin(sorted(changed))).select("id", BUCKET_COLUMN, FILE_COLUMN, ROW_COLUMN))
        published = publish_state(self.catalog, PIPELINE, TABLE_ID, state, dict(self.columns), run_id, properties,
                                  bucketing=bucketing, replaced=replaced, identifier=("id",))
        self.history[run_id] = (tuple(self.columns), [dict(r) for r in rows])
        return published

    # ---- the readers ----------------------------------------------------------------------------
    def read(self, name: str, run_id: str, published=None) -> Step:
        """Every reader's rows of the table now, by the page's blocks in one namespace (as one session runs
        them), the lake's values in place of the page's; recorded as step ``name``."""
        then_columns, then_rows = self.history[run_id]
        now = [dict(r) for r in sorted(self.model.values(), key=lambda r: r["id"])]
        step = Step(name, run_id, tuple(self.columns), now, then_columns, then_rows, published)
        if not self.duckdb:  # one connection for the whole lake: the catalog attached once
            self.duckdb = self._namespace(run_id)
            exec(documented("duckdb-connect"), self.duckdb)
        ns = {**self._namespace(run_id), "con": self.duckdb["con"]}
        # the table the page's pyiceberg-catalog block loads (by the entry attach writes: a test process has
        # imported pyiceberg before any .pyiceberg.yaml, so the entry's properties are given here)
        from pyiceberg.catalog import load_catalog

        ns["table"] = load_catalog(CATALOG_NAME, **catalog_properties(self.lake)).load_table(NAME)
        for engine in ENGINES:
            try:
                exec(documented(engine), ns)
                step.read[engine] = {
                    "rows": _rows(ns["rows"], step.columns), "one": _rows(ns["one"], step.columns),
                    "then": _rows(ns["then"], then_columns) if engine in TIME_TRAVELLERS else None}
            except Exception as exc:  # noqa: BLE001 - one reader's failure is its test's, the others read on
                step.read[engine] = {"error": f"{type(exc).__name__}: {exc}"}
            ns.pop("then", None)
        try:
            exec(documented("files"), ns)
            step.files = {"pyiceberg lookup": ns["lookup_files"], "pyiceberg all": ns["all_files"],
                          "duckdb lookup": _files_read(ns["profile"]),
                          "duckdb all": _files_read(ns["con"].sql(
                              "EXPLAIN ANALYZE SELECT * FROM iceberg_scan(getvariable('meta'))").fetchall()[0][1])}
        except Exception as exc:  # noqa: BLE001 - the lookup test's failure, not every test's
            step.files = {"error": f"{type(exc).__name__}: {exc}"}
        self.steps.append(step)
        return step

    def _namespace(self, run_id: str) -> dict:
        ns: dict = {}
        exec(documented("params"), ns)  # the page's values: this lake's in their place
        assert {k for k in ns if not k.startswith("__")} == {"lake", "name", "key", "value", "run_id"}
        return {"lake": self.lake.root, "name": NAME, "key": "id", "value": KEY, "run_id": run_id}


def _files_read(profile: str) -> int:
    return int(re.search(r"Total Files Read:\s*(\d+)", profile).group(1))


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Iterator[ReadersLake]:
    lake = ReadersLake(spark, tmp_path_factory.mktemp("readers") / "lake")
    model = lake.model

    # a full load
    model.update({i: {"id": i, "name": f"item {i}", "qty": i % 7} for i in range(1, ROWS + 1)})
    lake.read("full load", "r1", lake.publish("r1"))

    # merge-on-read: updates, deletes, inserts
    first = {3, KEY, 77, 150, 299, 10, 11, 301}
    for i in (3, KEY, 77, 150, 299):
        model[i] = {**model[i], "name": f"changed {i}"}
    for i in (10, 11):
        del model[i]
    model[301] = {"id": 301, "name": "item 301", "qty": 1}
    lake.read("merge-on-read 1", "r1", lake.publish("r2", first))

    second = {5, KEY, 200, 100, 302}
    for i in (5, KEY, 200):
        model[i] = {**model[i], "qty": 99}
    del model[100]
    model[302] = {"id": 302, "name": "item 302", "qty": 2}
    lake.read("merge-on-read 2", "r2", lake.publish("r3", second))

    # a compaction: the buckets of keys the two runs deleted from, rewritten whole
    third = {3, 77, 150, 5, 200}
    for i in third:
        model[i] = {**model[i], "qty": 5}
    lake.read("compaction", "r3", lake.publish("r4", third, rewrite=True))

    # qty widened from int to bigint, a column added
    lake.columns = {"id": "int", "name": "string", "qty": "bigint", "note": "string"}
    for row in model.values():
        row["note"] = None
    fourth = {KEY, 7, 303}
    model[KEY] = {**model[KEY], "qty": 5_000_000_000, "note": "widened"}
    model[7] = {**model[7], "note": "noted"}
    model[303] = {"id": 303, "name": "item 303", "qty": 6_000_000_000, "note": "new"}
    lake.read("widened and added", "r4", lake.publish("r5", fourth))

    # the expiry: every snapshot but the last two, and the files only they reached
    table = load_table(lake.catalog, PIPELINE, TABLE_ID)
    expired = expire_table(table, datetime.now(UTC) + timedelta(seconds=1), retain_last=2)
    lake.read("expired", "r4", expired)
    yield lake
    lake.duckdb["con"].close()


def test_the_lake_went_through_every_kind_of_commit(lake):
    full, delta1, delta2, compaction, widened, expiry = (s.published for s in lake.steps)
    assert (full.mode, full.buckets_rewritten) == ("rewrite", BUCKETS)
    assert (delta1.mode, delta1.position_deletes) == ("delta", 7)  # 5 updated, 2 deleted
    assert (delta2.mode, delta2.position_deletes) == ("delta", 4)
    assert compaction.mode == "rewrite" and compaction.delete_files_removed > 0 and compaction.position_deletes == 0
    assert (widened.mode, widened.position_deletes) == ("delta", 2)
    table = load_table(lake.catalog, PIPELINE, TABLE_ID)
    assert str(table.schema().find_field("qty").field_type) == "long" and table.schema().find_field("note")
    assert expiry.runs_expired == ["r1", "r2", "r3"] and expiry.files_deleted.get("data", 0) > 0


@pytest.mark.parametrize("engine", ENGINES)
def test_every_reader_reads_the_rows_and_a_keys_rows_after_each_commit(lake, engine):
    wrong = {}
    for step in lake.steps:
        read = step.read[engine]
        if "error" in read:
            wrong[step.name] = read["error"]
            continue
        one = [r for r in step.expected if r["id"] == KEY]
        if read["rows"] != step.expected:
            wrong[step.name] = {"missing": [r for r in step.expected if r not in read["rows"]][:5],
                                "unexpected": [r for r in read["rows"] if r not in step.expected][:5]}
        elif read["one"] != one:
            wrong[step.name] = {"lookup": read["one"], "expected": one}
    assert wrong == {}


@pytest.mark.parametrize("engine", TIME_TRAVELLERS)
def test_every_reader_reads_the_rows_a_run_left_by_its_run_id(lake, engine):
    wrong = {step.name: step.read[engine].get("error") or {"run": step.run_id, "read": len(step.read[engine]["then"]),
                                                            "expected": len(step.expected_then)}
             for step in lake.steps if step.read[engine].get("then") != step.expected_then}
    assert wrong == {}
    # the expiry took the snapshots of the runs before the last two: their run ids find none
    table = load_table(lake.catalog, PIPELINE, TABLE_ID)
    runs = [s.summary.additional_properties.get("cdc.run-id") for s in table.metadata.snapshots]
    assert runs == ["r4", "r5"]


def test_a_key_lookup_reads_fewer_files_than_a_full_scan(lake):
    for step in lake.steps[1:]:  # once merge-on-read runs added files of few keys, their bounds leave them out
        assert "error" not in step.files, (step.name, step.files)
        assert step.files["pyiceberg lookup"] < step.files["pyiceberg all"], (step.name, step.files)
        assert step.files["duckdb lookup"] < step.files["duckdb all"], (step.name, step.files)


# DuckDB 1.4 prunes by column bounds only (the page's known limits), so it is not asked to
def test_a_key_lookup_plans_only_the_files_of_its_bucket(lake):
    full_load = lake.steps[0]
    assert full_load.files["pyiceberg all"] == BUCKETS  # one file a bucket
    assert full_load.files["pyiceberg lookup"] == 1


# readers that upsert or deduplicate by key (Spark, Flink, pyiceberg's upsert) find it there, not in the
# table's cdc.key-columns property
def test_the_key_is_the_tables_identifier_field(lake):
    schema = load_table(lake.catalog, PIPELINE, TABLE_ID).schema()
    assert schema.identifier_field_names() == {"id"}


def test_the_documented_catalog_entry_opens_the_table_in_a_new_interpreter(lake, capsys):
    """The page's attach command writes the entry; its pyiceberg blocks, run as a user runs them (a new
    interpreter with PYICEBERG_HOME=<lake>), read the table now and as run r4 left it."""
    command = re.search(r"^\.venv/bin/python -m jobs (attach .*)$", DOC.read_text(encoding="utf-8"), re.M).group(1)
    assert cli.main(command.replace("/data/lake", lake.lake.root).split()) == 0
    with open(lake.lake.join(".pyiceberg.yaml"), encoding="utf-8") as written:
        assert capsys.readouterr().out == written.read()
    params = f"lake, name, key, value, run_id = {lake.lake.root!r}, {NAME!r}, 'id', {KEY}, 'r4'\n"
    script = params + documented("pyiceberg-catalog") + documented("pyiceberg") + (
        "import json\nprint(json.dumps({k: v.to_pylist() for k, v in (('rows', rows), ('one', one), ('then', then))}, "
        "default=str))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={"PYICEBERG_HOME": lake.lake.root, "PATH": "/usr/bin:/bin"}, cwd=lake.lake.root)
    assert done.returncode == 0, done.stderr[-2000:]
    read = json.loads(done.stdout)
    final = lake.steps[-1]
    assert _rows(pa.Table.from_pylist(read["rows"]), final.columns) == final.expected
    assert _rows(pa.Table.from_pylist(read["then"]), final.then_columns) == final.expected_then
