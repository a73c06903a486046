"""The local Airflow's script (jobs/airflow/local.py) without Airflow running: what its services are
given, and that it stops only the processes it started (the Airflow service test starts it for real)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from jobs.airflow import local as airflow_local


def test_the_services_listen_on_127_0_0_1_only_and_take_no_other_airflows_settings(tmp_path):
    shell = {"AIRFLOW__CORE__DAGS_FOLDER": "/elsewhere", "AIRFLOW_HOME": "/other", "PATH": "/usr/bin",
             "AIRFLOW_CONN_KAFKA_ORDERS": '{"conn_type": "kafka"}'}
    env = airflow_local.airflow_env(tmp_path, 8123, base_env=shell)
    assert env["AIRFLOW_HOME"] == str(tmp_path) and env["AIRFLOW__CORE__DAGS_FOLDER"].endswith("/dags")
    assert env["AIRFLOW_CONN_KAFKA_ORDERS"] == shell["AIRFLOW_CONN_KAFKA_ORDERS"]  # connections pass
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:8123/execution/"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{tmp_path / 'airflow.db'}"
    assert airflow_local.service_argv("api-server", 8123)[-4:] == ["--host", "127.0.0.1", "--port", "8123"]
    assert all("--skip-serve-logs" in airflow_local.service_argv(name, 8123) for name in ("scheduler", "triggerer"))


def test_stop_ends_the_process_of_a_pid_file_and_never_a_stranger_with_its_pid(tmp_path):
    (tmp_path / "run").mkdir()
    service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        pid_file = tmp_path / "run" / "scheduler.pid"
        pid_file.write_text(f"{service.pid} 1")  # the PID, started at another time: another process
        assert airflow_local.service_pid(tmp_path, "scheduler") is None
        assert airflow_local.stop(tmp_path) == [] and service.poll() is None
        pid_file.write_text(f"{service.pid} {airflow_local._start_time(service.pid)}")
        assert airflow_local.running_services(tmp_path) == ["scheduler"]
        assert airflow_local.stop(tmp_path, grace_seconds=5) == ["scheduler"]
        deadline = time.monotonic() + 5
        while service.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert service.poll() is not None and not pid_file.exists()
    finally:
        if service.poll() is None:
            os.kill(service.pid, 9)
            service.wait()
