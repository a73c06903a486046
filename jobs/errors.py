"""A failed stage as one line: what failed, why, and what to check (the command line's exit 1).

Operational failures (a source database or an Iceberg catalog that cannot be reached, a lake that
cannot be written, a refused connection) are told by the exception's type and the stage it broke;
a SetupError (an installation missing a part, such as the JVM-side decoders' jar) says itself what
is missing and how to set it up; a password in a URL the message quotes is masked. The traceback is
for ``--debug``.
"""
from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^@\s]+@")
_CONNECTION_WORDS = ("could not connect", "connection refused", "can't connect", "could not translate host",
                     "timed out", "name or service not known", "no route to host", "connection reset")


class SetupError(RuntimeError):
    """The installation lacks a part the run needs (jobs.jvm.JvmDecoderMissing): a setup problem, not one
    of the data or of a service; its message, one line, names what is missing and how to set it up."""


def mask(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ***."""
    return _URL_PASSWORD.sub(r"\1***@", text)


def _is_connection(exc: BaseException) -> bool:
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"OperationalError", "InterfaceError", "ConnectTimeout", "ConnectTimeoutError",
                "EndpointConnectionError", "NewConnectionError"}:
        return True
    return any(word in str(exc).lower() for word in _CONNECTION_WORDS)


def what_to_check(stage: str | None, exc: BaseException) -> str | None:
    """The hint for a failure of ``stage`` (decode, fold_publish, validate, reconcile, alert, expire)."""
    if isinstance(exc, PermissionError) or getattr(exc, "errno", None) in (13, 30):
        return "that the lake's folders are writable by this user (owner, permissions, a read-only mount)"
    if _is_connection(exc):
        if stage == "reconcile":
            return "that the source database of --source-counts is up and reachable, and its URL's host, port, " \
                   "database and credentials"
        if stage in ("fold_publish", "validate", "expire"):
            return "that the Iceberg catalog named by CDC_ICEBERG_CATALOG is up and reachable, and its " \
                   "PYICEBERG_CATALOG__<NAME>__* settings (uri, credentials)"
        if stage == "alert":
            return "the SMTP connection (smtp_default or SMTP_*)"
        return "that the service it names is up and reachable from this machine"
    if isinstance(exc, FileNotFoundError):
        return "that the file or folder it names exists (and was not removed while the run read it)"
    return None


def failure_line(command: str, stage: str | None, exc: BaseException) -> str:
    """One line: ``error: <command> failed[ in <stage>]: <Type>: <first line> — check <hint>``; for a
    SetupError ``error: <command> failed[ in <stage>]: setup problem: <its message>``."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    where = f" in {stage}" if stage and stage != command else ""
    if isinstance(exc, SetupError):  # the message says what to do: no hint, no truncation of the fix
        return mask(f"error: {command} failed{where}: setup problem: {first} (--debug shows the traceback)")
    hint = what_to_check(stage, exc)
    line = f"error: {command} failed{where}: {type(exc).__name__}: {first}"[:600]
    return mask(line + (f"; check {hint}" if hint else "") + " (--debug shows the traceback)")
