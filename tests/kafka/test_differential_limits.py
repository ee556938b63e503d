"""The corpus's group size limits (tests/kafka/corpus/limits.py): a Kafka broker of its own with
small ``group.max.size`` / ``group.consumer.max.size`` (the session broker is shared, so it keeps
Kafka's defaults) beside a gateway of ours with the same limits."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from protocol.apis import ApiKey
from tests.kafka.conftest import KAFKA_ALIGNED_SETTINGS, Sides
from tests.kafka.corpus import PARTITIONS, Scenario, limits
from tests.kafka.corpus.runner import common_versions, wait_for_topic
from tests.kafka.test_differential import RunScenario, assert_the_same, scenario_runner
from tests.support.java_driver import JavaDriver
from tests.support.kafka_broker import running_kafka
from tests.support.server import start_server

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def limited_sides() -> Iterator[Sides]:
    kafka_limits = {
        "group.max.size": str(limits.CLASSIC_MAX_SIZE),
        "group.consumer.max.size": str(limits.CONSUMER_MAX_SIZE),
    }
    with running_kafka(1, kafka_limits) as kafka:
        ours = start_server(
            "memory://",
            {
                "upstream-bootstrap-servers": kafka.bootstrap,
                "upstream-metadata-refresh-ms": "500",
                **KAFKA_ALIGNED_SETTINGS,
                "group-max-size": str(limits.CLASSIC_MAX_SIZE),
                "group-consumer-max-size": str(limits.CONSUMER_MAX_SIZE),
            },
        )
        try:
            yield Sides(kafka=kafka.bootstrap, ours=ours.bootstrap)
        finally:
            ours.stop()


@pytest.fixture(scope="module")
def limited_versions(limited_sides: Sides) -> dict[ApiKey, range]:
    return common_versions(limited_sides.kafka, limited_sides.ours)


@pytest.fixture
def run_limited(
    limited_sides: Sides, limited_versions: dict[ApiKey, range], java_driver: JavaDriver
) -> Iterator[RunScenario]:
    topic = f"limits-{time.monotonic_ns()}"
    java_driver.produce(limited_sides.kafka, topic, PARTITIONS, 1)
    wait_for_topic(limited_sides.ours, topic)
    yield from scenario_runner(limited_sides, limited_versions, topic)


@pytest.mark.parametrize("scenario", limits.SCENARIOS, ids=[s.name for s in limits.SCENARIOS])
def test_the_same_answers_at_the_limits(
    scenario: Scenario, limited_versions: dict[ApiKey, range], run_limited: RunScenario
) -> None:
    assert_the_same(scenario, limited_versions, run_limited)
