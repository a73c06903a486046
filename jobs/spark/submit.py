"""What spark-submit needs to run the pipeline's Spark application (``transform``) on a cluster whose
executors are other machines: the ``jobs`` package shipped with ``--py-files``, the JVM-side decoders'
jar with ``--jars``, the JVM options and the user's settings (a pipeline's ``spark.conf``) as ``--conf``,
and the driver's environment.

Light at import (standard library only, no pyspark, no Airflow): the DAGs are built from
:func:`submit_settings` every time they are parsed, and their transform task makes them again where it runs.

The package ships as a zip (``cdc-jobs-<digest>.zip``), not as a wheel: spark-submit and PySpark put
``--py-files`` ending in .zip, .egg or .jar on the Python path of the driver and of every executor's
Python worker (pyspark.SparkContext.PACKAGE_EXTENSIONS), a .whl only on the driver's. The zip holds what
the wheel holds (every module and the package data of pyproject.toml: the Great Expectations suites, the
Avro schemas), under ``jobs/``, but the decoders' jar, which goes with ``--jars``; its name is a digest of
those files, so a changed module gives a new archive and a stale one is never shipped.

One rule for jars: every jar goes to ``--jars`` (the decoders' jar first, then any ``spark.jars`` of the
user's settings), never to ``--conf spark.jars``, which spark-submit would let ``--jars`` overwrite.

Where the driver runs: on the machine that calls spark-submit (client mode; PySpark on a standalone
cluster has no cluster deploy mode). It imports ``jobs`` from the archive too (spark-submit puts
``--py-files`` before everything else on its path), and reads the suites and schemas from it
(importlib.resources), as the executors do.
"""
from __future__ import annotations

import fnmatch
import hashlib
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jobs
from jobs.env import environment
from jobs.spark.cache import default_cache_dir

PACKAGE_DIR = Path(jobs.__file__).resolve().parent  # the `jobs` package
PACKAGE_PARENT = PACKAGE_DIR.parent  # where `jobs` is imported from: a checkout, or site-packages
ENTRY = PACKAGE_DIR / "spark_entry.py"  # spark-submit's application
ARCHIVE_PREFIX = "cdc-jobs-"
# besides the modules, the files of [tool.setuptools.package-data] in pyproject.toml (relative to jobs/)
# that the archive holds, and those it leaves out (the decoders' jar: --jars ships it)
PACKAGE_DATA = ("formats/*/schemas/*", "quality/suites/*.json")
NOT_IN_ARCHIVE = ("spark/jars/*.jar",)
# the zip's entries get one fixed time: the same files give the same bytes
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


# ---- the package for the executors ---------------------------------------------------------------
def package_files(package_dir: str | os.PathLike = PACKAGE_DIR) -> list[str]:
    """The files of the ``jobs`` package that ship, relative to it with ``/``, sorted: every module
    (no byte code) and the package data (the decoders' jar goes with ``--jars``)."""
    root = Path(package_dir)
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        if rel.endswith(".py") or any(fnmatch.fnmatch(rel, pattern) for pattern in PACKAGE_DATA):
            found.append(rel)
    return sorted(found)


def package_digest(package_dir: str | os.PathLike = PACKAGE_DIR) -> str:
    """A digest of the shipped files' names and contents (16 hex digits)."""
    root = Path(package_dir)
    digest = hashlib.sha256()
    for rel in package_files(root):
        data = (root / rel).read_bytes()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def package_for_executors(cache_dir: str | os.PathLike, package_dir: str | os.PathLike = PACKAGE_DIR) -> str:
    """The path of a zip of the ``jobs`` package (``jobs/...`` entries) for ``--py-files``, built in
    ``cache_dir`` once per content of the package: ``cdc-jobs-<package_digest>.zip``. Written to a
    temporary file and renamed, so a concurrent caller never ships a half-written archive. Older
    archives are left in place (a running application may still serve one to new executors)."""
    root = Path(package_dir)
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"{ARCHIVE_PREFIX}{package_digest(root)}.zip"
    if target.is_file():
        return str(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=cache)
    try:
        with os.fdopen(fd, "wb") as out, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for rel in package_files(root):
                info = zipfile.ZipInfo(f"{root.name}/{rel}", date_time=_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, (root / rel).read_bytes())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return str(target)


