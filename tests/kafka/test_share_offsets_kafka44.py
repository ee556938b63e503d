"""The share groups' offsets admin APIs against Kafka 4.4's own: AlterShareGroupOffsets,
DescribeShareGroupOffsets (v0 and v1) and DeleteShareGroupOffsets, the same requests to both,
the same answers (docs/share-groups.md, "Admin")."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.support.kafka_broker import KafkaCluster
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka

Step = tuple[Any, ...]


@pytest.fixture(scope="module")
def ours() -> Iterator[ServerProcess]:
    with running_server("memory://") as server:
        server.wait_loaded()
        yield server


def _alter(client: WireClient, group: str, topics: dict[str, dict[int, int]]) -> Any:
    request = AlterShareGroupOffsetsRequest(
        group_id=group,
        topics=[
            AlterShareGroupOffsetsRequestTopic(
                name, [AlterShareGroupOffsetsRequestPartition(p, o) for p, o in sorted(parts.items())]
            )
            for name, parts in topics.items()
        ],
    )
    return client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, request)


def _altered(answer: Any, names: dict[str, str]) -> Step:
    return (
        answer.error_code,
        answer.error_message,
        sorted(
            (names.get(t.topic_name, t.topic_name), t.topic_id != bytes(16), p.partition_index, p.error_code,
             p.error_message)
            for t in answer.responses
            for p in t.partitions
        ),
    )  # fmt: skip


def _describe(client: WireClient, version: int, group: str, topics: dict[str, list[int]] | None) -> Any:
    wanted = (
        None if topics is None else [DescribeShareGroupOffsetsRequestTopic(t, p) for t, p in topics.items()]
    )
    request = DescribeShareGroupOffsetsRequest([DescribeShareGroupOffsetsRequestGroup(group, wanted)])
    return client.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, request).groups[0]


def _described(group: Any, names: dict[str, str]) -> Step:
    return (
        group.error_code,
        group.error_message,
        sorted(
            (names.get(t.topic_name, t.topic_name), t.topic_id != bytes(16), p.partition_index, p.start_offset,
             p.leader_epoch, p.lag, p.error_code)
            for t in group.topics
            for p in t.partitions
        ),
    )  # fmt: skip


def _delete(client: WireClient, group: str, topics: list[str], names: dict[str, str]) -> Step:
    request = DeleteShareGroupOffsetsRequest(group, [DeleteShareGroupOffsetsRequestTopic(t) for t in topics])
    answer = client.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, request)
    return (
        answer.error_code,
        answer.error_message and answer.error_message.replace(group, "G"),
        sorted(
            (names.get(t.topic_name, t.topic_name), t.topic_id != bytes(16), t.error_code, t.error_message)
            for t in answer.responses
        ),
    )


def _until(check: Any, step: Any) -> Any:
    """Kafka initializes a share group's state asynchronously: poll until it shows."""
    deadline = time.monotonic() + 30
    answer = step()
    while not check(answer) and time.monotonic() < deadline:
        time.sleep(0.2)
        answer = step()
    return answer


def _wait_for_topics(client: WireClient, group: str, *topics: str) -> None:
    """Until the group coordinator knows the new topics: Kafka's learns them from its metadata
    image some time after they are created, and answers UNKNOWN_TOPIC_OR_PARTITION until then.
    Probed with an alter of another group's start offsets (a group of its own on both sides)."""
    deadline = time.monotonic() + 30
    while True:
        answer = _alter(client, f"{group}-probe", {t: {0: 0} for t in topics})
        codes = [p.error_code for t in answer.responses for p in t.partitions]
        if answer.error_code == 0 and codes and not any(codes):
            return
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)


def _scenario(bootstrap: str, suffix: str) -> list[Step]:
    topic, other = f"so-{suffix}", f"so-{suffix}-other"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1), NewTopic(other, 1, 1)])
    finally:
        admin.close()
    names = {topic: "T", other: "O", f"{topic}-none": "N"}
    group, consumer = f"{topic}-share", f"{topic}-consumer"
    out: list[Step] = []
    with WireClient(bootstrap) as client:
        _wait_for_topics(client, group, topic, other)
        # On a group id nobody uses: the share group is created.
        for _ in range(50):  # the coordinator may still be loading its partition
            answer = _alter(client, group, {topic: {0: 0, 5: 0}})
            if answer.error_code not in (14, 15, 16):
                break
        out.append(("alter a partition that does not exist", _altered(answer, names)))
        out.append(("delete after a refused alter", _delete(client, group, [topic], names)))
        answer = _alter(client, group, {topic: {0: 0, 1: 0}, f"{topic}-none": {0: 0}})
        out.append(("alter new group", _altered(answer, names)))
        out.append(
            (
                "describe all",
                _described(
                    _until(lambda g: len(g.topics) > 0, lambda: _describe(client, 1, group, None)), names
                ),
            )
        )
        for version in (0, 1):
            named = _describe(client, version, group, {topic: [0, 1], other: [0], f"{topic}-none": [0]})
            out.append((f"describe named v{version}", _described(named, names)))
        out.append(("describe unknown group", _described(_describe(client, 1, f"{group}-none", None), names)))
        out.append(("delete unknown group", _delete(client, f"{group}-none", [topic], names)))
        out.append(("delete", _delete(client, group, [topic, other, f"{topic}-none"], names)))
        out.append(("describe after delete", _described(_describe(client, 1, group, None), names)))
        # A member makes the group non-empty.
        member = str(uuid.uuid4())
        joined = client.request(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            1,
            ShareGroupHeartbeatRequest(
                group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=[topic]
            ),
        )
        out.append(("join", joined.error_code))
        out.append(("alter non-empty", _altered(_alter(client, group, {topic: {0: 0}}), names)))
        out.append(("delete non-empty", _delete(client, group, [topic], names)))
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
        altered = _alter(client, consumer, {topic: {0: 0}})
        out.append(
            ("alter consumer group", (altered.error_code, altered.error_message.replace(consumer, "C")))
        )
        out.append(("delete consumer group", _delete(client, consumer, [topic], {})))
    return out


def test_share_offsets_admin_answers_as_kafka_4_4(kafka_broker: KafkaCluster, ours: ServerProcess) -> None:
    suffix = uuid.uuid4().hex[:8]
    kafka = _scenario(kafka_broker.bootstrap, suffix)
    served = _scenario(ours.bootstrap, suffix)
    differences = [(o, k) for o, k in zip(served, kafka, strict=True) if o != k]
    for ours_step, kafka_step in differences:
        print("OURS ", ours_step)
        print("KAFKA", kafka_step)
    assert not differences
