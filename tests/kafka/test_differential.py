"""The differential corpus (tests/kafka/corpus/) against Kafka's coordinator and ours: every
scenario at every version of its API that both serve, the answers compared field by field after
normalizing what legitimately differs (member ids, the coordinator's node id and address,
throttle times, error messages). Differences kept on purpose: docs/kafka-differences.md."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from protocol.apis import ApiKey
from tests.kafka.conftest import Sides
from tests.kafka.corpus import PARTITIONS, Names, Scenario, admin, classic, consumer
from tests.kafka.corpus.runner import Run, common_versions, wait_for_topic
from tests.support.java_driver import JavaDriver

pytestmark = pytest.mark.kafka

SCENARIOS: list[Scenario] = [*classic.SCENARIOS, *consumer.SCENARIOS, *admin.SCENARIOS]

RunScenario = Callable[[Scenario, int], tuple[list[Any], list[Any]]]


@pytest.fixture(scope="module")
def versions(sides: Sides) -> dict[ApiKey, range]:
    return common_versions(sides.kafka, sides.ours)


@pytest.fixture(scope="module")
def corpus_topic(sides: Sides, java_driver: JavaDriver) -> str:
    topic = f"corpus-{time.monotonic_ns()}"
    java_driver.produce(sides.kafka, topic, PARTITIONS, 1)
    wait_for_topic(sides.ours, topic)
    return topic


def scenario_runner(sides: Sides, versions: dict[ApiKey, range], topic: str) -> Iterator[RunScenario]:
    """Runs a scenario at one version on Kafka, then on us; closes every connection at the end."""
    runs: list[Run] = []

    def run(scenario: Scenario, version: int) -> tuple[list[Any], list[Any]]:
        prefix = f"{scenario.name}-v{version}-{time.monotonic_ns()}"
        names = Names(group=f"{prefix}-g", topic=topic, other_group=f"{prefix}-other")
        answers = []
        for bootstrap in (sides.kafka, sides.ours):
            side = Run(bootstrap, names, versions)
            runs.append(side)
            answers.append(side.run(scenario.steps(version, names)))
        return answers[0], answers[1]

    yield run
    for side in runs:
        side.close()


def assert_the_same(scenario: Scenario, versions: dict[ApiKey, range], run: RunScenario) -> None:
    """At every version of the scenario's API both serve, the same answers step by step."""
    served = [v for v in versions.get(scenario.api, range(0)) if v in scenario.versions]
    assert served, f"no version of {scenario.api.name} both serve"
    for version in served:
        kafka, ours = run(scenario, version)
        for index, (theirs, mine) in enumerate(zip(kafka, ours, strict=True)):
            assert (version, index, mine) == (version, index, theirs)


@pytest.fixture
def run_scenario(sides: Sides, versions: dict[ApiKey, range], corpus_topic: str) -> Iterator[RunScenario]:
    yield from scenario_runner(sides, versions, corpus_topic)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_same_answers(
    scenario: Scenario, versions: dict[ApiKey, range], run_scenario: RunScenario
) -> None:
    assert_the_same(scenario, versions, run_scenario)
