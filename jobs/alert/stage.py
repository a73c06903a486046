"""The alert stage: one data-quality email per run when something needs a human.

Reasons: a failed expectation, a state/source count mismatch, quarantine over its threshold,
decode counts that do not balance, values the typed state could not hold (published as null or
rounded). The SMTP server comes from Airflow's ``smtp_default`` connection (the same one
``SmtpNotifier`` uses, read from ``AIRFLOW_CONN_SMTP_DEFAULT``) or from ``SMTP_*`` environment
variables. Every value that may come from a message (table and column
names, observed values) is HTML-escaped; the password is never logged nor shown in a repr.
"""
from __future__ import annotations

import hashlib
import html as html_lib
import json
import logging
import re
import smtplib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from jobs import env
from jobs.reconcile.stage import MISMATCH, balance_problems

log = logging.getLogger(__name__)

AIRFLOW_CONN_ENV = "AIRFLOW_CONN_SMTP_DEFAULT"
SUBJECT_PREFIX = "[CDC data quality]"
DEFAULT_FROM = "cdc-data-quality@localhost"
_OBSERVED_MAX_CHARS = 500  # an observed value may be a long list of unexpected values

# kinds of reason, in the order the email shows them
EXPECTATION, COUNT_MISMATCH, QUARANTINE, UNBALANCED = "expectation", "count_mismatch", "quarantine", "unbalanced"
UNCONVERTED, LAG = "unconverted", "lag"


# ---- reasons -------------------------------------------------------------------------------------
def alert_reasons(
    validation: dict, reconciliation: list[dict], decode: dict, quarantine_threshold: float,
    merge: dict | None = None,
) -> list[dict]:
    """Everything in this run's reports that should reach a human, as JSON-ready dicts."""
    reasons: list[dict] = []
    for suite in (validation or {}).get("suites") or []:
        failed = [r for r in suite.get("results") or [] if not r.get("success", False)]
        for result in failed:
            kwargs = result.get("kwargs") or {}
            reasons.append(
                {
                    "kind": EXPECTATION,
                    "suite": suite.get("suite"),
                    "table": suite.get("table"),
                    "expectation": result.get("expectation"),
                    "column": kwargs.get("column") or _joined(kwargs.get("column_list")),
                    "kwargs": kwargs,
                    "observed": result.get("observed"),
                }
            )
        if not failed and suite.get("success") is False:
            # a suite can fail without a failed result (e.g. it could not run at all)
            reasons.append(
                {
                    "kind": EXPECTATION,
                    "suite": suite.get("suite"),
                    "table": suite.get("table"),
                    "expectation": "(suite failed)",
                    "column": None,
                    "kwargs": {},
                    "observed": suite.get("error"),
                }
            )
    for row in reconciliation or []:
        reasons += _count_reasons(row)
    total = (decode or {}).get("total") or {}
    landed, quarantined = total.get("landed") or 0, total.get("quarantined") or 0
    if landed > 0 and quarantined / landed > quarantine_threshold:
        reasons.append(
            {
                "kind": QUARANTINE,
                "quarantined": quarantined,
                "landed": landed,
                "ratio": round(quarantined / landed, 6),
                "threshold": quarantine_threshold,
                "by_reason": dict((decode or {}).get("quarantine_reasons") or {}),
            }
        )
    for problem in balance_problems(decode or {}):
        reasons.append({"kind": UNBALANCED, "problem": problem})
    for table, report in sorted(((merge or {}).get("tables") or {}).items()):
        # counts only: the values themselves (merge.json keeps an example) may be personal data
        for column, lost in sorted((report.get("unconverted_values") or {}).items()):
            reasons.append({"kind": UNCONVERTED, "table": table, "column": column, "type": lost.get("type"),
                            "nulled": lost.get("nulled", 0), "rounded": lost.get("rounded", 0)})
    return reasons


