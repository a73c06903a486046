"""`python -m jobs run` called in the test's own process (its SparkSession, so no JVM start per run)."""
from __future__ import annotations

from os import PathLike

from jobs import cli
from jobs.iceberg.catalog import load_table, open_catalog


def jobs_run(fmt: str, raw: str | PathLike, lake: str | PathLike, pipeline: str, run_id: str, *extra: str) -> int:
    """One ``jobs run`` of ``raw`` into ``lake``; its exit code (0: ran and published)."""
    return cli.main(["run", "--format", fmt, "--raw", str(raw), "--lake", str(lake), "--pipeline", pipeline,
                     "--run-id", run_id, *extra])


def decode_and_merge(spark, ctx, fmt: str, raw: str | PathLike, options=None, **merge_options):
    """The decode and the fold + publish of one run, in memory as ``transform`` hands them over, without
    its validation; the merge report."""
    from jobs import stages
    from jobs.formats import DecodeOptions

    decoded = stages.run_decode(spark, ctx, fmt, str(raw), options or DecodeOptions())
    try:
        return stages.run_merge(spark, ctx, decoded.changes, transaction_marks=decoded.transaction_marks,
                                **merge_options)
    finally:
        decoded.release()


def run_lines(tmp_path, fmt: str, lines: list[str], pipeline: str, run_id: str = "r1"):
    """``lines`` (message values, one per line) as a text raw snapshot, through one ``jobs run``; the lake."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "messages.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lake = tmp_path / "lake"
    assert jobs_run(fmt, raw, lake, pipeline, run_id) == 0
    return lake


def published_rows(lake, pipeline: str, table_id: str, columns: list[str], key) -> list[dict]:
    """The published table's rows as a reader sees them (pyiceberg's scan), ``columns`` only, sorted by ``key``."""
    from jobs.lake.layout import Lake

    table = load_table(open_catalog(Lake.at(str(lake))), pipeline, table_id)
    return sorted(table.scan().to_arrow().select(columns).to_pylist(), key=key)
