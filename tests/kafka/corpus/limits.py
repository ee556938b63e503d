"""Group size limits (GROUP_MAX_SIZE_REACHED), run against a Kafka broker and a server of ours
both configured with small limits (tests/kafka/test_differential_limits.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.apis import ApiKey
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from tests.kafka.corpus import Await, Context, Names, Scenario, Step, Until
from tests.kafka.corpus.classic import join_steps, sync

CLASSIC_MAX_SIZE = 1  # group.max.size
CONSUMER_MAX_SIZE = 2  # group.consumer.max.size


def _join(names: Names, member_id: str) -> Callable[[Context], ConsumerGroupHeartbeatRequest]:
    def build(ctx: Context) -> ConsumerGroupHeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(
            group_id=names.group,
            member_id=member_id,
            member_epoch=0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=[names.topic],
            topic_partitions=[],
        )

    return build


def _error_only(answer: Any, names: Names) -> Any:
    """Kafka 4.4 answers a member joining a group that has members before it computes the new
    target assignment; we compute it at once (docs/kafka-differences.md#assignment-timing): here
    only the verdict on each join counts."""
    return answer.error_code


def consumer_group_full(v: int, names: Names) -> list[Step | Await | Until]:
    hb = ApiKey.CONSUMER_GROUP_HEARTBEAT
    return [
        *(
            Step(hb, _join(names, f"limit-member-{i:09d}"), v, only=_error_only)
            for i in range(CONSUMER_MAX_SIZE + 1)
        ),
    ]


def classic_group_full(v: int, names: Names) -> list[Step | Await | Until]:
    return [
        *join_steps(v, names, "a"),
        Step(ApiKey.SYNC_GROUP, lambda c: sync(names, "a", c, ("a",))),
        *join_steps(v, names, "b"),
        Step(ApiKey.DESCRIBE_GROUPS, lambda c: DescribeGroupsRequest(groups=[names.group])),
    ]


SCENARIOS = [
    Scenario("consumer-group-max-size", ApiKey.CONSUMER_GROUP_HEARTBEAT, consumer_group_full),
    Scenario("classic-group-max-size", ApiKey.JOIN_GROUP, classic_group_full),
]
