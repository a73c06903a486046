"""Every environment variable the package reads, read here and only here, each when it is needed (never at
import: a process that sets one before a run sees it) and never written.

:data:`NAMES` is the list of them; docs/operations/environment.md says what each does, and a test keeps
the two equal. A variable outside it is read only where the user names it: ``${NAME}`` in a
pipeline file and ``--consumer-config-env KEY=NAME`` (:func:`named`), or to hand the whole environment on
to a child process (:func:`environment`).
"""
from __future__ import annotations

import os

NAMES = frozenset({
    # pipeline files (jobs.config)
    "CDC_HOME", "CDC_PIPELINES_DIR",
    # the command line's lake and its state tables (jobs.settings, jobs.iceberg.write)
    "CDC_ICEBERG_CATALOG", "CDC_STATE_BUCKETS", "CDC_STATE_DELTAS", "CDC_STATE_MAX_DELETED_SHARE",
    "CDC_STATE_MAX_FILES_PER_BUCKET", "CDC_LEASE_SECONDS",
    # the command line's metrics (jobs.metrics)
    "CDC_STATSD_HOST",
    # Spark (jobs.spark)
    "CDC_JVM_JAR", "CDC_JIT", "CDC_SPARK_MASTER", "CDC_SHUFFLE_PARTITIONS", "CDC_SPARK_ADAPTIVE", "CDC_SPARK_UI",
    "CDC_SPARK_LOG_LEVEL", "CDC_SPARK_CONF", "CDC_SPARK_PACKAGES", "CDC_SPARK_ARCHIVE_DIR", "XDG_CACHE_HOME",
    "CDC_CLASS_ARCHIVE", "JAVA_HOME", "SPARK_HOME",
    "SPARK_SUBMIT_ACTIVE", "PYSPARK_GATEWAY_PORT", "PYSPARK_PYTHON", "PATH", "PYTHONPATH",
    # quality suites, landing, S3 (jobs.quality, jobs.land, jobs.lake.storage)
    "CDC_EXPECTATIONS_DIR", "CDC_KAFKA_CONFIG", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_CA_BUNDLE",
    "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    # the alert's SMTP server (jobs.alert)
    "AIRFLOW_CONN_SMTP_DEFAULT", "AIRFLOW__EMAIL__FROM_EMAIL", "SMTP_HOST", "SMTP_PORT", "SMTP_USER",
    "SMTP_PASSWORD", "SMTP_FROM", "SMTP_STARTTLS", "SMTP_SSL", "SMTP_TIMEOUT", "SMTP_VERIFY_CERTIFICATES",
    # crash and concurrency tests (jobs.failpoints), the demo and the local Airflow (jobs.demo, jobs.airflow.local)
    "CDC_KILL_AT", "CDC_PAUSE_AT", "CDC_DEMO_DIR", "CDC_AIRFLOW_HOME", "CDC_AIRFLOW_PORT", "CDC_AIRFLOW_DB",
})


def get(name: str, default: str | None = None) -> str | None:
    """The value of ``name`` (one of :data:`NAMES`) as the environment holds it, or ``default``."""
    if name not in NAMES:
        raise KeyError(f"{name} is not one of jobs.env.NAMES: add it there and to docs/operations/environment.md")
    return os.environ.get(name, default)


def text(name: str, default: str = "") -> str:
    """The value of ``name`` without surrounding blanks; ``default`` when unset or blank."""
    return (get(name) or "").strip() or default


def named(name: str) -> str | None:
    """A variable the user names (a pipeline file's ``${NAME}``, ``--consumer-config-env``), or None."""
    return os.environ.get(name)


def environment() -> dict[str, str]:
    """A copy of the whole environment: what a child process inherits, what a pipeline file's ``${NAME}``
    may read."""
    return dict(os.environ)


def number(name: str, default: float | None, whole: bool = False) -> float | None:
    """The value of ``name`` as a number (``whole``: an integer, at least 0); ``default`` when unset or
    blank. A value that is no such number is a ValueError naming the variable."""
    value = text(name)
    if not value:
        return default
    try:
        parsed = int(value) if whole else float(value)
    except ValueError:
        parsed = None
    if parsed is None or (whole and parsed < 0):
        kind = "a whole number of at least 0" if whole else "a number"
        raise ValueError(f"{name}={value!r} is not {kind}: unset it (default {default}) or give one")
    return parsed
