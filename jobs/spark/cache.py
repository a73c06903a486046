"""The package's cache folder: what it builds once per machine and code version and keeps (the ``jobs`` archive
spark-submit ships, jobs.spark.submit; the driver JVM's class archive, jobs.spark.class_archive)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from jobs.env import environment


def default_cache_dir(env: Mapping[str, str] | None = None) -> str:
    """Where the archives are built: ``CDC_SPARK_ARCHIVE_DIR``, else ``$XDG_CACHE_HOME/cdc-pipeline``
    (``~/.cache/cdc-pipeline``): the submitting user's own folder, not a shared temporary one."""
    env = environment() if env is None else env
    configured = (env.get("CDC_SPARK_ARCHIVE_DIR") or "").strip()
    if configured:
        return configured
    base = (env.get("XDG_CACHE_HOME") or "").strip() or str(Path.home() / ".cache")
    return str(Path(base) / "cdc-pipeline")
