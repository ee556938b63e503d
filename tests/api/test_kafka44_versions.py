"""The group API versions Kafka 4.4 added, served as Kafka 4.4 answers them.

OffsetCommit/OffsetFetch v10 name topics by id (UNKNOWN_TOPIC_ID per partition of an id no topic
has), DeleteGroups v3 carries a per-group error message (null for the errors Kafka 4.4 leaves
without one), ApiVersions v5 checks the cluster and node a client expects (KIP-1242). The
expected answers were taken from a Kafka 4.4 broker given the same requests.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import Config
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from tests.api.test_dispatcher import Client

UNKNOWN_ID = uuid.UUID("5f0c3a8e-8d0b-4f1e-9d7a-2f6a7c1b9e55").bytes
CLUSTER_ID = "kafka44-versions-test"
NODE_ID = 7


@pytest_asyncio.fixture
async def server() -> AsyncIterator[RunningServer]:
    config = Config(
        host="127.0.0.1",
        port=0,
        storage="memory://",
        group_initial_rebalance_delay_ms=0,
        cluster_id=CLUSTER_ID,
        node_id=NODE_ID,
    )
    running = await start_server(config)
    try:
        yield running
    finally:
        await running.shutdown()


@pytest_asyncio.fixture
async def client(server: RunningServer) -> AsyncIterator[Client]:
    connected = await Client.connect(server.port, "kafka44-test")
    try:
        yield connected
    finally:
        await connected.close()


async def _topic_id(client: Client, name: str, partitions: int) -> bytes:
    created = await client.request(
        ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest([CreatableTopic(name, partitions, 1)], timeout_ms=5000)
    )
    assert [t.error_code for t in created.topics] == [0]
    topic_id: bytes = created.topics[0].topic_id
    return topic_id


def _commit_v10(group: str, *topics: tuple[bytes, list[int]]) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        topics=[
            OffsetCommitRequestTopic(
                topic_id=topic_id,
                partitions=[
                    OffsetCommitRequestPartition(p, 100 + p, committed_metadata="m") for p in partitions
                ],
            )
            for topic_id, partitions in topics
        ],
    )


def _fetch_v10(group: str, topics: list[tuple[bytes, list[int]]] | None) -> OffsetFetchRequest:
    wanted = (
        None
        if topics is None
        else [OffsetFetchRequestTopics(topic_id=t, partition_indexes=p) for t, p in topics]
    )
    return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=wanted)])


def _commit_answer(response: object) -> list[tuple[bytes, list[tuple[int, int]]]]:
    return [
        (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in response.topics  # type: ignore[attr-defined]
    ]


def _fetch_answer(response: object) -> list[tuple[bytes, list[tuple[int, int, int]]]]:
    (group,) = response.groups  # type: ignore[attr-defined]
    assert group.error_code == 0
    return [
        (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
        for t in group.topics
    ]


@pytest.mark.asyncio
async def test_offset_commit_v10_by_known_id_is_stored_under_the_topic(client: Client) -> None:
    events = await _topic_id(client, "events", 2)
    committed = await client.request(ApiKey.OFFSET_COMMIT, 10, _commit_v10("g-known", (events, [0, 1])))
    assert _commit_answer(committed) == [(events, [(0, 0), (1, 0)])]
    # The same offsets by name (v9) and by id (v10).
    by_name = await client.request(
        ApiKey.OFFSET_FETCH,
        9,
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    "g-known", topics=[OffsetFetchRequestTopics("events", partition_indexes=[0, 1])]
                )
            ]
        ),
    )
    assert [(p.partition_index, p.committed_offset) for p in by_name.groups[0].topics[0].partitions] == [
        (0, 100),
        (1, 101),
    ]
    by_id = await client.request(ApiKey.OFFSET_FETCH, 10, _fetch_v10("g-known", [(events, [0, 1])]))
    assert _fetch_answer(by_id) == [(events, [(0, 100, 0), (1, 101, 0)])]
    everything = await client.request(ApiKey.OFFSET_FETCH, 10, _fetch_v10("g-known", None))
    assert _fetch_answer(everything) == [(events, [(0, 100, 0), (1, 101, 0)])]


@pytest.mark.asyncio
async def test_offset_commit_v10_unknown_id_gets_unknown_topic_id_per_partition(client: Client) -> None:
    committed = await client.request(ApiKey.OFFSET_COMMIT, 10, _commit_v10("g-unknown", (UNKNOWN_ID, [0, 3])))
    unknown = int(ErrorCode.UNKNOWN_TOPIC_ID)
    assert _commit_answer(committed) == [(UNKNOWN_ID, [(0, unknown), (3, unknown)])]
    zero = await client.request(ApiKey.OFFSET_COMMIT, 10, _commit_v10("g-unknown", (bytes(16), [0])))
    assert _commit_answer(zero) == [(bytes(16), [(0, unknown)])]
    fetched = await client.request(ApiKey.OFFSET_FETCH, 10, _fetch_v10("g-unknown", [(UNKNOWN_ID, [0, 1])]))
    assert _fetch_answer(fetched) == [(UNKNOWN_ID, [(0, -1, unknown), (1, -1, unknown)])]


@pytest.mark.asyncio
async def test_offset_commit_and_fetch_v10_mixed_ids(client: Client) -> None:
    events = await _topic_id(client, "mixed-events", 2)
    unknown = int(ErrorCode.UNKNOWN_TOPIC_ID)
    committed = await client.request(
        ApiKey.OFFSET_COMMIT, 10, _commit_v10("g-mixed", (UNKNOWN_ID, [0, 1]), (events, [1]))
    )
    # As Kafka 4.4: the unknown ids first, then the topics the coordinator answered.
    assert _commit_answer(committed) == [(UNKNOWN_ID, [(0, unknown), (1, unknown)]), (events, [(1, 0)])]
    fetched = await client.request(
        ApiKey.OFFSET_FETCH, 10, _fetch_v10("g-mixed", [(UNKNOWN_ID, [0, 1]), (events, [0, 1])])
    )
    # As Kafka 4.4: the known topics first, the unknown ids last.
    assert _fetch_answer(fetched) == [
        (events, [(0, -1, 0), (1, 101, 0)]),
        (UNKNOWN_ID, [(0, -1, unknown), (1, -1, unknown)]),
    ]


@pytest.mark.asyncio
async def test_delete_groups_v3_answers_per_group_with_kafkas_messages(client: Client) -> None:
    events = await _topic_id(client, "delete-events", 1)
    await client.request(ApiKey.OFFSET_COMMIT, 10, _commit_v10("g-empty", (events, [0])))
    joined = await client.request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        ConsumerGroupHeartbeatRequest(
            group_id="g-busy",
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=["delete-events"],
            topic_partitions=[],
        ),
    )
    assert joined.error_code == 0, joined
    deleted = await client.request(
        ApiKey.DELETE_GROUPS, 3, DeleteGroupsRequest(["g-empty", "g-nope", "g-busy"])
    )
    # Kafka 4.4 leaves GROUP_ID_NOT_FOUND and NON_EMPTY_GROUP without a message (its per-group
    # messages come from share and streams group state it does not delete here).
    assert sorted((r.group_id, r.error_code, r.error_message) for r in deleted.results) == [
        ("g-busy", int(ErrorCode.NON_EMPTY_GROUP), None),
        ("g-empty", 0, None),
        ("g-nope", int(ErrorCode.GROUP_ID_NOT_FOUND), None),
    ]
    again = await client.request(ApiKey.OFFSET_FETCH, 10, _fetch_v10("g-empty", None))
    assert _fetch_answer(again) == []


def _api_versions(cluster_id: str | None, node_id: int) -> ApiVersionsRequest:
    return ApiVersionsRequest(
        client_software_name="kafka44-test",
        client_software_version="1",
        cluster_id=cluster_id,
        node_id=node_id,
    )


@pytest.mark.asyncio
async def test_api_versions_v5_with_the_expected_cluster_and_node_is_answered(client: Client) -> None:
    answered = await client.request(ApiKey.API_VERSIONS, 5, _api_versions(CLUSTER_ID, NODE_ID))
    assert answered.error_code == 0
    assert {a.api_key: a.max_version for a in answered.api_keys}[ApiKey.API_VERSIONS] == 5
    plain = await client.request(ApiKey.API_VERSIONS, 5, _api_versions(None, -1))
    assert plain.error_code == 0 and plain.api_keys == answered.api_keys


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("cluster_id", "node_id", "error"),
    [
        (CLUSTER_ID, NODE_ID + 1, ErrorCode.REBOOTSTRAP_REQUIRED),
        ("another-cluster", NODE_ID, ErrorCode.REBOOTSTRAP_REQUIRED),
        (CLUSTER_ID, -1, ErrorCode.INVALID_REQUEST),
        (None, NODE_ID, ErrorCode.INVALID_REQUEST),
    ],
)
async def test_api_versions_v5_mismatch_gets_kafkas_error(
    server: RunningServer, cluster_id: str | None, node_id: int, error: ErrorCode
) -> None:
    client = await Client.connect(server.port, "kafka44-test")
    try:
        refused = await client.request(ApiKey.API_VERSIONS, 5, _api_versions(cluster_id, node_id))
        assert (refused.error_code, refused.api_keys, refused.supported_features) == (int(error), [], [])
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_api_versions_before_v5_ignore_the_expected_identity(client: Client) -> None:
    answered = await client.request(ApiKey.API_VERSIONS, 4, _api_versions(None, -1))
    assert answered.error_code == 0 and answered.api_keys
