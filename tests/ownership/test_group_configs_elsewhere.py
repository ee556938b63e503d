"""Group configs answered by every node (docs/multinode.md#group-configs): a node that does not
hold the group's shard describes and alters them through the database, and the owner applies a
change made elsewhere at its next poll."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import streams_group_heartbeat as sgh
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.list_config_resources import ConfigResource as ListedResource
from protocol.messages.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from tests.durability.support import Servers, servers, wait_for
from tests.ownership.test_catalog import describe_group_config, start_node
from tests.ownership.test_nodes import GROUPS, owners
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.timeout(120)]

SESSION, INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
DYNAMIC_GROUP_CONFIG, DEFAULT_CONFIG = 8, 5
NONE = int(ErrorCode.NONE)
POLL_MS = 200
# How long a multi-process state (nodes, PostgreSQL) may take to settle on a loaded machine: the
# conditions are polled, so a passing run never waits this out.
SETTLE_S = 30.0
SETTINGS = {
    "group-coordinator-lease-ms": "3000",
    "group-coordinator-ownership-poll-ms": str(POLL_MS),
    "group-consumer-heartbeat-policy": "kafka",  # heartbeat intervals without jitter
    "group-consumer-min-session-timeout-ms": "5000",  # a session below a stored interval is allowed
}


@pytest.fixture
def nodes() -> Iterator[Servers]:
    with servers() as started:
        yield started


def _two_nodes(nodes: Servers, dsn: str) -> tuple[ServerProcess, ServerProcess, str]:
    """Nodes 1 and 2, and a group whose shard node 2 holds."""
    one, two = start_node(nodes, dsn, 1, SETTINGS), start_node(nodes, dsn, 2, SETTINGS)
    wait_for(lambda: 2 in owners(one, GROUPS).values(), SETTLE_S, "node 2 to own shards")
    group = next(g for g, owner in owners(one, GROUPS).items() if owner == 2)
    # A shard is leased before it is loaded: node 2 answers COORDINATOR_LOAD_IN_PROGRESS till then.
    wait_for(lambda: describe_group_config(two, group)[0] == NONE, SETTLE_S, "node 2 to load the shard")
    return one, two, group


def _described(admin: AdminClient, group: str) -> dict[str, tuple[str, int]]:
    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    # The consumer group configs this test changes (a group also describes the streams ones).
    return {
        name: (e.value, int(e.source))
        for name, e in future.result(timeout=10).items()
        if name.startswith("consumer.")
    }


def _alter(admin: AdminClient, group: str, *entries: ConfigEntry) -> None:
    [future] = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=list(entries))]
    ).values()
    future.result(timeout=10)


def _interval(node: ServerProcess, group: str) -> str | None:
    request = DescribeConfigsRequest([DescribeConfigsResource(32, group, [INTERVAL])])
    with WireClient(node.bootstrap) as client:
        (result,) = client.request(ApiKey.DESCRIBE_CONFIGS, 4, request).results
    return result.configs[0].value if result.configs else None


def _set(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def test_the_admin_client_alters_and_describes_through_a_node_not_owning_the_group(
    nodes: Servers, pg_dsn: str
) -> None:
    one, two, group = _two_nodes(nodes, pg_dsn)
    admin = AdminClient({"bootstrap.servers": one.bootstrap})
    assert _described(admin, group)[SESSION] == ("45000", DEFAULT_CONFIG)
    _alter(admin, group, _set(SESSION, "50000"), _set(INTERVAL, "6000"))
    assert _described(admin, group) == {
        SESSION: ("50000", DYNAMIC_GROUP_CONFIG),
        INTERVAL: ("6000", DYNAMIC_GROUP_CONFIG),
    }
    # Raw requests to the non-owner itself (the admin client may pick either node).
    assert describe_group_config(one, group) == (NONE, "50000")
    wait_for(
        lambda: describe_group_config(two, group) == (NONE, "50000"),
        SETTLE_S,
        "the owner to reload",
    )

    [future] = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[_set(SESSION, "70000")])]
    ).values()
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=10)
    assert refused.value.args[0].name() == "INVALID_CONFIG"


def test_invalid_values_are_refused_by_either_node_against_the_stored_overrides(
    nodes: Servers, pg_dsn: str
) -> None:
    one, two, group = _two_nodes(nodes, pg_dsn)
    with WireClient(one.bootstrap) as client:
        raised = IncrementalAlterConfigsRequest(
            [AlterConfigsResource(32, group, [AlterableConfig(INTERVAL, 0, "9000")])]
        )
        (ok,) = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, raised).responses
        assert ok.error_code == NONE
    # A session timeout below the stored interval: refused whichever node is asked.
    below = IncrementalAlterConfigsRequest(
        [AlterConfigsResource(32, group, [AlterableConfig(SESSION, 0, "8000")])]
    )
    wait_for(lambda: _interval(two, group) == "9000", SETTLE_S, "the owner to reload")
    for node in (one, two):
        with WireClient(node.bootstrap) as client:
            (result,) = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, below).responses
        assert result.error_code == ErrorCode.INVALID_CONFIG, node
        assert result.error_message == f"{SESSION} must be greater than {INTERVAL}"
    # validate_only and a non-numeric value on the non-owner store nothing.
    check = IncrementalAlterConfigsRequest(
        [AlterConfigsResource(32, group, [AlterableConfig(SESSION, 0, "55000")])], validate_only=True
    )
    junk = IncrementalAlterConfigsRequest(
        [AlterConfigsResource(32, group, [AlterableConfig(SESSION, 0, "soon")])]
    )
    with WireClient(one.bootstrap) as client:
        (validated,) = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, check).responses
        (bad,) = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, junk).responses
    assert validated.error_code == NONE and bad.error_code == ErrorCode.INVALID_CONFIG
    assert describe_group_config(one, group) == (NONE, "45000")


def test_the_owner_applies_a_change_made_elsewhere_at_the_members_next_heartbeat(
    nodes: Servers, pg_dsn: str
) -> None:
    one, two, group = _two_nodes(nodes, pg_dsn)
    with WireClient(two.bootstrap) as owner:
        created = owner.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic("t", 1, 1)]))
        assert created.topics[0].error_code == NONE
        join = ConsumerGroupHeartbeatRequest(
            group_id=group, member_id="member-1", member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=["t"], topic_partitions=[],
        )  # fmt: skip
        joined = owner.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join)
        assert (joined.error_code, joined.heartbeat_interval_ms) == (NONE, 5000)
        with WireClient(one.bootstrap) as elsewhere:
            alter = IncrementalAlterConfigsRequest(
                [AlterConfigsResource(32, group, [AlterableConfig(INTERVAL, 0, "7000")])]
            )
            (altered,) = elsewhere.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter).responses
            assert altered.error_code == NONE
        beat = ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=joined.member_id, member_epoch=joined.member_epoch,
        )  # fmt: skip

        def interval() -> int:
            response = owner.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, beat)
            assert response.error_code == NONE
            beat.member_epoch = response.member_epoch
            return int(response.heartbeat_interval_ms)

        wait_for(lambda: interval() == 7000, SETTLE_S, "the owner to apply the new interval")


def test_streams_configs_changed_elsewhere_are_validated_there_and_applied_by_the_owner(
    nodes: Servers, pg_dsn: str
) -> None:
    """The streams.* group configs take the consumer ones' path (docs/streams-groups.md#group-configs)."""
    one, two, group = _two_nodes(nodes, pg_dsn)
    standbys, interval = "streams.num.standby.replicas", "streams.heartbeat.interval.ms"
    with WireClient(one.bootstrap) as elsewhere:
        too_many = IncrementalAlterConfigsRequest(
            [AlterConfigsResource(32, group, [AlterableConfig(standbys, 0, "3")])]
        )
        (refused,) = elsewhere.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, too_many).responses
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.INVALID_CONFIG,
        f"{standbys} must be less than or equal to 2",
    )
    topology = sgh.Topology(epoch=1, subtopologies=[sgh.Subtopology(subtopology_id="0", source_topics=["t"])])
    with WireClient(two.bootstrap) as owner:
        created = owner.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic("t", 1, 1)]))
        assert created.topics[0].error_code == NONE
        join = sgh.StreamsGroupHeartbeatRequest(
            group_id=group, member_id="member-1", member_epoch=0, rebalance_timeout_ms=30000,
            topology=topology, active_tasks=[], standby_tasks=[], warmup_tasks=[], process_id="p1",
        )  # fmt: skip
        joined = owner.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, join)
        assert (joined.error_code, joined.heartbeat_interval_ms) == (NONE, 5000)
        with WireClient(one.bootstrap) as elsewhere:
            alter = IncrementalAlterConfigsRequest(
                [AlterConfigsResource(32, group, [AlterableConfig(interval, 0, "7000")])]
            )
            (altered,) = elsewhere.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter).responses
            assert altered.error_code == NONE
            described = elsewhere.request(
                ApiKey.DESCRIBE_CONFIGS,
                4,
                DescribeConfigsRequest([DescribeConfigsResource(32, group, [interval])]),
            )
            assert [(c.value, c.config_source) for c in described.results[0].configs] == [
                ("7000", DYNAMIC_GROUP_CONFIG)
            ]
        beat = sgh.StreamsGroupHeartbeatRequest(
            group_id=group, member_id="member-1", member_epoch=joined.member_epoch
        )

        def told() -> int:
            response = owner.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, beat)
            assert response.error_code == NONE, response
            beat.member_epoch = response.member_epoch
            return int(response.heartbeat_interval_ms)

        wait_for(lambda: told() == 7000, SETTLE_S, "the owner to apply the streams group's interval")


def test_every_node_lists_the_group_config_resources_of_every_shard(nodes: Servers, pg_dsn: str) -> None:
    """ListConfigResources lists the groups with stored configs, whichever node holds them, as
    every Kafka broker lists those of the cluster metadata (docs/group-configs.md#listing-config-resources)."""
    one, two, group = _two_nodes(nodes, pg_dsn)
    change = AlterConfigsResource(32, group, [AlterableConfig(SESSION, 0, "50000")])
    with WireClient(two.bootstrap) as owner:
        altered = owner.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest([change]))
    assert [r.error_code for r in altered.responses] == [NONE]
    for node in (one, two):
        with WireClient(node.bootstrap) as client:
            listed = client.request(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest([32]))
        assert listed == ListConfigResourcesResponse(config_resources=[ListedResource(group, 32)]), node.port
