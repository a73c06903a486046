"""The data-quality alert through a real SMTP server (aiosmtpd on a free 127.0.0.1 port)."""
from __future__ import annotations

import email
import json
import logging
import re
from email import policy

import pytest
from aiosmtpd.smtp import AuthResult, LoginPassword

from jobs.alert.stage import alert_reasons, render_alert_html, run_alert, smtp_settings
from tests.support.servers import free_port
from tests.support.smtp import Inbox, smtp_sink

pytestmark = [
    # the login tests allow AUTH without TLS on purpose (a local sink); aiosmtpd warns about it
    pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning"),
]

HOSTILE_TABLE = "<script>alert(1)</script>"
RECIPIENTS = ["dq@example.com", "oncall@example.com"]
SENDER = "cdc@example.com"
SMTP_ENV = ("AIRFLOW_CONN_SMTP_DEFAULT", "SMTP_HOST", "SMTP_PORT", "SMTP_USER", "SMTP_PASSWORD", "SMTP_FROM",
            "SMTP_STARTTLS", "SMTP_SSL", "SMTP_TIMEOUT", "AIRFLOW__EMAIL__FROM_EMAIL")


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


def _failing_reports():
    validation = {
        "success": False,
        "suites": [
            {
                "suite": "state",
                "table": HOSTILE_TABLE,
                "success": False,
                "results": [
                    {"expectation": "expect_column_values_to_not_be_null", "kwargs": {"column": "id<b>"},
                     "success": False, "observed": {"unexpected_count": 2, "partial": ["<img src=x onerror=1>"]}},
                    {"expectation": "expect_table_row_count_to_be_between", "kwargs": {}, "success": True,
                     "observed": 5},
                ],
            }
        ],
    }
    reconciliation = [
        {"table": "shop._.orders", "state_rows": 5, "source_rows": 6, "status": "mismatch", "snapshot_id": 1},
        {"table": "shop._.items", "state_rows": 2, "source_rows": 2, "status": "match", "snapshot_id": 2},
        {"table": "shop._.unknown", "state_rows": 2, "source_rows": None, "status": "unknown", "snapshot_id": 3},
    ]
    decode = {"total": {"landed": 10, "decoded": 10, "quarantined": 0, "ignored": 0}, "tables": {}}
    return validation, reconciliation, decode


def _html_and_text(envelope) -> tuple[str, str, email.message.EmailMessage]:
    msg = email.message_from_bytes(envelope.original_content, policy=policy.default)
    assert msg.get_content_type() == "multipart/alternative"
    html_part = msg.get_body(preferencelist=("html",))
    text_part = msg.get_body(preferencelist=("plain",))
    assert html_part is not None and text_part is not None
    return html_part.get_content(), text_part.get_content(), msg


def _assert_one_escaped_alert(inbox: Inbox, result: dict, sender: str) -> None:
    assert result["error"] is None
    assert result["sent"] is True
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
    assert [r["kind"] for r in result["reasons"]] == ["expectation", "count_mismatch"]


def test_alert_through_airflow_connection_json(smtp_server, monkeypatch, tmp_path):
    controller, inbox = smtp_server
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv(
        "AIRFLOW_CONN_SMTP_DEFAULT",
        json.dumps({"conn_type": "smtp", "host": "127.0.0.1", "port": controller.port,
                    "extra": {"disable_tls": True, "disable_ssl": True, "from_email": SENDER, "timeout": 10}}),
    )
    validation, reconciliation, decode = _failing_reports()

    result = run_alert("shop", "2026-11-01T00:00:00+00:00", validation, reconciliation, decode, RECIPIENTS,
                       "/lake/reports/shop/run=x")

    _assert_one_escaped_alert(inbox, result, SENDER)
    json.dumps(result)  # written as alert.json by the stage


def test_alert_through_smtp_env_with_login_never_logs_the_password(smtp_server_with_login, monkeypatch, caplog):
    controller, inbox, credentials = smtp_server_with_login
    for name, value in {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(controller.port), "SMTP_USER": "dq-user",
                        "SMTP_PASSWORD": "pa55-word-xyz", "SMTP_FROM": SENDER}.items():
        monkeypatch.setenv(name, value)
    validation, reconciliation, decode = _failing_reports()

    with caplog.at_level(logging.DEBUG):
        result = run_alert("shop", "2026-11-01T00:00:00+00:00", validation, reconciliation, decode, RECIPIENTS,
                           "/lake/reports/shop/run=x")

    _assert_one_escaped_alert(inbox, result, SENDER)
    assert credentials.attempts == 1
    assert "pa55-word-xyz" not in caplog.text
    assert "pa55-word-xyz" not in json.dumps(result)
    assert "pa55-word-xyz" not in repr(smtp_settings())


