"""The topic catalog from upstream: KIP-848 regex subscriptions, new topics, partition growth.

Tansu has no CreatePartitions, so partition growth is checked on the catalog itself (the core's
reaction to a catalog change is the one standalone mode's tests cover)."""

from __future__ import annotations

import threading
import time

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from coordinator.gateway.catalog import UpstreamCatalog
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from tests.gateway.clients import confluent_member
from tests.gateway.conftest import Upstream, running_gateway
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient


def _owned(members: list) -> set[tuple[str, int]]:  # type: ignore[type-arg]
    return {tp for m in members for tp in m.assignment}


@pytest.mark.integration
def test_regex_subscription_follows_upstream_topics(gateway: ServerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
    stop = threading.Event()
    members = []
    try:
        admin.create_topics([NewTopic("growth-a", 2, 1)])
        members = [
            confluent_member(
                gateway.bootstrap, "^growth-.*", "growers", stop, "consumer", name=f"g{i}", by_topic=True
            )
            for i in range(2)
        ]

        def wait_for(expected: set[tuple[str, int]], what: str) -> None:
            deadline = time.monotonic() + 30
            while _owned(members) != expected or any(not m.assignment for m in members):
                assert not [m.error for m in members if m.error], [m.error for m in members]
                assert time.monotonic() < deadline, f"{what}: {[(m.name, m.assignment) for m in members]}"
                time.sleep(0.1)

        wait_for({("growth-a", 0), ("growth-a", 1)}, "the regex did not match the upstream topic")
        admin.create_topics([NewTopic("growth-b", 2, 1), NewTopic("other", 1, 1)])
        wait_for(
            {("growth-a", 0), ("growth-a", 1), ("growth-b", 0), ("growth-b", 1)},
            "the new matching topic was not assigned",
        )
    finally:
        stop.set()
        for member in members:
            if member.thread is not None:
                member.thread.join(30)
        admin.close()


def _topic(name: str, partitions: int, topic_id: bytes, error: int = 0) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=error,
        name=name,
        topic_id=topic_id,
        partitions=[
            MetadataResponsePartition(partition_index=p, leader_id=1, replica_nodes=[1])
            for p in range(partitions)
        ],
    )


def test_the_catalog_sees_growth_new_ids_and_deletions() -> None:
    catalog = UpstreamCatalog()
    first, second = b"\x01" * 16, b"\x02" * 16
    catalog.replace_all([_topic("a", 2, first)])
    version = catalog.version
    assert catalog.partitions_of("a") == 2 and catalog.topic_by_id(first) is catalog.topics["a"]
    catalog.observe([_topic("a", 2, first)])
    assert catalog.version == version  # nothing changed: groups are not disturbed
    catalog.observe([_topic("a", 5, first)])  # partitions added upstream
    assert catalog.version > version and catalog.has_partition("a", 4)
    catalog.observe([_topic("a", 1, second)])  # deleted and re-created: a new topic id
    assert catalog.topic_by_id(first) is None and catalog.partitions_of("a") == 1
    catalog.observe([_topic("a", 0, second, ErrorCode.LEADER_NOT_AVAILABLE)])  # transient: kept
    assert catalog.partitions_of("a") == 1
    catalog.observe([_topic("a", 0, second, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
    assert "a" not in catalog.topics and catalog.leaders == {}
    catalog.replace_all([_topic("b", 1, first)])
    assert set(catalog.topics) == {"b"}


def _listed(bootstrap: str, topic: str) -> bool:
    with WireClient(bootstrap) as client:
        answer = client.request(
            ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
        )
    return any(t.name == topic and t.error_code == ErrorCode.NONE and t.partitions for t in answer.topics)


@pytest.mark.integration
def test_a_commit_for_a_topic_created_a_moment_ago_upstream_is_accepted(upstream: Upstream) -> None:
    """The catalog has not refreshed since the topic was created straight on upstream: the
    gateway asks upstream before answering UNKNOWN_TOPIC_OR_PARTITION, as Kafka's coordinator
    would know the topic at once (docs/gateway.md#topics-the-catalog-has-not-seen-yet)."""
    topic = f"lookup-{upstream.kind}"
    group = f"lookup-group-{upstream.kind}"
    partitions = [OffsetCommitRequestPartition(0, 5), OffsetCommitRequestPartition(7, 9)]
    commit = OffsetCommitRequest(
        group_id=group,
        topics=[
            OffsetCommitRequestTopic(topic, partitions=partitions),
            OffsetCommitRequestTopic(f"{topic}-missing", partitions=[OffsetCommitRequestPartition(0, 1)]),
        ],
    )
    with running_gateway(upstream.bootstrap, **{"upstream-metadata-refresh-ms": "600000"}) as gateway:
        deadline = time.monotonic() + 60
        with WireClient(gateway.bootstrap) as client:
            # Loaded, and its catalog read, before the topic exists.
            while client.request(ApiKey.OFFSET_COMMIT, 8, commit).topics[0].partitions[0].error_code == (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            ):
                assert time.monotonic() < deadline, "the gateway never finished loading"
                time.sleep(0.05)
            admin = KafkaAdminClient(bootstrap_servers=upstream.bootstrap)
            try:
                admin.create_topics([NewTopic(topic, 2, 1)])
            finally:
                admin.close()
            while not _listed(upstream.bootstrap, topic):
                assert time.monotonic() < deadline, "upstream never listed the new topic"
                time.sleep(0.05)
            answer = client.request(ApiKey.OFFSET_COMMIT, 8, commit)
            again = client.request(ApiKey.OFFSET_COMMIT, 8, commit)
    errors = {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}
    assert errors == {
        (topic, 0): ErrorCode.NONE,
        (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (f"{topic}-missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert {(t.name, p.partition_index): p.error_code for t in again.topics for p in t.partitions} == errors
