"""A StatsD server for tests: a UDP socket on 127.0.0.1 and the lines of the datagrams it received."""
from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def statsd_socket() -> Iterator[socket.socket]:
    """A UDP socket bound to a free port of 127.0.0.1, its buffer large enough for a run's datagrams."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        server.bind(("127.0.0.1", 0))
        yield server


def received_lines(server: socket.socket, quiet_s: float = 1.0) -> list[str]:
    """Every line of the datagrams waiting on the socket, until none came for ``quiet_s``."""
    lines = []
    server.settimeout(quiet_s)
    try:
        while True:
            lines += server.recv(65536).decode().splitlines()
    except TimeoutError:
        return lines
