"""Group requests for shards this node does not answer for (docs/multinode.md#routing).

Kafka's coordinator answers NOT_COORDINATOR for a group whose ``__consumer_offsets`` partition
it does not lead, and COORDINATOR_LOAD_IN_PROGRESS while it loads one; clients then look the
coordinator up again or retry. A request naming several groups (DescribeGroups, DeleteGroups,
OffsetFetch v8+, ConsumerGroupDescribe) passes only when every group is served here: clients
batch such requests per coordinator, so a mixed one is answered NOT_COORDINATOR as a whole.
GROUP config resources (DescribeConfigs, IncrementalAlterConfigs) of a shard being loaded get
COORDINATOR_LOAD_IN_PROGRESS; those of a shard held elsewhere are answered by the server before
this gate (coordinator/server/group_configs_elsewhere.py), else NOT_COORDINATOR.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from coordinator.api.amend import reply
from coordinator.api.config_resources import GROUP, Refusal, screen_alter, screen_describe
from coordinator.api.loading import load_in_progress_response
from coordinator.api.routes import Handler, Routes
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.core.shard_map import ShardMap, ShardStatus
from protocol.apis import ApiKey
from protocol.error_responses import error_response, join_group_error
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.sync_group import SyncGroupRequest

RequestT = TypeVar("RequestT")


def _offset_fetch_groups(req: OffsetFetchRequest) -> list[str]:
    return [group.group_id for group in req.groups] if req.groups else [req.group_id]


def install_shard_gate(routes: Routes, shard_map: ShardMap) -> None:
    """Put the ownership check in front of every API that names groups (ListGroups lists the
    groups held here, which are those of the shards served here)."""
    if shard_map.single_node:
        return

    def gate(api_key: ApiKey, request_type: type[RequestT], groups: Callable[[RequestT], list[str]]) -> None:
        def wrapper(inner: Handler[RequestT]) -> Handler[RequestT]:
            def handle(ctx: RequestContext, req: RequestT) -> Result:
                statuses = {shard_map.status(group_id, ctx.now_ms) for group_id in groups(req)}
                if not statuses or statuses == {ShardStatus.SERVING}:
                    return inner(ctx, req)
                response: Any
                if None in statuses:
                    if isinstance(req, JoinGroupRequest):
                        response = join_group_error(ctx.api_version, ErrorCode.NOT_COORDINATOR, req.member_id)
                    else:
                        response = error_response(api_key, ctx.api_version, req, ErrorCode.NOT_COORDINATOR)
                else:
                    response = load_in_progress_response(api_key, ctx.api_version, req)
                return reply(ctx, response)

            return handle

        routes.wrap(api_key, request_type, wrapper)

    gate(ApiKey.JOIN_GROUP, JoinGroupRequest, lambda r: [r.group_id])
    gate(ApiKey.SYNC_GROUP, SyncGroupRequest, lambda r: [r.group_id])
    gate(ApiKey.HEARTBEAT, HeartbeatRequest, lambda r: [r.group_id])
    gate(ApiKey.LEAVE_GROUP, LeaveGroupRequest, lambda r: [r.group_id])
    gate(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, lambda r: [r.group_id])
    gate(ApiKey.OFFSET_FETCH, OffsetFetchRequest, _offset_fetch_groups)
    gate(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, lambda r: [r.group_id])
    gate(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, lambda r: list(r.groups))
    gate(ApiKey.DELETE_GROUPS, DeleteGroupsRequest, lambda r: list(r.groups_names))
    gate(ApiKey.CONSUMER_GROUP_HEARTBEAT, ConsumerGroupHeartbeatRequest, lambda r: [r.group_id])
    gate(ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest, lambda r: list(r.group_ids))
    refusal = _group_config_refusal(shard_map)
    routes.wrap(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, screen_describe(refusal))
    routes.wrap(ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest, screen_alter(refusal))


def _group_config_refusal(shard_map: ShardMap) -> Refusal:
    """GROUP resources of groups whose shard is not served here (an empty name passes: it is
    refused as invalid wherever it arrives)."""

    def refuse(ctx: RequestContext, resource_type: int, name: str) -> tuple[int, str | None] | None:
        if resource_type != GROUP or not name:
            return None
        status = shard_map.status(name, ctx.now_ms)
        if status is ShardStatus.SERVING:
            return None
        if status is None:
            return ErrorCode.NOT_COORDINATOR, f"group {name} is coordinated by another node"
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None

    return refuse
