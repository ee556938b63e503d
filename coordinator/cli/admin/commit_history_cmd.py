"""`offsets history GROUP`: the commit audit history, read from the coordinator's storage.

The server appends every accepted offset commit to ``offset_commit_history`` when
``offset.commit.history.retention.ms`` is set (and prunes rows older than that). No Kafka API
carries the history, so this command reads the storage the server writes (SQLite or PostgreSQL,
read-only: safe next to a running server).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from coordinator.cli.admin.output import note, print_json, print_table
from coordinator.cli.admin.specs import parse_datetime_ms, parse_duration_ms
from storage.base import StoreError
from storage.records import OffsetCommitRecord
from storage.redact import redact_url
from storage.url import open_store

DEFAULT_STORAGE = "sqlite:///coordinator.db"
STORAGE_ENV = "COORDINATOR_STORAGE"


def add_commit_history_parser(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = verbs.add_parser(
        "history",
        help="every commit of a group, oldest first, from the commit audit history (storage)",
        description="Show a group's recorded offset commits, oldest first: time, partition, offset, "
        "leader epoch and metadata. The server records them when offset.commit.history.retention.ms "
        "is set. This command reads the server's storage (read-only), not the Kafka listener.",
        epilog="exit codes: 0 ok, 1 storage unreadable or no history kept, 2 usage",
    )
    parser.add_argument("group", metavar="GROUP")
    parser.add_argument(
        "--storage",
        metavar="URL",
        default=os.environ.get(STORAGE_ENV) or DEFAULT_STORAGE,
        help=f"the server's storage URL (default ${STORAGE_ENV}, else {DEFAULT_STORAGE})",
    )
    parser.add_argument("--topic", action="append", metavar="T", help="only this topic (repeatable)")
    parser.add_argument(
        "--since",
        metavar="WHEN",
        help="only commits from then on: an ISO 8601 date-time or a duration back from now (PT1H)",
    )
    parser.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    parser.set_defaults(func=lambda args: offsets_history(args, parser))


def offsets_history(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        since_ms = 0 if args.since is None else _since(args.since)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        records = asyncio.run(_read(args.storage, args.group))
    except (StoreError, ValueError, OSError) as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    except _NoHistory as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    topics = set(args.topic or [])
    shown = [r for r in records if r.commit_ms >= since_ms and (not topics or r.topic in topics)]
    if args.format == "json":
        print_json({"group": args.group, "commits": [_json(r) for r in shown]})
        return 0
    if not shown:
        note(f"no recorded commits for group {args.group}" + (" match the filters" if records else ""))
        return 0
    print_table(
        ["TIME", "TOPIC", "PARTITION", "OFFSET", "LEADER-EPOCH", "METADATA"],
        [[_time(r.commit_ms), r.topic, r.partition, r.offset, r.leader_epoch, r.metadata] for r in shown],
    )
    return 0


class _NoHistory(Exception):
    pass


async def _read(url: str, group: str) -> list[OffsetCommitRecord]:
    store: Any = open_store(url)
    reader = getattr(store, "commit_history", None)
    if reader is None:
        raise _NoHistory(f"{redact_url(url)} keeps no commit history (only SQLite and PostgreSQL do)")
    await store.open()
    try:
        records: list[OffsetCommitRecord] = await reader(group)
        return records
    finally:
        await store.close()


def _since(text: str) -> int:
    if text.strip().upper().startswith("P"):
        return int(time.time() * 1000) - parse_duration_ms(text)
    return parse_datetime_ms(text)


def _json(r: OffsetCommitRecord) -> dict[str, Any]:
    return {
        "time_ms": r.commit_ms,
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "leader_epoch": r.leader_epoch,
        "metadata": r.metadata,
        "expire_ms": r.expire_ms,
    }


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
