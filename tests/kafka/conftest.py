"""Kafka 4.4 beside us: the session broker is Kafka's own coordinator, and our gateway in front of
that same broker is ours. Topics (and their records) are the broker's, so both coordinators see the
same partitions and end offsets; the groups are each coordinator's own, so a scenario uses the same
group names on both sides and the outputs compare line for line."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.kafka_broker import KafkaCluster
from tests.support.server import ServerProcess, start_server

_names = itertools.count()


@dataclass(frozen=True)
class Sides:
    """The two bootstraps a scenario runs against."""

    kafka: str
    ours: str

    def items(self) -> list[tuple[str, str]]:
        return [("kafka", self.kafka), ("ours", self.ours)]


# Our group settings where the session broker's differ from the defaults (tests/support/kafka_broker.py):
# the same heartbeat interval and bounds, so that described configs and timings compare.
KAFKA_ALIGNED_SETTINGS = {
    "group-consumer-heartbeat-interval-ms": "500",
    "group-consumer-min-heartbeat-interval-ms": "500",
    "group-consumer-min-session-timeout-ms": "1000",
    "group-min-session-timeout-ms": "1000",
    "group-share-heartbeat-interval-ms": "500",
    "group-share-min-heartbeat-interval-ms": "500",
    "group-share-min-session-timeout-ms": "1000",
    "group-initial-rebalance-delay-ms": "0",
    # The streams group settings the session broker sets, and Kafka's initial rebalance delay.
    "group-streams-heartbeat-interval-ms": "500",
    "group-streams-min-heartbeat-interval-ms": "500",
    "group-streams-min-session-timeout-ms": "1000",
    "group-streams-initial-rebalance-delay-ms": "3000",
    # Kafka's default: an empty group without offsets is removed at the next check, so both keep
    # it as long (the tests' usual 1 s would race with the scenarios).
    "offsets-retention-check-interval-ms": "600000",
    # Kafka tells every member the configured interval; ours shortens it around hand-overs by
    # default (docs/kip848-handover.md).
    "group-consumer-heartbeat-policy": "kafka",
}


@pytest.fixture(scope="session")
def gateway_on_kafka(kafka_broker: KafkaCluster) -> Iterator[ServerProcess]:
    """Our coordinator as a gateway in front of the session Kafka broker."""
    gateway = start_server(
        "memory://",
        {
            "upstream-bootstrap-servers": kafka_broker.bootstrap,
            "upstream-metadata-refresh-ms": "500",
            **KAFKA_ALIGNED_SETTINGS,
        },
    )
    try:
        yield gateway
    finally:
        gateway.stop()


@pytest.fixture(scope="session")
def sides(kafka_broker: KafkaCluster, gateway_on_kafka: ServerProcess) -> Sides:
    return Sides(kafka=kafka_broker.bootstrap, ours=gateway_on_kafka.bootstrap)


@pytest.fixture(scope="session")
def standalone_beside_kafka(kafka_broker: KafkaCluster) -> Iterator[ServerProcess]:
    """Our coordinator standalone (memory storage, no upstream): no records, its own topics."""
    server = start_server("memory://", KAFKA_ALIGNED_SETTINGS)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["gateway", "standalone"])
def any_sides(request: pytest.FixtureRequest, kafka_broker: KafkaCluster) -> Sides:
    """Kafka beside our gateway, or beside our standalone server: for scenarios that need no
    records (a standalone coordinator stores none)."""
    fixture = "gateway_on_kafka" if request.param == "gateway" else "standalone_beside_kafka"
    ours: ServerProcess = request.getfixturevalue(fixture)
    return Sides(kafka=kafka_broker.bootstrap, ours=ours.bootstrap)


@pytest.fixture
def unique() -> str:
    """A name prefix no other test of the session uses (groups and topics live for the session)."""
    return f"t{next(_names)}"


# The group configs' values when nothing overrides them, on both sides (Kafka's default session
# timeout; the test broker's and our heartbeat interval).
GROUP_CONFIG_DEFAULTS = {
    "consumer.session.timeout.ms": "45000",
    "consumer.heartbeat.interval.ms": "500",
    "streams.num.standby.replicas": "0",
    "streams.initial.rebalance.delay.ms": "3000",
    "streams.assignment.interval.ms": "1000",
}
