"""The oracle: the share-consumer scenarios of test_share_delivery.py against Kafka 4.4's own share
groups (no gateway), so that what the gateway does is checked against what Kafka does."""

from __future__ import annotations

import pytest

from tests.gateway.test_share_dead_letters import dead_letter_scenario
from tests.gateway.test_share_delivery import exactly_once, release_and_reject
from tests.support.kafka_broker import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.timeout(240)]


@pytest.mark.parametrize(("consumers", "partitions"), [(3, 1), (5, 2)])
def test_kafka_delivers_every_record_exactly_once_under_accept(
    kafka_broker: KafkaCluster, consumers: int, partitions: int
) -> None:
    exactly_once(kafka_broker.bootstrap, consumers, partitions, "explicit")


def test_kafka_redelivers_released_records_counted_and_never_rejected_ones(
    kafka_broker: KafkaCluster,
) -> None:
    release_and_reject(kafka_broker.bootstrap)


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "headers-only"])
def test_kafka_writes_the_same_dead_letters(kafka_broker: KafkaCluster, copy: bool) -> None:
    """Kafka 4.4's own DLQ (on with share.version 2): the same records, headers and payloads as the
    gateway writes. Kafka writes only to a topic with errors.deadletterqueue.group.enable=true."""
    dead_letter_scenario(
        kafka_broker.bootstrap, copy, {"errors.deadletterqueue.group.enable": "true"}, moves_start=False
    )
