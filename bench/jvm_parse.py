"""How fast the JVM parses Debezium values outside Spark SQL's ``from_json``: the measure behind the
one lever left for issue 6's decode (a decoder on the JVM side, bench/README.md "JVM-side parse").

    .venv/bin/python -m bench.jvm_parse --raw bench/data/debezium-1000000 [--passes 3]

Compiles ``bench/jvm_parse/DebeziumEnvelopeParser.java`` (a Spark Java UDF: Jackson's streaming
parser, one pass per value; needs ``javac``, from a JDK) into a jar, starts one local Spark session
with the pipeline's settings and that jar, and times, pass after pass in the same session, two parses
of every value into the same envelope (op, before, after, source as map<string,string>, ts_ms):
Spark SQL's ``from_json`` (the bench's floor) and the Java UDF; each pass aggregates the parsed
envelopes (count, and the entries of ``after``) so that nothing is pruned. Then it checks that both
give the same envelope for every message (a sum of 64-bit hashes of each envelope's JSON text).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ENVELOPE = ("struct<op:string, before:map<string,string>, after:map<string,string>, "
            "source:map<string,string>, ts_ms:bigint>")
SOURCE = Path(__file__).parent / "jvm_parse" / "DebeziumEnvelopeParser.java"
UDF_CLASS = "DebeziumEnvelopeParser"


def build_jar(out_dir: Path) -> Path:
    """Compile the UDF against Spark's own jars; the jar's path."""
    import pyspark

    javac, jar = shutil.which("javac"), shutil.which("jar")
    if not javac or not jar:
        raise SystemExit("bench.jvm_parse needs a JDK (javac and jar): apt-get install openjdk-17-jdk-headless")
    classpath = str(Path(pyspark.__file__).parent / "jars" / "*")
    subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(out_dir), str(SOURCE)], check=True)
    target = out_dir / "jvm_parse.jar"
    subprocess.run([jar, "cf", str(target), "-C", str(out_dir), f"{UDF_CLASS}.class"], check=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--raw", required=True, type=Path, help="a debezium snapshot made by bench.generate")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from jobs.spark.session import SPARK_CONF

    with tempfile.TemporaryDirectory() as tmp:
        builder = SparkSession.builder.appName("bench-jvm-parse").master("local[*]")
        for key, value in {**SPARK_CONF, "spark.jars": str(build_jar(Path(tmp)))}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        try:
            spark.udf.registerJavaFunction("debezium_envelope", UDF_CLASS, ENVELOPE)
            raw = spark.read.parquet(str(args.raw))
            parses = {"from_json": F.from_json(F.col("value").cast("string"), ENVELOPE),
                      "java_udf": F.call_udf("debezium_envelope", F.col("value"))}
            seconds: dict[str, list[float]] = {name: [] for name in parses}
            messages = 0
            for _ in range(args.passes):
                for name, parse in parses.items():
                    start = time.perf_counter()
                    row = raw.select(parse.alias("e")).agg(
                        F.count(F.lit(1)).alias("n"), F.count("e").alias("parsed"),
                        F.sum(F.size(F.col("e")["after"])).alias("entries")).first()
                    seconds[name].append(time.perf_counter() - start)
                    messages = row["n"]
            sums = {name: raw.select(F.sum(F.xxhash64(F.to_json(parse)).cast("decimal(38,0)")).alias("h")).first()["h"]
                    for name, parse in parses.items()}
        finally:
            spark.stop()
    print(f"messages {messages:,}; seconds per pass (first is a fresh JVM's), best msg/s")
    for name, times in seconds.items():
        print(f"  {name:<10} {' / '.join(f'{t:.1f}' for t in times)} s   {messages / min(times):,.0f} msg/s")
    print(f"  java_udf / from_json, best passes: {min(seconds['java_udf']) / min(seconds['from_json']):.2f}")
    print(f"  same envelope for every message: {'yes' if sums['from_json'] == sums['java_udf'] else 'NO'}")
    return 0 if sums["from_json"] == sums["java_udf"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
