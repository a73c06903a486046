"""jobs.spark.submit: the package archive for the executors and spark-submit's settings (no Spark here;
tests/integration/test_spark_cluster.py runs them on a standalone cluster)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from jobs.spark import submit as ss
from jobs.spark.session import driver_memory, jvm_options
from tests.support.paths import REPO

NO_ENV: dict[str, str] = {}


def _toy_package(root: Path) -> Path:
    package = root / "jobs"
    (package / "formats" / "dts_avro" / "schemas").mkdir(parents=True)
    (package / "__pycache__").mkdir()
    (package / "spark" / "jars").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("A = 1\n")
    (package / "formats" / "__init__.py").write_text("")
    (package / "formats" / "dts_avro" / "schemas" / "x.avsc").write_text("{}")
    (package / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (package / "spark" / "jars" / "cdc-jvm.jar").write_bytes(b"PK")
    (package / "notes.txt").write_text("not shipped")
    return package


# ---- the archive -----------------------------------------------------------------------------------
def test_the_archive_holds_every_module_and_the_package_data_of_pyproject():
    shipped = ss.package_files()
    modules = sorted(p.relative_to(ss.PACKAGE_DIR).as_posix() for p in ss.PACKAGE_DIR.rglob("*.py")
                     if "__pycache__" not in p.parts)
    assert [f for f in shipped if f.endswith(".py")] == modules
    assert {"fold/core.py", "formats/debezium/decoder.py", "spark_entry.py", "formats/dts_avro/schemas/dts_record.avsc",
            "quality/suites/changes.json", "quality/suites/state.json"} <= set(shipped)
    assert not [f for f in shipped if f.endswith(".jar")]  # the decoders' jar goes with --jars
    # the wheel's package data (pyproject.toml), the jar apart
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]
    assert {f"{package.removeprefix('jobs').strip('.').replace('.', '/')}/{pattern}".lstrip("/")
            for package, patterns in data.items() for pattern in patterns} == {*ss.PACKAGE_DATA, *ss.NOT_IN_ARCHIVE}


def test_archive_is_built_once_per_content_and_again_when_a_module_changes(tmp_path):
    package = _toy_package(tmp_path / "src")
    cache = tmp_path / "cache"
    first = Path(ss.package_for_executors(cache, package))
    assert first.parent == cache and first.name.startswith("cdc-jobs-") and first.suffix == ".zip"
    with zipfile.ZipFile(first) as archive:
        assert archive.namelist() == ["jobs/__init__.py", "jobs/a.py", "jobs/formats/__init__.py",
                                      "jobs/formats/dts_avro/schemas/x.avsc"]
    built_at = first.stat().st_mtime_ns
    assert Path(ss.package_for_executors(cache, package)) == first and first.stat().st_mtime_ns == built_at

    (package / "a.py").write_text("A = 2\n")
    second = Path(ss.package_for_executors(cache, package))
    assert second != first and second.is_file() and first.is_file()  # the old one stays (a running app may serve it)
    with zipfile.ZipFile(second) as archive:
        assert archive.read("jobs/a.py") == b"A = 2\n"

    (package / "b.py").write_text("")  # a new module is a change too
    assert Path(ss.package_for_executors(cache, package)) not in (first, second)
    (package / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"\1")  # byte code is not
    (package / "notes.txt").write_text("changed")
    assert len(list(cache.glob("cdc-jobs-*.zip"))) == 3
    ss.package_for_executors(cache, package)
    assert len(list(cache.glob("cdc-jobs-*.zip"))) == 3 and not list(cache.glob(".*.tmp"))


def test_archive_bytes_depend_only_on_the_files(tmp_path):
    package = _toy_package(tmp_path / "src")
    one = Path(ss.package_for_executors(tmp_path / "one", package))
    os.utime(package / "a.py", (0, 0))
    two = Path(ss.package_for_executors(tmp_path / "two", package))
    assert one.name == two.name and one.read_bytes() == two.read_bytes()


def test_jobs_imports_from_the_archive_alone(tmp_path):
    archive = ss.package_for_executors(tmp_path / "cache")
    code = ("import importlib.resources, json, jobs, jobs.cli, jobs.fold.core, jobs.formats as d; "
            "from jobs.quality.validate import load_suite, suite_file; "
            "print(json.dumps([jobs.__file__, d.available_formats(), "
            "len(importlib.resources.files('jobs.formats.dts_avro').joinpath('schemas/dts_record.avsc').read_text()), "
            "str(suite_file('state')), [load_suite(s)['name'] for s in ('changes', 'state')]]))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CDC_EXPECTATIONS_DIR")} | {"PYTHONPATH": archive}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    where, formats, schema_chars, state_suite, suites = json.loads(out.stdout.splitlines()[-1])
    assert where == f"{archive}/jobs/__init__.py"
    assert "debezium" in formats and "dts_avro" in formats and schema_chars > 0
    # the driver reads the suites from the archive: nothing tells it where a checkout's are
    assert state_suite == f"{archive}/jobs/quality/suites/state.json" and len(suites) == 2


def test_archives_go_to_the_users_cache_unless_told():
    assert ss.default_cache_dir({"CDC_SPARK_ARCHIVE_DIR": "/srv/cdc/archives"}) == "/srv/cdc/archives"
    assert ss.default_cache_dir({"XDG_CACHE_HOME": "/c"}) == "/c/cdc-pipeline"
    assert ss.default_cache_dir(NO_ENV) == str(Path.home() / ".cache" / "cdc-pipeline")


# ---- conf, jars, packages --------------------------------------------------------------------------
def test_conf_has_the_jvm_options_and_the_users_settings_win():
    conf = ss.submit_conf(NO_ENV)
    assert conf == {"spark.driver.extraJavaOptions": jvm_options(NO_ENV),
                    "spark.executor.extraJavaOptions": jvm_options(NO_ENV),
                    "spark.driver.memory": driver_memory()}
    assert ss.submit_conf(NO_ENV, conf={"spark.driver.memory": "3g"})["spark.driver.memory"] == "3g"
    quick = ss.submit_conf({"CDC_JIT": "c1"})
    assert quick["spark.executor.extraJavaOptions"].endswith("-XX:TieredStopAtLevel=1")
    users = {"spark.hadoop.fs.s3a.path.style.access": True, "spark.driver.extraJavaOptions": "-Xss4m",
             "spark.executor.cores": 2}
    conf = ss.submit_conf(NO_ENV, conf=users)
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true" and conf["spark.executor.cores"] == "2"
    assert conf["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert conf["spark.executor.extraJavaOptions"] == jvm_options(NO_ENV)
    # nothing from the environment: a pipeline's settings are its file's
    assert "spark.executor.cores" not in ss.submit_conf({"CDC_SPARK_CONF": json.dumps(users)})


def test_executor_python_only_when_told_and_the_driver_keeps_its_own():
    assert not [k for k in ss.submit_conf(NO_ENV) if k.startswith("spark.pyspark.")]
    conf = ss.submit_conf(NO_ENV, executor_python="/opt/cdc/venv/bin/python")
    assert conf["spark.pyspark.python"] == "/opt/cdc/venv/bin/python"
    assert conf["spark.pyspark.driver.python"] == sys.executable
    conf = ss.submit_conf(NO_ENV, executor_python="/opt/x/python", driver_python="/opt/y/python")
    assert conf["spark.pyspark.driver.python"] == "/opt/y/python"
    # the user's settings still win
    assert ss.submit_conf(NO_ENV, conf={"spark.pyspark.python": "./env/bin/python"},
                          executor_python="/opt/x/python")["spark.pyspark.python"] == "./env/bin/python"


def test_every_jar_goes_to_jars_the_decoders_first(monkeypatch, tmp_path):
    import jobs.spark.jvm

    monkeypatch.setattr(jobs.spark.jvm, "DEFAULT_JAR", tmp_path / "missing.jar")
    assert ss.submit_jars(NO_ENV) is None
    built = tmp_path / "cdc-jvm.jar"
    built.write_bytes(b"PK")
    monkeypatch.setattr(jobs.spark.jvm, "DEFAULT_JAR", built)
    assert ss.submit_jars(NO_ENV) == str(built)
    assert ss.submit_jars({"CDC_JVM_JAR": "s3a://b/cdc-jvm.jar"}) == "s3a://b/cdc-jvm.jar"
    users = {"spark.jars": f"/x/a.jar, {built}"}
    assert ss.submit_jars(NO_ENV, conf=users) == f"/x/a.jar,{built}"  # listed once
    assert ss.submit_jars(NO_ENV, conf={"spark.jars": "/x/a.jar"}) == f"{built},/x/a.jar"
    assert "spark.jars" not in ss.submit_conf(NO_ENV, conf=users)


def test_packages_are_the_pipelines():
    assert ss.submit_packages(None) is None and ss.submit_packages([]) is None
    assert ss.submit_packages([" org.apache.hadoop:hadoop-aws:3.4.2 ", "c:d:2"]) == "org.apache.hadoop:hadoop-aws:3.4.2,c:d:2"


# ---- the driver's environment ----------------------------------------------------------------------
def test_a_shipping_driver_does_not_see_this_checkout():
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), "/opt/plugins", f"{REPO}/jobs", f"{REPO}/."]), "PATH": "/usr/bin"}
    shipped = ss.driver_env(shipped=True, env=env, python="/venv/bin/python")
    assert shipped["PYTHONPATH"] == "/opt/plugins"
    assert ss.driver_env(shipped=True, env={"PYTHONPATH": str(REPO)})["PYTHONPATH"] == ""  # set: overrides the inherited
    assert shipped["PYSPARK_PYTHON"] == shipped["PYSPARK_DRIVER_PYTHON"] == "/venv/bin/python"
    assert shipped["PATH"] == f"/venv/bin{os.pathsep}/usr/bin" and shipped["SPARK_SUBMIT_ACTIVE"] == "1"
    assert "CDC_EXPECTATIONS_DIR" not in shipped  # the archive holds the suites

    local = ss.driver_env(shipped=False, env=env, extra={"CDC_ICEBERG_CATALOG": "prod"})
    assert local["PYTHONPATH"] == str(REPO) and "CDC_EXPECTATIONS_DIR" not in local
    assert local["CDC_ICEBERG_CATALOG"] == "prod"


def test_submit_settings_are_the_operators_keyword_arguments(tmp_path):
    settings = ss.submit_settings(tmp_path / "cache", executor_python="/opt/py", env={"CDC_JIT": "c1"},
                                  packages=["a:b:1"], extra_env={"CDC_ICEBERG_CATALOG": "prod"})
    assert set(settings) == {"application", "py_files", "jars", "conf", "env_vars", "packages"}
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    SparkSubmitOperator(task_id="t", application_args=["transform"], **settings)  # all accepted
    assert settings["application"] == str(REPO / "jobs" / "spark_entry.py") and Path(settings["application"]).is_file()
    assert Path(settings["py_files"]).parent == tmp_path / "cache"
    assert settings["conf"]["spark.pyspark.python"] == "/opt/py" and settings["packages"] == "a:b:1"
    assert settings["env_vars"]["CDC_ICEBERG_CATALOG"] == "prod" and "PYTHONPATH" in settings["env_vars"]
    local = ss.submit_settings(tmp_path / "unused", ship=False, env=NO_ENV)
    assert local["py_files"] is None and not (tmp_path / "unused").exists()
    assert local["env_vars"]["PYTHONPATH"] == str(REPO)


def test_the_entry_drops_its_own_folder_from_the_path():
    from jobs.spark_entry import _without_own_folder

    assert _without_own_folder([str(REPO / "jobs"), "", "/x", f"{REPO}/jobs/"]) == ["", "/x"]


def test_module_is_light_to_import():
    code = ("import sys, jobs.spark.submit, jobs.spark_entry; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'airflow', 'pyarrow', 'py4j')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_dts_avro_reads_its_schema_from_the_archive(tmp_path):
    archive = ss.package_for_executors(tmp_path / "cache")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": archive}
    out = subprocess.run([sys.executable, "-c", "from jobs.formats.dts_avro import decoder; decoder.record_schema()"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
