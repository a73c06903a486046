"""The one place a SparkSession is configured, so the job, the DAG's spark-submit and the tests agree."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from jobs.jvm import with_jar

if TYPE_CHECKING:  # importable without pyspark (the DAG's spark-submit arguments are built from it)
    from pyspark.sql import SparkSession

# The decoders' generated code has methods above HotSpot's 8000-byte JIT limit: left interpreted, they
# slow decoding down (bench/README.md, "The JIT and generated code"). The parallel collector suits a
# batch job (throughput, no concurrent marking competing for the 2 cores of a small worker). JVM options
# reach a spark-submit'ed driver as --conf.
JVM_OPTIONS = "-Duser.timezone=UTC -XX:-DontCompileHugeMethods -XX:+UseParallelGC"
# CDC_JIT=c1: the JIT's quick compiler only. A fresh JVM spends much of a small run compiling Spark's and
# the pipeline's code with C2; C1 alone compiles cheaply into slower code. Small runs, each a fresh
# spark-submit, are faster with it; large runs are slower, as they run long enough for C2's code to repay
# its compiling (bench/README.md, "The JIT and generated code"). Default: HotSpot's tiered JIT.
JIT_OPTIONS = {"tiered": "", "c1": "-XX:TieredStopAtLevel=1"}


def jvm_options(env: Mapping[str, str] | None = None) -> str:
    """The driver's and executors' JVM options: JVM_OPTIONS and those of ``CDC_JIT`` (tiered or c1)."""
    env = os.environ if env is None else env
    jit = (env.get("CDC_JIT") or "tiered").strip().lower()
    if jit not in JIT_OPTIONS:
        raise ValueError(f"CDC_JIT={jit!r}: one of {', '.join(JIT_OPTIONS)}")
    return " ".join(o for o in (JVM_OPTIONS, JIT_OPTIONS[jit]) if o)


# Settings the pipeline's semantics depend on: UTC everywhere so re-runs are identical on any machine,
# microsecond timestamps because Iceberg wants them, last-wins map keys for merging partial row
# images; and a little tuning, each item said why.
SPARK_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
    # event ids hash row images (maps) entry by entry in their order (jobs/decoders/common.py)
    "spark.sql.legacy.allowHashOnMapType": "true",
    # column names come from the source as they are: "Name" and "NAME" are two columns (PostgreSQL
    # quoted identifiers, case-sensitive collations), not one name twice
    "spark.sql.caseSensitive": "true",
    "spark.sql.shuffle.partitions": os.environ.get("CDC_SHUFFLE_PARTITIONS", "8"),
    # adaptive execution coalesces the shuffles of a run's small tables (CDC_SPARK_ADAPTIVE=false: off)
    "spark.sql.adaptive.enabled": os.environ.get("CDC_SPARK_ADAPTIVE", "true"),
    # the decoders' expressions are many: generated code split into small methods, and a stage whose
    # fused method would still be huge falls back to per-operator code, both JIT-compiled sooner
    # (bench/README.md, "The JIT and generated code")
    "spark.sql.codegen.methodSplitThreshold": "256",
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # the generated classes of a pipeline's queries are ~170 (a 1M run); Spark's default cache of 100
    # evicted them, so a long-lived session (a warm run, the test suite) compiled them again each time
    "spark.sql.codegen.cache.maxEntries": "1000",
    "spark.ui.enabled": os.environ.get("CDC_SPARK_UI", "false"),
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.extraJavaOptions": jvm_options(),
    "spark.executor.extraJavaOptions": jvm_options(),
}


def build_spark(app_name: str = "cdc-pipeline", master: str | None = None) -> SparkSession:
    """Get or create the session; under spark-submit the master comes from the submit command."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master or not os.environ.get("SPARK_SUBMIT_ACTIVE"):
        builder = builder.master(master or os.environ.get("CDC_SPARK_MASTER", "local[*]"))
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    jars = with_jar(None)
    if jars:  # the JVM-side decoders (jobs.jvm); read only when this call starts the JVM
        builder = builder.config("spark.jars", jars)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("CDC_SPARK_LOG_LEVEL", "WARN"))
    return spark


@contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """``key`` set to ``value`` for what runs inside (the pipeline runs one Spark job at a time)."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


@contextmanager
def jvm_log_level(spark: SparkSession, logger: str, level: str) -> Iterator[None]:
    """The JVM's log4j logger ``logger`` at ``level`` for what runs inside, then back as it was: a logger
    without a configuration of its own goes back to inheriting its level (not pinned to the one it had)."""
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    config = log4j.core.LoggerContext.getContext(False).getConfiguration().getLoggerConfig(logger)
    before = config.getExplicitLevel() if config.getName() == logger else None  # None: inherit
    log4j.core.config.Configurator.setLevel(logger, log4j.Level.toLevel(level))
    try:
        yield
    finally:
        log4j.core.config.Configurator.setLevel(logger, before)
