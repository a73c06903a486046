"""The driver JVM's class-data-sharing archive (the JDK's CDS): Spark's classes mapped from one file instead of
looked up, read and verified out of some 300 jars by every new driver.

A fresh driver spends seconds of a small run loading classes (bench/results/HISTORY.md, 2026-12-05). The first
driver on a machine whose JVM and Spark jars have no archive yet records the classes it loads
(``-XX:ArchiveClassesAtExit``: written as that JVM exits) into a file of its own; once the JVM has exited, the
process that started it checks the file and renames it into place, so that no JVM ever maps a file still being
written (a truncated archive crashes the JVM that maps it). Later drivers map it (``-XX:SharedArchiveFile``); an
archive the JVM finds stale (another JDK, other jars) it ignores, silently. The archive's name hashes the JVM
and the jars it was recorded with, so a new Spark or JDK records a new one and the old one is removed.

Only the driver: executors on other machines have no such file. ``CDC_CLASS_ARCHIVE``: the folder it is kept in
(default: ``jvm`` in the package's cache folder, jobs.spark.cache), or ``off``.
Standard library only: the DAG's operator and the command line use it before any Spark starts.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jobs import env as environ
from jobs.spark.cache import default_cache_dir

# a stale archive is ignored without a warning on the driver's stderr
_QUIET = "-Xlog:cds=off,cds+dynamic=off"
_PREFIX = "spark-classes-"
_SUFFIX = ".jsa"
_PENDING = ".part"
_PENDING_MAX_AGE_S = 86400  # a recording whose process died before it was checked


@dataclass(frozen=True)
class ClassArchive:
    """The archive of this JVM and these jars (``path``), and where this driver records it when there is none
    yet (``pending``; None: the driver maps ``path``)."""

    path: Path
    java: str  # the JVM spark-submit starts: what checks a recording
    pending: Path | None = None

    @property
    def jvm_options(self) -> str:
        """The driver's JVM options that map the archive, or record it."""
        if self.pending is None:
            return f"-XX:SharedArchiveFile={self.path} {_QUIET}"
        return f"-XX:ArchiveClassesAtExit={self.pending} {_QUIET}"

    def settle(self) -> bool:
        """Once the recording driver has exited: its archive renamed into place if a JVM maps it, else removed
        (a driver killed while writing it). Whether an archive was adopted; nothing to do when none was recorded."""
        if self.pending is None or not self.pending.is_file():
            return False
        try:
            if not _maps(self.java, self.pending):
                return False
            os.replace(self.pending, self.path)
        finally:
            self.pending.unlink(missing_ok=True)
        _remove_others(self.path)
        return True


def class_archive(record: bool, env: Mapping[str, str] | None = None) -> ClassArchive | None:
    """The archive a driver started from here maps; with ``record``, where it records one when there is none yet
    (the caller then ``settle``s it once that driver exited). None: off, or no JVM or Spark found here."""
    env = environ.environment() if env is None else env
    setting = (env.get("CDC_CLASS_ARCHIVE") or "").strip()
    if setting.lower() == "off":
        return None
    java, spark_home = _java(env), _spark_home(env)
    if java is None or spark_home is None:
        return None
    folder = Path(setting) if setting else Path(default_cache_dir(env)) / "jvm"
    path = folder / f"{_PREFIX}{_key(java, spark_home)}{_SUFFIX}"
    if any(c.isspace() for c in str(path)):  # JVM options are split at blanks
        return None
    if path.is_file():
        return ClassArchive(path, java)
    if not record:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    return ClassArchive(path, java, pending=folder / f"{path.name}.{uuid.uuid4().hex}{_PENDING}")


def with_driver_options(conf: Mapping[str, str], archive: ClassArchive | None) -> dict[str, str]:
    """Spark settings ``conf`` with the archive's options after the driver's own JVM options."""
    conf = dict(conf)
    if archive is not None:
        own = conf.get("spark.driver.extraJavaOptions", "").strip()
        conf["spark.driver.extraJavaOptions"] = f"{own} {archive.jvm_options}".strip()
    return conf


def _java(env: Mapping[str, str]) -> str | None:
    """The java spark-submit runs (its launcher's rule: ``$JAVA_HOME/bin/java``, else the one on PATH)."""
    home = (env.get("JAVA_HOME") or "").strip()
    if home:
        return str(Path(home) / "bin" / "java") if (Path(home) / "bin" / "java").is_file() else None
    return shutil.which("java", path=env.get("PATH"))


def _spark_home(env: Mapping[str, str]) -> Path | None:
    home = (env.get("SPARK_HOME") or "").strip()
    if home:
        return Path(home)
    spec = importlib.util.find_spec("pyspark")  # located, not imported
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None


def _key(java: str, spark_home: Path) -> str:
    """A hash of what the JVM checks an archive against: the JVM itself and the jars of Spark's class path."""
    digest = hashlib.sha256()
    for f in [Path(os.path.realpath(java)), *sorted((spark_home / "jars").glob("*.jar"))]:
        stat = f.stat()
        digest.update(f"{f}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _maps(java: str, archive: Path) -> bool:
    """Whether a JVM starts with the archive mapped (one cut short by a killed writer crashes it: its crash
    report goes to a scratch folder, not the caller's working directory)."""
    with tempfile.TemporaryDirectory(prefix="cdc-archive-check-") as scratch:
        try:
            done = subprocess.run([java, f"-XX:SharedArchiveFile={archive}", f"-XX:ErrorFile={scratch}/hs_err_%p.log",
                                   _QUIET, "-version"], capture_output=True, timeout=120, check=False, cwd=scratch)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return done.returncode == 0


def _remove_others(kept: Path) -> None:
    """The archives of other JVMs or jars, and recordings left by processes that died a while ago."""
    now = time.time()
    for f in kept.parent.glob(f"{_PREFIX}*"):
        stale = f.name.endswith(_SUFFIX) and f != kept
        abandoned = f.name.endswith(_PENDING) and now - f.stat().st_mtime > _PENDING_MAX_AGE_S
        if stale or abandoned:
            f.unlink(missing_ok=True)