# ---- spark-submit's arguments --------------------------------------------------------------------
def user_conf(conf: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The user's Spark settings (a pipeline's ``spark.conf``), values as text."""
    from jobs.spark.session import conf_text

    return {str(k): conf_text(v) for k, v in (conf or {}).items()}


def submit_conf(env: Mapping[str, str] | None = None, executor_python: str | None = None,
                driver_python: str | None = None, conf: Mapping[str, Any] | None = None) -> dict[str, str]:
    """``--conf`` of spark-submit: the driver's and executors' JVM options of jobs.spark.session (with
    ``CDC_JIT``'s; the driver's cannot be set from inside the job) and the driver's heap
    (jobs.spark.session.driver_memory), with ``executor_python``
    ``spark.pyspark.python`` (the executors' interpreter) and ``spark.pyspark.driver.python`` (the
    driver's, ``driver_python`` or this one: without it spark-submit would start the driver with the
    executors' interpreter), then the user's settings (:func:`user_conf`), which win (no secrets: S3A reads
    credentials such as AWS_ACCESS_KEY_ID itself). ``spark.jars`` never: see :func:`submit_jars`."""
    from jobs.spark.session import driver_memory, jvm_options

    env = environment() if env is None else env
    options = jvm_options(env)
    # the driver runs where spark-submit is called (client mode): its heap fits that machine
    merged = {"spark.driver.extraJavaOptions": options, "spark.executor.extraJavaOptions": options,
              "spark.driver.memory": driver_memory()}
    if executor_python:
        merged["spark.pyspark.python"] = executor_python
        merged["spark.pyspark.driver.python"] = driver_python or sys.executable
    merged.update(user_conf(conf))
    merged.pop("spark.jars", None)
    return merged


def submit_jars(env: Mapping[str, str] | None = None, conf: Mapping[str, Any] | None = None) -> str | None:
    """``--jars`` of spark-submit: the JVM-side decoders' jar (as jobs.spark.jvm.jar_path: ``CDC_JVM_JAR``, any
    URI Spark reads, else the one setup built), then the ``spark.jars`` of the user's settings
    (:func:`user_conf`); None when there is none."""
    from jobs.spark.jvm import DEFAULT_JAR

    env = environment() if env is None else env
    ours = (env.get("CDC_JVM_JAR") or "").strip() or (str(DEFAULT_JAR) if DEFAULT_JAR.is_file() else None)
    listed = [j.strip() for j in (user_conf(conf).get("spark.jars") or "").split(",") if j.strip()]
    if ours and ours not in listed:
        listed.insert(0, ours)
    return ",".join(listed) or None


def submit_packages(packages: Iterable[str] | None = None) -> str | None:
    """``--packages`` of spark-submit: a pipeline's Maven coordinates; None when there are none."""
    return ",".join(p.strip() for p in packages or () if p.strip()) or None


def _is_package_parent(entry: str) -> bool:
    try:
        return Path(entry).resolve() in (PACKAGE_PARENT, PACKAGE_DIR)
    except OSError:
        return False


def driver_env(shipped: bool = True, env: Mapping[str, str] | None = None, python: str | None = None,
               extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of the spark-submit'ed driver (what SparkSubmitOperator's ``env_vars`` adds to the
    submitting process's own): ``python`` (default: this interpreter) for Python, its folder first on
    PATH (spark-submit lives there), ``SPARK_SUBMIT_ACTIVE`` (jobs.spark.session.build_spark then takes the master
    from spark-submit). ``shipped``: ``jobs`` comes from the ``--py-files`` archive (its suites and
    schemas too), so PYTHONPATH is the submitter's without the folder this ``jobs`` is imported from
    (always set, so an inherited one does not put it back). Not ``shipped``: that folder on PYTHONPATH
    (local Spark, the driver and executors on this machine). ``extra`` last (e.g. a deployment's own
    variables)."""
    env = environment() if env is None else env
    python = python or sys.executable
    out = {
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "SPARK_SUBMIT_ACTIVE": "1",
        "PATH": f"{Path(python).parent}{os.pathsep}{env.get('PATH', '')}",
    }
    if shipped:
        inherited = (env.get("PYTHONPATH") or "").split(os.pathsep)
        out["PYTHONPATH"] = os.pathsep.join(p for p in inherited if p and not _is_package_parent(p))
    else:
        out["PYTHONPATH"] = str(PACKAGE_PARENT)
    out.update({str(k): str(v) for k, v in (extra or {}).items()})
    return out


def submit_settings(cache_dir: str | os.PathLike | None = None, *, ship: bool = True,
                    executor_python: str | None = None, conf: Mapping[str, Any] | None = None,
                    packages: Iterable[str] | None = None, extra_env: Mapping[str, str] | None = None,
                    env: Mapping[str, str] | None = None, driver_python: str | None = None,
                    build_archive: bool = True) -> dict[str, Any]:
    """SparkSubmitOperator's keyword arguments for the pipeline's Spark application, all but
    ``application_args`` (jobs.airflow.tasks.transform_args), ``conn_id``, ``task_id`` and ``name``:

    - ``application``: jobs/spark_entry.py, which runs jobs.cli with the ``jobs`` on spark-submit's path;
    - ``py_files``: with ``ship``, the package's archive (:func:`package_for_executors` in ``cache_dir``,
      default :func:`default_cache_dir`); without, None (local Spark: ``jobs`` from where this process has it);
    - ``jars``: :func:`submit_jars`; ``conf``: :func:`submit_conf` (``executor_python``: the executors'
      interpreter, ``spark.pyspark.python``); ``env_vars``: :func:`driver_env` (``extra_env`` added);
      ``packages``: :func:`submit_packages`.

    ``conf`` and ``packages``: the user's Spark settings and Maven coordinates (a pipeline's ``spark``
    block). ``build_archive`` False leaves ``py_files`` None for the caller to fill where the job is submitted
    (a DAG is parsed on one machine and run on another)."""
    env = environment() if env is None else env
    py_files = package_for_executors(cache_dir or default_cache_dir(env)) if ship and build_archive else None
    return {
        "application": str(ENTRY),
        "py_files": py_files,
        "jars": submit_jars(env, conf),
        "conf": submit_conf(env, executor_python=executor_python, driver_python=driver_python, conf=conf),
        "env_vars": driver_env(shipped=ship, env=env, python=driver_python, extra=extra_env),
        "packages": submit_packages(packages),
    }
