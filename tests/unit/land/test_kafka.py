"""Kafka settings from an Airflow connection (the apache-kafka provider's hook), given as an
``AIRFLOW_CONN_<ID>`` JSON environment variable as Airflow's environment secrets backend reads it."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from jobs.land.command import LandError, kafka_consumer_config, main

SECRET = "Endpoint=sb://cdcns.servicebus.windows.net/;SharedAccessKeyName=land;SharedAccessKey=s3cr3t-KEY="
EVENT_HUBS = {
    "bootstrap.servers": "cdcns.servicebus.windows.net:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "$ConnectionString",
    "sasl.password": SECRET,
}


def _connection(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka", **fields}))


def test_event_hubs_kafka_endpoint_settings_come_from_the_connection_extra(monkeypatch) -> None:
    _connection(monkeypatch, "eh_kafka", extra=EVENT_HUBS)
    assert kafka_consumer_config("eh_kafka") == EVENT_HUBS


def test_login_and_password_fields_become_the_sasl_credentials(monkeypatch) -> None:
    extra = {"bootstrap.servers": "broker:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}
    _connection(monkeypatch, "scram", login="lander", password="pw-in-the-password-field", extra=extra)
    assert kafka_consumer_config("scram") == {**extra, "sasl.username": "lander",
                                              "sasl.password": "pw-in-the-password-field"}
    # what the extra names wins over the fields
    _connection(monkeypatch, "both", login="field-user", password="field-pw", extra=EVENT_HUBS)
    assert kafka_consumer_config("both") == EVENT_HUBS


def test_unusable_connections_are_clear_errors_without_values(monkeypatch) -> None:
    with pytest.raises(LandError, match="Airflow connection 'no_such_conn'"):
        kafka_consumer_config("no_such_conn")
    _connection(monkeypatch, "no_bootstrap", extra={"sasl.password": SECRET})
    with pytest.raises(LandError, match="bootstrap.servers") as caught:
        kafka_consumer_config("no_bootstrap")
    assert SECRET not in str(caught.value)


def test_cli_lands_with_the_connection_and_never_prints_a_secret(monkeypatch, tmp_path: Path, capsys,
                                                                 caplog) -> None:
    # a setting librdkafka rejects makes it quote the value: land's message must not carry any of them
    _connection(monkeypatch, "eh_bad", extra={**EVENT_HUBS, "bootstrap.servers": "127.0.0.1:1",
                                              "sasl.mechanism": SECRET})
    caplog.set_level(logging.DEBUG)
    code = main(["--kafka-conn-id", "eh_bad", "--topic", "orders", "--lake", str(tmp_path / "lake"),
                 "--pipeline", "p", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02T00:00:00Z"])
    out = capsys.readouterr()
    assert code == 1 and "Kafka consumer settings rejected" in out.err
    for text in (out.out, out.err, caplog.text):
        assert "s3cr3t" not in text
    assert not (tmp_path / "lake" / "raw").exists() or not any((tmp_path / "lake" / "raw").rglob("_manifest.json"))


def test_cli_refuses_a_missing_connection_as_an_argument_error(tmp_path: Path, capsys) -> None:
    code = main(["--kafka-conn-id", "absent_conn", "--topic", "orders", "--lake", str(tmp_path / "lake"),
                 "--pipeline", "p", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02T00:00:00Z"])
    assert code == 2 and "absent_conn" in capsys.readouterr().err