def _count_reasons(row: dict) -> list[dict]:
    """A mismatch the lake has reached (one per checkpoint), and a checkpoint the lake has waited for
    longer than the maximum lag; a checkpoint the lake has not reached yet is no problem."""
    reasons = []
    mismatched = [c for c in row.get("checkpoints") or [] if c.get("verdict") == MISMATCH]
    if row.get("status") == MISMATCH and not mismatched:  # a report without checkpoints
        mismatched = [{"source_rows": row.get("source_rows"), "lake_rows": row.get("state_rows")}]
    for cp in mismatched:
        diff = cp.get("key_diff") or {}
        reasons.append({"kind": COUNT_MISMATCH, "table": row.get("table"), "moment": cp.get("moment"),
                        "source_rows": cp.get("source_rows"), "lake_rows": cp.get("lake_rows"),
                        "difference": cp.get("difference"), "missing_in_lake": diff.get("missing_in_lake"),
                        "extra_in_lake": diff.get("extra_in_lake"), "snapshot_id": row.get("snapshot_id")})
    for cp in row.get("pending") or []:
        lag = cp.get("lag") or {}
        if lag.get("overdue"):
            reasons.append({"kind": LAG, "table": row.get("table"), "moment": cp.get("moment"),
                            "lake_time": lag.get("lake_time"), "lag_seconds": lag.get("seconds"),
                            "waiting_seconds": lag.get("waiting_seconds")})
    return reasons


def _joined(columns) -> str | None:
    return ", ".join(str(c) for c in columns) if isinstance(columns, list) and columns else None


# ---- rendering -----------------------------------------------------------------------------------
def _one_line(text: str) -> str:
    """No CR/LF (or other control character) may reach a mail header."""
    return re.sub(r"[\x00-\x1f\x7f]+", " ", text).strip()


def _readable(value) -> str:
    """A cell as a person reads it, never raw JSON: a mapping as ``name: value`` lines (counts, such as
    the quarantine's by reason, the largest first), a list comma-separated; cut short."""
    if isinstance(value, dict):
        counts = all(isinstance(v, int) for v in value.values())
        items = sorted(value.items(), key=lambda kv: (-kv[1], str(kv[0])) if counts else str(kv[0]))
        text = "\n".join(f"{k}: {_inline(v)}" for k, v in items)
    elif isinstance(value, list):
        text = ", ".join(_inline(v) for v in value)
    else:
        text = _inline(value)
    return text if len(text) <= _OBSERVED_MAX_CHARS else text[:_OBSERVED_MAX_CHARS] + "…"


def _inline(value) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _esc(value) -> str:
    if value is None:
        return "&ndash;"
    return html_lib.escape(_readable(value), quote=True).replace("\n", "<br>")


_SECTIONS: list[tuple[str, str, list[tuple[str, str]]]] = [
    (EXPECTATION, "Failed expectations",
     [("suite", "Suite"), ("table", "Table"), ("expectation", "Expectation"), ("column", "Column"),
      ("observed", "Observed")]),
    (COUNT_MISMATCH, "Row counts that do not match the source at the moment it was counted",
     [("table", "Table"), ("moment", "Moment"), ("source_rows", "Source rows"), ("lake_rows", "Lake rows"),
      ("difference", "Lake - source"), ("missing_in_lake", "Keys missing in the lake"),
      ("extra_in_lake", "Keys only in the lake"), ("snapshot_id", "Snapshot")]),
    (LAG, "Source counts the lake has not reached for longer than the maximum lag",
     [("table", "Table"), ("moment", "Moment"), ("lake_time", "Lake reaches"), ("lag_seconds", "Lag (s)"),
      ("waiting_seconds", "Waiting (s)")]),
    (QUARANTINE, "Quarantine over its threshold",
     [("quarantined", "Quarantined"), ("landed", "Landed"), ("ratio", "Ratio"), ("threshold", "Threshold"),
      ("by_reason", "By reason")]),
    (UNBALANCED, "Counts that do not balance (landed = decoded + quarantined + ignored)",
     [("problem", "Problem")]),
    (UNCONVERTED, "Values the state's column type cannot hold (see merge.json; the change records keep them)",
     [("table", "Table"), ("column", "Column"), ("type", "Type"), ("nulled", "Published as null"),
      ("rounded", "Published rounded")]),
]