def test_wrong_password_is_reported_without_the_password(smtp_server_with_login, monkeypatch):
    controller, inbox, _ = smtp_server_with_login
    for name, value in {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(controller.port), "SMTP_USER": "dq-user",
                        "SMTP_PASSWORD": "not-the-pa55word"}.items():
        monkeypatch.setenv(name, value)

    result = run_alert("shop", "r1", *_failing_reports(), RECIPIENTS, "/lake")

    assert result["sent"] is False
    assert "SMTPAuthenticationError" in result["error"]
    assert "not-the-pa55word" not in result["error"]
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

    result = run_alert("shop", "r1", validation, reconciliation, decode, RECIPIENTS, "/lake")

    assert result["sent"] is False and result["reasons"] == [] and result["error"] is None
    assert inbox.envelopes == []


def test_smtp_server_down_is_reported_not_raised(monkeypatch):
    port = free_port()  # nothing listens there
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(port))
    monkeypatch.setenv("SMTP_TIMEOUT", "5")

    result = run_alert("shop", "r1", *_failing_reports(), RECIPIENTS, "/lake")

    assert result["sent"] is False
    assert f"127.0.0.1:{port}" in result["error"] and "ConnectionRefusedError" in result["error"]
    assert len(result["reasons"]) == 2


def test_problems_without_smtp_or_recipients_are_not_sent(monkeypatch):
    result = run_alert("shop", "r1", *_failing_reports(), RECIPIENTS, "/lake")
    assert result["sent"] is False and "no SMTP server configured" in result["error"]

    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    result = run_alert("shop", "r1", *_failing_reports(), [], "/lake")
    assert result["sent"] is False and result["error"] is None and result["skipped"] == "no recipients"


def test_settings_from_airflow_connection_uri(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT",
                       "smtp://mail%40user:s%3Acret-pw@mail.example.com:2525?disable_ssl=true&disable_tls=false"
                       "&from_email=dq%40example.com&timeout=7")
    settings = smtp_settings()
    assert (settings.host, settings.port, settings.user, settings.password) == (
        "mail.example.com", 2525, "mail@user", "s:cret-pw")
    assert (settings.ssl, settings.starttls, settings.timeout, settings.from_addr) == (False, True, 7.0, "dq@example.com")
    assert "s:cret-pw" not in repr(settings) and "s:cret-pw" not in str(settings)

    # the smtp provider's defaults: SSL on unless disabled (and then no STARTTLS inside it)
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", '{"conn_type": "smtp", "host": "mx", "login": "u"}')
    settings = smtp_settings()
    assert (settings.ssl, settings.starttls, settings.port, settings.from_addr) == (True, False, 0, "u")


