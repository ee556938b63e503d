"""Share group membership against Kafka 4.4's own share groups: the same requests to both, the
same error codes and messages (docs/share-groups.md, "Membership").

One difference is deliberate and left out of the comparison: Kafka hands a share group's
partitions out only once the share coordinator has initialized their state (asynchronously: the
first heartbeats of a new group answer epoch 2 with an empty assignment), while this coordinator
is its own share coordinator and assigns at once (epoch 1, the partition in the first answer).
The numbers inside the epoch messages are therefore not compared, only their text.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.share_group_describe import ShareGroupDescribeRequest
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.support.kafka_broker import KafkaCluster
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def ours() -> Iterator[ServerProcess]:
    with running_server("memory://") as server:
        server.wait_loaded()
        yield server


def _scenario(bootstrap: str, topic: str) -> list[tuple[str, int, str | None]]:
    """The same requests against one cluster: (step, error code, error message) of each answer."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        admin.close()
    share, consumer = f"{topic}-share", f"{topic}-consumer"
    member = str(uuid.uuid4())
    out: list[tuple[str, int, str | None]] = []
    with WireClient(bootstrap) as client:

        def share_beat(step: str, group: str, member_id: str, epoch: int, topics: list[str] | None) -> Any:
            request = ShareGroupHeartbeatRequest(
                group_id=group, member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics
            )
            answer = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, request)
            out.append((step, answer.error_code, answer.error_message))
            return answer

        def retrying(call: Callable[[], Any]) -> Any:
            for _ in range(50):  # the coordinator may still be loading its partition
                answer = call()
                if answer.error_code not in (14, 15, 16):
                    return answer
                out.pop()
            raise AssertionError("the group coordinator never became available")

        joined = retrying(lambda: share_beat("join", share, member, 0, [topic]))
        share_beat("steady", share, member, joined.member_epoch, None)
        share_beat("empty member id", share, "", 0, [topic])
        share_beat("no subscription", share, member, 0, None)
        share_beat("bad epoch", share, member, -2, None)
        share_beat("unknown member", share, "not-a-member", 1, None)
        share_beat("unknown group", f"{share}-none", member, 1, None)
        share_beat("epoch ahead", share, member, joined.member_epoch + 1, None)
        client.request(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            ConsumerGroupHeartbeatRequest(
                group_id=consumer,
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=[topic],
                topic_partitions=[],
            ),
        )
        share_beat("consumer group id", consumer, member, 0, [topic])
        cg = client.request(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            ConsumerGroupHeartbeatRequest(
                group_id=share,
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=[topic],
                topic_partitions=[],
            ),
        )
        out.append(("consumer heartbeat on a share group", cg.error_code, cg.error_message))
        described = client.request(
            ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest([share, consumer, f"{share}-none"])
        )
        for group in sorted(described.groups, key=lambda g: g.group_id):
            suffix = group.group_id.removeprefix(topic)
            out.append(
                (
                    f"describe {suffix}",
                    group.error_code,
                    group.error_message and group.error_message.replace(topic, "T"),
                )
            )
            if group.group_id == share:
                out.append(
                    (f"describe {suffix} state {group.group_state}", len(group.members), group.assignor_name)
                )
        for version in (5, 6):
            classic = client.request(ApiKey.DESCRIBE_GROUPS, version, DescribeGroupsRequest([share])).groups[
                0
            ]
            out.append(
                (
                    f"DescribeGroups v{version} {classic.group_state}",
                    classic.error_code,
                    classic.error_message,
                )
            )
        left = share_beat("leave", share, member, -1, None)
        out.append(("left epoch", left.member_epoch, None))
    # The epochs inside messages differ on purpose (see the module docstring).
    return [
        (step, code, None if message is None else re.sub(r"\d+", "N", message.replace(topic, "T")))
        for step, code, message in out
    ]


def test_share_group_membership_answers_as_kafka_4_4(kafka_broker: KafkaCluster, ours: ServerProcess) -> None:
    suffix = uuid.uuid4().hex[:8]
    kafka = _scenario(kafka_broker.bootstrap, f"sg-{suffix}")
    served = _scenario(ours.bootstrap, f"sg-{suffix}")
    differences = [
        (ours_step, theirs) for ours_step, theirs in zip(served, kafka, strict=True) if ours_step != theirs
    ]
    assert not differences
