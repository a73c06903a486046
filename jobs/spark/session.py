"""The one place a SparkSession is configured, so the job, the DAG's spark-submit and the tests agree."""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from jobs import env as environ
from jobs.spark.class_archive import ClassArchive, class_archive, with_driver_options
from jobs.spark.jvm import with_jar

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
    env = environ.environment() if env is None else env
    jit = (env.get("CDC_JIT") or "tiered").strip().lower()
    if jit not in JIT_OPTIONS:
        raise ValueError(f"CDC_JIT={jit!r}: one of {', '.join(JIT_OPTIONS)}")
    return " ".join(o for o in (JVM_OPTIONS, JIT_OPTIONS[jit]) if o)


# Settings the pipeline's semantics depend on: UTC everywhere so re-runs are identical on any machine,
# microsecond timestamps because Iceberg wants them, last-wins map keys for merging partial row
# images; and a little tuning, each item said why (with its default where a variable of TUNING sets it).
SPARK_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # a column's parquet.field.id metadata written as its Parquet field id: Iceberg readers map a data
    # file's columns by id (Spark 4.1's default, said here because the lake depends on it)
    "spark.sql.parquet.fieldId.write.enabled": "true",
    "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
    # event ids hash row images (maps) entry by entry in their order (jobs/formats/base.py)
    "spark.sql.legacy.allowHashOnMapType": "true",
    # column names come from the source as they are: "Name" and "NAME" are two columns (PostgreSQL
    # quoted identifiers, case-sensitive collations), not one name twice
    "spark.sql.caseSensitive": "true",
    "spark.sql.shuffle.partitions": "8",
    # adaptive execution coalesces the shuffles of a run's small tables (CDC_SPARK_ADAPTIVE=false: off)
    "spark.sql.adaptive.enabled": "true",
    # the decoders' expressions are many: generated code split into small methods, and a stage whose
    # fused method would still be huge falls back to per-operator code, both JIT-compiled sooner
    # (bench/README.md, "The JIT and generated code")
    "spark.sql.codegen.methodSplitThreshold": "256",
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # the generated classes of a pipeline's queries are ~170 (a 1M run); Spark's default cache of 100
    # evicted them, so a long-lived session (a warm run, the test suite) compiled them again each time
    "spark.sql.codegen.cache.maxEntries": "1000",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.extraJavaOptions": JVM_OPTIONS,
    "spark.executor.extraJavaOptions": JVM_OPTIONS,
}
# the settings above that a variable changes where it is set (CDC_JIT: the JVM options, jvm_options)
TUNING = {"CDC_SHUFFLE_PARTITIONS": "spark.sql.shuffle.partitions", "CDC_SPARK_ADAPTIVE": "spark.sql.adaptive.enabled",
          "CDC_SPARK_UI": "spark.ui.enabled"}


def tuned_conf(env: Mapping[str, str]) -> dict[str, str]:
    """SPARK_CONF with the values the variables of TUNING and ``CDC_JIT`` give, where set."""
    conf = {**SPARK_CONF, **{key: env[name].strip() for name, key in TUNING.items() if (env.get(name) or "").strip()}}
    if (env.get("CDC_JIT") or "").strip():
        conf["spark.driver.extraJavaOptions"] = conf["spark.executor.extraJavaOptions"] = jvm_options(env)
    return conf


# S3A (hadoop-aws: Spark's s3a:// file system) for an S3 lake or S3 input. The credentials are never
# settings: S3A takes them from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
# which Spark also hands to S3A as fs.s3a.access.key / secret.key / session.token for the executors) or
# from the instance's role. The providers are hadoop-aws 3.3's default chain, by names hadoop-aws 3.4+
# also takes (it maps the AWS SDK v1 names to their v2 classes); Hadoop 3.4's own default names SDK v2
# classes only, which an SDK v1 hadoop-aws (3.3, the tests' jar) cannot load.
S3A_CREDENTIALS_PROVIDERS = ",".join((
    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
    "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
    "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider",
))
# Durations as plain numbers in the unit every hadoop-aws reads them in: Hadoop 3.4's defaults ("60s",
# "24h") are durations with units, which hadoop-aws 3.3 reads as numbers and fails on ("For input
# string: "60s""); the values are Hadoop 3.4's defaults.
S3A_DURATIONS = {
    "fs.s3a.connection.establish.timeout": "30000",  # ms
    "fs.s3a.connection.timeout": "200000",  # ms
    "fs.s3a.threads.keepalivetime": "60",  # s
    "fs.s3a.multipart.purge.age": "86400",  # s
}


