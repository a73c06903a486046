"""The pipeline's JVM-side decoders: Java sources under ``jobs/jvm/src``, compiled against the venv's
Spark by ``scripts/build_jvm.sh`` (part of ``scripts/setup.sh``) into ``jobs/jvm/build/cdc-jvm.jar``.

A decoder there is a Spark Java UDF: one message in, its decode outcome out, in one pass of a
streaming parser, where the Spark SQL decoders evaluate dozens of expressions per message (bench/README.md,
"JVM-side decoding"). The jar reaches the driver's class path through ``spark.jars`` (jobs.spark for a
session this process starts, jobs.airflow_tasks.spark_conf for spark-submit); where it is missing or
``CDC_JVM_DECODERS=0``, the Spark SQL decoders decode (same records, slower).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importable without pyspark (the DAG's spark-submit arguments are built from it)
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType

log = logging.getLogger(__name__)

DEFAULT_JAR = Path(__file__).parent / "build" / "cdc-jvm.jar"


def jar_path() -> str | None:
    """The jar of the JVM-side decoders: ``CDC_JVM_JAR`` (any URI Spark reads) or the one setup built."""
    configured = os.environ.get("CDC_JVM_JAR", "").strip()
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


def available(spark: SparkSession, class_name: str) -> bool:
    """Whether the JVM-side decoder ``class_name`` can run in this session (its jar on the driver's class
    path), unless ``CDC_JVM_DECODERS=0`` asks for the Spark SQL decoders."""
    if os.environ.get("CDC_JVM_DECODERS", "1").strip() == "0":
        return False
    from py4j.java_gateway import JavaClass

    found = spark._jvm  # noqa: SLF001 - py4j is the only way to a JVM class from PySpark
    for part in class_name.split("."):
        found = getattr(found, part)
    if isinstance(found, JavaClass):
        return True
    log.warning("%s is not on the Spark driver's class path (no %s): decoding with Spark SQL, slower",
                class_name, jar_path() or "jar: run scripts/build_jvm.sh")
    return False


def register_udf(spark: SparkSession, class_name: str, config: dict, return_type: DataType) -> str:
    """Registers the JVM-side decoder ``class_name`` made with ``config`` as a UDF returning
    ``return_type``; its name (one per configuration, so a long-lived session keeps each)."""
    text = json.dumps(config, sort_keys=True)
    name = "cdc_" + hashlib.sha256(f"{class_name}\n{text}".encode()).hexdigest()[:16]
    decoder = spark._jvm  # noqa: SLF001
    for part in class_name.split("."):
        decoder = getattr(decoder, part)
    decoder.register(spark._jsparkSession, name, text, return_type.json())  # noqa: SLF001
    return name


def outcome_type() -> DataType:
    """The outcome struct a JVM-side decoder returns: status, reason, table_id, its change records and
    the message's shape (jobs.decoders)."""
    from pyspark.sql.types import StringType, StructField, StructType

    from jobs.decoders.common import RECORDS_TYPE

    return StructType([StructField("status", StringType()), StructField("reason", StringType()),
                       StructField("table_id", StringType()), StructField("records", RECORDS_TYPE),
                       StructField("shape", StringType())])
