"""The one door to SMTP, for the command line and the DAG alike: where the server's settings come from,
and the sending of one email (multipart/alternative: plain text and HTML) with smtplib.

Settings come from an Airflow connection, its extras read as the smtp provider's ``SmtpHook`` reads them
(the DAG names its connection: :func:`connection_settings`, through Airflow's secrets backends; the command
line takes ``AIRFLOW_CONN_SMTP_DEFAULT``), else from ``SMTP_*`` environment variables
(:func:`smtp_settings`). The password is never logged, shown in a repr, nor left in an error's text.
"""
from __future__ import annotations

import html as html_lib
import logging
import re
import smtplib
import ssl
from collections.abc import Callable
from dataclasses import dataclass, replace
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from jobs import env

log = logging.getLogger(__name__)

AIRFLOW_CONN_ENV = "AIRFLOW_CONN_SMTP_DEFAULT"
DEFAULT_FROM = "cdc-data-quality@localhost"
_PROVIDER_RETRIES = 5  # the smtp provider's default retry_limit: connects tried again when the server hangs up


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
    retries: int = 0  # connects tried again after the server hung up at once (a connection's retry_limit)

    def __repr__(self) -> str:
        password = "'***'" if self.password else "None"
        return (
            f"SmtpSettings(host={self.host!r}, port={self.port!r}, user={self.user!r}, password={password}, "
            f"from_addr={self.from_addr!r}, starttls={self.starttls!r}, ssl={self.ssl!r}, "
            f"timeout={self.timeout!r}, verify_certificates={self.verify_certificates!r}, retries={self.retries!r})"
        )

    __str__ = __repr__

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port or (465 if self.ssl else 25)}"


# where the settings come from, asked only when an email is due (None: no server configured)
SmtpSource = Callable[[], "SmtpSettings | None"]


class SmtpError(RuntimeError):
    """The email could not go: one line, never the password."""


class SmtpConfigError(SmtpError, ValueError):
    """The SMTP configuration cannot be used."""


# ---- settings ------------------------------------------------------------------------------------
def smtp_settings() -> SmtpSettings | None:
    """The command line's server: Airflow's smtp_default connection from the env, else SMTP_* env vars,
    else None."""
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


def connection_settings(conn_id: str, from_email: str | None = None) -> SmtpSettings:
    """The DAG's server: Airflow connection ``conn_id`` (env, secrets backend or metadata database). The
    sender is ``from_email``, else the connection's, else Airflow's own; one of them must say it."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(conn_id)  # Airflow masks its password in the task's log
    except AirflowNotFoundException:
        raise SmtpConfigError(f"no Airflow connection {conn_id!r} (the pipeline's alert.smtp_connection)") from None
    sender = from_email or conn.extra_dejson.get("from_email") or airflow_from_email()
    if not sender:
        raise SmtpConfigError(f"no sender: set from_email in the extra of connection {conn_id} or alert.from_email")
    return replace(settings_from_connection(conn, conn_id), from_addr=sender)


def settings_from_connection(conn, name: str = AIRFLOW_CONN_ENV) -> SmtpSettings:
    """SMTP settings from an Airflow Connection, its extras as the smtp provider's SmtpHook reads them:
    TLS and SSL on unless disabled, ``from_email``, ``timeout``, ``retry_limit``, ``ssl_context``."""
    extra = conn.extra_dejson
    if extra.get("auth_type", "basic") != "basic":
        raise SmtpConfigError(f"{name}: auth_type {extra['auth_type']!r} is not supported (a login and password are)")
    if extra.get("ssl_context") not in (None, "default", "none"):
        raise SmtpConfigError(f"{name}: extra 'ssl_context' must be 'default' or 'none'")
    use_ssl = not _truthy(extra.get("disable_ssl"), False)
    try:
        timeout, retries = float(extra.get("timeout", 30)), int(extra.get("retry_limit", _PROVIDER_RETRIES))
    except (TypeError, ValueError):
        raise SmtpConfigError(f"{name}: extras 'timeout' and 'retry_limit' must be numbers") from None
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
        verify_certificates=extra.get("ssl_context") != "none",
        retries=max(retries, 0),
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


def _truthy(value, default: bool) -> bool:
    """Booleans from JSON extras, URI query strings ("true") and env vars alike."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


# ---- sending -------------------------------------------------------------------------------------
def one_line(text: str) -> str:
    """No CR/LF (or other control character) may reach a mail header."""
    return re.sub(r"[\x00-\x1f\x7f]+", " ", text).strip()


def email_message(from_addr: str, to: list[str], subject: str, html: str,
                  text: str | None = None) -> tuple[EmailMessage, list[str]]:
    """The email: multipart/alternative, the plain text first and the HTML preferred; and its recipients."""
    recipients = [one_line(addr) for addr in to if addr and addr.strip()]
    if not recipients:
        raise ValueError("no recipients")
    msg = EmailMessage()
    msg["Subject"] = one_line(subject)
    msg["From"] = one_line(from_addr)
    msg["To"] = ", ".join(recipients)
    msg["Date"] = formatdate(localtime=True)
    msg["Message-ID"] = make_msgid(domain="cdc-data-quality")
    msg.set_content(text if text is not None else _html_to_text(html))
    msg.add_alternative(html, subtype="html")
    return msg, recipients


def send_email(smtp: SmtpSource, to: list[str], subject: str, html: str, text: str | None = None) -> None:
    """Send one email with the settings ``smtp`` gives; SmtpError (one line, no password) when it cannot go."""
    settings = smtp()
    if settings is None:
        raise SmtpConfigError(f"no SMTP server configured ({AIRFLOW_CONN_ENV} or SMTP_HOST)")
    msg, recipients = email_message(settings.from_addr, to, subject, html, text)
    try:
        with _connected(settings) as client:
            client.send_message(msg, from_addr=settings.from_addr, to_addrs=recipients)
    except (smtplib.SMTPException, OSError, ValueError) as exc:
        # the message of an SMTP/socket error holds the server's reply, never our password; masked anyway
        detail = str(exc).replace(settings.password, "***") if settings.password else str(exc)
        raise SmtpError(one_line(f"SMTP {settings.where}: {type(exc).__name__}: {detail}")) from None
    log.info("email sent to %d recipient(s) via %s", len(recipients), settings.where)


def _connected(settings: SmtpSettings) -> smtplib.SMTP:
    """A client connected (again after a server that hung up at once, ``retries`` times), TLS started and
    logged in as the settings say."""
    context = ssl.create_default_context()
    if not settings.verify_certificates:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    for attempt in range(settings.retries + 1):
        try:
            if settings.ssl:
                client: smtplib.SMTP = smtplib.SMTP_SSL(settings.host, settings.port, timeout=settings.timeout,
                                                       context=context)
            else:
                client = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout)
            break
        except smtplib.SMTPServerDisconnected:
            if attempt == settings.retries:
                raise
    try:
        if settings.starttls:
            client.starttls(context=context)
            client.ehlo()
        if settings.user and settings.password:
            client.login(settings.user, settings.password)
    except BaseException:
        client.close()
        raise
    return client


def _html_to_text(html_body: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", " ", html_body))
