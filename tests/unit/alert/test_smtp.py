"""jobs.alert.smtp without a server: where the settings come from, and what is sent how (a real server:
tests/integration/test_alert_smtp.py)."""
from __future__ import annotations

import json
import smtplib
from types import SimpleNamespace

import pytest

from jobs.alert import smtp
from jobs.alert.smtp import (
    SmtpConfigError,
    SmtpError,
    SmtpSettings,
    connection_settings,
    email_message,
    send_email,
    smtp_settings,
)
from jobs.alert.smtp import settings_from_connection as from_connection
from tests.support.alerts import SMTP_ENV


@pytest.fixture(autouse=True)
def _no_smtp_env(monkeypatch, tmp_path):
    for name in SMTP_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))


def _connection(extra: dict | None = None, **fields):
    return SimpleNamespace(host="mx", port=None, login="u", password="pw", extra_dejson=extra or {}, **fields)


def test_settings_from_airflow_connection_uri(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT",
                       "smtp://mail%40user:s%3Acret-pw@mail.example.com:2525?disable_ssl=true&disable_tls=false"
                       "&from_email=dq%40example.com&timeout=7")
    settings = smtp_settings()
    assert (settings.host, settings.port, settings.user, settings.password) == (
        "mail.example.com", 2525, "mail@user", "s:cret-pw")
    assert (settings.ssl, settings.starttls, settings.timeout, settings.from_addr) == (False, True, 7.0, "dq@example.com")
    assert "s:cret-pw" not in repr(settings) and "s:cret-pw" not in str(settings)

    # the smtp provider's defaults: SSL on unless disabled (and then no STARTTLS inside it), 5 retries
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", '{"conn_type": "smtp", "host": "mx", "login": "u"}')
    settings = smtp_settings()
    assert (settings.ssl, settings.starttls, settings.port, settings.from_addr, settings.retries) == (
        True, False, 0, "u", 5)


def test_unparsable_airflow_connection_is_refused_without_its_password(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", "smtp://u:hunter2-secret@host:notaport")
    with pytest.raises(SmtpConfigError, match="AIRFLOW_CONN_SMTP_DEFAULT cannot be parsed") as refused:
        smtp_settings()
    assert "hunter2-secret" not in str(refused.value)


def test_smtp_env_defaults(monkeypatch):
    assert smtp_settings() is None
    monkeypatch.setenv("SMTP_HOST", "mx")
    settings = smtp_settings()
    assert (settings.port, settings.starttls, settings.ssl, settings.user, settings.password, settings.retries) == (
        25, False, False, None, None, 0)
    assert settings.from_addr == "cdc-data-quality@localhost"
    monkeypatch.setenv("SMTP_SSL", "true")
    assert smtp_settings().port == 465
    monkeypatch.setenv("SMTP_PORT", "twenty-five")
    with pytest.raises(SmtpConfigError, match="must be numbers"):
        smtp_settings()


def test_a_connections_extras_are_read_as_the_smtp_provider_reads_them():
    assert from_connection(_connection({"ssl_context": "none", "retry_limit": "2"})).verify_certificates is False
    assert from_connection(_connection({"retry_limit": 2})).retries == 2
    assert from_connection(_connection({"ssl_context": "default"})).verify_certificates is True
    with pytest.raises(SmtpConfigError, match="'ssl_context' must be 'default' or 'none'"):
        from_connection(_connection({"ssl_context": "lax"}))
    with pytest.raises(SmtpConfigError, match="'timeout' and 'retry_limit' must be numbers"):
        from_connection(_connection({"timeout": "soon"}))
    # OAuth2 (a token fetched from an identity provider) is not what this door does: said, not ignored
    with pytest.raises(SmtpConfigError, match="auth_type 'oauth2' is not supported"):
        from_connection(_connection({"auth_type": "oauth2"}), "smtp_dq")


def test_the_dags_connection_is_found_by_name_and_names_a_sender(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DQ", json.dumps({"conn_type": "smtp", "host": "mx", "port": 2525,
                                                           "login": "dq", "password": "pw-123"}))
    settings = connection_settings("smtp_dq", "dq-bot@example.com")
    assert (settings.host, settings.port, settings.user, settings.from_addr) == ("mx", 2525, "dq", "dq-bot@example.com")
    # the sender: the pipeline's, else the connection's, else Airflow's; never a made-up one
    with pytest.raises(SmtpConfigError, match="no sender: set from_email in the extra of connection smtp_dq"):
        connection_settings("smtp_dq")
    monkeypatch.setenv("AIRFLOW__EMAIL__FROM_EMAIL", "airflow@example.com")
    assert connection_settings("smtp_dq").from_addr == "airflow@example.com"
    with pytest.raises(SmtpConfigError, match="no Airflow connection 'smtp_nowhere'"):
        connection_settings("smtp_nowhere", "dq-bot@example.com")