def s3a_conf(endpoint: str | None) -> dict[str, str]:
    """The ``spark.hadoop.fs.s3a.*`` settings of every session: the credentials providers and durations
    above, and with ``endpoint`` (an S3-compatible server's URL, as jobs.lake.storage takes it from
    ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``) that endpoint, addressed path-style (bucket in the
    path, as jobs.lake.storage's pyarrow does with an endpoint). They matter only where an ``s3a://`` path
    is read or written; ``CDC_SPARK_CONF`` overrides any of them."""
    conf = {"fs.s3a.aws.credentials.provider": S3A_CREDENTIALS_PROVIDERS, **S3A_DURATIONS}
    if endpoint:
        conf["fs.s3a.endpoint"] = endpoint
        conf["fs.s3a.path.style.access"] = "true"
    return {f"spark.hadoop.{key}": value for key, value in conf.items()}


def user_conf(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``CDC_SPARK_CONF``: a JSON object of Spark settings (values as strings), empty when unset."""
    env = environ.environment() if env is None else env
    text = (env.get("CDC_SPARK_CONF") or "").strip()
    if not text:
        return {}
    try:
        conf = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError("CDC_SPARK_CONF is not a JSON object") from None
    if not isinstance(conf, dict):
        raise ValueError("CDC_SPARK_CONF is not a JSON object")
    return {str(k): conf_text(v) for k, v in conf.items()}


def conf_text(value: object) -> str:
    """A Spark setting's value as Spark takes it (YAML's and JSON's booleans as true/false)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def session_settings(env: Mapping[str, str] | None = None, launched: Mapping[str, str] | None = None,
                     archive: ClassArchive | None = None) -> dict[str, str]:
    """Every setting build_spark gives a session: tuned_conf and s3a_conf (the endpoint from the
    environment, as jobs.lake.storage reads it), then, for a JVM this process starts, ``CDC_SPARK_PACKAGES`` as
    ``spark.jars.packages`` and ``CDC_SPARK_CONF``, which wins, with the JVM-side decoders' jar in
    ``spark.jars`` besides any given. ``launched``: the settings of a driver spark-submit started
    (jobs.spark.submit passed it jars, packages and ``CDC_SPARK_CONF`` already), which stay as they are:
    only settings it does not have are added. ``archive``: the class archive the JVM this process starts maps or
    records (jobs.spark.class_archive)."""
    env = environ.environment() if env is None else env
    endpoint = (env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or "").strip() or None
    conf = {**tuned_conf(env), **s3a_conf(endpoint)}
    if launched is not None:
        return {k: v for k, v in conf.items() if k not in launched}
    packages = (env.get("CDC_SPARK_PACKAGES") or "").strip()
    if packages:
        conf["spark.jars.packages"] = packages
    # the JVM this process starts (PYSPARK_SUBMIT_ARGS' --driver-memory, where given, wins over it)
    conf["spark.driver.memory"] = driver_memory()
    conf = with_driver_options(conf, archive)
    conf.update(user_conf(env))
    jars = with_jar(conf.get("spark.jars"))  # the JVM-side decoders (jobs.spark.jvm)
    if jars:
        conf["spark.jars"] = jars
    return conf


# The driver's heap when the pipeline starts the JVM (the command line) or spark-submits it (the DAG), unless
# given: a quarter of the machine's memory, as the JVM's own default heap is, within these bounds (Spark's
# own default, 1 GB, leaves most of a worker's memory unused; a run's memory is bounded by its tasks,
# jobs.lake.raw.MESSAGES_PER_TASK, so a larger heap buys speed, not the ability to finish).
DRIVER_MEMORY_BOUNDS_MB = (1024, 8192)


