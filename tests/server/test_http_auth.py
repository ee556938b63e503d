"""The HTTP port with the authorizer on (issue 30, part 5): the console and /api need the token,
/metrics can be made to, and oversize request lines and headers get 414/431 without a traceback."""

from __future__ import annotations

import base64
import socket
import time
from pathlib import Path

import pytest

from coordinator.server.config import ConfigError, load_config
from coordinator.server.http_auth import Access, HttpGuard, http_guard
from tests.support.ports import free_port
from tests.support.server import running_server

TOKEN = "s3cret-console-token-0123456789"


def http_get(
    port: int, path: str, authorization: str | None = None, raw: bytes | None = None
) -> tuple[int, bytes]:
    """(status, whole response) of one request over a fresh connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        if raw is None:
            auth = f"Authorization: {authorization}\r\n" if authorization else ""
            raw = f"GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode()
        sock.sendall(raw)
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    return int(response.split(b" ", 2)[1]), response


def wait_http(port: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            if http_get(port, "/healthz")[0] == 200:
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, "the HTTP port did not answer"
        time.sleep(0.05)


def basic(password: str) -> str:
    return "Basic " + base64.b64encode(f"ops:{password}".encode()).decode()


def test_guard_decisions() -> None:
    guard = HttpGuard(TOKEN, console_protected=True, metrics_protected=False)
    assert guard.console(None) is Access.NO_CREDENTIAL
    assert guard.console(f"Bearer {TOKEN}") is Access.ALLOWED
    assert guard.console(basic(TOKEN)) is Access.ALLOWED
    assert guard.console("Bearer wrong") is Access.NO_CREDENTIAL
    assert guard.console("Basic !!!") is Access.NO_CREDENTIAL
    assert guard.metrics(None) is Access.ALLOWED
    assert HttpGuard(None, True, False).console(f"Bearer {TOKEN}") is Access.DISABLED


def test_token_settings_are_checked(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("abc\n")
    with pytest.raises(ConfigError, match="16 characters"):
        http_guard(load_config(cli={"console_token_file": str(short)}, env={}))
    with pytest.raises(ConfigError, match="needs console-token-file"):
        http_guard(load_config(cli={"metrics_token_required": True}, env={}))
    with pytest.raises(ConfigError, match="cannot read"):
        http_guard(load_config(cli={"console_token_file": str(tmp_path / "missing")}, env={}))


@pytest.mark.integration
def test_console_and_api_need_the_token_and_metrics_can_too(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    settings = {
        "metrics-port": str(port),
        "authorizer-enabled": "true",
        "console-token-file": str(token_file),
        "metrics-token-required": "true",
    }
    with running_server("memory://", settings):
        wait_http(port)
        for path in ("/api/groups", "/", "/api/groups/g1", "/metrics"):
            status, response = http_get(port, path)
            assert status == 401, (path, response)
            assert b"WWW-Authenticate: Basic" in response
            assert http_get(port, path, "Bearer not-the-token")[0] == 401
        assert http_get(port, "/api/groups", f"Bearer {TOKEN}")[0] == 200
        assert http_get(port, "/api/groups", basic(TOKEN))[0] == 200
        assert http_get(port, "/metrics", f"Bearer {TOKEN}")[0] == 200
        assert http_get(port, "/readyz")[0] in (200, 503)  # probes need no credential


@pytest.mark.integration
def test_without_a_token_file_the_authorizer_closes_the_console(tmp_path: Path) -> None:
    port = free_port()
    with running_server("memory://", {"metrics-port": str(port), "authorizer-enabled": "true"}):
        wait_http(port)
        assert http_get(port, "/api/groups")[0] == 403
        assert http_get(port, "/", f"Bearer {TOKEN}")[0] == 403
        assert http_get(port, "/metrics")[0] == 200  # not restricted unless asked


@pytest.mark.integration
def test_oversize_request_line_and_headers_are_refused_without_a_traceback() -> None:
    port = free_port()
    with running_server("memory://", {"metrics-port": str(port)}) as server:
        wait_http(port)
        long_line = b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        assert http_get(port, "", raw=long_line)[0] == 414
        long_header = b"GET /healthz HTTP/1.1\r\nX-Big: " + b"b" * 70_000 + b"\r\n\r\n"
        assert http_get(port, "", raw=long_header)[0] == 431
        many = b"GET /healthz HTTP/1.1\r\n" + b"X-A: 1\r\n" * 500 + b"\r\n"
        assert http_get(port, "", raw=many)[0] == 431
        assert http_get(port, "/healthz")[0] == 200
        assert "Traceback" not in server.log_text()
