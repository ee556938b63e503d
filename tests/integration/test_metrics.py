"""/metrics, /healthz and /readyz of a running server, scraped around a rebalance and commits."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.apis import ApiKey
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.support.ports import free_port, wait_http_ok
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[tuple[ServerProcess, int]]:
    port = free_port()
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", {"metrics-port": str(port)}) as server:
        wait_http_ok(f"http://127.0.0.1:{port}/readyz")
        yield server, port


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return samples


def wait_for_sample(port: int, key: str, value: float, timeout_s: float = 20) -> None:
    """Scrape until the sample ``key`` (name and labels) has ``value``: what the server reaches in
    the background (loading, a sampler's pass) is polled for, never assumed."""
    deadline = time.monotonic() + timeout_s
    while (found := scrape(port).get(key)) != value:
        assert time.monotonic() < deadline, f"{key} is {found}, not {value}"
        time.sleep(0.05)


def delta(after: dict[str, float], before: dict[str, float], key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


def join_and_sync(client: WireClient, member_id: str) -> tuple[str, int]:
    protocols = [JoinGroupRequestProtocol("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00")]
    joined = client.request(
        ApiKey.JOIN_GROUP, 3, JoinGroupRequest("g", 10000, 30000, member_id, None, "consumer", protocols)
    )
    assert joined.error_code == 0
    synced = client.request(
        ApiKey.SYNC_GROUP,
        3,
        SyncGroupRequest("g", joined.generation_id, joined.member_id, None,
                         assignments=[SyncGroupRequestAssignment(joined.member_id, b"")]),
    )  # fmt: skip
    assert synced.error_code == 0
    return joined.member_id, joined.generation_id


def test_counters_move_by_the_right_amounts(metered: tuple[ServerProcess, int]) -> None:
    server, port = metered
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
        assert response.status == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
        assert response.status == 200
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/nope", timeout=5)
    with WireClient(server.bootstrap) as client:
        created = client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic("t", 10, 1)]))
        assert created.topics[0].error_code == 0
        before = scrape(port)
        member_id, generation = join_and_sync(client, "")
        middle = scrape(port)
        assert delta(middle, before, "coordinator_group_completed_rebalances_total") == 1
        assert middle['coordinator_groups{state="Stable"}'] == 1
        assert middle["coordinator_members"] == 1
        assert delta(middle, before, 'coordinator_group_requests_total{request="join",result="ok"}') == 1
        assert delta(middle, before, 'coordinator_group_requests_total{request="sync",result="ok"}') == 1
        assert delta(middle, before, "coordinator_rebalance_duration_seconds_count") == 1

        partitions = [OffsetCommitRequestPartition(p, 100 + p, committed_metadata="") for p in range(10)]
        commit = OffsetCommitRequest(
            "g", generation, member_id, topics=[OffsetCommitRequestTopic("t", partitions=partitions)]
        )
        for _ in range(3):
            response = client.request(ApiKey.OFFSET_COMMIT, 7, commit)
            assert {p.error_code for p in response.topics[0].partitions} == {0}
        unknown = OffsetCommitRequest(
            "g",
            generation,
            member_id,
            topics=[OffsetCommitRequestTopic("missing", partitions=partitions[:2])],
        )
        client.request(ApiKey.OFFSET_COMMIT, 7, unknown)
        # The leader rejoining forces a second rebalance (Kafka's rule for a leader JoinGroup).
        join_and_sync(client, member_id)
        after = scrape(port)
    assert delta(after, middle, 'coordinator_offset_commits_total{result="ok"}') == 30
    assert delta(after, middle, 'coordinator_offset_commits_total{result="unknown_topic_or_partition"}') == 2
    assert (
        delta(after, middle, 'coordinator_requests_total{api="offset_commit",result="ok",version="7"}') == 4
    )
    assert (
        delta(after, middle, 'coordinator_request_latency_seconds_count{api="offset_commit",version="7"}')
        == 4
    )
    assert delta(after, middle, "coordinator_group_completed_rebalances_total") == 1
    assert delta(after, middle, "coordinator_storage_batch_records_sum") >= 30 + 1  # offsets + group record
    assert after["coordinator_storage_write_failures_total"] == 0
    assert after["coordinator_connections"] >= 0
    assert "coordinator_partition_load_time_seconds" in after


def test_consumer_group_metrics(metered: tuple[ServerProcess, int]) -> None:
    server, port = metered
    with WireClient(server.bootstrap) as client:
        client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic("t", 4, 1)]))
        before = scrape(port)
        for member_id in ("a", "b"):
            join = ConsumerGroupHeartbeatRequest(
                "cg",
                member_id,
                0,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=["t"],
                topic_partitions=[],
            )
            assert client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join).error_code == 0
        stale = ConsumerGroupHeartbeatRequest("cg", "a", 7)
        assert client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, stale).error_code == 110
        after = scrape(port)
    assert delta(after, before, "coordinator_consumer_group_rebalances_total") == 2
    # b waits for partitions a still owns: the group is reconciling.
    assert after['coordinator_groups{state="Reconciling"}'] == 1
    assert after["coordinator_members"] == 2
    heartbeats = 'coordinator_requests_total{api="consumer_group_heartbeat",result="%s",version="1"}'
    assert delta(after, before, heartbeats % "ok") == 2
    assert delta(after, before, heartbeats % "fenced_member_epoch") == 1