def machine_memory_mb() -> int:
    """This machine's memory in MB, or the container's limit where one is set (cgroup v2 or v1)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = open(limit_file).read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total // (1 << 20)


def driver_memory(setting: str | None = None, machine_mb: int | None = None) -> str:
    """The driver's heap: ``setting`` (Spark's syntax, e.g. ``4g``) unless empty or ``auto``, else a quarter
    of the machine's memory within DRIVER_MEMORY_BOUNDS_MB."""
    if setting and setting.strip().lower() != "auto":
        return setting.strip()
    low, high = DRIVER_MEMORY_BOUNDS_MB
    quarter = (machine_memory_mb() if machine_mb is None else machine_mb) // 4
    return f"{max(low, min(high, quarter))}m"


def build_spark(app_name: str = "cdc-pipeline", master: str | None = None,
                archive: ClassArchive | None = None) -> SparkSession:
    """Get or create the session; under spark-submit the master, jars, packages and ``CDC_SPARK_CONF``
    come from the submit command (see session_settings). A JVM this process starts maps the class archive there
    is (jobs.spark.class_archive), or records ``archive`` (then ``stop_driver_jvm`` before settling it)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    submitted = bool(environ.get("SPARK_SUBMIT_ACTIVE"))
    if master or not submitted:
        builder = builder.master(master or environ.text("CDC_SPARK_MASTER", "local[*]"))
    launched = None
    if submitted and environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit's driver JVM runs already
        SparkContext._ensure_initialized()  # noqa: SLF001 - attaches to that JVM (starts none)
        launched = dict(SparkConf().getAll())
    if archive is None:
        archive = driver_class_archive(record=False)
    for key, value in session_settings(launched=launched, archive=archive).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not environ.get("PYSPARK_PYTHON"):  # PySpark's default is `python3` on PATH: the workers run this one
        spark.sparkContext.pythonExec = sys.executable
    spark.sparkContext.setLogLevel(environ.text("CDC_SPARK_LOG_LEVEL", "WARN"))
    return spark


def stop_driver_jvm(spark: SparkSession, timeout_s: float = 300) -> None:
    """The session stopped and the JVM this process started (not spark-submit's) waited for: it exits once its
    standard input closes, writing what ``-XX:ArchiveClassesAtExit`` asks on the way."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway  # noqa: SLF001 - the JVM PySpark launched, if it did
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    gateway.shutdown()
    proc.stdin.close()
    proc.wait(timeout=timeout_s)
    SparkContext._gateway = SparkContext._jvm = None  # noqa: SLF001 - a later session starts a new one


def driver_class_archive(record: bool) -> ClassArchive | None:
    """The class archive (jobs.spark.class_archive) of the driver JVM this process is about to start; None when
    it starts none: spark-submit started it, or a session runs here already (a test's, a caller's)."""
    from pyspark import SparkContext

    if environ.get("SPARK_SUBMIT_ACTIVE") or SparkContext._gateway is not None:  # noqa: SLF001
        return None
    return class_archive(record=record)


def keep_class_archive(spark: SparkSession, archive: ClassArchive | None) -> None:
    """The class archive the session's JVM recorded, kept for the next drivers (nothing when it recorded none):
    the JVM stopped first, as it writes the archive on its way out. A failure here is a warning: the run is done."""
    if archive is None or archive.pending is None:
        return
    try:
        stop_driver_jvm(spark)
        archive.settle()
    except Exception as e:  # noqa: BLE001 - an archive not kept costs the next driver seconds, never the run
        print(f"warning: the JVM class archive was not kept: {type(e).__name__}: {e}", file=sys.stderr)


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


def without_dictionary(columns: Iterable[str]) -> dict[str, str]:
    """Parquet writer options that write ``columns`` without dictionary encoding: for columns of nearly one value
    per row (ids, positions, times, hashes), whose dictionary the writer fills, hashing every value, only to fall
    back to plain encoding (bench/README.md, "Writing the change records")."""
    return {f"parquet.enable.dictionary#{c}": "false" for c in columns}


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
