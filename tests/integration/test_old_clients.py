"""A client pinned to a 2016 broker version (kafka-python with api_version=(0, 10, 1): Fetch v3,
ListOffsets v1, Produce v2, versions Kafka 4.0 dropped) runs its group here without a refused
request, and its producer gets an answer instead of a closed connection."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import InvalidRequestError
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.producer.produce import ProduceRequest

from tests.support.server import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PINNED = (0, 10, 1)


def test_a_consumer_pinned_to_kafka_0_10_joins_fetches_and_commits(server: ServerProcess) -> None:
    versions = BrokerVersionData(PINNED)
    assert (versions.api_version(FetchRequest), versions.api_version(ProduceRequest)) == (3, 2)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic("pinned", 2, 1)])
    finally:
        admin.close()
    consumer = KafkaConsumer("pinned", bootstrap_servers=server.bootstrap, group_id="pinned-group",
                             api_version=PINNED, enable_auto_commit=False)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert {tp.partition for tp in consumer.assignment()} == {0, 1}
        assert consumer.poll(timeout_ms=500) == {}  # Fetch v3 on empty logs
        consumer.commit()
        assert {consumer.committed(tp) for tp in consumer.assignment()} == {0}
    finally:
        consumer.close()

    producer = KafkaProducer(bootstrap_servers=server.bootstrap, api_version=PINNED, retries=0)
    try:
        with pytest.raises(InvalidRequestError):  # Produce v2, answered as every Produce here
            producer.send("pinned", b"x", partition=0).get(timeout=10)
    finally:
        producer.close()
    refused = [line for line in server.log_lines if "unsupported request" in line]
    assert refused == []
