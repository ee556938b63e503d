"""``share.isolation.level=read_committed`` through the gateway: the gateway reads the upstream
with Fetch isolation level 1 and a share consumer gets the committed transactions' records only,
never an aborted one's (docs/share-groups.md, "Isolation")."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.gateway.conftest import running_gateway
from tests.gateway.share_support import (
    Received,
    all_assigned,
    create_topic,
    poll_once,
    share_consumer,
    wait_for,
)
from tests.gateway.test_share_auto_offset_reset import set_group_config

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.timeout(240)]


def transaction(producer: Producer, topic: str, values: list[str], commit: bool) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value.encode(), partition=0)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)
        producer.abort_transaction(30)


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
def test_read_committed_skips_aborted_transactions(kafka_broker: Any, level: str) -> None:
    """On the Kafka 4.4 upstream, with a transactional producer writing through the gateway."""
    with running_gateway(kafka_broker.bootstrap) as gateway:
        bootstrap = gateway.bootstrap
        topic, group_id = f"txn-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, 1)
        set_group_config(bootstrap, group_id, "share.auto.offset.reset", "earliest")
        set_group_config(bootstrap, group_id, "share.isolation.level", level)
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}", "log_level": 0}
        )
        producer.init_transactions(30)
        transaction(producer, topic, ["c0", "c1"], commit=True)
        transaction(producer, topic, ["a0", "a1"], commit=False)
        transaction(producer, topic, ["c2"], commit=True)

        expected = ["c0", "c1", "c2"] if level == "read_committed" else ["c0", "c1", "a0", "a1", "c2"]
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
                lambda: len(received.records) >= len(expected),
                lambda: poll_once(consumer, received),
                60,
                "records",
            )
            for _ in range(5):
                poll_once(consumer, received)
            consumer.commit_sync()
        finally:
            consumer.close()
        assert received.values() == expected
