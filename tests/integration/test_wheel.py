"""The package as a wheel, away from the checkout: built from a copy of its sources (the JVM-side decoders'
jar built into them first, as make wheel does), installed into a fresh venv in a temporary folder, and a
whole ``python -m jobs run`` of a Debezium sample from yet another folder, with no PYTHONPATH and none of
the CDC_ variables that point at files: the suites, the schema and the jar are the wheel's own.

The fresh venv gets the package only. Its third-party dependencies are the test venv's, through one .pth
line naming that venv's site-packages: installing pyspark, Great Expectations, pyiceberg and the rest
again would take minutes and the network on every run, and says nothing of the package (the wheel's
metadata, its dependency list, is checked in tests/unit/test_packaging.py). A .pth line only adds the
folder to sys.path, after the venv's own site-packages, and Python processes no .pth file inside it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from jobs.lake.layout import Lake
from tests.support.decoders import FLINK_PRODUCT_ROWS
from tests.support.packaging import requirement_files
from tests.support.paths import REPO, RESOURCES
from tests.support.pipeline_runs import published_rows

SAMPLE = RESOURCES / "debezium" / "flink" / "debezium-postgres-data-schema-include.txt"
PIPELINE, RUN_ID, TABLE = "wheel", "r1", "postgres.inventory.products"
PACKAGE_FILES = ("jobs/spark/jars/cdc-jvm.jar", "jobs/quality/suites/changes.json", "jobs/quality/suites/state.json",
                 "jobs/formats/dts_avro/schemas/dts_record.avsc")
# where the installed package is and what it reads, asked of the fresh venv's Python
WHERE = """
import json, jobs
from jobs.formats.dts_avro.decoder import SCHEMA_FILE
from jobs.quality.validate import load_suite, suite_file
from jobs.spark.jvm import DEFAULT_JAR
print(json.dumps({"jobs": jobs.__file__, "suites": [str(suite_file(s)) for s in ("changes", "state")],
                  "names": [load_suite(s)["name"] for s in ("changes", "state")], "schema": str(SCHEMA_FILE),
                  "jar": str(DEFAULT_JAR) if DEFAULT_JAR.is_file() else None}))
"""


def _sources(to: Path) -> Path:
    """What building the package reads, copied: pyproject.toml, its readme and requirement files, jobs/."""
    to.mkdir()
    for name in ["pyproject.toml", "README.md", *(f.name for files in requirement_files().values() for f in files)]:
        shutil.copy2(REPO / name, to / name)
    shutil.copytree(REPO / "jobs", to / "jobs", ignore=shutil.ignore_patterns("__pycache__"))
    return to


def _clean_env() -> dict[str, str]:
    """This environment without PYTHONPATH and the CDC_ variables (a jar, suites, a catalog elsewhere); the
    suite's small-data Spark settings (tests/conftest.py)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("CDC_")}
    return env | {"CDC_JIT": "c1", "CDC_SHUFFLE_PARTITIONS": "2", "CDC_SPARK_ADAPTIVE": "false"}


def _site_packages(python: Path) -> Path:
    return Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    built = subprocess.run(["jvm/build.sh"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0 and (REPO / PACKAGE_FILES[0]).is_file(), built.stderr
    root = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root / "dist"),
                           str(_sources(root / "src"))], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (found,) = (root / "dist").glob("*.whl")
    return found


@pytest.fixture(scope="module")
def venv_python(wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    shared = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (_site_packages(python) / "cdc-test-dependencies.pth").write_text("".join(f"{path}\n" for path in shared))
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                                "--no-index", "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]
    return python


def test_the_wheel_holds_the_files_the_package_reads(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert set(PACKAGE_FILES) <= names
    distribution, version = wheel.name.split("-")[:2]
    assert {n.split("/")[0] for n in names} == {"jobs", f"{distribution}-{version}.dist-info"}


def test_the_installed_package_finds_its_suites_schema_and_jar_without_the_checkout(venv_python, tmp_path):
    out = subprocess.run([venv_python, "-c", WHERE], cwd=tmp_path, env=_clean_env(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    where = json.loads(out.stdout)
    package = Path(where["jobs"]).parent
    assert package.parent == _site_packages(venv_python) and REPO not in package.parents
    assert where["suites"] == [str(package / "quality" / "suites" / f"{s}.json") for s in ("changes", "state")]
    assert where["names"] == ["change_records", "table_state"]
    assert where["schema"] == str(package / "formats" / "dts_avro" / "schemas" / "dts_record.avsc")
    assert where["jar"] == str(package / "spark" / "jars" / "cdc-jvm.jar")


def _state(rows: list[tuple]) -> dict[int, tuple]:
    """The table Flink's changes leave (tests/resources/debezium/SOURCE.md): the last image of each key."""
    state: dict[int, tuple] = {}
    for kind, key, *values in rows:
        if kind in ("+I", "+U"):
            state[key] = tuple(values)
        elif kind == "-D":
            del state[key]
    return state


def test_a_whole_run_of_a_sample_from_another_folder(venv_python, tmp_path):
    work = tmp_path / "elsewhere"
    (work / "raw").mkdir(parents=True)
    shutil.copy2(SAMPLE, work / "raw" / SAMPLE.name)
    run = subprocess.run([venv_python, "-m", "jobs", "run", "--format", "debezium", "--raw", "raw", "--lake", "lake",
                          "--pipeline", PIPELINE, "--run-id", RUN_ID, "--primary-keys", "products=id"],
                         cwd=work, env=_clean_env(), capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    rows = published_rows(work / "lake", PIPELINE, TABLE, ["id", "name", "description", "weight"], lambda r: r["id"])
    expected = _state(FLINK_PRODUCT_ROWS)
    assert [r["id"] for r in rows] == sorted(expected) and len(rows) == 10
    for row in rows:
        name, description, weight = expected[row["id"]]
        assert (row["name"], row["description"]) == (name, description) and row["weight"] == pytest.approx(weight)

    report = json.loads((work / "lake" / Lake.report_dir(PIPELINE, RUN_ID) / "validation.json").read_text())
    assert [(suite["suite"], suite["table"]) for suite in report["suites"]] == [("change_records", None),
                                                                                 ("table_state", TABLE)]
    assert report["success"] and all(suite["results"] for suite in report["suites"])
