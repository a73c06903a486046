"""The unit tests: every test here is marked ``unit``. A unit test starts no server (Kafka broker, S3,
SMTP, Airflow) and no JVM of its own (spark-submit, a ``python -m jobs`` or bench subprocess, a
SparkSession other than the session's ``spark`` fixture): those belong in tests/integration."""
from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    # a conftest's hook sees every collected item, not only this folder's
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.unit)