def render_alert_html(pipeline: str, run_id: str, reasons: list[dict], report_location: str) -> tuple[str, str]:
    """(subject, html body): a small table per kind of problem, every value escaped."""
    count = len(reasons)
    subject = _one_line(
        f"{SUBJECT_PREFIX} {_one_line(pipeline)} run {_one_line(run_id)}: {count} problem{'' if count == 1 else 's'}"
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head>",
        "<body style=\"font-family:sans-serif\">",
        f"<h2>CDC data quality: {_esc(pipeline)} run {_esc(run_id)}</h2>",
        f"<p>{count} problem{'' if count == 1 else 's'} found. Report: "
        f"<a href=\"{_esc(report_location)}\">{_esc(report_location)}</a></p>",
    ]
    for kind, title, columns in _SECTIONS:
        rows = [r for r in reasons if r.get("kind") == kind]
        if not rows:
            continue
        parts.append(f"<h3>{html_lib.escape(title)} ({len(rows)})</h3>")
        parts.append("<table border=\"1\" cellpadding=\"4\" cellspacing=\"0\" style=\"border-collapse:collapse\">")
        parts.append("<tr>" + "".join(f"<th>{html_lib.escape(label)}</th>" for _, label in columns) + "</tr>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{_esc(row.get(key))}</td>" for key, _ in columns) + "</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return subject, "\n".join(parts)


def render_alert_text(pipeline: str, run_id: str, reasons: list[dict], report_location: str) -> str:
    """The plain-text alternative of the same email."""
    lines = [f"CDC data quality: {pipeline} run {run_id}: {len(reasons)} problem(s)", f"Report: {report_location}", ""]
    for kind, title, columns in _SECTIONS:
        rows = [r for r in reasons if r.get("kind") == kind]
        if rows:
            lines.append(f"{title}:")
            for row in rows:
                cells = [f"{label}: {_one_line(_readable(row.get(key)).replace(chr(10), '; '))}"
                         for key, label in columns]
                lines.append("  - " + "; ".join(cells))
            lines.append("")
    return "\n".join(lines)


# ---- SMTP settings -------------------------------------------------------------------------------
@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int  # 0 = the protocol's standard port (25, or 465 with SSL), as smtplib does
    user: str | None
    password: str | None
    from_addr: str
    starttls: bool
    ssl: bool
    timeout: float
    verify_certificates: bool = True

    def __repr__(self) -> str:
        password = "'***'" if self.password else "None"
        return (
            f"SmtpSettings(host={self.host!r}, port={self.port!r}, user={self.user!r}, password={password}, "
            f"from_addr={self.from_addr!r}, starttls={self.starttls!r}, ssl={self.ssl!r}, "
            f"timeout={self.timeout!r}, verify_certificates={self.verify_certificates!r})"
        )

    __str__ = __repr__

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port or (465 if self.ssl else 25)}"


class SmtpConfigError(ValueError):
    """The SMTP configuration cannot be used (message never holds the password)."""


def _truthy(value, default: bool) -> bool:
    """Booleans from JSON extras, URI query strings ("true") and env vars alike."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def smtp_settings() -> SmtpSettings | None:
    """The SMTP server: Airflow's smtp_default connection from the env, else SMTP_* env vars, else None."""
    conn_value = env.get(AIRFLOW_CONN_ENV, "").strip()
    if conn_value:
        return _settings_from_airflow_connection(conn_value)
    host = env.get("SMTP_HOST", "").strip()
    if not host:
        return None
    use_ssl = _truthy(env.get("SMTP_SSL"), False)
    port_text = env.get("SMTP_PORT", "").strip()
    try:
        port = int(port_text) if port_text else (465 if use_ssl else 25)
        timeout = float(env.get("SMTP_TIMEOUT", "").strip() or 30)
    except ValueError:
        raise SmtpConfigError("SMTP_PORT and SMTP_TIMEOUT must be numbers") from None
    user = env.get("SMTP_USER") or None
    return SmtpSettings(
        host=host,
        port=port,
        user=user,
        password=env.get("SMTP_PASSWORD") or None,
        from_addr=env.get("SMTP_FROM") or airflow_from_email() or user or DEFAULT_FROM,
        starttls=_truthy(env.get("SMTP_STARTTLS"), False),
        ssl=use_ssl,
        timeout=timeout,
        verify_certificates=_truthy(env.get("SMTP_VERIFY_CERTIFICATES"), True),
    )


