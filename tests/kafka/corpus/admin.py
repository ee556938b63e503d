"""FindCoordinator, and the group configs (DescribeConfigs, IncrementalAlterConfigs on GROUP)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.apis import ApiKey
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from tests.kafka.corpus import Await, Names, Scenario, Step, Until

GROUP_RESOURCE = 32
SET, DELETE = 0, 1
# The group configs both coordinators serve (docs/kafka-differences.md#group-configs).
SERVED = ["consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"]


def find_coordinator(v: int, names: Names) -> list[Step | Await | Until]:
    if v < 4:
        return [
            Step(ApiKey.FIND_COORDINATOR, lambda c: FindCoordinatorRequest(key=names.group, key_type=0), v)
        ]
    return [
        Step(
            ApiKey.FIND_COORDINATOR,
            lambda c: FindCoordinatorRequest(key_type=0, coordinator_keys=[names.group, names.other_group]),
            v,
        )
    ]


def _describe(names: Names, keys: list[str] | None = SERVED) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=GROUP_RESOURCE, resource_name=names.group, configuration_keys=keys
            )
        ],
        include_synonyms=True,
    )


def _alter(
    names: Names, *changes: tuple[str, int, str | None], validate_only: bool = False
) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=GROUP_RESOURCE,
                resource_name=names.group,
                configs=[
                    AlterableConfig(name=n, config_operation=op, value=value) for n, op, value in changes
                ],
            )
        ],
        validate_only=validate_only,
    )


DEFAULT_SESSION_MS = "45000"  # group.consumer.session.timeout.ms, Kafka's default and ours


def _session_is(value: str) -> Callable[[Any], bool]:
    """Kafka applies a config change through its metadata log: a broker may describe the old value
    for a moment after the change was acknowledged."""

    def done(answer: Any) -> bool:
        return any(
            c.name == "consumer.session.timeout.ms" and c.value == value for c in answer.results[0].configs
        )

    return done


def group_configs(
    describe_version: int | None, alter_version: int | None, names: Names
) -> list[Step | Await | Until]:
    d, a = ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS
    session = "consumer.session.timeout.ms"
    return [
        Step(d, lambda c: _describe(names), describe_version),
        Step(a, lambda c: _alter(names, (session, SET, "50000")), alter_version),
        Until(Step(d, lambda c: _describe(names), describe_version), _session_is("50000")),
        Step(a, lambda c: _alter(names, (session, SET, "40000"), validate_only=True), alter_version),
        Step(a, lambda c: _alter(names, (session, SET, "-1")), alter_version),
        Step(a, lambda c: _alter(names, (session, SET, "abc")), alter_version),
        Step(a, lambda c: _alter(names, ("no.such.config", SET, "1")), alter_version),
        Step(a, lambda c: _alter(names, ("consumer.heartbeat.interval.ms", SET, "60000")), alter_version),
        Step(a, lambda c: _alter(names, (session, DELETE, None)), alter_version),
        Until(Step(d, lambda c: _describe(names), describe_version), _session_is(DEFAULT_SESSION_MS)),
    ]


SCENARIOS = [
    Scenario("find-coordinator", ApiKey.FIND_COORDINATOR, find_coordinator),
    Scenario("group-configs-describe", ApiKey.DESCRIBE_CONFIGS, lambda v, n: group_configs(v, None, n)),
    Scenario("group-configs-alter", ApiKey.INCREMENTAL_ALTER_CONFIGS, lambda v, n: group_configs(None, v, n)),
]
