"""The issue's attack probes against a real server: each gets its own error, nobody else notices."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    path: Path = tmp_path_factory.mktemp("probes") / "c.db"
    with running_server(f"sqlite:///{path}", {"group-initial-rebalance-delay-ms": "0"}) as process:
        with WireClient(process.bootstrap) as client:
            created = client.request(
                ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic("t", 4, 1)], 5000)
            )
            assert created.topics[0].error_code == 0
        yield process


def _commit(client: WireClient, group: str, offset: int, retention_ms: int = -1) -> int:
    request = OffsetCommitRequest(
        group_id=group,
        retention_time_ms=retention_ms,
        topics=[OffsetCommitRequestTopic(name="t", partitions=[OffsetCommitRequestPartition(0, offset)])],
    )
    response = client.request(ApiKey.OFFSET_COMMIT, 2, request)
    code: int = response.topics[0].partitions[0].error_code
    return code


def _fetched(client: WireClient, group: str) -> int:
    request = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic("t", [0])])
    offset: int = client.request(ApiKey.OFFSET_FETCH, 3, request).topics[0].partitions[0].committed_offset
    return offset


def test_oversized_instance_id_gets_an_error_and_the_group_stays_describable(server: ServerProcess) -> None:
    with WireClient(server.bootstrap) as client:
        protocols = [JoinGroupRequestProtocol("range", b"")]
        join = JoinGroupRequest("victim", 10000, 10000, "", "i" * 32767, "consumer", protocols)
        assert client.request(ApiKey.JOIN_GROUP, 5, join).error_code == ErrorCode.INVALID_REQUEST
        described = client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["victim"]))
        assert described.groups[0].error_code == 0  # the connection is still open and answers


def test_retention_overflow_commits_and_does_not_fail_others(server: ServerProcess) -> None:
    with WireClient(server.bootstrap) as attacker, WireClient(server.bootstrap) as victim:
        assert _commit(attacker, "attacker", 1, retention_ms=2**63 - 1) == 0
        for offset in range(2, 12):
            attacker.send_raw(
                _raw_commit(attacker, "attacker", offset, 2**63 - 1)
            )  # pipelined with the victim's commits: the same storage batches
            assert _commit(victim, "victim", offset) == 0
        for _ in range(2, 12):
            attacker.read_frame()
        assert _fetched(victim, "victim") == 11
        assert _fetched(attacker, "attacker") == 11


def _raw_commit(client: WireClient, group: str, offset: int, retention_ms: int) -> bytes:
    from protocol.wire import encode_request

    client.correlation_id += 1
    request = OffsetCommitRequest(
        group_id=group,
        retention_time_ms=retention_ms,
        topics=[OffsetCommitRequestTopic(name="t", partitions=[OffsetCommitRequestPartition(0, offset)])],
    )
    return encode_request(ApiKey.OFFSET_COMMIT, 2, client.correlation_id, client.client_id, request)


def test_nul_in_group_id_is_refused(server: ServerProcess) -> None:
    with WireClient(server.bootstrap) as client:
        assert _commit(client, "bad\x00group", 5) == ErrorCode.INVALID_GROUP_ID
        assert _commit(client, "good", 5) == 0


def test_huge_partition_counts_are_refused_at_once(server: ServerProcess) -> None:
    with WireClient(server.bootstrap) as client:
        for count in (2**31 - 1, 2_000_000):
            request = CreateTopicsRequest([CreatableTopic(f"huge-{count}", count, 1)], 5000)
            result = client.request(ApiKey.CREATE_TOPICS, 5, request).topics[0]
            assert result.error_code == ErrorCode.INVALID_PARTITIONS
            assert "per topic" in result.error_message


def test_huge_requests_close_only_their_connection(server: ServerProcess) -> None:
    from protocol.wire import encode_request

    def frame(api_key: int, version: int, body: object) -> bytes:
        return encode_request(api_key, version, 1, "x", body)

    huge_describe = frame(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"] * 400_000))
    many_groups = frame(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"] * 10_001))
    partitions = [OffsetCommitRequestPartition(p, 1) for p in range(100_001)]
    many_items = frame(
        ApiKey.OFFSET_COMMIT,
        2,
        OffsetCommitRequest(group_id="g", topics=[OffsetCommitRequestTopic("t", partitions=partitions)]),
    )
    for attack in (huge_describe, many_groups, many_items):
        with WireClient(server.bootstrap) as attacker, WireClient(server.bootstrap) as bystander:
            attacker.send_raw(attack)
            assert attacker.is_closed_by_peer()
            assert _commit(bystander, "bystander", 3) == 0
    deadline = time.monotonic() + 10  # the server's log reaches us through a pipe
    expected = ("control.request.max.bytes", "more than 10000 groups", "more than 100000 array elements")
    while not all(text in server.log_text() for text in expected) and time.monotonic() < deadline:
        time.sleep(0.05)
    log = server.log_text()
    assert all(text in log for text in expected), log[-2000:]
