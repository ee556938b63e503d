"""Helpers for the security tests: test certificates (openssl CLI), TLS wire clients, and the
ports of a server's extra listeners (parsed from its log)."""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

_LISTENER = re.compile(r"listener (\S+) \((\S+)\) on \S+:(\d+) advertised as (\S+):(\d+)")


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(directory: Path) -> Certificates:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    d = directory
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=test-ca", cwd=d)  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject in (("server", "/CN=localhost"), ("client", "/O=tests/CN=alice")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subject, cwd=d)  # fmt: skip
        extra = ["-extfile", "server.ext"] if name == "server" else []
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", *extra, cwd=d)  # fmt: skip
    return Certificates(d / "ca.pem", d / "server.pem", d / "server.key", d / "client.pem", d / "client.key")


def tls_settings(certs: Certificates) -> dict[str, str]:
    return {
        "ssl-certfile": str(certs.server_cert),
        "ssl-keyfile": str(certs.server_key),
        "ssl-cafile": str(certs.ca),
    }


def listener_ports(server: ServerProcess, timeout: float = 10) -> dict[str, tuple[str, int, str, int]]:
    """{listener name: (protocol, bound port, advertised host, advertised port)}."""
    deadline = time.monotonic() + timeout
    while True:
        found = {
            m.group(1): (m.group(2), int(m.group(3)), m.group(4), int(m.group(5)))
            for m in (_LISTENER.search(line) for line in list(server.log_lines))
            if m
        }
        if (found and "loaded" in server.log_text()) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


class TlsWireClient(WireClient):
    """WireClient over TLS (server verified against ca; optional client certificate)."""

    def __init__(
        self,
        bootstrap: str,
        ca: Path,
        cert: Path | None = None,
        key: Path | None = None,
        client_id: str = "test-client",
        timeout: float = 10,
    ) -> None:
        host, port = bootstrap.rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(ca))
        if cert is not None:
            context.load_cert_chain(str(cert), str(key) if key else None)
        raw = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock = context.wrap_socket(raw, server_hostname=host)
        self.client_id = client_id
        self.correlation_id = 0