def test_the_email_is_text_and_html_and_no_header_takes_a_line_break():
    msg, recipients = email_message("dq@x\r\nBcc: evil@x", [" a@x ", "", "b@y\n"], "s\r\nBcc: evil@x", "<p>h</p>",
                                    "t")
    assert recipients == ["a@x", "b@y"] and msg["To"] == "a@x, b@y"
    assert msg["Subject"] == "s Bcc: evil@x" and msg["Bcc"] is None and "\nBcc" not in msg.as_string()
    assert msg.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in msg.iter_parts()] == ["text/plain", "text/html"]
    with pytest.raises(ValueError, match="no recipients"):
        email_message("dq@x", [" "], "s", "<p>h</p>")


class _Client:
    """smtplib.SMTP's place: hangs up ``hangups`` times on connect, then takes what is sent."""

    hangups, connects, sent = 0, 0, []

    def __init__(self, host, port, timeout):
        type(self).connects += 1
        if type(self).connects <= type(self).hangups:
            raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def login(self, user, password):
        raise smtplib.SMTPAuthenticationError(535, f"no such user {user} with {password}".encode())

    def send_message(self, msg, from_addr, to_addrs):
        type(self).sent.append((from_addr, to_addrs))

    def close(self):
        pass


@pytest.mark.parametrize("retries, hangups, sent", [(0, 0, True), (2, 2, True), (1, 2, False)])
def test_a_server_that_hangs_up_at_once_is_tried_again_as_many_times_as_the_connection_says(
        monkeypatch, retries, hangups, sent):
    client = type("Client", (_Client,), {"hangups": hangups, "connects": 0, "sent": []})
    monkeypatch.setattr(smtp.smtplib, "SMTP", client)
    settings = SmtpSettings("mx", 25, None, None, "dq@x", starttls=False, ssl=False, timeout=1, retries=retries)
    if sent:
        send_email(lambda: settings, ["a@x"], "s", "<p>h</p>")
        assert client.sent == [("dq@x", ["a@x"])]
    else:
        with pytest.raises(SmtpError, match="SMTP mx:25: SMTPServerDisconnected"):
            send_email(lambda: settings, ["a@x"], "s", "<p>h</p>")
    assert client.connects == min(hangups, retries) + 1


def test_what_cannot_go_says_why_in_one_line_without_the_password(monkeypatch):
    monkeypatch.setattr(smtp.smtplib, "SMTP", type("Client", (_Client,), {"connects": 0, "sent": []}))
    settings = SmtpSettings("mx", 0, "dq", "s3cret-pw", "dq@x", starttls=False, ssl=False, timeout=1)
    with pytest.raises(SmtpError) as refused:
        send_email(lambda: settings, ["a@x"], "s", "<p>h</p>")
    # a server that echoed the password (this one does) has it masked
    assert str(refused.value) == "SMTP mx:25: SMTPAuthenticationError: (535, b'no such user dq with ***')"
    with pytest.raises(SmtpConfigError, match=r"no SMTP server configured \(AIRFLOW_CONN_SMTP_DEFAULT or SMTP_HOST\)"):
        send_email(lambda: None, ["a@x"], "s", "<p>h</p>")
