"""The Python side of the DTS Avro decoder, alone: microseconds per message, and fastavro's share.

    .venv/bin/python -m bench.python_decode --raw bench/data/dts_avro-1000000 [--messages 100000]

Reads the first ``--messages`` values of a generated DTS Avro snapshot into memory, then times, in
this process (one core, no Spark), ``jobs.decoders.dts_avro.decode_batches`` over them in Arrow
batches of 10,000 rows (the size ``mapInArrow`` hands a Python worker), and fastavro's
``schemaless_reader`` alone over the same values. Each is run ``--repeat`` times; the best is printed.
"""
from __future__ import annotations

import argparse
import io
import time
from pathlib import Path


def _values(raw: Path, messages: int):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables, held = [], 0
    for path in sorted(raw.rglob("*.parquet")):
        table = pq.read_table(path)
        tables.append(table.slice(0, messages - held))
        held += tables[-1].num_rows
        if held >= messages:
            break
    if not tables:
        raise SystemExit(f"no Parquet files under {raw}")
    return pa.concat_tables(tables)


def _best(run, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    import fastavro

    from jobs.decoders.dts_avro import decode_batches, record_schema

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--raw", required=True, type=Path, help="a dts_avro snapshot made by bench.generate")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    table = _values(args.raw, args.messages)
    batches = table.to_batches(max_chunksize=10_000)
    values = table.column("value").to_pylist()
    schema = record_schema()
    n = table.num_rows

    def decode() -> None:
        for _ in decode_batches(iter(batches)):
            pass

    def read_only() -> None:
        for value in values:
            fastavro.schemaless_reader(io.BytesIO(value), schema, return_record_name=True)

    whole, avro = _best(decode, args.repeat), _best(read_only, args.repeat)
    print(f"messages {n:,}: decode_batches {whole / n * 1e6:.1f} us/message, "
          f"of which fastavro schemaless_reader {avro / n * 1e6:.1f} us ({100 * avro / whole:.0f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
