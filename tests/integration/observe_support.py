"""An in-process coordinator with its HTTP port, and helpers to read its API and metrics."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from email.message import Message
from typing import Any

import pytest_asyncio

from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import Config
from protocol.apis import ApiKey
from protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartition,
    encode_consumer_protocol_assignment_v0,
    encode_consumer_protocol_subscription_v0,
)
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.support.ports import free_port, wait_http_ok
from tests.support.wire_client import WireClient

# A group id that is markup, a path and a query at once: the console must show it as text.
NASTY_GROUP = "<script>alert(1)</script>/g?x=1&y"
_METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


@dataclass
class Observed:
    server: RunningServer
    http_port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    @property
    def http(self) -> str:
        return f"127.0.0.1:{self.http_port}"


@pytest_asyncio.fixture
async def observed() -> AsyncIterator[Observed]:
    http_port = free_port()
    config = Config(
        host="127.0.0.1",
        port=0,
        storage="memory://",
        metrics_port=http_port,
        group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=100,
    )
    running = await start_server(config)
    try:
        # The groups load in the background after the listener opens: /readyz says when they are in.
        await asyncio.to_thread(wait_http_ok, f"http://127.0.0.1:{http_port}/readyz")
        yield Observed(running, http_port)
    finally:
        await running.shutdown()
        if running.health is not None:
            await running.health.close()


def http_get(url: str) -> tuple[int, Message, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


async def get_json(observed: Observed, path: str) -> tuple[int, Any]:
    status, _headers, body = await asyncio.to_thread(http_get, f"http://{observed.http}{path}")
    return status, json.loads(body)


async def scrape(observed: Observed) -> tuple[dict[str, float], set[str]]:
    """Samples by name and labels, and the metric names the scrape declares (# TYPE)."""
    _status, _headers, body = await asyncio.to_thread(http_get, f"http://{observed.http}/metrics")
    samples: dict[str, float] = {}
    declared: set[str] = set()
    for line in body.decode().splitlines():
        if line.startswith("# TYPE "):
            declared.add(line.split()[2])
        elif match := _METRIC_LINE.match(line):
            samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return samples, declared


def subscription(topic: str) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    encode_consumer_protocol_subscription_v0(ConsumerProtocolSubscription([topic]), out)
    return bytes(out)


def consumer_assignment(topic: str, partitions: list[int]) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    encode_consumer_protocol_assignment_v0(
        ConsumerProtocolAssignment([TopicPartition(topic, partitions)], None), out
    )
    return bytes(out)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with WireClient(bootstrap) as client:
        created = client.request(
            ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic(name, partitions, 1)])
        )
        assert created.topics[0].error_code == 0


def form_group(
    bootstrap: str,
    group: str,
    client_id: str,
    partitions: int = 4,
    topic: str = "t",
    session_timeout_ms: int = 10000,
) -> tuple[str, int]:
    """One classic member joins, syncs all of ``topic`` and commits an offset per partition (it
    sends no heartbeat afterwards: its session expires)."""
    with WireClient(bootstrap, client_id=client_id) as client:
        protocols = [JoinGroupRequestProtocol("range", subscription(topic))]
        joined = client.request(
            ApiKey.JOIN_GROUP,
            3,
            JoinGroupRequest(group, session_timeout_ms, 30000, "", None, "consumer", protocols),
        )
        assert joined.error_code == 0
        assignment = consumer_assignment(topic, list(range(partitions)))
        synced = client.request(
            ApiKey.SYNC_GROUP,
            3,
            SyncGroupRequest(group, joined.generation_id, joined.member_id, None,
                             assignments=[SyncGroupRequestAssignment(joined.member_id, assignment)]),
        )  # fmt: skip
        assert synced.error_code == 0
        commit = OffsetCommitRequest(
            group,
            joined.generation_id,
            joined.member_id,
            topics=[
                OffsetCommitRequestTopic(
                    topic,
                    partitions=[
                        OffsetCommitRequestPartition(p, 10 * p, committed_metadata="")
                        for p in range(partitions)
                    ],
                )
            ],
        )
        response = client.request(ApiKey.OFFSET_COMMIT, 7, commit)
        assert {p.error_code for p in response.topics[0].partitions} == {0}
        return joined.member_id, joined.generation_id


def join_without_sync(bootstrap: str, group: str) -> str:
    """A member that joins and never syncs: the group stays in CompletingRebalance for a while."""
    with WireClient(bootstrap, client_id="stuck") as client:
        protocols = [JoinGroupRequestProtocol("range", subscription("t"))]
        joined = client.request(
            ApiKey.JOIN_GROUP, 3, JoinGroupRequest(group, 30000, 60000, "", None, "consumer", protocols)
        )
        assert joined.error_code == 0
        return str(joined.member_id)
