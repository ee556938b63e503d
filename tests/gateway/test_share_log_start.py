"""Records deleted upstream below a share group's start offset (DeleteRecords, as retention does):
the gateway moves the share-partition's start offset to the upstream's log start, as Kafka's
share-partition leader does, and the consumers go on from there instead of getting
OFFSET_OUT_OF_RANGE (docs/share-groups.md, "One ShareFetch")."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from protocol.apis import ApiKey
from protocol.messages import alter_share_group_offsets as asgo
from tests.gateway.conftest import running_gateway
from tests.gateway.share_support import Received, create_topic, poll_once, produce, share_consumer, wait_for
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.timeout(240)]


def test_deleted_records_move_the_start_offset(kafka_broker: Any) -> None:
    """On the Kafka 4.4 upstream (DeleteRecords is Kafka's)."""
    with running_gateway(kafka_broker.bootstrap) as gateway:
        deleted_records_move_the_start_offset(gateway.bootstrap)


def deleted_records_move_the_start_offset(bootstrap: str) -> None:
    topic, group_id = f"deleted-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [f"r{n}" for n in range(10)])
    # The group's share-partition starts at 0 (the empty group's start offset set, as
    # kafka-share-groups --reset-offsets --to-earliest does).
    request = asgo.AlterShareGroupOffsetsRequest(
        group_id,
        [asgo.AlterShareGroupOffsetsRequestTopic(topic, [asgo.AlterShareGroupOffsetsRequestPartition(0, 0)])],
    )
    with WireClient(bootstrap) as client:
        altered = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, request)
    assert [p.error_code for t in altered.responses for p in t.partitions] == [0]
    # The first six records go upstream.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for future in admin.delete_records([TopicPartition(topic, 0, 6)]).values():
        future.result(30)

    consumer = share_consumer(bootstrap, group_id, topic)
    received = Received()
    try:
        wait_for(lambda: len(received.records) >= 4, lambda: poll_once(consumer, received), 60, "the records")
        for _ in range(5):
            poll_once(consumer, received)
        consumer.commit_sync()
    finally:
        consumer.close()
    assert sorted(received.values()) == [f"r{n}" for n in range(6, 10)]
