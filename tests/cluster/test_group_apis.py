"""The group APIs are declared once, by the routes that name groups (coordinator/api/table.py):
the loading answers, the shard gate and the gateway's own list follow them."""

from __future__ import annotations

from coordinator.api.routes import Routes
from coordinator.api.table import api_routes
from coordinator.core.cluster import Cluster, NodeIdentity
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.shard_map import ShardMap
from coordinator.gateway.versions import SERVED_HERE
from protocol.apis import ApiKey

CONFIG_APIS = {ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS}


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
    assert routes.group_apis == {
        ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH, ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE, *CONFIG_APIS,
    }  # fmt: skip


def test_the_gateway_serves_every_group_api_itself() -> None:
    # The config APIs are forwarded unless they name GROUP resources (docs/gateway.md).
    assert _routes().group_apis - CONFIG_APIS <= SERVED_HERE
