"""`groups history GROUP`: why a group rebalanced, from the coordinator's HTTP API.

Group events are not part of the Kafka protocol, so this command reads the server's HTTP port
(``serve --metrics-port``) instead of the Kafka listener.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from coordinator.cli.admin.connection import parse_address
from coordinator.cli.admin.http_api import DEFAULT_HTTP, HTTP_ENV, HttpApiError, get_json, group_url
from coordinator.cli.admin.output import print_json, print_table
from coordinator.cli.admin.specs import parse_datetime_ms, parse_duration_ms


def parse_since(text: str, now_ms: int) -> int:
    """An ISO 8601 date-time, or an ISO 8601 duration back from now (PT10M: the last 10 minutes)."""
    if text.strip().upper().startswith("P"):
        return now_ms - parse_duration_ms(text)
    return parse_datetime_ms(text)


def add_history_parser(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    default_http = os.environ.get(HTTP_ENV, DEFAULT_HTTP)
    parser = verbs.add_parser(
        "history",
        help="why a group rebalanced: its events (joins, leaves, timeouts, rebalances) from the HTTP API",
        description="Show a group's events, oldest first: members joining, leaving and timing out, "
        "subscription and metadata changes, rebalances and their reasons and durations. Events are "
        "not in the Kafka protocol: this command reads the coordinator's HTTP port "
        "(serve --metrics-port), not the Kafka listener. Unless the server runs with "
        "--group-events-persist true, events live in its memory only: a restart loses them.",
        epilog="exit codes: 0 ok, 1 group unknown or server unreachable, 2 usage",
    )
    parser.add_argument("group", metavar="GROUP")
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        default=default_http,
        help=f"the coordinator's HTTP (metrics) address (default {DEFAULT_HTTP}, or ${HTTP_ENV})",
    )
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only events from then on: an ISO 8601 date-time (2024-05-01T12:00:00Z) or a duration "
        "back from now (PT10M)",
    )
    parser.add_argument(
        "--format",
        "--output",
        dest="format",
        choices=["table", "json"],
        default="table",
        help="output format",
    )
    parser.add_argument(
        "--timeout", metavar="SECONDS", type=float, default=10.0, help="HTTP timeout (default 10)"
    )
    parser.set_defaults(func=lambda args: groups_history(args, parser))


def groups_history(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        parse_address(args.http)
        since_ms = 0 if args.since is None else parse_since(args.since, int(time.time() * 1000))
    except ValueError as exc:
        parser.error(str(exc))
    if not args.timeout > 0:
        parser.error("--timeout must be positive")
    try:
        history = get_json(group_url(args.http, args.group, "/history", f"since_ms={since_ms}"), args.timeout)
    except HttpApiError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    events: list[dict[str, Any]] = history["events"]
    if args.format == "json":
        print_json(history)
    elif not events:
        print(f"no events recorded for group {args.group}", file=sys.stderr)
    else:
        print_table(
            ["TIME", "EVENT", "STATE", "GENERATION", "WHAT"],
            [[_time(e["time_ms"]), e["kind"], e["state"], e["generation"], e["message"]] for e in events],
        )
    if not _persisted(args):
        print(NOT_PERSISTED, file=sys.stderr)
    return 0


NOT_PERSISTED = (
    "note: this server keeps group events in memory only (group.events.persist=false, the default): "
    "the history starts again at its next restart; serve --group-events-persist true stores them"
)


def _persisted(args: argparse.Namespace) -> bool:
    """Whether the server stores group events (the group's view says); True when it cannot tell,
    so that no note is printed on a guess."""
    try:
        view = get_json(group_url(args.http, args.group), args.timeout)
    except HttpApiError:
        return True
    return bool(view.get("history_persisted", True))


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
