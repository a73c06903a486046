"""A run that fails before its Iceberg commit leaves the published snapshot as it was; a re-run heals."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs import stages
from jobs.demo.simulator import SourceSimulator, TableSpec, write_parquet
from jobs.iceberg.catalog import load_table, open_catalog
from jobs.iceberg.expire import expire_pipeline
from jobs.lake.layout import Lake
from jobs.model.properties import RUN_ID_PROP, TOMBSTONES_PROP
from jobs.model.reports import TableReport
from tests.support.pipeline_runs import decode_and_merge

TABLE = TableSpec("db", "public", "accounts", [("id", "int"), ("owner", "text"), ("balance", "decimal(12,2)")],
                  ["id"])


def _rows(lake: Lake, table_id: str) -> list[dict]:
    table = load_table(open_catalog(lake), "atom", table_id)
    return sorted(table.scan().to_arrow().select(["id", "owner", "balance"]).to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("rows, ops, crash_in, mode", [
    # many changes of a small table: the touched buckets are rewritten; crash once the data is written
    (20, 60, "jobs.iceberg.row_delta.data_file", "rewrite"),
    # few changes of a larger one: position deletes; crash once the delete files are written too
    (400, 6, "jobs.iceberg.write._position_delete_file", "delta"),
])
def test_failure_before_commit_keeps_the_published_snapshot(spark, tmp_path, monkeypatch, rows, ops, crash_in, mode):
    sim = SourceSimulator(21, [TABLE], "postgresql", n_partitions=2)
    sim.populate("accounts", rows)
    sim.snapshot()
    first = sim.to_kafka_records(with_schema=True)
    sim.random_ops(ops)
    second = sim.to_kafka_records(with_schema=True)[len(first):]
    write_parquet(tmp_path / "r1" / "p.parquet", first)
    write_parquet(tmp_path / "r2" / "p.parquet", second)
    lake = Lake.at(str(tmp_path / "lake"))

    def run(run_id, raw):
        ctx = stages.RunContext(lake, "atom", run_id)
        return decode_and_merge(spark, ctx, "debezium", raw).tables["db.public.accounts"]

    run("r1", tmp_path / "r1")
    table_id = "db.public.accounts"
    table = load_table(open_catalog(lake), "atom", table_id)
    snapshot_before = table.current_snapshot().snapshot_id
    rows_before = _rows(lake, table_id)

    # crash after Spark wrote the new data files, before the catalog commit
    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash before commit")

    monkeypatch.setattr(crash_in, crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run("r2", tmp_path / "r2")
    table = load_table(open_catalog(lake), "atom", table_id)
    assert table.current_snapshot().snapshot_id == snapshot_before
    assert _rows(lake, table_id) == rows_before

    monkeypatch.undo()
    assert run("r2", tmp_path / "r2").mode == mode
    expected = sorted(
        ({"id": r["id"], "owner": r["owner"], "balance": r["balance"]} for r in sim.expected_state("accounts")),
        key=lambda r: r["id"],
    )
    assert _rows(lake, table_id) == expected
    table = load_table(open_catalog(lake), "atom", table_id)
    assert table.current_snapshot().summary.additional_properties[RUN_ID_PROP] == "r2"


ORDERS = TableSpec("db", "public", "orders", [("order_id", "int"), ("item", "text"), ("qty", "int")], ["order_id"])


def test_a_run_failing_at_its_second_table_publishes_neither_and_a_rerun_publishes_both(spark, tmp_path, monkeypatch):
    """The run's tables are committed once, together: a crash while the second table is staged (its first
    table staged, files written) leaves both tables at the run before; a re-run publishes both."""
    from jobs.iceberg import row_delta

    sim = SourceSimulator(22, [TABLE, ORDERS], "postgresql", n_partitions=2)
    sim.populate("accounts", 30)
    sim.populate("orders", 30)
    sim.snapshot()
    first = sim.to_kafka_records(with_schema=True)
    sim.random_ops(30, tables=["accounts"])
    sim.random_ops(30, tables=["orders"])
    write_parquet(tmp_path / "r1" / "p.parquet", first)
    write_parquet(tmp_path / "r2" / "p.parquet", sim.to_kafka_records(with_schema=True)[len(first):])
    lake = Lake.at(str(tmp_path / "lake"))
    table_ids = ("db.public.accounts", "db.public.orders")

    def run(run_id):
        return decode_and_merge(spark, stages.RunContext(lake, "atom", run_id), "debezium", tmp_path / run_id)

    def snapshots():
        return [load_table(open_catalog(lake), "atom", t).current_snapshot().snapshot_id for t in table_ids]

    run("r1")
    before = snapshots()
    real, staging = row_delta.data_file, []

    def crash_at_the_second_table(transaction, path, partition=()):
        if not staging:
            staging.append(transaction)
        elif transaction is not staging[0]:
            raise RuntimeError("simulated crash staging the second table")
        return real(transaction, path, partition)

    monkeypatch.setattr(row_delta, "data_file", crash_at_the_second_table)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run("r2")
    monkeypatch.undo()
    assert len(staging) == 1 and snapshots() == before  # the first table was staged, and is not committed
    assert set(run("r2").tables) == set(table_ids)
    for table_id, spec in zip(table_ids, (TABLE, ORDERS), strict=True):
        table = load_table(open_catalog(lake), "atom", table_id)
        assert table.current_snapshot().summary.additional_properties[RUN_ID_PROP] == "r2"
        columns = [c for c, _ in spec.columns]
        rows = sorted(table.scan().to_arrow().select(columns).to_pylist(), key=lambda r: r[spec.primary_key[0]])
        assert rows == [{c: r[c] for c in columns} for r in sim.expected_state(spec.name)], table_id


# ---- two attempts of one run ------------------------------------------------------------------------
# The interleavings below are made deterministic in one process: attempt A is held at the moment it has
# written and read back its files, before its catalog commit (a hook on pyiceberg's reading of the new
# files' footers, which runs A's real code and then the other attempt's), as a stalled Airflow attempt
# would be while its retry runs. The attempts call merge_changes, below the pipeline's lease
# (jobs.lake.lease, tested in tests/unit/lake/test_lease.py): what is checked is that the files and the commit
# stay sound where two attempts do meet.
class _Stalled(Exception):
    """Attempt B stopped just before its catalog commit, never to commit."""


def _two_runs(tmp_path, rows: int, ops: int):
    sim = SourceSimulator(23, [TABLE], "postgresql", n_partitions=2)
    sim.populate("accounts", rows)
    sim.snapshot()
    first = sim.to_kafka_records(with_schema=True)
    sim.random_ops(ops)
    second = sim.to_kafka_records(with_schema=True)[len(first):]
    write_parquet(tmp_path / "r1" / "p.parquet", first)
    write_parquet(tmp_path / "r2" / "p.parquet", second)
    return sim


def _expected(sim) -> list[dict]:
    return sorted(({"id": r["id"], "owner": r["owner"], "balance": r["balance"]} for r in sim.expected_state("accounts")),
                  key=lambda r: r["id"])


def _merge(spark, lake: Lake, run_id: str, raw) -> TableReport:
    """One attempt of the run's merge, below the lease: its decode, then merge_changes."""
    from jobs.fold.stage import merge_changes
    from jobs.formats import DecodeOptions

    decoded = stages.run_decode(spark, stages.RunContext(lake, "atom", run_id), "debezium", str(raw), DecodeOptions())
    try:
        return merge_changes(spark, lake, "atom", run_id, decoded.changes).tables["db.public.accounts"]
    finally:
        decoded.release()


