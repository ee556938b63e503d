"""Classic consumer groups with aiokafka 0.14 against the coordinator (issue 3).

aiokafka's admin client can list and describe groups and fetch their offsets; it has no DeleteGroups,
OffsetDelete or alter-offsets call, so those go through raw requests (deletes) and an aiokafka
consumer committing from outside the group (what "alter offsets" does on the wire).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, OffsetAndMetadata, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import CommitFailedError

from tests.integration import clients
from tests.integration.clients import AIOKAFKA, TOPIC, Committed
from tests.support.server import ServerProcess

LIB = AIOKAFKA
pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
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
    # aiokafka 0.14 supports group_instance_id (JoinGroup v5); it does not know error 82
    # FENCED_INSTANCE_ID, which only the replaced (already closed) process could receive here.
    clients.check_static_restart(LIB, server.bootstrap)


def test_offsets_committed_with_metadata_are_read_by_every_library(server: ServerProcess) -> None:
    clients.check_offsets_read_by_all(LIB, server.bootstrap)


class Admin:
    """Blocking wrapper over AIOKafkaAdminClient, one event loop per call."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def _run(self, call: Any) -> Any:
        async def main() -> Any:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10000)
            await admin.start()
            try:
                return await call(admin)
            finally:
                await admin.close()

        return asyncio.run(main())

    def list_groups(self) -> dict[str, str]:
        return dict(self._run(lambda admin: admin.list_consumer_groups()))

    def describe(self, group: str) -> Any:
        # One group per request: aiokafka 0.14 sends DescribeGroups v3 but decodes the answer with
        # the v2 schema, so a second group in the same response would be read misaligned.
        [response] = self._run(lambda admin: admin.describe_consumer_groups([group]))
        [described] = response.groups
        return described

    def offsets(self, group: str) -> dict[int, tuple[int, str]]:
        listed = self._run(lambda admin: admin.list_consumer_group_offsets(group))
        return {tp.partition: (meta.offset, meta.metadata) for tp, meta in listed.items()}


def _commit_from_outside(bootstrap: str, group: str, offsets: dict[int, tuple[int, str]]) -> None:
    async def main() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in offsets])
            await consumer.commit(
                {TopicPartition(TOPIC, p): OffsetAndMetadata(o, m) for p, (o, m) in offsets.items()}
            )
        finally:
            await consumer.stop()

    asyncio.run(main())


def test_admin_list_describe_delete_and_alter(server: ServerProcess) -> None:
    bootstrap, group = server.bootstrap, "admin-aio"
    clients.create_topic(bootstrap, TOPIC)
    clients.create_topic(bootstrap, "unsubscribed", 1)
    clients.commit_offsets(LIB, bootstrap, group, TOPIC, {0: Committed(5, "before")})
    admin = Admin(bootstrap)

    with clients.pool(LIB, bootstrap, group, TOPIC) as workers:
        members = [workers.spawn("m0"), workers.spawn("m1")]
        split = workers.wait_split(members)

        assert admin.list_groups()[group] == "consumer"
        error_code, group_id, state, protocol_type, protocol, described_members = admin.describe(group)[:6]
        assert (error_code, group_id, state, protocol_type, protocol) == (
            0,
            group,
            "Stable",
            "consumer",
            "roundrobin",
        )
        by_client = {m[1]: m for m in described_members}
        assert set(by_client) == {"m0", "m1"}
        for worker in members:
            member_id, _, client_host, metadata, assignment = by_client[worker.name]
            assert member_id == worker.member_id
            assert clients.decode_subscription_topics(metadata) == [TOPIC]
            assert client_host.lstrip("/") == "127.0.0.1"
            assert clients.decode_assignment(assignment) == {TOPIC: split[worker.name]}
        assert admin.offsets(group) == {0: (5, "before")}

        # A live group: not deletable, not committable from outside, subscribed offsets kept.
        assert clients.delete_groups(bootstrap, group) == {group: NON_EMPTY_GROUP}
        with pytest.raises(CommitFailedError):  # the server answers UNKNOWN_MEMBER_ID
            _commit_from_outside(bootstrap, group, {1: (7, "altered")})
        assert clients.offset_delete_errors(bootstrap, group, TOPIC, [0]) == (
            0,
            {0: GROUP_SUBSCRIBED_TO_TOPIC},
        )
        assert clients.offset_delete_errors(bootstrap, group, "unsubscribed", [0]) == (0, {0: 0})
        for worker in members:
            assert worker.close() == 0

    assert admin.describe(group)[2:6] == ("Empty", "consumer", "", [])
    _commit_from_outside(bootstrap, group, {1: (7, "altered")})
    assert admin.offsets(group) == {0: (5, "before"), 1: (7, "altered")}
    assert clients.offset_delete_errors(bootstrap, group, TOPIC, [0]) == (0, {0: 0})
    assert admin.offsets(group) == {1: (7, "altered")}

    assert clients.delete_groups(bootstrap, group) == {group: 0}
    assert clients.delete_groups(bootstrap, group) == {group: GROUP_ID_NOT_FOUND}
    assert admin.describe(group)[:6] == (0, group, "Dead", "", "", [])
    assert group not in admin.list_groups()
    assert admin.offsets(group) == {}


def test_describe_reports_client_host_as_kafka_does(server: ServerProcess) -> None:
    """Kafka stores ``InetAddress.toString()`` of the member's connection: "/127.0.0.1"."""
    clients.create_topic(server.bootstrap, TOPIC)
    with clients.pool(LIB, server.bootstrap, "hosts", TOPIC) as workers:
        workers.wait_split([workers.spawn("h0")])
        [member] = Admin(server.bootstrap).describe("hosts")[5]
        assert member[2] == "/127.0.0.1"
