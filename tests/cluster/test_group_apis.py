"""The group APIs are declared once, by the group routes (coordinator/api/table.py): the route
table, the loading answers, the shard gate and the gateway's own list follow them, and the lists
about part of them name only group APIs."""

from __future__ import annotations

from coordinator.api import shard_gate, validation
from coordinator.api.limits import PAYLOAD_APIS
from coordinator.api.routes import Routes
from coordinator.api.table import GROUP_APIS, GROUP_CONFIG_APIS, GROUP_ROUTES, api_routes
from coordinator.core.cluster import Cluster, NodeIdentity
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.shard_map import ShardMap
from coordinator.gateway.versions import SERVED_HERE
from coordinator.server import metrics
from protocol.apis import ApiKey


def _routes() -> Routes:
    cluster = Cluster(
        NodeIdentity(0, "h", 1, "c"),
        auto_create_topics=False,
        num_partitions=1,
        shard_map=ShardMap.for_one_process(4, 0),
    )
    return api_routes(cluster, GroupCoordinator(BrokerGroupSettings()))


def test_the_routes_that_name_groups_are_the_group_apis() -> None:
    routes = _routes()
    assert routes.group_apis == GROUP_APIS == {
        ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT,
        ApiKey.TXN_OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH, ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE,
        ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.STREAMS_GROUP_HEARTBEAT,
        ApiKey.STREAMS_GROUP_DESCRIBE,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
    }  # fmt: skip
    for api_key, (request_type, _groups) in GROUP_ROUTES.items():
        route = routes.get(api_key)
        assert route is not None and route.request_type is request_type and route.groups is not None


def test_the_gateway_serves_every_group_api_itself() -> None:
    # The config APIs are forwarded unless they name GROUP resources (docs/gateway.md).
    assert GROUP_CONFIG_APIS <= GROUP_APIS
    assert SERVED_HERE & GROUP_APIS == GROUP_APIS - GROUP_CONFIG_APIS


def test_the_lists_about_some_group_apis_name_only_group_apis() -> None:
    assert set(metrics._GROUP_RESULT_APIS) <= GROUP_APIS
    assert set(validation._GROUP_LISTS) <= GROUP_APIS
    assert shard_gate._GATED_APART <= GROUP_APIS
    assert PAYLOAD_APIS - {ApiKey.PRODUCE} <= GROUP_APIS