def _files_exist(lake: Lake) -> None:
    """Every file the table's current snapshot sends a reader to exists."""
    table = load_table(open_catalog(lake), "atom", "db.public.accounts")
    for task in table.scan().plan_files():
        for path in (task.file.file_path, *(d.file_path for d in task.delete_files)):
            assert Path(path.removeprefix("file://")).exists(), path
    tombstones = table.properties.get(TOMBSTONES_PROP)
    if tombstones:
        assert list(Path(tombstones.removeprefix("file://")).glob("*.parquet")), tombstones


def _hold_first_attempt(monkeypatch, then, stall_others: bool = True):
    """Run ``then()`` as soon as the first attempt has read back the files it wrote, before its commit;
    with ``stall_others``, an attempt reaching that moment inside ``then`` stalls there (_Stalled)."""
    from jobs.iceberg import row_delta

    real = row_delta.data_file
    depth, first_attempts = [], []

    def held(transaction, path, partition=()):
        file = real(transaction, path, partition)
        if first_attempts and transaction is not first_attempts[0]:
            if stall_others:
                raise _Stalled()
            return file
        if depth:  # the first attempt's other files
            return file
        depth.append(1)
        first_attempts.append(transaction)
        try:
            then()
        except _Stalled:
            pass
        return file

    monkeypatch.setattr(row_delta, "data_file", held)


