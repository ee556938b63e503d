"""``share.auto.offset.reset`` set as a group config (IncrementalAlterConfigs on the GROUP
resource, as kafka-configs does) and in force through the gateway: a share group's partitions
start at the log start with ``earliest`` and at the first record newer than the duration with
``by_duration:`` (docs/share-groups.md, "One ShareFetch")."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin._resource import ResourceType

from tests.gateway.conftest import Upstream
from tests.gateway.share_support import (
    Received,
    all_assigned,
    create_topic,
    poll_once,
    share_consumer,
    wait_for,
)
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HOUR_MS = 3_600_000


def set_group_config(bootstrap: str, group_id: str, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    resource = ConfigResource(
        ResourceType.GROUP,
        group_id,
        incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def produce_at(bootstrap: str, topic: str, values: list[str], timestamp_ms: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0})
    for value in values:
        producer.produce(topic, value=value.encode(), partition=0, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def consume_all(bootstrap: str, group_id: str, topic: str, expected: int) -> list[str]:
    """What one share consumer joining now receives, accepting everything, until ``expected``
    records came and a few more polls brought nothing else."""
    consumer = share_consumer(bootstrap, group_id, topic)
    received = Received()
    try:
        wait_for(
            lambda: all_assigned(bootstrap, group_id, 1, 1),
            lambda: poll_once(consumer, received),
            60,
            "assignment",
        )
        wait_for(
            lambda: len(received.records) >= expected,
            lambda: poll_once(consumer, received),
            60,
            "the records",
        )
        for _ in range(5):
            poll_once(consumer, received)
        consumer.commit_sync()
    finally:
        consumer.close()
    return received.values()


def test_earliest_starts_at_the_log_start(gateway: ServerProcess) -> None:
    bootstrap = gateway.bootstrap
    topic, group_id = f"reset-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    old = [f"old{n}" for n in range(10)]
    produce_at(bootstrap, topic, old, int(time.time() * 1000))
    set_group_config(bootstrap, group_id, "share.auto.offset.reset", "earliest")
    assert sorted(consume_all(bootstrap, group_id, topic, len(old))) == sorted(old)


def test_by_duration_starts_at_the_first_record_newer_than_the_duration(
    upstream: Upstream, gateway: ServerProcess
) -> None:
    """Kafka keeps the producer's timestamps and finds the first record at most an hour old.
    Tansu's ListOffsets by timestamp answers by the time it appended the records (now), so there
    every record is within the hour -- where ``latest`` would have delivered none of them."""
    bootstrap = gateway.bootstrap
    topic, group_id = f"reset-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    now_ms = int(time.time() * 1000)
    ancient = ["ancient0", "ancient1"]
    produce_at(bootstrap, topic, ancient, now_ms - 3 * HOUR_MS)
    recent = ["recent0", "recent1", "recent2"]
    produce_at(bootstrap, topic, recent, now_ms - 60_000)
    set_group_config(bootstrap, group_id, "share.auto.offset.reset", "by_duration:PT1H")
    expected = recent if upstream.kind == "kafka" else ancient + recent
    assert sorted(consume_all(bootstrap, group_id, topic, len(expected))) == sorted(expected)
