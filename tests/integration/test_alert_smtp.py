"""The data-quality alert through a real SMTP server (aiosmtpd on a free 127.0.0.1 port), by the one SMTP
door (jobs.alert.smtp) from the command line's settings and from the DAG's connection."""
from __future__ import annotations

import email
import json
import logging
import re
from email import policy

import pytest
from aiosmtpd.smtp import AuthResult, LoginPassword

from jobs.alert.smtp import connection_settings, smtp_settings
from jobs.alert.stage import run_alert
from jobs.model.reports import AlertReport, DecodeReport, ReconciliationReport, RunReports, ValidationReport
from tests.support.alerts import SMTP_ENV, failing_reports, write_reports
from tests.support.servers import free_port
from tests.support.smtp import Inbox, smtp_sink

pytestmark = [
    # the login tests allow AUTH without TLS on purpose (a local sink); aiosmtpd warns about it
    pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning"),
]

RECIPIENTS = ["dq@example.com", "oncall@example.com"]
SENDER = "cdc@example.com"


class _Credentials:
    """aiosmtpd authenticator accepting one user/password pair."""

    def __init__(self, user: str, password: str) -> None:
        self.user, self.password = user.encode(), password.encode()
        self.attempts = 0

    def __call__(self, server, session, envelope, mechanism, auth_data):
        self.attempts += 1
        ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (self.user, self.password)
        # handled=False: aiosmtpd then answers 535 itself (its default assumes we replied)
        return AuthResult(success=ok, handled=False)


@pytest.fixture(autouse=True)
def _no_smtp_env(monkeypatch):
    for name in SMTP_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def smtp_server():
    with smtp_sink() as (controller, inbox):
        yield controller, inbox


@pytest.fixture
def smtp_server_with_login():
    credentials = _Credentials("dq-user", "pa55-word-xyz")
    # a local sink has no TLS: allow AUTH in clear text for the test only
    with smtp_sink(authenticator=credentials, auth_require_tls=False, auth_required=True) as (controller, inbox):
        yield controller, inbox, credentials


def _html_and_text(envelope) -> tuple[str, str, email.message.EmailMessage]:
    msg = email.message_from_bytes(envelope.original_content, policy=policy.default)
    assert msg.get_content_type() == "multipart/alternative"
    html_part = msg.get_body(preferencelist=("html",))
    text_part = msg.get_body(preferencelist=("plain",))
    assert html_part is not None and text_part is not None
    return html_part.get_content(), text_part.get_content(), msg


def _assert_one_escaped_alert(inbox: Inbox, result: AlertReport, sender: str) -> None:
    assert result.error is None
    assert result.sent is True
    assert len(inbox.envelopes) == 1
    envelope = inbox.envelopes[0]
    assert envelope.mail_from == sender
    assert sorted(envelope.rcpt_tos) == sorted(RECIPIENTS)
    html_body, text_body, msg = _html_and_text(envelope)
    assert msg["Subject"] == "[CDC data quality] shop run 2026-11-01T00:00:00+00:00: 2 problems"
    assert msg["To"] == ", ".join(RECIPIENTS)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html_body
    assert "<script" not in html_body.lower()
    assert "<img" not in html_body and "id<b>" not in html_body
    assert "id&lt;b&gt;" in html_body
    assert "shop._.orders" in html_body and "shop._.orders" in text_body
    assert "shop._.items" not in html_body  # matching tables are not problems
    assert [r.kind for r in result.reasons] == ["expectation", "count_mismatch"]


def test_alert_through_airflow_connection_json(smtp_server, monkeypatch, tmp_path):
    controller, inbox = smtp_server
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv(
        "AIRFLOW_CONN_SMTP_DEFAULT",
        json.dumps({"conn_type": "smtp", "host": "127.0.0.1", "port": controller.port,
                    "extra": {"disable_tls": True, "disable_ssl": True, "from_email": SENDER, "timeout": 10}}),
    )
    result = run_alert("shop", "2026-11-01T00:00:00+00:00", failing_reports(), RECIPIENTS, "/lake/reports/shop/run=x")

    _assert_one_escaped_alert(inbox, result, SENDER)
    json.dumps(result.to_json())  # written as alert.json by the stage


