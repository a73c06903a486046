"""What a user would run instead of the pipeline, on the same snapshot files (one process each):

- ``floor``: Spark reads the raw Parquet and parses every value with ``from_json`` into the format's
  envelope; the parsed envelopes are counted (so the parse cannot be pruned away), nothing else;
- ``naive_spark``: ``from_json`` + the latest message per key by a window + deletes dropped + Parquet;
- ``duckdb``: the same naive fold as DuckDB SQL over the same files;
- ``contract_floor`` (Debezium only, on request): a lower bound of any implementation of DESIGN.md's
  contract: the floor's parse, projected into the canonical change record with the cheapest expressions
  (no quarantine, counts, phases, partial images or transactions) and written in the lake's
  ``changes/`` layout as the pipeline writes it, then the naive window fold over the written records.
  Its ``records_seconds`` is the first part alone: what persisting the change records costs at least.

The naive folds know nothing of phases, redeliveries, partial images, transactions or key changes:
they are the speed a user gets by ignoring them.

    python -m bench.contenders floor|naive_spark|duckdb|contract_floor --format F --raw DIR [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

# per format: the envelope a user would declare, and where op, key, position and the row are in it
SPARK_ENVELOPES = {
    "debezium": "struct<before:map<string,string>, after:map<string,string>, source:map<string,string>, op:string, "
                "ts_ms:bigint>",
    "debezium_schema": "struct<payload:struct<before:map<string,string>, after:map<string,string>, "
                       "source:map<string,string>, op:string, ts_ms:bigint>>",
    "canal": "struct<data:array<map<string,string>>, old:array<map<string,string>>, type:string, es:bigint, "
             "id:bigint, table:string, database:string>",
    "qlik": "struct<magic:string, type:string, message:struct<data:map<string,string>, "
            "beforeData:map<string,string>, headers:struct<operation:string, changeSequence:string>>>",
}
DELETE_OPS = ("d", "DELETE")
# the formats whose envelope run_contract_floor projects into change records
CONTRACT_FORMATS = ("debezium", "debezium_schema")


def spark_columns(fmt: str):
    """(op, key, position, row) columns over the parsed envelope ``e`` (and the raw ``key``)."""
    from pyspark.sql import functions as F

    e = F.col("e")
    if fmt.startswith("debezium"):
        p = e["payload"] if fmt == "debezium_schema" else e
        key = F.get_json_object(F.col("key").cast("string"), "$.id")
        return p["op"], key, p["source"]["lsn"].cast("bigint"), p["after"]
    if fmt == "canal":
        return e["type"], e["data"][0]["id"], F.struct(e["es"], e["id"]), e["data"][0]
    if fmt == "qlik":
        m = e["message"]
        return m["headers"]["operation"], m["data"]["id"], m["headers"]["changeSequence"], m["data"]
    raise SystemExit(f"no naive Spark contender for {fmt} (binary Avro: Spark has no from_avro without the "
                     "spark-avro package)")


def run_floor(spark, fmt: str, raw: str) -> dict:
    from pyspark.sql import functions as F

    spark_columns(fmt)  # the same formats as the naive fold
    parsed = spark.read.parquet(raw).select(F.from_json(F.col("value").cast("string"), SPARK_ENVELOPES[fmt]).alias("e"))
    # counting the parsed structs (not rows) keeps the whole parse: nothing is pruned from the envelope
    row = parsed.agg(F.count(F.lit(1)).alias("n"), F.count("e").alias("parsed")).first()
    return {"counted": row["n"], "parsed": row["parsed"]}


def run_naive_spark(spark, fmt: str, raw: str, out: str) -> dict:
    from pyspark.sql import functions as F

    df = spark.read.parquet(raw).select("topic", "offset", "key",
                                        F.from_json(F.col("value").cast("string"), SPARK_ENVELOPES[fmt]).alias("e"))
    if fmt == "qlik":
        df = df.where(F.col("e")["type"] == "DT")
    op, key, position, row = spark_columns(fmt)
    events = df.select("topic", "offset", op.alias("op"), key.alias("k"), position.alias("pos"), row.alias("row"))
    return {"state_rows": write_latest_rows(events, ["topic", "k"], "pos", "row", out)}


def write_latest_rows(events, keys: list[str], position: str, row: str, out: str) -> int:
    """The naive fold: per ``keys`` the event of the highest (``position``, ``offset``) by a window, deletes
    dropped, (keys, ``row``) written as Parquet to ``out``; the number of rows written."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest = Window.partitionBy(*keys).orderBy(F.col(position).desc(), F.col("offset").desc())
    state = (events.withColumn("rn", F.row_number().over(latest)).where(F.col("rn") == 1)
             .where(~F.col("op").isin(*DELETE_OPS)).select(*keys, row))
    state.write.mode("overwrite").parquet(out)
    return state.sparkSession.read.parquet(out).count()


