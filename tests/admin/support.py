"""Helpers for the admin CLI tests: run the CLI in-process, set up groups with kafka-python."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from coordinator.cli.admin.cli import main


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def cli(bootstrap: str, *argv: str) -> CliResult:
    """`coordinator <argv> --bootstrap <bootstrap>` in-process; argparse's exits become codes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*argv, "--bootstrap", bootstrap])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return CliResult(code, out.getvalue(), err.getvalue())


def table_rows(text: str) -> list[list[str]]:
    """The rows (header included) of a table the CLI printed, split on runs of blanks."""
    return [line.split() for line in text.strip().splitlines() if line.strip()]


def create_topics(bootstrap: str, **partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(name, n, 1) for name, n in partitions.items()])
    finally:
        admin.close()


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int], metadata: str = "") -> None:
    """Commit as a simple consumer (kafka-python, assigned partitions, no group membership)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(t, p) for t, p in offsets])
        consumer.commit(
            {TopicPartition(t, p): OffsetAndMetadata(o, metadata, -1) for (t, p), o in offsets.items()}
        )
    finally:
        consumer.close()


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The group's committed offsets as kafka-python's admin client sees them (the oracle)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        found = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in found.items() if om.offset >= 0}


@contextlib.contextmanager
def live_consumer(bootstrap: str, group: str, topics: list[str], client_id: str) -> Iterator[KafkaConsumer]:
    """A kafka-python group member kept alive by its heartbeat thread until the block ends."""
    consumer = KafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer got no assignment in 30 s"
            consumer.poll(timeout_ms=200)
        yield consumer
    finally:
        consumer.close()
