"""Classic consumer groups with kafka-python 3.x against the coordinator (issue 3)."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, OffsetAndMetadata, TopicPartition
from kafka.errors import GroupSubscribedToTopicError, NoError, UnknownMemberIdError

from tests.integration import clients
from tests.integration.clients import KAFKA_PYTHON, TOPIC, Committed
from tests.support.server import ServerProcess

LIB = KAFKA_PYTHON
pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


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


def test_admin_list_describe_delete_and_alter(server: ServerProcess) -> None:
    bootstrap, group = server.bootstrap, "admin-kp"
    clients.create_topic(bootstrap, TOPIC)
    clients.create_topic(bootstrap, "unsubscribed", 1)
    clients.commit_offsets(LIB, bootstrap, group, TOPIC, {0: Committed(5, "before")})
    t0, t1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="admin", request_timeout_ms=10000)
    try:
        with clients.pool(LIB, bootstrap, group, TOPIC) as workers:
            members = [workers.spawn("m0"), workers.spawn("m1")]
            split = workers.wait_split(members)

            listed = {g["group_id"]: g for g in admin.list_groups()}
            assert listed[group]["protocol_type"] == "consumer"
            assert listed[group]["group_state"] == "Stable"
            assert listed[group]["group_type"] == "classic"
            assert group in {g["group_id"] for g in admin.list_groups(states_filter=["stable"])}
            assert group not in {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}

            described = admin.describe_groups([group])[group]
            assert described["error"] is None
            assert described["group_state"] == "Stable"
            assert described["protocol_type"] == "consumer"
            assert described["protocol_data"] == "range"
            by_client = {m["client_id"]: m for m in described["members"]}
            assert set(by_client) == {"m0", "m1"}
            for worker in members:
                member = by_client[worker.name]
                assert member["member_id"] == worker.member_id
                assert member["group_instance_id"] is None
                assert member["client_host"].lstrip("/") == "127.0.0.1"
                assert member["member_metadata"]["topics"] == [TOPIC]
                [assigned] = member["member_assignment"]["assigned_partitions"]
                assert assigned["topic"] == TOPIC
                assert frozenset(assigned["partitions"]) == split[worker.name]

            # A live group: not deletable, its offsets not alterable, subscribed topics not deletable.
            assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
            altered = admin.alter_group_offsets(group, {t1: OffsetAndMetadata(7, "altered", -1)})
            assert altered == {t1: UnknownMemberIdError}
            deleted = admin.delete_group_offsets(group, [t0, TopicPartition("unsubscribed", 0)])
            assert deleted == {t0: GroupSubscribedToTopicError, TopicPartition("unsubscribed", 0): NoError}
            for worker in members:
                assert worker.close() == 0

        empty = admin.describe_groups([group])[group]
        assert (empty["group_state"], empty["members"], empty["protocol_data"]) == ("Empty", [], "")
        assert group in {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}

        assert admin.alter_group_offsets(group, {t1: OffsetAndMetadata(7, "altered", -1)}) == {t1: NoError}
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp: (o.offset, o.metadata) for tp, o in offsets.items()} == {
            t0: (5, "before"),
            t1: (7, "altered"),
        }
        assert admin.delete_group_offsets(group, [t0]) == {t0: NoError}
        assert set(admin.list_group_offsets({group: None})[group]) == {t1}

        assert admin.delete_groups([group]) == {group: "OK"}
        assert admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
        dead = admin.describe_groups([group])[group]
        assert (dead["group_state"], dead["members"]) == ("Dead", [])
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.list_group_offsets({group: None})[group] == {}
    finally:
        admin.close()


def test_describe_reports_client_host_as_kafka_does(server: ServerProcess) -> None:
    """Kafka stores ``InetAddress.toString()`` of the member's connection: "/127.0.0.1"."""
    clients.create_topic(server.bootstrap, TOPIC)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10000)
    try:
        with clients.pool(LIB, server.bootstrap, "hosts", TOPIC) as workers:
            workers.wait_split([workers.spawn("h0")])
            [member] = admin.describe_groups(["hosts"])["hosts"]["members"]
            assert member["client_host"] == "/127.0.0.1"
    finally:
        admin.close()
