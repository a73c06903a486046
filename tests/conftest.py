"""Shared fixtures: one SparkSession for the whole test session, and the test resources folder."""
from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support.paths import RESOURCES  # noqa: E402 - REPO on sys.path first

# the vendor documents (seeds/) and captured messages (<format>/, each folder's SOURCE.md gives their
# provenance and licence) the tests read: kept in the repository, so a fresh clone tests itself;
# CDC_SHARED_DIR points at another folder laid out the same way
SHARED = Path(os.environ.get("CDC_SHARED_DIR", RESOURCES))
# importing airflow creates $AIRFLOW_HOME (default ~/airflow): keep tests out of the user's home. The
# xdist workers (make test runs two) inherit the controller's environment: each gets a home of its own,
# so two workers' Airflow metadata databases never meet
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if "AIRFLOW_HOME" not in os.environ or (_WORKER and os.environ.get("CDC_TESTS_OWN_AIRFLOW_HOME") == "1"):
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix=f"cdc-tests-airflow-{_WORKER or 'main'}-")
    os.environ["CDC_TESTS_OWN_AIRFLOW_HOME"] = "1"
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
# py4j logs from __del__ at interpreter exit, after pytest closed the streams
logging.getLogger("py4j").setLevel(logging.WARNING)


# one JVM runs a few hundred pipeline runs: more heap than local mode's default 1 GB
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--driver-memory 4g pyspark-shell")
# Test-sized data (tens to thousands of records): 2 shuffle partitions, and no adaptive execution,
# whose re-planning at every shuffle costs more than it saves on data this small (four test files,
# with 2 partitions: 359 s with it, 317 s without). Semantics depend on neither; the DAG test's
# spark-submit and the command line's subprocesses (tests/support/replay.run_cli) run with adaptive
# execution, as production does.
os.environ.setdefault("CDC_SHUFFLE_PARTITIONS", "2")
os.environ.setdefault("CDC_SPARK_ADAPTIVE", "false")


@pytest.fixture(scope="session")
def spark():
    from jobs.spark.session import build_spark

    session = build_spark("cdc-tests", master="local[2]")
    # Test-sized data runs faster interpreted: compiling each query's generated code costs more than the
    # code saves on a few thousand rows (docs/operations/tests-and-benchmark.md). Spark's interpreted and
    # generated paths give the same results (its own suites run both); the pipeline's generated code stays
    # tested by every `jobs run` in a process of its own (the command line, the DAG's spark-submit,
    # tests/support/replay.run_cli), which runs with production's settings.
    session.conf.set("spark.sql.codegen.wholeStage", "false")
    session.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _release_cached_data(request):
    """What one test cached (decode outcomes, changes, folds) is not left to fill the next tests' memory."""
    yield
    if "spark" in request.fixturenames:
        request.getfixturevalue("spark").catalog.clearCache()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The test resources: ``<format>/`` (captured messages, their SOURCE.md beside them) and ``seeds/``."""
    if not SHARED.is_dir():
        pytest.fail(f"test resources not found at {SHARED} (set CDC_SHARED_DIR)")
    if (SHARED / "samples").is_dir() and not (SHARED / "debezium").is_dir():
        pytest.fail(f"{SHARED} holds samples/<format>/: the tests read <format>/ and seeds/ side by side "
                    "(tests/resources/README.md)")
    return SHARED


@pytest.fixture
def small_raw(spark, tmp_path):
    """A raw folder of one Debezium insert (tests/integration/test_operational_errors.py)."""
    from tests.support.decoders import raw_frame

    raw = tmp_path / "raw"
    value = '{"op": "c", "after": {"id": 1}, "source": {"connector": "postgresql", "db": "d", "schema": "s", ' \
            '"table": "t", "lsn": 5}}'
    raw_frame(spark, [value], keys=['{"id": 1}']).write.parquet(str(raw))
    return raw
