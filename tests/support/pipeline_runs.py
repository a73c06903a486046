"""`python -m jobs run` called in the test's own process (its SparkSession, so no JVM start per run)."""
from __future__ import annotations

from os import PathLike

from jobs import cli


def jobs_run(fmt: str, raw: str | PathLike, lake: str | PathLike, pipeline: str, run_id: str, *extra: str) -> int:
    """One ``jobs run`` of ``raw`` into ``lake``; its exit code (0: ran and published)."""
    return cli.main(["run", "--format", fmt, "--raw", str(raw), "--lake", str(lake), "--pipeline", pipeline,
                     "--run-id", run_id, *extra])


def decode_and_merge(spark, ctx, fmt: str, raw: str | PathLike, options=None, **merge_options) -> dict:
    """The decode and the fold + publish of one run, in memory as ``transform`` hands them over, without
    its validation; the merge report."""
    from jobs import stages
    from jobs.decoders import DecodeOptions

    decoded = stages.run_decode(spark, ctx, fmt, str(raw), options or DecodeOptions())
    try:
        return stages.run_merge(spark, ctx, decoded.changes, **merge_options)
    finally:
        decoded.release()
