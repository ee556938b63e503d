"""Which handler answers which API: the routes the pure layers serve by themselves.

Fetch (it waits on a timer), DeleteTopics (it also removes the topics' offsets) and the SASL APIs
(they drive the connection's authentication) need the runtime; the server adds their routes.
"""

from __future__ import annotations

from coordinator.api.authz import install_security_disabled
from coordinator.api.config_resources import ConfigResources
from coordinator.api.expected_identity import expected_identity_check
from coordinator.api.routes import Routes
from coordinator.api.shard_gate import install_shard_gate
from coordinator.api.topics import KnownTopics
from coordinator.api.transactions import add_transaction_routes
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
from protocol.messages.sync_group import SyncGroupRequest


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

    routes.add(ApiKey.JOIN_GROUP, JoinGroupRequest, coordinator.join_group)
    routes.add(ApiKey.SYNC_GROUP, SyncGroupRequest, coordinator.sync_group)
    routes.add(ApiKey.HEARTBEAT, HeartbeatRequest, coordinator.heartbeat)
    routes.add(ApiKey.LEAVE_GROUP, LeaveGroupRequest, coordinator.leave_group)
    routes.add(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, coordinator.commit_offsets)
    routes.add(ApiKey.OFFSET_FETCH, OffsetFetchRequest, coordinator.fetch_offsets)
    routes.add(ApiKey.LIST_GROUPS, ListGroupsRequest, coordinator.list_groups)
    routes.add(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, coordinator.handle)
    routes.add(ApiKey.DELETE_GROUPS, DeleteGroupsRequest, coordinator.delete_groups)
    routes.add(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, coordinator.delete_offsets)
    # The APIs one kind of group serves on its own (GroupKind.request_handlers).
    routes.add(ApiKey.CONSUMER_GROUP_HEARTBEAT, ConsumerGroupHeartbeatRequest, coordinator.handle)
    routes.add(ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest, coordinator.handle)
    configs = ConfigResources(
        coordinator.config, coordinator.group_configs, lambda: cluster.node.node_id, cluster.topics.get
    )
    routes.add(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, configs.describe)
    routes.add(ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest, configs.incremental_alter)

    add_transaction_routes(routes, coordinator)

    known = KnownTopics(cluster)
    routes.wrap(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, known.commit_offsets)
    routes.wrap(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, known.delete_offsets)

    install_shard_gate(routes, cluster.shard_map)
    install_security_disabled(routes)
    return routes