def airflow_from_email() -> str | None:
    """Airflow's own sender (``[email] from_email``), what SmtpNotifier falls back to for a connection that
    names none; read from the env so Airflow's config need not be loaded."""
    return (env.get("AIRFLOW__EMAIL__FROM_EMAIL") or "").strip() or None


def _settings_from_airflow_connection(value: str) -> SmtpSettings:
    # Airflow is slow to import: only here, when a connection is actually configured
    from airflow.sdk import Connection

    try:
        # the same split as Airflow's secrets backends: JSON when it starts with "{", else a URI
        if value.startswith("{"):
            conn = Connection.from_json(value, conn_id="smtp_default")
        else:
            conn = Connection.from_uri(value, conn_id="smtp_default")
    except Exception as exc:  # noqa: BLE001 - Airflow's messages may echo the URI with its password
        raise SmtpConfigError(f"{AIRFLOW_CONN_ENV} cannot be parsed ({type(exc).__name__})") from None
    return settings_from_connection(conn)


def settings_from_connection(conn) -> SmtpSettings:
    """SMTP settings from an Airflow Connection (env, secrets backend or metadata database)."""
    extra = conn.extra_dejson
    # extras as the smtp provider's SmtpHook reads them: TLS and SSL are on unless disabled
    use_ssl = not _truthy(extra.get("disable_ssl"), False)
    try:
        timeout = float(extra.get("timeout", 30))
    except (TypeError, ValueError):
        raise SmtpConfigError(f"{AIRFLOW_CONN_ENV}: extra 'timeout' is not a number") from None
    return SmtpSettings(
        host=conn.host or "localhost",
        port=int(conn.port or 0),
        user=conn.login or None,
        password=conn.password or None,
        from_addr=extra.get("from_email") or airflow_from_email() or conn.login or DEFAULT_FROM,
        # STARTTLS inside an SSL session makes no sense; SSL wins when both are on
        starttls=not _truthy(extra.get("disable_tls"), False) and not use_ssl,
        ssl=use_ssl,
        timeout=timeout,
        verify_certificates=str(extra.get("ssl_context") or "default") != "none",
    )


# ---- sending -------------------------------------------------------------------------------------
def alert_message(from_addr: str, to: list[str], subject: str, html: str,
                  text: str | None = None) -> tuple[EmailMessage, list[str]]:
    """The email both senders send (smtplib here, the smtp provider's hook in the DAG): multipart/
    alternative, the plain text first and the HTML preferred; and its recipients."""
    recipients = [_one_line(addr) for addr in to if addr and addr.strip()]
    if not recipients:
        raise ValueError("no recipients")
    msg = EmailMessage()
    msg["Subject"] = _one_line(subject)
    msg["From"] = _one_line(from_addr)
    msg["To"] = ", ".join(recipients)
    msg["Date"] = formatdate(localtime=True)
    msg["Message-ID"] = make_msgid(domain="cdc-data-quality")
    msg.set_content(text if text is not None else _html_to_text(html))
    msg.add_alternative(html, subtype="html")
    return msg, recipients


def send_alert(settings: SmtpSettings, to: list[str], subject: str, html: str, text: str | None = None) -> None:
    """Send one multipart/alternative (text + HTML) email; raises smtplib/OSError errors."""
    msg, recipients = alert_message(settings.from_addr, to, subject, html, text)
    context = ssl.create_default_context()
    if not settings.verify_certificates:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if settings.ssl:
        client: smtplib.SMTP = smtplib.SMTP_SSL(settings.host, settings.port, timeout=settings.timeout, context=context)
    else:
        client = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout)
    with client:
        if settings.starttls:
            client.starttls(context=context)
            client.ehlo()
        if settings.user and settings.password:
            client.login(settings.user, settings.password)
        client.send_message(msg, from_addr=settings.from_addr, to_addrs=recipients)
    log.info("data-quality alert sent to %d recipient(s) via %s", len(recipients), settings.where)


