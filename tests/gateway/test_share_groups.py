"""Gateway mode on Tansu (which has no share groups): librdkafka share consumers join a share
group served by the gateway and get the upstream's partitions by the upstream's topic ids
(docs/share-groups.md; the records they read: test_share_delivery.py)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import ShareConsumer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.share_group_describe import DescribedGroup, ShareGroupDescribeRequest
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def describe(gateway: ServerProcess, group_id: str) -> DescribedGroup:
    with WireClient(gateway.bootstrap) as client:
        response = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest([group_id]))
    [group] = response.groups
    assert isinstance(group, DescribedGroup)
    return group


def poll_until(consumers: list[ShareConsumer], done: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        for consumer in consumers:
            consumer.poll(0.2)


def test_share_consumers_get_the_upstream_partitions_by_topic_id(gateway: ServerProcess) -> None:
    topic, group_id = f"queue-{uuid.uuid4().hex[:8]}", f"workers-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    finally:
        admin.close()
    config = {"bootstrap.servers": gateway.bootstrap, "group.id": group_id, "log_level": 0}
    consumers = [ShareConsumer(config) for _ in range(2)]
    for consumer in consumers:
        consumer.subscribe([topic])

    def assigned_everything() -> bool:
        group = describe(gateway, group_id)
        held = [p for m in group.members for tp in m.assignment.topic_partitions for p in tp.partitions]
        return len(group.members) == 2 and sorted(held) == [0, 1, 2]

    poll_until(consumers, assigned_everything)
    group = describe(gateway, group_id)
    topic_ids = {tp.topic_id for m in group.members for tp in m.assignment.topic_partitions}
    with WireClient(gateway.bootstrap) as client:
        metadata = client.request(
            ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
        )
    assert topic_ids == {metadata.topics[0].topic_id}  # the upstream's id, as the gateway shows it
    for consumer in consumers:
        consumer.close()
    poll_until([], lambda: describe(gateway, group_id).group_state == "Empty")