@pytest.mark.parametrize("rows, ops", [(20, 60), (400, 6)], ids=["rewrite", "delta"])
def test_an_attempt_never_commits_files_another_attempt_of_the_run_replaced(spark, tmp_path, monkeypatch, rows, ops):
    """Attempt A of r2 has written its files and stalls before its commit; attempt B of r2 writes its own
    and stalls before its commit; A commits. Every file A's snapshot names exists (B wrote beside A's,
    never over them) and the table is the source's; a re-run finds r2 published."""
    sim = _two_runs(tmp_path, rows, ops)
    lake = Lake.at(str(tmp_path / "lake"))
    _merge(spark, lake, "r1", tmp_path / "r1")
    _hold_first_attempt(monkeypatch, lambda: _merge(spark, lake, "r2", tmp_path / "r2"))
    assert _merge(spark, lake, "r2", tmp_path / "r2").mode == ("delta" if ops < 10 else "rewrite")
    monkeypatch.undo()
    _files_exist(lake)
    assert _rows(lake, "db.public.accounts") == _expected(sim)
    assert _merge(spark, lake, "r2", tmp_path / "r2").already_published
    assert _rows(lake, "db.public.accounts") == _expected(sim)
    # expire finds the stalled attempt's files in their folders, and takes them (folders too) once old enough
    kinds = ("data", "deletes") if ops < 10 else ("data",)
    table_dir = next((tmp_path / "lake" / "warehouse").glob("atom*/db__public__accounts"))
    assert all(len(list((table_dir / kind / "run=r2").iterdir())) == 2 for kind in kinds)
    as_of = datetime.now(UTC) + timedelta(days=2)
    expire_pipeline(open_catalog(lake), "atom", as_of, retain_days=0, retain_last=10)
    table = load_table(open_catalog(lake), "atom", "db.public.accounts")
    named = {Path(t.file.file_path).parent.parent.name for t in table.scan().plan_files() if "/run=r2/" in t.file.file_path}
    assert [[p.name for p in (table_dir / kind / "run=r2").iterdir()] for kind in kinds] == [list(named)] * len(kinds)
    _files_exist(lake)
    assert _rows(lake, "db.public.accounts") == _expected(sim)


@pytest.mark.parametrize("first_run", [True, False], ids=["creating the table", "changing it"])
def test_losing_a_commit_race_says_another_attempt_committed_and_a_rerun_finishes(spark, tmp_path, monkeypatch,
                                                                                 first_run):
    """Attempt A stalls before its commit while attempt B of the same run commits: A's commit is refused
    (pyiceberg's "Table already exists" or ValidationException underneath) with an error saying that
    another attempt or run committed first and that re-running the run finishes it; the table is B's."""
    sim = _two_runs(tmp_path, 40, 30)
    lake = Lake.at(str(tmp_path / "lake"))
    if not first_run:
        _merge(spark, lake, "r1", tmp_path / "r1")
    run_id, raw = ("r1", tmp_path / "r1") if first_run else ("r2", tmp_path / "r2")
    _hold_first_attempt(monkeypatch, lambda: _merge(spark, lake, run_id, raw), stall_others=False)
    with pytest.raises(Exception) as refused:
        _merge(spark, lake, run_id, raw)
    monkeypatch.undo()
    assert type(refused.value).__name__ == "CommitConflict", repr(refused.value)
    message = str(refused.value)
    assert "another attempt" in message and f"re-run run {run_id}" in message, message
    assert _merge(spark, lake, run_id, raw).already_published
    _files_exist(lake)
    if not first_run:
        assert _rows(lake, "db.public.accounts") == _expected(sim)


def test_a_commit_refuses_files_gone_since_they_were_written(spark, tmp_path, monkeypatch):
    """A file the commit would name is deleted after it was written (an attempt or an expire of another
    process): the commit is refused, naming the file, nothing is published, and a re-run publishes."""
    sim = _two_runs(tmp_path, 400, 6)
    lake = Lake.at(str(tmp_path / "lake"))
    _merge(spark, lake, "r1", tmp_path / "r1")
    table = load_table(open_catalog(lake), "atom", "db.public.accounts")
    snapshot_before = table.current_snapshot().snapshot_id
    gone = []

    def delete_one_written_file():
        written = sorted(p for p in (tmp_path / "lake").rglob("*.parquet") if "/data/run=r2/" in str(p))
        gone.append(written[0])
        written[0].unlink()

    _hold_first_attempt(monkeypatch, delete_one_written_file)
    with pytest.raises(Exception) as refused:
        _merge(spark, lake, "r2", tmp_path / "r2")
    monkeypatch.undo()
    assert type(refused.value).__name__ == "MissingFiles", repr(refused.value)
    assert gone[0].name in str(refused.value) and "re-run run r2" in str(refused.value)
    table = load_table(open_catalog(lake), "atom", "db.public.accounts")
    assert table.current_snapshot().snapshot_id == snapshot_before
    assert _merge(spark, lake, "r2", tmp_path / "r2").mode == "delta"
    _files_exist(lake)
    assert _rows(lake, "db.public.accounts") == _expected(sim)