def _html_to_text(html_body: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", " ", html_body))


def run_alert(
    pipeline: str,
    run_id: str,
    validation: dict,
    reconciliation: list[dict],
    decode: dict,
    alert_to: list[str],
    report_location: str,
    quarantine_threshold: float = 0.0,
    settings: SmtpSettings | None = None,
    merge: dict | None = None,
    sender: Sender | None = None,
    previous: dict | None = None,
) -> dict:
    """Compute the reasons and send at most one email per run and problems; failures are reported, never
    raised.

    ``sender`` sends it (under Airflow: the smtp provider's hook), else smtplib with ``settings``, which
    default to :func:`smtp_settings` (environment); ``merge`` is the run's merge.json; ``previous`` the
    run's alert.json of an earlier attempt, whose ``emails`` say what was sent already."""
    reasons = alert_reasons(validation, reconciliation, decode, quarantine_threshold, merge)
    recipients = [addr.strip() for addr in alert_to or [] if addr and addr.strip()]
    result: dict = {
        "sent": False, "reasons": reasons, "recipients": recipients, "error": None, "skipped": None, "subject": None,
        "digest": problems_digest(reasons), "emails": list((previous or {}).get("emails") or []),
    }
    if not reasons:
        result["skipped"] = "no problems"
        return result
    subject, html_body = render_alert_html(pipeline, run_id, reasons, report_location)
    result["subject"] = subject
    if not recipients:
        result["skipped"] = "no recipients"
        return result
    done = next((e for e in result["emails"] if e.get("digest") == result["digest"]), None)
    if done is not None:  # a re-run of the run id: these problems were mailed already
        result["skipped"] = f"already sent at {done.get('sent_at')} for the same problems"
        return result
    text_body = render_alert_text(pipeline, run_id, reasons, report_location)
    if sender is not None:
        return _sent_by(sender, result, recipients, subject, html_body, text_body)
    try:
        settings = settings or smtp_settings()
    except SmtpConfigError as exc:
        result["error"] = str(exc)
        return result
    if settings is None:
        result["error"] = f"no SMTP server configured ({AIRFLOW_CONN_ENV} or SMTP_HOST)"
        return result
    try:
        send_alert(settings, recipients, subject, html_body, text_body)
    except (smtplib.SMTPException, OSError, ValueError) as exc:
        # the message of an SMTP/socket error holds the server's reply, never our password
        detail = str(exc)
        if settings.password:
            detail = detail.replace(settings.password, "***")
        result["error"] = _one_line(f"SMTP {settings.where}: {type(exc).__name__}: {detail}")
        log.warning("data-quality alert not sent: %s", result["error"])
        return result
    return _record_sent(result)


# what identifies a problem, not how long it has lasted: a re-run measures the wait again
_MEASURES = ("waiting_seconds", "lag_seconds")


def problems_digest(reasons: list[dict]) -> str:
    """The identity of a set of problems: the same run with the same problems is mailed once."""
    identity = [{k: v for k, v in r.items() if k not in _MEASURES} for r in reasons]
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def _record_sent(result: dict) -> dict:
    result["sent"] = True
    sent_at = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    result["emails"].append({"digest": result["digest"], "sent_at": sent_at, "recipients": result["recipients"],
                             "subject": result["subject"]})
    return result


# (to, subject, html, text): sends one email or raises
Sender = Callable[[list[str], str, str, str | None], None]


def _sent_by(sender: Sender, result: dict, recipients: list[str], subject: str, html: str, text: str) -> dict:
    try:
        sender(recipients, subject, html, text)
    except Exception as exc:  # noqa: BLE001 - any failure of the hook is reported as not sent
        # the hook's errors hold the server's reply; the connection's password never reaches them
        result["error"] = _one_line(f"SMTP: {type(exc).__name__}: {exc}")
        log.warning("data-quality alert not sent: %s", result["error"])
        return result
    return _record_sent(result)