def test_alert_through_smtp_env_with_login_never_logs_the_password(smtp_server_with_login, monkeypatch, caplog):
    controller, inbox, credentials = smtp_server_with_login
    for name, value in {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(controller.port), "SMTP_USER": "dq-user",
                        "SMTP_PASSWORD": "pa55-word-xyz", "SMTP_FROM": SENDER}.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.DEBUG):
        result = run_alert("shop", "2026-11-01T00:00:00+00:00", failing_reports(), RECIPIENTS,
                           "/lake/reports/shop/run=x")

    _assert_one_escaped_alert(inbox, result, SENDER)
    assert credentials.attempts == 1
    assert "pa55-word-xyz" not in caplog.text
    assert "pa55-word-xyz" not in json.dumps(result.to_json())
    assert "pa55-word-xyz" not in repr(smtp_settings())


def test_wrong_password_is_reported_without_the_password(smtp_server_with_login, monkeypatch):
    controller, inbox, _ = smtp_server_with_login
    for name, value in {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(controller.port), "SMTP_USER": "dq-user",
                        "SMTP_PASSWORD": "not-the-pa55word"}.items():
        monkeypatch.setenv(name, value)

    result = run_alert("shop", "r1", failing_reports(), RECIPIENTS, "/lake")

    assert result.sent is False
    assert "SMTPAuthenticationError" in result.error
    assert "not-the-pa55word" not in result.error
    assert inbox.envelopes == []


def test_passing_run_sends_nothing(smtp_server, monkeypatch):
    controller, inbox = smtp_server
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(controller.port))
    validation = {"success": True, "suites": [{"suite": "changes", "table": None, "success": True,
                                                "results": [{"expectation": "e", "kwargs": {}, "success": True}]}]}
    reconciliation = [{"table": "t", "state_rows": 1, "source_rows": 1, "status": "match", "snapshot_id": 1},
                      {"table": "u", "state_rows": 1, "source_rows": None, "status": "unknown", "snapshot_id": 2}]
    decode = {"total": {"landed": 3, "decoded": 2, "quarantined": 0, "ignored": 1},
              "tables": {"t": {"landed": 3, "decoded": 2, "quarantined": 0, "ignored": 1}}}
    reports = RunReports(decode=DecodeReport.from_json(decode), validation=ValidationReport.from_json(validation),
                         reconciliation=ReconciliationReport.from_json({"tables": reconciliation}))

    result = run_alert("shop", "r1", reports, RECIPIENTS, "/lake")

    assert result.sent is False and result.reasons == () and result.error is None
    assert inbox.envelopes == []


def test_smtp_server_down_is_reported_not_raised(monkeypatch):
    port = free_port()  # nothing listens there
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(port))
    monkeypatch.setenv("SMTP_TIMEOUT", "5")

    result = run_alert("shop", "r1", failing_reports(), RECIPIENTS, "/lake")

    assert result.sent is False
    assert f"127.0.0.1:{port}" in result.error and "ConnectionRefusedError" in result.error
    assert len(result.reasons) == 2


def test_cli_exits_3_when_an_owed_alert_is_not_sent_and_refuses_a_threshold_outside_0_1(monkeypatch, tmp_path,
                                                                                         capsys):
    """As the Airflow task fails with AlertNotSent, the CLI's ``alert`` (and ``run``) exits 3 when problems
    were found for recipients and the email could not go, so that cron or another scheduler sees it; the
    reports stay as written."""
    from jobs import cli
    from jobs.lake.layout import Lake
    from jobs.stages import RunContext

    lake = tmp_path / "lake"
    ctx = RunContext(Lake.at(str(lake)), "shop", "r1")
    write_reports(ctx, failing_reports())
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(free_port()))  # nothing listens there
    monkeypatch.setenv("SMTP_TIMEOUT", "5")
    argv = ["alert", "--lake", str(lake), "--pipeline", "shop", "--run-id", "r1", "--alert-to", RECIPIENTS[0]]
    assert cli.main(argv) == cli.ALERT_NOT_SENT == 3
    assert "alert not sent" in capsys.readouterr().err
    assert "ConnectionRefusedError" in ctx.read_report(AlertReport).error
    # no recipients: nothing was owed, nothing failed
    assert cli.main(argv[:-2]) == 0
    with pytest.raises(SystemExit) as usage:
        cli.main([*argv, "--quarantine-threshold", "-5"])
    assert usage.value.code == 2 and "not a fraction between 0 and 1" in capsys.readouterr().err


