"""The coordinator's HTTP API (``serve --metrics-port``), read by the commands that need what the
Kafka protocol does not carry: group events, lag in seconds and the lag status."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any, Final
from urllib.parse import quote

from coordinator.cli.admin.connection import parse_address

HTTP_ENV: Final = "COORDINATOR_HTTP"
DEFAULT_HTTP: Final = "127.0.0.1:9095"


class HttpApiError(Exception):
    """The HTTP API could not answer; the message says why, for people."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def configured_http() -> str | None:
    """The HTTP address from the environment, if the operator set one."""
    return os.environ.get(HTTP_ENV) or None


def group_url(http: str, group: str, suffix: str = "", query: str = "") -> str:
    host, port = parse_address(http)
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    path = f"/api/groups/{quote(group, safe='')}{suffix}"
    return f"http://{netloc}{path}" + (f"?{query}" if query else "")


def get_json(url: str, timeout: float) -> dict[str, Any]:
    """GET a JSON document; HttpApiError for an error answer or an unreachable server."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as exc:
        raise HttpApiError(_error_message(exc), exc.code) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        address = url.split("/")[2]
        raise HttpApiError(
            f"cannot reach the coordinator's HTTP port at {address} ({reason}); is it started with "
            f"--metrics-port? (set --http or ${HTTP_ENV})"
        ) from None
    return body


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.load(exc)["error"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {exc.code} {exc.reason}"
