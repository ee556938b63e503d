"""Which handler answers which API: the routes the pure layers serve by themselves.

Fetch (it waits on a timer), DeleteTopics (it also removes the topics' offsets) and the SASL APIs
(they drive the connection's authentication) need the runtime; the server adds their routes.
"""

from __future__ import annotations

from typing import Any

from coordinator.api.authz import install_security_disabled
from coordinator.api.config_resources import GROUP, ConfigResources
from coordinator.api.expected_identity import expected_identity_check
from coordinator.api.routes import Routes
from coordinator.api.shard_gate import install_shard_gate
from coordinator.api.topics import KnownTopics
from coordinator.core.cluster import Cluster
from coordinator.core.group_coordinator import GroupCoordinator
from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.share_group_describe import ShareGroupDescribeRequest
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from protocol.messages.sync_group import SyncGroupRequest


def _one_group(req: Any) -> list[str]:
    return [req.group_id]


def _offset_fetch_groups(req: OffsetFetchRequest) -> list[str]:
    return [group.group_id for group in req.groups] if req.groups else [req.group_id]


def _group_resources(req: DescribeConfigsRequest | IncrementalAlterConfigsRequest) -> list[str]:
    return [r.resource_name for r in req.resources if r.resource_type == GROUP]


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

    # The group APIs: each names the groups it is about (the shard gate and the loading answers
    # read these; docs/architecture.md).
    routes.add(ApiKey.JOIN_GROUP, JoinGroupRequest, coordinator.join_group, groups=_one_group)
    routes.add(ApiKey.SYNC_GROUP, SyncGroupRequest, coordinator.sync_group, groups=_one_group)
    routes.add(ApiKey.HEARTBEAT, HeartbeatRequest, coordinator.heartbeat, groups=_one_group)
    routes.add(ApiKey.LEAVE_GROUP, LeaveGroupRequest, coordinator.leave_group, groups=_one_group)
    routes.add(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, coordinator.commit_offsets, groups=_one_group)
    routes.add(
        ApiKey.OFFSET_FETCH, OffsetFetchRequest, coordinator.fetch_offsets, groups=_offset_fetch_groups
    )
    routes.add(ApiKey.LIST_GROUPS, ListGroupsRequest, coordinator.list_groups, groups=lambda _r: [])
    routes.add(
        ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, coordinator.handle, groups=lambda r: list(r.groups)
    )
    routes.add(
        ApiKey.DELETE_GROUPS,
        DeleteGroupsRequest,
        coordinator.delete_groups,
        groups=lambda r: list(r.groups_names),
    )
    routes.add(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, coordinator.delete_offsets, groups=_one_group)
    # The APIs one kind of group serves on its own (GroupKind.request_handlers).
    routes.add(
        ApiKey.CONSUMER_GROUP_HEARTBEAT, ConsumerGroupHeartbeatRequest, coordinator.handle, groups=_one_group
    )
    routes.add(
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        ConsumerGroupDescribeRequest,
        coordinator.handle,
        groups=lambda r: list(r.group_ids),
    )
    routes.add(
        ApiKey.SHARE_GROUP_HEARTBEAT, ShareGroupHeartbeatRequest, coordinator.handle, groups=_one_group
    )
    routes.add(
        ApiKey.SHARE_GROUP_DESCRIBE,
        ShareGroupDescribeRequest,
        coordinator.handle,
        groups=lambda r: list(r.group_ids),
    )
    configs = ConfigResources(
        coordinator.config, coordinator.group_configs, lambda: cluster.node.node_id, cluster.topics.get
    )
    routes.add(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, configs.describe, groups=_group_resources)
    routes.add(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        IncrementalAlterConfigsRequest,
        configs.incremental_alter,
        groups=_group_resources,
    )

    known = KnownTopics(cluster)
    routes.wrap(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, known.commit_offsets)
    routes.wrap(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, known.delete_offsets)

    install_shard_gate(routes, cluster.shard_map)
    install_security_disabled(routes)
    return routes
