"""The tests' hadoop-aws for Spark on ``s3a://``: ``scripts/setup.sh --dev`` (run by ``make test``) extracts
``hadoop-aws-3.3.1.jar`` and the ``aws-java-sdk-bundle`` it was built with into ``.venv/s3a-jars`` (from
the sdist of sagemaker-pyspark on PyPI: no Maven Central here). They do not match pyspark's Hadoop 3.4:
fine for tests, as jobs/spark/session.py's ``s3a_conf`` gives every setting as both versions read it; production
sets ``CDC_SPARK_PACKAGES`` to the hadoop-aws of Spark's own Hadoop instead.

A session gets them as ``spark.jars`` of ``CDC_SPARK_CONF`` (jobs.spark.session.session_settings keeps the
JVM-side decoders' jar beside them)::

    env["CDC_SPARK_CONF"] = s3a_spark_conf()
"""
from __future__ import annotations

import json

from tests.support.paths import REPO

S3A_JARS_DIR = REPO / ".venv" / "s3a-jars"
S3A_JARS = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")


def s3a_jars() -> list[str] | None:
    """The jars' paths, or None when setup has not extracted them (``scripts/setup.sh --dev``)."""
    found = [S3A_JARS_DIR / name for name in S3A_JARS]
    return [str(p) for p in found] if all(p.is_file() for p in found) else None


def missing_reason() -> str:
    return (f"the s3a jars ({', '.join(S3A_JARS)}) are not in {S3A_JARS_DIR}: run `make setup-dev` "
            "(scripts/setup.sh --dev extracts them)")


def s3a_spark_conf() -> str:
    """``CDC_SPARK_CONF`` putting the s3a jars on the session's class path (no credentials: S3A reads
    them from the AWS_* environment)."""
    jars = s3a_jars()
    if jars is None:
        raise FileNotFoundError(missing_reason())
    return json.dumps({"spark.jars": ",".join(jars)})
