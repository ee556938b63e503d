"""Loopback ports for the services tests start, and waiting for an HTTP endpoint to turn ready."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the service started next binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http_ok(url: str, timeout_s: float = 10) -> None:
    """Poll ``url`` until it answers 2xx: ``/readyz`` answers 503 while a server is still loading,
    and the Kafka listener (whose log line tests wait for) opens before loading ends."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except (urllib.error.HTTPError, urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