def run_contract_floor(spark, fmt: str, raw: str, out: str) -> dict:
    """The floor's parse + the canonical change records written as ``changes/`` + the naive window fold
    over them (module docstring); ``records_seconds``: the parse and the records' write alone."""
    from pyspark.sql import functions as F

    from jobs.stages import write_change_records

    if fmt not in CONTRACT_FORMATS:
        raise SystemExit(f"no contract floor for {fmt}: it projects Debezium's envelope only")
    start = time.perf_counter()
    e = F.from_json(F.col("value").cast("string"), SPARK_ENVELOPES[fmt])
    e = e["payload"] if fmt == "debezium_schema" else e
    source = e["source"]
    records = spark.read.parquet(raw).select(
        F.lit(fmt).alias("format"),
        F.concat_ws(".", source["db"], source["schema"], source["table"]).alias("table_id"),
        e["op"].alias("op"),
        F.when(e["op"] == "r", "FULL_LOAD").otherwise("CDC").alias("phase"),
        F.from_json(F.col("key").cast("string"), "map<string,string>").alias("key"),
        e["before"].alias("before"), e["after"].alias("after"),
        F.lit(None).cast("array<string>").alias("present_columns"),
        F.lpad(source["lsn"], 20, "0").alias("position"),
        source["txId"].alias("tx_id"), F.lit(None).cast("long").alias("tx_seq"),
        F.lit(None).cast("boolean").alias("tx_last"),
        F.timestamp_millis(e["ts_ms"]).alias("event_time"),
        "topic", "partition", "offset", F.col("timestamp").alias("kafka_ts"),
        F.xxhash64("value").cast("string").alias("event_id"))
    changes = f"{out}/changes"
    write_change_records(records, changes)
    records_seconds = time.perf_counter() - start
    # a map cannot key a window: the key's JSON text does
    events = spark.read.parquet(changes).withColumn("k", F.to_json("key"))
    state_rows = write_latest_rows(events, ["table", "k"], "position", "after", f"{out}/state")
    return {"state_rows": state_rows, "records_seconds": round(records_seconds, 3)}


DUCKDB_PATHS = {
    # (op, key, position expression, row, filter)
    "debezium": ("$.op", "json_extract_string(decode(key), '$.id')",
                 "CAST(json_extract_string(v, '$.source.lsn') AS BIGINT)", "$.after", "TRUE"),
    "debezium_schema": ("$.payload.op", "json_extract_string(decode(key), '$.id')",
                        "CAST(json_extract_string(v, '$.payload.source.lsn') AS BIGINT)", "$.payload.after", "TRUE"),
    "canal": ("$.type", "json_extract_string(v, '$.data[0].id')",
              "[CAST(json_extract_string(v, '$.es') AS BIGINT), CAST(json_extract_string(v, '$.id') AS BIGINT)]",
              "$.data[0]", "TRUE"),
    "qlik": ("$.message.headers.operation", "json_extract_string(v, '$.message.data.id')",
             "json_extract_string(v, '$.message.headers.changeSequence')", "$.message.data",
             "json_extract_string(v, '$.type') = 'DT'"),
}


def run_duckdb(fmt: str, raw: str, out: str) -> dict:
    import duckdb

    if fmt not in DUCKDB_PATHS:
        raise SystemExit(f"no DuckDB contender for {fmt} (binary Avro values)")
    op, key, pos, row, keep = DUCKDB_PATHS[fmt]
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    query = f"""
        WITH m AS (SELECT topic, "offset", key, decode(value) AS v FROM read_parquet('{raw}/*.parquet')),
        e AS (SELECT topic, "offset", json_extract_string(v, '{op}') AS op, {key} AS k, {pos} AS pos,
                     json_extract(v, '{row}') AS row FROM m WHERE {keep}),
        latest AS (SELECT * FROM e QUALIFY row_number() OVER (PARTITION BY topic, k ORDER BY pos DESC, "offset" DESC) = 1)
        SELECT topic, k, row FROM latest WHERE op NOT IN ('d', 'DELETE')
    """
    con.execute(f"COPY ({query}) TO '{out}/state.parquet' (FORMAT parquet)")
    rows = con.execute(f"SELECT count(*) FROM read_parquet('{out}/state.parquet')").fetchone()[0]
    return {"state_rows": rows}


def run_timed(contender: str, fmt: str, raw: str, out: str | None, spark) -> dict:
    """One run of ``contender`` (``spark``: None for DuckDB); its result with ``seconds``, timed from a
    ready engine: a SparkSession's start (a JVM) is not part of the work compared."""
    if contender == "duckdb":
        os.makedirs(out, exist_ok=True)
    start = time.perf_counter()
    if contender == "duckdb":
        result = run_duckdb(fmt, raw, out)
    elif contender == "floor":
        result = run_floor(spark, fmt, raw)
    elif contender == "contract_floor":
        result = run_contract_floor(spark, fmt, raw, out)
    else:
        result = run_naive_spark(spark, fmt, raw, out)
    return {**result, "seconds": round(time.perf_counter() - start, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.contenders")
    parser.add_argument("contender", choices=("floor", "naive_spark", "duckdb", "contract_floor"))
    parser.add_argument("--format", required=True)
    parser.add_argument("--raw", required=True)
    parser.add_argument("--out")
    parser.add_argument("--result", help="write the result JSON here")
    args = parser.parse_args(argv)
    spark = None
    if args.contender != "duckdb":
        from jobs.spark.session import build_spark

        spark = build_spark(f"bench-{args.contender}")
    result = run_timed(args.contender, args.format, args.raw, args.out, spark)
    if spark is not None:
        spark.stop()
    text = json.dumps(result)
    if args.result:
        with open(args.result, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