def test_unparsable_airflow_connection_is_reported_without_its_password(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", "smtp://u:hunter2-secret@host:notaport")
    result = run_alert("shop", "r1", *_failing_reports(), RECIPIENTS, "/lake")
    assert result["sent"] is False and "AIRFLOW_CONN_SMTP_DEFAULT" in result["error"]
    assert "hunter2-secret" not in result["error"]


def test_smtp_env_defaults(monkeypatch):
    assert smtp_settings() is None
    monkeypatch.setenv("SMTP_HOST", "mx")
    settings = smtp_settings()
    assert (settings.port, settings.starttls, settings.ssl, settings.user, settings.password) == (25, False, False,
                                                                                                  None, None)
    monkeypatch.setenv("SMTP_SSL", "true")
    assert smtp_settings().port == 465


def test_subject_cannot_inject_headers():
    subject, _ = render_alert_html("shop\r\nBcc: evil@example.com", "r1\n", [{"kind": "unbalanced", "problem": "x"}],
                                   "/lake")
    assert "\r" not in subject and "\n" not in subject
    assert subject == "[CDC data quality] shop Bcc: evil@example.com run r1: 1 problem"


def test_quarantine_threshold_and_balance_reasons():
    decode = {"total": {"landed": 100, "decoded": 85, "quarantined": 10, "ignored": 5},
              "tables": {"t": {"landed": 100, "decoded": 85, "quarantined": 10, "ignored": 5}},
              "quarantine_reasons": {"bad json": 10}}
    reasons = alert_reasons({}, [], decode, quarantine_threshold=0.05)
    assert reasons == [{"kind": "quarantine", "quarantined": 10, "landed": 100, "ratio": 0.1, "threshold": 0.05,
                        "by_reason": {"bad json": 10}}]
    assert alert_reasons({}, [], decode, quarantine_threshold=0.1) == []  # at the threshold is not over it

    decode["tables"]["t"]["landed"] = 99
    kinds = [r["kind"] for r in alert_reasons({}, [], decode, quarantine_threshold=0.5)]
    assert kinds == ["unbalanced", "unbalanced"]  # table t, and the tables' sum against the total

    # a suite that failed without a failed result (it could not run) is still a reason
    failed_suite = {"suites": [{"suite": "s", "table": "t", "success": False, "results": [], "error": "boom"}]}
    assert [r["expectation"] for r in alert_reasons(failed_suite, [], {}, 0.0)] == ["(suite failed)"]


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
    validation, reconciliation, decode = _failing_reports()
    ctx.write_report("validation.json", validation)
    ctx.write_report("reconciliation.json", {"tables": reconciliation})
    ctx.write_report("decode.json", decode)
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(free_port()))  # nothing listens there
    monkeypatch.setenv("SMTP_TIMEOUT", "5")
    argv = ["alert", "--lake", str(lake), "--pipeline", "shop", "--run-id", "r1", "--alert-to", RECIPIENTS[0]]
    assert cli.main(argv) == cli.ALERT_NOT_SENT == 3
    assert "alert not sent" in capsys.readouterr().err
    assert "ConnectionRefusedError" in ctx.read_report("alert.json")["error"]
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

    result = run_alert("shop", "r1", {}, [], decode, RECIPIENTS, "/lake")

    assert result["sent"] is True
    html_body, text_body, _ = _html_and_text(inbox.envelopes[0])
    cell = re.search(r"<tr><td>13</td>.*?</tr>", html_body, re.S).group(0)
    # one reason a line, the most frequent first, every name escaped; no JSON braces or quotes
    assert "<td>&lt;b&gt;no source table&lt;/b&gt;: 10<br>malformed JSON: 3</td>" in cell
    assert "{" not in cell and "&quot;" not in cell and "<b>" not in html_body
    assert "By reason: <b>no source table</b>: 10; malformed JSON: 3" in text_body


def test_alert_through_the_dags_smtp_hook_is_text_and_html(smtp_server_with_login, monkeypatch, tmp_path):
    """The DAG's path (the smtp provider's SmtpHook on the connection, jobs.airflow.tasks.smtp_sender) sends
    the same multipart/alternative email as the command line's, logged in as the connection says."""
    from jobs.airflow.tasks import smtp_sender

    controller, inbox, credentials = smtp_server_with_login
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", json.dumps(
        {"conn_type": "smtp", "host": "127.0.0.1", "port": controller.port, "login": "dq-user",
         "password": "pa55-word-xyz", "extra": {"disable_tls": True, "disable_ssl": True}}))

    result = run_alert("shop", "2026-11-01T00:00:00+00:00", *_failing_reports(), RECIPIENTS,
                       "/lake/reports/shop/run=x", sender=smtp_sender("smtp_default", SENDER))

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
    validation, reconciliation, decode = _failing_reports()
    ctx.write_report("validation.json", validation)
    ctx.write_report("reconciliation.json", {"tables": reconciliation})
    ctx.write_report("decode.json", decode)

    first = alert_stage(ctx, RECIPIENTS, 0.0)
    again = alert_stage(ctx, RECIPIENTS, 0.0)

    assert first["sent"] is True and len(inbox.envelopes) == 1
    assert again["sent"] is False and again["error"] is None and len(inbox.envelopes) == 1
    assert again["skipped"].startswith("already sent") and again["reasons"] == first["reasons"]
    assert ctx.read_report("alert.json")["emails"] == first["emails"]  # what was sent, kept

    reconciliation[1] = {**reconciliation[1], "source_rows": 3, "status": "mismatch"}  # a new problem
    ctx.write_report("reconciliation.json", {"tables": reconciliation})
    new = alert_stage(ctx, RECIPIENTS, 0.0)
    assert new["sent"] is True and len(inbox.envelopes) == 2 and len(new["emails"]) == 2
    assert alert_stage(ctx, RECIPIENTS, 0.0)["sent"] is False and len(inbox.envelopes) == 2
