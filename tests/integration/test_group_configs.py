"""Group configs with the clients' own admin APIs: confluent-kafka's AdminClient
(incremental_alter_configs / describe_configs on ConfigResource GROUP) and kafka-python's
KafkaAdminClient (GROUP = 32), against a real server on SQLite, across a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType
from kafka.errors import InvalidConfigurationError

from protocol.apis import ApiKey
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from tests.support.server import ServerProcess, start_server
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

SESSION, INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
DYNAMIC_GROUP_CONFIG, DEFAULT_CONFIG = 8, 5


@pytest.fixture
def storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'coordinator.db'}"


@pytest.fixture
def server(storage: str) -> Iterator[ServerProcess]:
    process = start_server(storage)
    try:
        yield process
    finally:
        process.stop()


def _set(admin: AdminClient, group: str, **values: str) -> None:
    entries = [ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
               for name, value in values.items()]  # fmt: skip
    [future] = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]
    ).values()
    future.result(timeout=10)


def _described(admin: AdminClient, group: str) -> dict[str, tuple[str, int, bool]]:
    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    # The consumer group configs (a group also describes the streams ones: docs/streams-groups.md).
    return {
        name: (e.value, int(e.source), e.is_read_only)
        for name, e in future.result(timeout=10).items()
        if name.startswith("consumer.")
    }


def test_confluent_admin_sets_describes_and_deletes_group_configs_which_survive_a_restart(
    server: ServerProcess, storage: str
) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    _set(admin, "billing", consumer_session_timeout_ms="50000", consumer_heartbeat_interval_ms="6000")
    assert _described(admin, "billing") == {
        SESSION: ("50000", DYNAMIC_GROUP_CONFIG, False),
        INTERVAL: ("6000", DYNAMIC_GROUP_CONFIG, False),
    }
    assert _described(admin, "other")[SESSION] == ("45000", DEFAULT_CONFIG, False)

    bad = ConfigEntry(SESSION, "70000", incremental_operation=AlterConfigOpType.SET)
    [future] = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, "billing", incremental_configs=[bad])]
    ).values()
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=10)
    error = refused.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert "must be less than or equal to group.consumer.max.session.timeout.ms" in error.str()

    server.stop()
    restarted = start_server(storage, port=server.port)
    try:
        # Until the group's shard is loaded its configs answer COORDINATOR_LOAD_IN_PROGRESS, which
        # the admin client hands back instead of retrying.
        restarted.wait_loaded()
        admin = AdminClient({"bootstrap.servers": restarted.bootstrap})
        assert _described(admin, "billing")[SESSION] == ("50000", DYNAMIC_GROUP_CONFIG, False)
        delete = ConfigEntry(INTERVAL, None, incremental_operation=AlterConfigOpType.DELETE)
        [future] = admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, "billing", incremental_configs=[delete])]
        ).values()
        future.result(timeout=10)
        assert _described(admin, "billing")[INTERVAL] == ("5000", DEFAULT_CONFIG, False)
    finally:
        restarted.stop()


def test_kafka_python_admin_alters_and_describes_group_configs(server: ServerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        result = admin.alter_configs(
            [KpConfigResource(ConfigResourceType.GROUP, "billing", {SESSION: "55000"})]
        )
        assert result == {"group": {"billing": "OK"}}
        described = admin.describe_configs([KpConfigResource(ConfigResourceType.GROUP, "billing")])
        assert {name: c["value"] for name, c in described["group"]["billing"].items()} == {SESSION: "55000"}
        everything = admin.describe_configs(
            [KpConfigResource(ConfigResourceType.GROUP, "billing")], config_filter="all"
        )
        assert everything["group"]["billing"][INTERVAL]["config_source"] == "DEFAULT_CONFIG"
        refused = admin.alter_configs(
            [KpConfigResource(ConfigResourceType.GROUP, "billing", {INTERVAL: "20000"})]
        )
        message = refused["group"]["billing"]
        assert isinstance(message, str) and InvalidConfigurationError.__name__ in message
        brokers = admin.describe_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
        )
        assert brokers["broker"]["0"]["group.consumer.max.session.timeout.ms"]["value"] == "60000"
    finally:
        admin.close()


def test_a_consumer_group_member_is_told_its_groups_heartbeat_interval(storage: str) -> None:
    server = start_server(storage, {"group-consumer-heartbeat-policy": "kafka"})  # no jitter
    try:
        _heartbeat_interval_is_the_groups(server)
    finally:
        server.stop()


def _heartbeat_interval_is_the_groups(server: ServerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    _set(admin, "g", consumer_heartbeat_interval_ms="7000")
    with WireClient(server.bootstrap) as wire:
        created = wire.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic("t", 1, 1)]))
        assert created.topics[0].error_code == 0
        join = ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="member-1", member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=["t"], topic_partitions=[],
        )  # fmt: skip
        response = wire.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join)
        assert (response.error_code, response.heartbeat_interval_ms) == (0, 7000)
        join.group_id = "another"
        assert wire.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join).heartbeat_interval_ms == 5000
