"""An SMTP sink on 127.0.0.1 (aiosmtpd) that keeps every message it accepts, for the alert tests."""
from __future__ import annotations

import contextlib
import email
from collections.abc import Iterator
from email import policy
from typing import Any

from aiosmtpd.controller import Controller

from tests.support.servers import LOCALHOST, free_port


class Inbox:
    """aiosmtpd handler keeping every accepted envelope."""

    def __init__(self) -> None:
        self.envelopes: list = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        self.envelopes.append(envelope)
        return "250 Message accepted"

    def messages(self) -> list[email.message.EmailMessage]:
        return [email.message_from_bytes(e.original_content, policy=policy.default) for e in self.envelopes]


@contextlib.contextmanager
def smtp_sink(inbox: Inbox | None = None, **controller: Any) -> Iterator[tuple[Controller, Inbox]]:
    """A running sink on a free port (``controller``: aiosmtpd's options, e.g. an authenticator), stopped
    afterwards."""
    inbox = inbox or Inbox()
    server = Controller(inbox, hostname=LOCALHOST, port=free_port(), **controller)
    server.start()  # returns once the server answers
    try:
        yield server, inbox
    finally:
        server.stop()
