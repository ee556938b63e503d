"""Several nodes (docs/multinode.md): FindCoordinator names the owner of the group's shard,
Metadata and DescribeCluster list the live nodes, and group requests for shards served
elsewhere or still loading are answered before the core."""

from __future__ import annotations

from typing import Any

from coordinator.api.config_resources import GROUP
from coordinator.api.table import api_routes
from coordinator.core.cluster import Cluster, NodeIdentity
from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.shard_map import NodeAddress, ShardMap, ShardState
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from storage.records import TopicRecord
from tests.cluster.test_cluster import Sent

SHARDS = 4


def group_in(shard: int) -> str:
    shard_map = ShardMap(SHARDS, 0)
    return next(f"g{i}" for i in range(1000) if shard_map.shard_of(f"g{i}") == shard)


def setup() -> tuple[Cluster, ShardMap, Any]:
    """Node 1 serves shard 0, loads shard 1; node 2 owns shard 2; shard 3 has no live owner."""
    shard_map = ShardMap(SHARDS, 1, valid_until_ms=1000)
    for shard in (0, 1):
        shard_map.move(shard, ShardState.LOADING)
    shard_map.move(0, ShardState.ACTIVE)
    shard_map.owners = {2: 2}
    shard_map.nodes = {1: NodeAddress(1, "one.local", 9001), 2: NodeAddress(2, "two.local", 9002)}
    cluster = Cluster(
        NodeIdentity(1, "one.local", 9001, "cid"),
        auto_create_topics=False,
        num_partitions=1,
        shard_map=shard_map,
    )
    cluster.load([TopicRecord("t", b"\x01" * 16, 3, 1, ())])
    routes = api_routes(cluster, GroupCoordinator(BrokerGroupSettings()))
    return cluster, shard_map, routes


def call(routes: Any, api_key: ApiKey, version: int, request: Any, now_ms: int = 0) -> Any:
    sent = Sent()
    ctx = RequestContext(now_ms, 0, version, "c", "h", sent)
    result = routes.get(api_key).handle(ctx, request)
    for reply_to, response in result.replies:
        reply_to.send(response)
    [response] = sent.responses
    return response


def test_find_coordinator_names_the_owner_of_the_shard() -> None:
    _, _, routes = setup()
    keys = [group_in(shard) for shard in range(SHARDS)]
    response = call(routes, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(coordinator_keys=keys))
    found = [(c.node_id, c.host, c.port, c.error_code) for c in response.coordinators]
    assert found == [
        (1, "one.local", 9001, ErrorCode.NONE),
        (1, "one.local", 9001, ErrorCode.NONE),  # loading here: this node answers for it
        (2, "two.local", 9002, ErrorCode.NONE),
        (-1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    ]


def test_metadata_and_describe_cluster_list_the_live_nodes() -> None:
    _, _, routes = setup()
    metadata = call(routes, ApiKey.METADATA, 12, MetadataRequest(topics=None))
    assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [
        (1, "one.local", 9001),
        (2, "two.local", 9002),
    ]
    assert [p.leader_id for p in metadata.topics[0].partitions] == [1, 2, 1]  # spread, the same on every node
    cluster = call(routes, ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest())
    assert [b.broker_id for b in cluster.brokers] == [1, 2]


def test_group_requests_are_routed_by_shard() -> None:
    _, shard_map, routes = setup()
    served, loading, elsewhere = group_in(0), group_in(1), group_in(2)
    heartbeat = call(
        routes, ApiKey.HEARTBEAT, 4, HeartbeatRequest(group_id=served, generation_id=1, member_id="m")
    )
    assert heartbeat.error_code == ErrorCode.UNKNOWN_MEMBER_ID  # reached the core
    join = call(routes, ApiKey.JOIN_GROUP, 9, JoinGroupRequest(group_id=elsewhere, member_id="m"))
    assert (join.error_code, join.member_id) == (ErrorCode.NOT_COORDINATOR, "m")
    fetch = call(routes, ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=loading, topics=None))
    assert fetch.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    # One group elsewhere fails a request naming several groups as a whole.
    describe = call(routes, ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[served, elsewhere]))
    assert [g.error_code for g in describe.groups] == [ErrorCode.NOT_COORDINATOR] * 2
    # Past the time its leases are known to hold, the node answers for nothing.
    late = call(
        routes, ApiKey.HEARTBEAT, 4, HeartbeatRequest(group_id=served), now_ms=shard_map.valid_until_ms
    )
    assert late.error_code == ErrorCode.NOT_COORDINATOR


def test_group_config_resources_are_answered_by_the_owner_of_the_group() -> None:
    _, _, routes = setup()
    here, loading, elsewhere = group_in(0), group_in(1), group_in(2)
    describe = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(GROUP, elsewhere),
            DescribeConfigsResource(GROUP, here),
            DescribeConfigsResource(GROUP, loading),
            DescribeConfigsResource(4, "1"),  # BROKER: any node
        ]
    )
    response = call(routes, ApiKey.DESCRIBE_CONFIGS, 4, describe)
    assert [(r.resource_name, r.error_code) for r in response.results] == [
        (elsewhere, ErrorCode.NOT_COORDINATOR),
        (here, ErrorCode.NONE),
        (loading, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        ("1", ErrorCode.NONE),
    ]
    assert response.results[1].configs  # described from the loaded overrides
    assert f"group {elsewhere} is coordinated by another node" == response.results[0].error_message
    change = [AlterableConfig("consumer.session.timeout.ms", 0, "50000")]
    alter = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(GROUP, elsewhere, change), AlterConfigsResource(GROUP, here, change)],
        validate_only=True,
    )
    response = call(routes, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)
    assert [(r.resource_name, r.error_code) for r in response.responses] == [
        (elsewhere, ErrorCode.NOT_COORDINATOR),
        (here, ErrorCode.NONE),
    ]
