"""What the decode's counts cost: the decoded messages checkpointed with their counts and topic shapes
observed on that pass (jobs.decode.stage, jobs.spark.observed), against the same checkpoint followed by
the two aggregates over it that gave them before (topic shapes, then jobs.decode.stage.decode_counts).

    .venv/bin/python -m bench.decode_counts --raw bench/data/debezium-1000000 [--format debezium] [--repeat 3]

One Spark session, the two alternated --repeat times after a warm-up of each; prints each one's seconds.
"""
from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", required=True)
    parser.add_argument("--format", default="debezium")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from jobs.decode import stage
    from jobs.formats import DecodeOptions
    from jobs.formats.decoders import get_decoder
    from jobs.lake.raw import raw_size, read_raw, task_split
    from jobs.spark.session import build_spark, session_conf

    spark = build_spark("decode-counts")
    split = task_split(raw_size(args.raw))
    decoder = get_decoder(args.format)

    def observed() -> None:
        exploded, groups = stage._checkpointed(decoder.decode(raw, DecodeOptions()))  # noqa: SLF001
        stage.counts_of(stage._outcome_groups(groups))  # noqa: SLF001
        stage.release(exploded)

    def aggregated() -> None:
        exploded = stage.materialize(stage.exploded_outcomes(decoder.decode(raw, DecodeOptions())))
        first = exploded.where(stage._first_row())  # noqa: SLF001
        first.where(F.col("shape").isNotNull()).groupBy("topic", "shape").count().collect()
        stage.decode_counts(first)
        stage.release(exploded)

    with session_conf(spark, "spark.sql.files.maxPartitionBytes", str(split.max_split_bytes or 128 << 20)):
        raw = read_raw(spark, args.raw, split)
        for run in range(args.repeat + 1):
            for name, step in (("observed", observed), ("aggregates after", aggregated)):
                started = time.perf_counter()
                step()
                label = "warm-up" if run == 0 else f"run {run}"
                print(f"{label:>8}  {name:<17} {time.perf_counter() - started:6.2f} s", flush=True)


if __name__ == "__main__":
    main()
