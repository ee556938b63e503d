"""Which handler answers which API: the routes the pure layers serve by themselves.

Fetch (it waits on a timer), DeleteTopics (it also removes the topics' offsets) and the SASL APIs
(they drive the connection's authentication) need the runtime; the server adds their routes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from coordinator.api.authz import install_security_disabled
from coordinator.api.config_listing import ConfigListing
from coordinator.api.config_resources import GROUP, ConfigResources
from coordinator.api.expected_identity import expected_identity_check
from coordinator.api.routes import Handler, Routes
from coordinator.api.shard_gate import install_shard_gate
from coordinator.api.topics import KnownTopics
from coordinator.api.transactions import add_transaction_routes, txn_offset_commit_handler
from coordinator.core.cluster import Cluster
from coordinator.core.group_coordinator import GroupCoordinator
from protocol.apis import ApiKey
from protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_config_resources import ListConfigResourcesRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.share_group_describe import ShareGroupDescribeRequest
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest
from protocol.messages.sync_group import SyncGroupRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest


def _one_group(req: Any) -> list[str]:
    return [req.group_id]


def _offset_fetch_groups(req: OffsetFetchRequest) -> list[str]:
    return [group.group_id for group in req.groups] if req.groups else [req.group_id]


def _group_resources(req: DescribeConfigsRequest | IncrementalAlterConfigsRequest) -> list[str]:
    return [r.resource_name for r in req.resources if r.resource_type == GROUP]


# The group APIs, declared once: each API with the request class it decodes to and the groups a
# request names (none for ListGroups; the GROUP resources for the config APIs). The shard gate,
# the loading answers and the gateway's list of APIs it serves itself follow this table
# (docs/architecture.md); a new kind of group adds its APIs here.
GROUP_ROUTES: Final[dict[ApiKey, tuple[type[Any], Callable[[Any], list[str]]]]] = {
    ApiKey.JOIN_GROUP: (JoinGroupRequest, _one_group),
    ApiKey.SYNC_GROUP: (SyncGroupRequest, _one_group),
    ApiKey.HEARTBEAT: (HeartbeatRequest, _one_group),
    ApiKey.LEAVE_GROUP: (LeaveGroupRequest, _one_group),
    ApiKey.OFFSET_COMMIT: (OffsetCommitRequest, _one_group),
    ApiKey.TXN_OFFSET_COMMIT: (TxnOffsetCommitRequest, _one_group),
    ApiKey.OFFSET_FETCH: (OffsetFetchRequest, _offset_fetch_groups),
    ApiKey.LIST_GROUPS: (ListGroupsRequest, lambda _r: []),
    ApiKey.DESCRIBE_GROUPS: (DescribeGroupsRequest, lambda r: list(r.groups)),
    ApiKey.DELETE_GROUPS: (DeleteGroupsRequest, lambda r: list(r.groups_names)),
    ApiKey.OFFSET_DELETE: (OffsetDeleteRequest, _one_group),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (ConsumerGroupHeartbeatRequest, _one_group),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (ConsumerGroupDescribeRequest, lambda r: list(r.group_ids)),
    ApiKey.SHARE_GROUP_HEARTBEAT: (ShareGroupHeartbeatRequest, _one_group),
    ApiKey.SHARE_GROUP_DESCRIBE: (ShareGroupDescribeRequest, lambda r: list(r.group_ids)),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (
        DescribeShareGroupOffsetsRequest,
        lambda r: [g.group_id for g in r.groups],
    ),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (AlterShareGroupOffsetsRequest, _one_group),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (DeleteShareGroupOffsetsRequest, _one_group),
    ApiKey.STREAMS_GROUP_HEARTBEAT: (StreamsGroupHeartbeatRequest, _one_group),
    ApiKey.STREAMS_GROUP_DESCRIBE: (StreamsGroupDescribeRequest, lambda r: list(r.group_ids)),
    ApiKey.DESCRIBE_CONFIGS: (DescribeConfigsRequest, _group_resources),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (IncrementalAlterConfigsRequest, _group_resources),
}
GROUP_APIS: Final = frozenset(GROUP_ROUTES)
# The group APIs that are also about other resources (brokers, topics): served as group APIs for
# their GROUP resources only.
GROUP_CONFIG_APIS: Final = frozenset({ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS})


def api_routes(cluster: Cluster, coordinator: GroupCoordinator) -> Routes:
    """The cluster view's and the group core's routes, the unknown-topic filter in front of the
    offset writes, and the ACL APIs answering SECURITY_DISABLED until an authorizer is installed."""
    routes = Routes()
    routes.add(ApiKey.API_VERSIONS, ApiVersionsRequest, cluster.api_versions)
    routes.wrap(
        ApiKey.API_VERSIONS,
        ApiVersionsRequest,
        expected_identity_check(lambda _ctx: (cluster.node.cluster_id, cluster.node.node_id)),
    )
    routes.add(ApiKey.METADATA, MetadataRequest, cluster.metadata)
    routes.add(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest, cluster.describe_cluster)
    routes.add(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, cluster.find_coordinator)
    routes.add(ApiKey.CREATE_TOPICS, CreateTopicsRequest, cluster.create_topics)
    routes.add(ApiKey.CREATE_PARTITIONS, CreatePartitionsRequest, cluster.create_partitions)
    routes.add(ApiKey.LIST_OFFSETS, ListOffsetsRequest, cluster.list_offsets)
    routes.add(ApiKey.PRODUCE, ProduceRequest, cluster.produce)

    # The group APIs (GROUP_ROUTES), each served by its handler here.
    handlers: dict[ApiKey, Handler[Any]] = {
        ApiKey.JOIN_GROUP: coordinator.join_group,
        ApiKey.SYNC_GROUP: coordinator.sync_group,
        ApiKey.HEARTBEAT: coordinator.heartbeat,
        ApiKey.LEAVE_GROUP: coordinator.leave_group,
        ApiKey.OFFSET_COMMIT: coordinator.commit_offsets,
        ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit_handler(coordinator),
        ApiKey.OFFSET_FETCH: coordinator.fetch_offsets,
        ApiKey.LIST_GROUPS: coordinator.list_groups,
        ApiKey.DESCRIBE_GROUPS: coordinator.handle,
        ApiKey.DELETE_GROUPS: coordinator.delete_groups,
        ApiKey.OFFSET_DELETE: coordinator.delete_offsets,
        # The APIs one kind of group serves on its own (GroupKind.request_handlers).
        ApiKey.CONSUMER_GROUP_HEARTBEAT: coordinator.handle,
        ApiKey.CONSUMER_GROUP_DESCRIBE: coordinator.handle,
        ApiKey.SHARE_GROUP_HEARTBEAT: coordinator.handle,
        ApiKey.SHARE_GROUP_DESCRIBE: coordinator.handle,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: coordinator.handle,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS: coordinator.handle,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: coordinator.handle,
        ApiKey.STREAMS_GROUP_HEARTBEAT: coordinator.handle,
        ApiKey.STREAMS_GROUP_DESCRIBE: coordinator.handle,
    }
    configs = ConfigResources(
        coordinator.config, coordinator.group_configs, lambda: cluster.node.node_id, cluster.topics.get
    )
    handlers[ApiKey.DESCRIBE_CONFIGS] = configs.describe
    handlers[ApiKey.INCREMENTAL_ALTER_CONFIGS] = configs.incremental_alter
    listing = ConfigListing(
        lambda: sorted(coordinator.group_configs.overrides),
        cluster.broker_ids,
        lambda: sorted(cluster.topics),
    )
    routes.add(ApiKey.LIST_CONFIG_RESOURCES, ListConfigResourcesRequest, listing.list)
    if set(handlers) != GROUP_APIS:
        raise ValueError(f"group APIs without a handler or a route: {set(handlers) ^ GROUP_APIS}")
    for api_key, (request_type, groups) in GROUP_ROUTES.items():
        routes.add(api_key, request_type, handlers[api_key], groups=groups)

    add_transaction_routes(routes)

    known = KnownTopics(cluster)
    routes.wrap(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, known.commit_offsets)
    routes.wrap(ApiKey.TXN_OFFSET_COMMIT, TxnOffsetCommitRequest, known.commit_txn_offsets)
    routes.wrap(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, known.delete_offsets)

    install_shard_gate(routes, cluster.shard_map)
    install_security_disabled(routes)
    return routes
