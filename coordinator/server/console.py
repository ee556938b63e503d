"""The read-only web console and its JSON API, served by the metrics/health HTTP server.

* ``/api/groups``: every group with state, type, members, lag and status, and the server's mode
  (``gateway`` or ``standalone``) with the hint the overview shows;
* ``/api/groups/<id>``: one group: members (with their liveness) and assignments, committed
  offsets and lag;
* ``/api/topics``: every topic with its partitions, the groups consuming it and their total lag;
* ``/api/topics/<name>``: one topic: lag per group and per partition;
* ``/api/groups/<id>/history?since=<seq>&since_ms=<wall ms>``: its events, oldest first;
* ``/`` and ``/ui/...``: the console, static HTML/CSS/JS shipped with the package.

Every response carries security headers: a Content-Security-Policy without inline script or
style (``frame-ancestors 'none'``), ``X-Content-Type-Options: nosniff`` and
``Referrer-Policy: no-referrer``. The pages build their DOM with ``textContent`` only, never
``innerHTML``: group, member and client ids are attacker-controlled strings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Final
from urllib.parse import parse_qs, unquote

from coordinator.server.group_views import GroupViews
from coordinator.server.topic_views import TopicViews

SECURITY_HEADERS: Final = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
)

_STATIC: Final = {
    "index.html": "text/html; charset=utf-8",
    "group.html": "text/html; charset=utf-8",
    "topics.html": "text/html; charset=utf-8",
    "topic.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}
_JSON: Final = "application/json"


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: str
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = SECURITY_HEADERS


def _json(status: str, value: object) -> HttpResponse:
    body = json.dumps(value, separators=(",", ":")).encode()
    return HttpResponse(status, body, _JSON, (*SECURITY_HEADERS, ("Cache-Control", "no-store")))


def _error(status: str, message: str) -> HttpResponse:
    return _json(status, {"error": message})


class Console:
    """Routes console and API paths; ``views`` is None until the groups are loaded."""

    def __init__(self) -> None:
        self.views: GroupViews | None = None
        self.topics: TopicViews | None = None
        self._files: dict[str, bytes] = {}

    def handles(self, path: str) -> bool:
        return path == "/" or path.startswith(("/ui/", "/api/"))

    def handle(self, path: str, query: str) -> HttpResponse:
        if path == "/" or path == "/ui/":
            return self._static("index.html")
        if path.startswith("/ui/"):
            return self._static(path.removeprefix("/ui/"))
        return self._api(path.removeprefix("/api/"), parse_qs(query))

    def _static(self, name: str) -> HttpResponse:
        kind = _STATIC.get(name)
        if kind is None:
            return HttpResponse("404 Not Found", b"not found\n", "text/plain; charset=utf-8")
        body = self._files.get(name)
        if body is None:
            body = self._files[name] = (
                resources.files("coordinator.server.console_static").joinpath(name).read_bytes()
            )
        return HttpResponse("200 OK", body, kind)

    def _api(self, route: str, query: dict[str, list[str]]) -> HttpResponse:
        views = self.views
        if views is None:
            return _error("503 Service Unavailable", "groups are still loading")
        parts = route.split("/")
        if parts == ["groups"]:
            return _json("200 OK", views.overview())
        if parts[0] == "topics" and len(parts) <= 2 and self.topics is not None:
            if len(parts) == 1 or not parts[1]:
                return _json("200 OK", {"mode": views.mode, "topics": self.topics.list_topics()})
            topic = unquote(parts[1])
            found = self.topics.describe(topic)
            if found is None:
                return _error("404 Not Found", f"topic {topic!r} not found")
            note = views.topic_lag_note(found["lag"] is not None)
            return _json("200 OK", found | {"mode": views.mode, "lag_note": note})
        if len(parts) in (2, 3) and parts[0] == "groups" and parts[1]:
            group_id = unquote(parts[1])
            if len(parts) == 2:
                view = views.describe(group_id)
                if view is None:
                    return _error("404 Not Found", f"group {group_id!r} not found")
                return _json("200 OK", view)
            if parts[2] == "history":
                try:
                    since = int(query.get("since", ["0"])[0])
                    since_ms = int(query.get("since_ms", ["0"])[0])
                except ValueError:
                    return _error("400 Bad Request", "since and since_ms must be integers")
                events = views.history(group_id, since, since_ms)
                if not events and views.describe(group_id) is None:
                    return _error("404 Not Found", f"group {group_id!r} not found")
                return _json("200 OK", {"group_id": group_id, "events": [e.to_json() for e in events]})
        return _error("404 Not Found", "unknown API path")
