"""The pipeline's JVM-side decoders: Java sources under ``jvm/src``, compiled against the venv's
Spark by ``jvm/build.sh`` (part of ``scripts/setup.sh``, ``make setup``; ``jvm/build.sh test`` runs their
Java tests, ``jvm/test``) into ``jobs/spark/jars/cdc-jvm.jar``. A format's registry entry names its class
(``jvm_decoder``, jobs/formats/<format>/__init__.py).

A decoder there is a Spark Java UDF: one message in, its decode outcome out, in one pass of a
streaming parser (bench/README.md, "JVM-side decoding"). Debezium and DTS Avro are decoded there and
nowhere else. The jar reaches the driver's class path through ``spark.jars`` (jobs.spark.session for a session
this process starts, jobs.spark.submit.submit_jars for spark-submit); where it is missing, decoding
those formats fails with a JvmDecoderMissing that says how to set it up (no slower fallback). The jar
also holds two functions every run uses: the decode's grouped counts (cdc.GroupCounts, jobs.spark.observed)
and Iceberg's bucket transform (cdc.IcebergBucket).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from jobs import env
from jobs.errors import SetupError

if TYPE_CHECKING:  # importable without pyspark (the DAG's spark-submit arguments are built from it)
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType

DEFAULT_JAR = Path(__file__).parent / "jars" / "cdc-jvm.jar"


class JvmDecoderMissing(SetupError):
    """A JVM-side decoder that is not on the Spark driver's class path: the jar was not built, or the
    session was started without it (a setup problem, not one of the data)."""


def jar_path() -> str | None:
    """The jar of the JVM-side decoders: ``CDC_JVM_JAR`` (any URI Spark reads) or the one setup built."""
    configured = env.text("CDC_JVM_JAR")
    if configured:
        return configured
    return str(DEFAULT_JAR) if DEFAULT_JAR.is_file() else None


def with_jar(jars: str | None) -> str | None:
    """A ``spark.jars`` value that also holds the decoders' jar (where there is one)."""
    ours = jar_path()
    listed = [j for j in (jars or "").split(",") if j.strip()]
    if ours and ours not in listed:
        listed.insert(0, ours)
    return ",".join(listed) or None


def missing(class_name: str, jar: str | None = None) -> JvmDecoderMissing:
    """The error of a JVM-side decoder ``class_name`` not on the class path, naming the jar expected
    (``jar``, else jar_path(), else the one setup builds) and how to put it there."""
    configured = env.text("CDC_JVM_JAR")
    jar = jar or jar_path()
    if jar is None:
        where = f"its jar {DEFAULT_JAR} was not built"
    elif configured and "://" not in jar and not Path(jar).is_file():
        where = f"its jar {jar} (CDC_JVM_JAR) does not exist"
    else:
        where = (f"the Spark session was started without its jar {jar} (spark.jars; a session created before "
                 "the jar was built, or spark-submit without --jars)")
    return JvmDecoderMissing(
        f"the JVM-side decoder {class_name} is not on the Spark driver's class path: {where}. "
        f"Build the jar with `make setup` (or jvm/build.sh, which needs a JDK) and start a new session; "
        f"with spark-submit or on a cluster pass it with --jars {jar or DEFAULT_JAR} "
        "(or name it with CDC_JVM_JAR)")


def _java_class(spark: SparkSession, class_name: str):
    found = spark._jvm  # noqa: SLF001 - py4j is the only way to a JVM class from PySpark
    for part in class_name.split("."):
        found = getattr(found, part)
    return found


def require(spark: SparkSession, class_name: str) -> None:
    """Raises JvmDecoderMissing unless the JVM-side decoder ``class_name`` is on the driver's class path."""
    from py4j.java_gateway import JavaClass

    if not isinstance(_java_class(spark, class_name), JavaClass):
        raise missing(class_name)


def register_udf(spark: SparkSession, class_name: str, config: dict, return_type: DataType) -> str:
    """Registers the JVM-side decoder ``class_name`` made with ``config`` as a UDF returning
    ``return_type``; its name (one per configuration, so a long-lived session keeps each). Raises
    JvmDecoderMissing where the class is not on the class path."""
    require(spark, class_name)
    text = json.dumps(config, sort_keys=True)
    name = "cdc_" + hashlib.sha256(f"{class_name}\n{text}".encode()).hexdigest()[:16]
    decoder = _java_class(spark, class_name)
    decoder.register(spark._jsparkSession, name, text, return_type.json())  # noqa: SLF001
    return name


ICEBERG_BUCKET_CLASS = "cdc.IcebergBucket"


def register_iceberg_bucket(spark: SparkSession) -> None:
    """Registers Iceberg's bucket transform (jvm/src/cdc/IcebergBucket.java) in ``spark``'s session as
    iceberg_bucket_long/_string/_binary/_decimal(value, n); the long one takes a bigint (an int or a
    unix_date cast first: a Java UDF's arguments are not coerced). Registering again changes nothing."""
    require(spark, ICEBERG_BUCKET_CLASS)
    _java_class(spark, ICEBERG_BUCKET_CLASS).register(spark._jsparkSession)  # noqa: SLF001


GROUP_COUNTS_CLASS, GROUP_COUNTS_FUNCTION = "cdc.GroupCounts", "cdc_group_counts"


def register_group_counts(spark: SparkSession) -> str:
    """Registers the grouped count as one aggregate (jvm/src/cdc/GroupCounts.java) in ``spark``'s session,
    once; its name. Raises JvmDecoderMissing where the class is not on the class path."""
    if not spark.catalog.functionExists(GROUP_COUNTS_FUNCTION):
        require(spark, GROUP_COUNTS_CLASS)
        _java_class(spark, GROUP_COUNTS_CLASS).register(spark._jsparkSession)  # noqa: SLF001
    return GROUP_COUNTS_FUNCTION