def test_the_quarantine_by_reason_cell_reads_as_reasons_with_counts_not_json(smtp_server, monkeypatch):
    controller, inbox = smtp_server
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(controller.port))
    hostile = "<b>no source table</b>"
    decode = {"total": {"landed": 20, "decoded": 7, "quarantined": 13, "ignored": 0}, "tables": {},
              "quarantine_reasons": {"malformed JSON": 3, hostile: 10}}

    result = run_alert("shop", "r1", RunReports(decode=DecodeReport.from_json(decode)), RECIPIENTS, "/lake")

    assert result.sent is True
    html_body, text_body, _ = _html_and_text(inbox.envelopes[0])
    cell = re.search(r"<tr><td>13</td>.*?</tr>", html_body, re.S).group(0)
    # one reason a line, the most frequent first, every name escaped; no JSON braces or quotes
    assert "<td>&lt;b&gt;no source table&lt;/b&gt;: 10<br>malformed JSON: 3</td>" in cell
    assert "{" not in cell and "&quot;" not in cell and "<b>" not in html_body
    assert "By reason: <b>no source table</b>: 10; malformed JSON: 3" in text_body


def test_alert_through_the_dags_named_connection_is_text_and_html(smtp_server_with_login, monkeypatch, tmp_path):
    """The DAG's path (the pipeline's connection by name, through Airflow's secrets backends: here its env
    variable under another id) sends the same multipart/alternative email as the command line's, logged
    in as the connection says, from the pipeline's sender."""
    controller, inbox, credentials = smtp_server_with_login
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DQ", json.dumps(
        {"conn_type": "smtp", "host": "127.0.0.1", "port": controller.port, "login": "dq-user",
         "password": "pa55-word-xyz", "extra": {"disable_tls": True, "disable_ssl": True,
                                                "from_email": "not-this@example.com"}}))

    result = run_alert("shop", "2026-11-01T00:00:00+00:00", failing_reports(), RECIPIENTS,
                       "/lake/reports/shop/run=x", smtp=lambda: connection_settings("smtp_dq", SENDER))

    _assert_one_escaped_alert(inbox, result, SENDER)  # text and HTML, as the command line's
    assert credentials.attempts == 1
    _html, text_body, msg = _html_and_text(inbox.envelopes[0])
    assert "Report: /lake/reports/shop/run=x" in text_body and "Lake - source: -;" in text_body
    assert msg["Message-ID"] and msg["Date"]


def test_a_rerun_alerts_once_for_the_same_problems_and_again_for_a_new_one(smtp_server, monkeypatch, tmp_path):
    """Re-running a published run id runs its alert again: the email already sent for the same problems
    is not sent twice (alert.json keeps what was sent); a new problem sends."""
    from jobs.lake.layout import Lake
    from jobs.stages import RunContext
    from jobs.stages import run_alert as alert_stage

    controller, inbox = smtp_server
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(controller.port))
    ctx = RunContext(Lake.at(str(tmp_path / "lake")), "shop", "20261101T000000Z_20261102T000000Z")
    write_reports(ctx, failing_reports())

    first = alert_stage(ctx, RECIPIENTS, 0.0)
    again = alert_stage(ctx, RECIPIENTS, 0.0)

    assert first.sent is True and len(inbox.envelopes) == 1
    assert again.sent is False and again.error is None and len(inbox.envelopes) == 1
    assert again.skipped.startswith("already sent") and again.reasons == first.reasons
    assert ctx.read_report(AlertReport).emails == first.emails  # what was sent, kept

    write_reports(ctx, failing_reports(mismatched=("shop._.orders", "shop._.items")))  # a new problem
    new = alert_stage(ctx, RECIPIENTS, 0.0)
    assert new.sent is True and len(inbox.envelopes) == 2 and len(new.emails) == 2
    assert alert_stage(ctx, RECIPIENTS, 0.0).sent is False and len(inbox.envelopes) == 2
