"""Helpers of the share-group data-plane tests: topics, producing numbered records, share
consumers that record what they received, and polling loops with deadlines."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer, ShareConsumer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.messages.share_group_describe import DescribedGroup, ShareGroupDescribeRequest
from tests.support.wire_client import WireClient


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def produce(
    bootstrap: str, topic: str, values: Iterable[str], partitions: int = 1, per_batch: int = 10
) -> None:
    """Round-robin over the partitions, flushed every ``per_batch`` records: a record batch is
    acquired whole by one consumer, so several batches let several consumers share a partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0})
    for n, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=n % partitions)
        if (n + 1) % per_batch == 0:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0


def describe(bootstrap: str, group_id: str) -> DescribedGroup:
    with WireClient(bootstrap) as client:
        response = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest([group_id]))
    [group] = response.groups
    assert isinstance(group, DescribedGroup)
    return group


def share_consumer(bootstrap: str, group_id: str, topic: str, **extra: Any) -> ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group_id, "log_level": 0, **extra}
    consumer = ShareConsumer(config)
    consumer.subscribe([topic])
    return consumer


@dataclass
class Received:
    """Every record a consumer got: (value, delivery count), in order."""

    records: list[tuple[str, int]] = field(default_factory=list)

    def values(self) -> list[str]:
        return [v for v, _ in self.records]


def poll_once(consumer: ShareConsumer, received: Received, timeout: float = 0.2) -> list[Any]:
    messages: list[Any] = list(consumer.poll(timeout) or [])
    batch = [m for m in messages if m.error() is None]
    for message in batch:
        received.records.append((bytes(message.value()).decode(), int(message.delivery_count())))
    return batch


def wait_for(done: Callable[[], bool], step: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        step()


def all_assigned(bootstrap: str, group_id: str, members: int, partitions: int) -> bool:
    group = describe(bootstrap, group_id)
    held = {p for m in group.members for tp in m.assignment.topic_partitions for p in tp.partitions}
    # The target caught up with the last join (it waits for the assignment interval) and every
    # member has it.
    epochs_settled = group.group_epoch == group.assignment_epoch and all(
        m.member_epoch == group.assignment_epoch for m in group.members
    )
    return len(group.members) == members and held == set(range(partitions)) and epochs_settled
