"""Classic consumer groups with confluent-kafka (librdkafka, group.protocol=classic) (issue 3)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from tests.integration import clients
from tests.integration.clients import CONFLUENT, TOPIC, Committed
from tests.support.server import ServerProcess

LIB = CONFLUENT
pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

GROUP_SUBSCRIBED_TO_TOPIC = 86


def test_one_consumer_gets_all_partitions(server: ServerProcess) -> None:
    clients.check_one_consumer_gets_all(LIB, server.bootstrap)


def test_three_consumers_split_without_overlap_or_gap(server: ServerProcess) -> None:
    clients.check_three_consumers_split(LIB, server.bootstrap)


def test_closed_consumer_hands_its_partitions_over(server: ServerProcess) -> None:
    clients.check_close_hands_over(LIB, server.bootstrap)


def test_sigkilled_consumer_expires_after_session_timeout(server: ServerProcess) -> None:
    clients.check_sigkill_expires(LIB, server.bootstrap)


def test_static_members_restart_without_rebalance(server: ServerProcess) -> None:
    clients.check_static_restart(LIB, server.bootstrap)


def test_offsets_committed_with_metadata_are_read_by_every_library(server: ServerProcess) -> None:
    clients.check_offsets_read_by_all(LIB, server.bootstrap)


def _listed(admin: AdminClient, **filters: Any) -> dict[str, Any]:
    result = admin.list_consumer_groups(request_timeout=10, **filters).result()
    assert not result.errors, result.errors
    return {listing.group_id: listing for listing in result.valid}


def _describe(admin: AdminClient, group: str) -> Any:
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result()


def _alter(admin: AdminClient, group: str, partitions: list[TopicPartition]) -> dict[int, Any]:
    request = [ConsumerGroupTopicPartitions(group, partitions)]
    [future] = admin.alter_consumer_group_offsets(request, request_timeout=10).values()
    return {tp.partition: tp.error for tp in future.result().topic_partitions}


def _offsets(admin: AdminClient, group: str) -> dict[int, tuple[int, str]]:
    [future] = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=10
    ).values()
    return {tp.partition: (tp.offset, tp.metadata) for tp in future.result().topic_partitions}


def _delete(admin: AdminClient, group: str) -> int:
    [future] = admin.delete_consumer_groups([group], request_timeout=10).values()
    try:
        future.result()
    except KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def test_admin_list_describe_delete_and_alter(server: ServerProcess) -> None:
    bootstrap, group = server.bootstrap, "admin-confluent"
    clients.create_topic(bootstrap, TOPIC)
    clients.create_topic(bootstrap, "unsubscribed", 1)
    clients.commit_offsets(LIB, bootstrap, group, TOPIC, {0: Committed(5, "before")})
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})

    with clients.pool(LIB, bootstrap, group, TOPIC) as workers:
        members = [workers.spawn("m0"), workers.spawn("m1")]
        split = workers.wait_split(members)

        listing = _listed(admin)[group]
        assert listing.state == ConsumerGroupState.STABLE
        assert listing.type == ConsumerGroupType.CLASSIC
        assert listing.is_simple_consumer_group is False
        assert group in _listed(admin, states={ConsumerGroupState.STABLE})
        assert group not in _listed(admin, states={ConsumerGroupState.EMPTY})
        assert group in _listed(admin, types={ConsumerGroupType.CLASSIC})

        described = _describe(admin, group)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        assert described.is_simple_consumer_group is False
        assert described.coordinator.port == server.port
        by_client = {m.client_id: m for m in described.members}
        assert set(by_client) == {"m0", "m1"}
        for worker in members:
            member = by_client[worker.name]
            assert member.member_id == worker.member_id
            assert member.group_instance_id is None
            assert member.host.lstrip("/") == "127.0.0.1"
            owned = {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions}
            assert owned == {(TOPIC, p) for p in split[worker.name]}

        # A live group: not deletable, offsets not alterable, subscribed topics' offsets kept.
        assert _delete(admin, group) == KafkaError.NON_EMPTY_GROUP
        errors = _alter(admin, group, [TopicPartition(TOPIC, 1, 7, metadata="altered")])
        assert errors[1] is not None and errors[1].code() == KafkaError.UNKNOWN_MEMBER_ID
        # confluent-kafka's AdminClient has no OffsetDelete: raw request.
        assert clients.offset_delete_errors(bootstrap, group, TOPIC, [0]) == (
            0,
            {0: GROUP_SUBSCRIBED_TO_TOPIC},
        )
        assert clients.offset_delete_errors(bootstrap, group, "unsubscribed", [0]) == (0, {0: 0})
        for worker in members:
            assert worker.close() == 0

    empty = _describe(admin, group)
    assert (empty.state, empty.members) == (ConsumerGroupState.EMPTY, [])
    assert group in _listed(admin, states={ConsumerGroupState.EMPTY})

    assert _alter(admin, group, [TopicPartition(TOPIC, 1, 7, metadata="altered")]) == {1: None}
    assert _offsets(admin, group) == {0: (5, "before"), 1: (7, "altered")}
    assert clients.offset_delete_errors(bootstrap, group, TOPIC, [0]) == (0, {0: 0})
    assert _offsets(admin, group) == {1: (7, "altered")}

    assert _delete(admin, group) == 0
    assert _delete(admin, group) == KafkaError.GROUP_ID_NOT_FOUND
    dead = _describe(admin, group)
    assert (dead.state, dead.members) == (ConsumerGroupState.DEAD, [])
    assert group not in _listed(admin)
    assert _offsets(admin, group) == {}


def test_describe_reports_client_host_as_kafka_does(server: ServerProcess) -> None:
    """librdkafka shows the broker's string as is: Kafka's is "/127.0.0.1"."""
    clients.create_topic(server.bootstrap, TOPIC)
    admin = AdminClient({"bootstrap.servers": server.bootstrap, "broker.address.family": "v4"})
    with clients.pool(LIB, server.bootstrap, "hosts", TOPIC) as workers:
        workers.wait_split([workers.spawn("h0")])
        [member] = _describe(admin, "hosts").members
        assert member.host == "/127.0.0.1"
