"""Hypothesis profiles for every property test: ``ci`` (default, quick) and ``long`` (soak); the
session-wide Apache Kafka 4.4 fixtures (``kafka_broker``, ``kafka_cluster``, ``java_driver``).

Registered here, at the root, so a partial run uses the same settings as the full suite.
Select with ``HYPOTHESIS_PROFILE=long pytest tests/protocol`` (tests that set their own example
counts read the variable themselves).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.support.java_driver import JavaDriver
from tests.support.kafka_broker import KafkaCluster, running_kafka

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "long",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaCluster]:
    """One Apache Kafka 4.4 broker (KRaft, combined broker and controller) for the whole test
    session: JVM start-up is the cost, so every ``kafka`` test shares it and names its groups and
    topics uniquely."""
    with running_kafka(size=1) as cluster:
        yield cluster


KAFKA_SASL_USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}


@pytest.fixture(scope="session")
def kafka_authorizer_broker() -> Iterator[KafkaCluster]:
    """One Kafka 4.4 broker with the StandardAuthorizer and a SASL_PLAINTEXT listener (PLAIN,
    KAFKA_SASL_USERS), started only when a test asks for it: the oracle for the gateway's ACLs."""
    with running_kafka(size=1, sasl_users=KAFKA_SASL_USERS) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    """A three-broker Apache Kafka 4.4 cluster (KRaft), for leadership moves and stopped brokers."""
    with running_kafka(size=3) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def java_driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaDriver]:
    """Kafka 4.4's Java clients and tools in one JVM for the whole session (tests/support/java_driver.py)."""
    driver = JavaDriver(tmp_path_factory.mktemp("java-driver") / "driver.log")
    try:
        yield driver
    finally:
        driver.close()
