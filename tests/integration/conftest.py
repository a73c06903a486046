"""The integration tests: every test here is marked ``integration`` (whole stages, real servers, new
JVMs), and the real servers they share (tests/support/servers.py): one Tansu broker and one moto S3
server for the session, tests keeping apart by their own topic names and buckets."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.demo_data import generate_demo
from tests.support.servers import moto_s3, s3_env, tansu_broker
from tests.support.smtp import smtp_sink as running_smtp_sink

HERE = Path(__file__).resolve().parent


# the integration modules over 40 test-seconds each (whole-run matrices, Airflow, a Spark cluster, S3,
# the databases): `make test` leaves them to `make test-scenarios`, so that it fits in 15 minutes on 2
# cores; CI (.ci/run) runs both (docs/operations/tests-and-benchmark.md)
SCENARIOS = frozenset({
    "test_airflow_service.py", "test_awkward_names.py", "test_bucketed_state.py", "test_concurrent_attempts.py",
    "test_dag_run.py", "test_decoder_fuzzing_runs.py", "test_every_format_replay.py", "test_expire.py",
    "test_fingerprints.py", "test_value_fingerprints.py", "test_metrics.py",
    "test_full_load_replace.py", "test_history.py", "test_iceberg_readers.py", "test_killed_runs.py",
    "test_properties.py", "test_publish_atomicity.py", "test_run_splits.py", "test_s3_lake.py",
    "test_schema_changes.py", "test_shareplex_runs.py", "test_source_databases.py", "test_spark_cluster.py",
    "test_transactions_across_partitions.py", "test_wheel.py", "test_workload_replay.py",
})


def pytest_collection_modifyitems(config, items):
    # a conftest's hook sees every collected item, not only this folder's
    for item in items:
        path = Path(item.path).resolve()
        if HERE in path.parents:
            item.add_marker(pytest.mark.integration)
            if path.name in SCENARIOS:
                item.add_marker(pytest.mark.scenario)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """One Tansu broker for the session; tests keep apart by using their own topic names."""
    with tansu_broker() as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """One moto S3 server for the session; tests keep apart by using their own buckets."""
    with moto_s3() as endpoint:
        yield endpoint


@pytest.fixture()
def s3_lake_env(s3_endpoint: str) -> Iterator[str]:
    """The AWS variables pointing at the session's S3 server, for one test; yields the endpoint."""
    with s3_env(s3_endpoint):
        yield s3_endpoint


@pytest.fixture()
def smtp_sink():
    """(port, inbox) of an SMTP sink on 127.0.0.1 for one test (tests/support/smtp.py)."""
    with running_smtp_sink() as (server, inbox):
        yield server.port, inbox


@pytest.fixture(scope="session")
def demo_topics(tmp_path_factory) -> Path:
    """The bundled demo's topics, generated once per test process (tests/support/demo_data.py)."""
    return generate_demo(tmp_path_factory.mktemp("demo"))
