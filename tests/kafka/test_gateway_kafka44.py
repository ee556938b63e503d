"""Kafka 4.4's group API versions in gateway mode, in front of a real Kafka 4.4 broker.

OffsetCommit/OffsetFetch v10 resolve topic ids through upstream metadata. KIP-1242: one
identity on every listener.

Clients learn the cluster id and the node ids from the Metadata the gateway forwards (upstream's
cluster id, a virtual broker per upstream node, the coordinator's own node id at the bootstrap
address); ApiVersions v5 accepts exactly that identity on each listener
(docs/protocol.md#kip-1242-the-cluster-and-node-a-client-expects).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
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
from tests.support.kafka_broker import KafkaCluster
from tests.support.server import ServerProcess, start_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka

COORDINATOR_NODE = 2**30


@pytest.fixture(scope="module")
def gateway(kafka_broker: KafkaCluster) -> Iterator[ServerProcess]:
    server = start_server(
        "memory://",
        {"upstream-bootstrap-servers": kafka_broker.bootstrap, "upstream-metadata-refresh-ms": "500"},
    )
    try:
        yield server
    finally:
        server.stop()


def _metadata(bootstrap: str, timeout: float = 60) -> MetadataResponse:
    """The gateway's Metadata once it names the upstream cluster (polled)."""
    deadline = time.monotonic() + timeout
    while True:
        with WireClient(bootstrap) as client:
            answer: MetadataResponse = client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        if answer.cluster_id and len(answer.brokers) >= 2:
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)


def _api_versions(address: str, cluster_id: str | None, node_id: int) -> int:
    with WireClient(address) as client:
        answer = client.request(
            ApiKey.API_VERSIONS,
            5,
            ApiVersionsRequest(
                client_software_name="tests",
                client_software_version="1",
                cluster_id=cluster_id,
                node_id=node_id,
            ),
        )
    return int(answer.error_code)


def test_each_listener_accepts_the_identity_metadata_gave_it(
    kafka_broker: KafkaCluster, gateway: ServerProcess
) -> None:
    metadata = _metadata(gateway.bootstrap)
    assert metadata.cluster_id == kafka_broker.cluster_id
    addresses = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
    assert set(addresses) == {1, COORDINATOR_NODE}
    cluster = kafka_broker.cluster_id
    rebootstrap = int(ErrorCode.REBOOTSTRAP_REQUIRED)

    # A virtual broker stands for upstream node 1.
    assert _api_versions(addresses[1], cluster, 1) == 0
    assert _api_versions(addresses[1], cluster, COORDINATOR_NODE) == rebootstrap
    # The bootstrap address is the coordinator's node.
    assert _api_versions(gateway.bootstrap, cluster, COORDINATOR_NODE) == 0
    assert _api_versions(gateway.bootstrap, cluster, 1) == rebootstrap
    # Another cluster's id is refused everywhere; no expectation is accepted everywhere.
    for address in (gateway.bootstrap, addresses[1]):
        assert _api_versions(address, "another-cluster", 1) == rebootstrap
        assert _api_versions(address, None, -1) == 0


def _upstream_topic_id(kafka_broker: KafkaCluster, name: str) -> bytes:
    with WireClient(kafka_broker.bootstrap) as client:
        created = client.request(
            ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest([CreatableTopic(name, 2, 1)], timeout_ms=30000)
        )
        assert created.topics[0].error_code == 0, created
        deadline = time.monotonic() + 30
        while True:
            found = client.request(
                ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name=name)])
            )
            if found.topics[0].error_code == 0:
                topic_id: bytes = found.topics[0].topic_id
                return topic_id
            assert time.monotonic() < deadline, found
            time.sleep(0.2)


def test_offsets_v10_by_upstream_topic_id(kafka_broker: KafkaCluster, gateway: ServerProcess) -> None:
    topic_id = _upstream_topic_id(kafka_broker, "gateway-v10-events")
    unknown_id = bytes(range(16))
    commit = OffsetCommitRequest(
        group_id="gateway-v10",
        topics=[
            OffsetCommitRequestTopic(
                topic_id=topic_id, partitions=[OffsetCommitRequestPartition(p, 40 + p) for p in (0, 1)]
            ),
            OffsetCommitRequestTopic(topic_id=unknown_id, partitions=[OffsetCommitRequestPartition(0, 1)]),
        ],
    )
    deadline = time.monotonic() + 30
    with WireClient(gateway.bootstrap) as client:
        while True:  # until the gateway's catalog has seen the new topic (metadata refresh)
            committed = client.request(ApiKey.OFFSET_COMMIT, 10, commit)
            answer = {
                t.topic_id: [(p.partition_index, p.error_code) for p in t.partitions]
                for t in committed.topics
            }
            if answer[topic_id] != [(0, ErrorCode.UNKNOWN_TOPIC_ID), (1, ErrorCode.UNKNOWN_TOPIC_ID)]:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
        assert answer == {topic_id: [(0, 0), (1, 0)], unknown_id: [(0, ErrorCode.UNKNOWN_TOPIC_ID)]}
        fetched = client.request(
            ApiKey.OFFSET_FETCH,
            10,
            OffsetFetchRequest(
                groups=[
                    OffsetFetchRequestGroup(
                        "gateway-v10",
                        topics=[OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=[0, 1])],
                    )
                ]
            ),
        )
    assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
            for t in fetched.groups[0].topics] == [(topic_id, [(0, 40, 0), (1, 41, 0)])]  # fmt: skip
