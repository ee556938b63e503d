"""Group requests for shards this node does not answer for (docs/multinode.md#routing).

Kafka's coordinator answers NOT_COORDINATOR for a group whose ``__consumer_offsets`` partition
it does not lead, and COORDINATOR_LOAD_IN_PROGRESS while it loads one; clients then look the
coordinator up again or retry. A request naming several groups (DescribeGroups, DeleteGroups,
OffsetFetch v8+, ConsumerGroupDescribe) passes only when every group is served here: clients
batch such requests per coordinator, so a mixed one is answered NOT_COORDINATOR as a whole.
GROUP config resources (DescribeConfigs, IncrementalAlterConfigs) of a shard being loaded get
COORDINATOR_LOAD_IN_PROGRESS; those of a shard held elsewhere are answered by the server before
this gate (coordinator/server/group_configs_elsewhere.py), else NOT_COORDINATOR.

A single node (SQLite, memory) answers for every shard but loads them in the background after it
starts serving (docs/performance.md#loading-in-the-background): a request for a group of a shard
not loaded yet gets COORDINATOR_LOAD_IN_PROGRESS and moves that shard to the front of the queue;
ListGroups, which lists every group, gets COORDINATOR_LOAD_IN_PROGRESS until the last shard is
loaded (as Kafka's coordinator while any of its partitions loads); GROUP config requests never
reach the gate for a shard not loaded yet (the dispatcher holds them until it is). Once
everything is loaded the gate passes requests straight through.
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
from coordinator.core.shard_map import ShardMap, ShardState
from protocol.apis import ApiKey
from protocol.error_responses import error_response, join_group_error
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.list_groups import ListGroupsRequest

RequestT = TypeVar("RequestT")

# Group APIs the gate screens on their own terms: ListGroups names no group (on a single node it
# waits for every shard); the config APIs are screened per GROUP resource.
_GATED_APART = frozenset({ApiKey.LIST_GROUPS, ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS})


def install_shard_gate(routes: Routes, shard_map: ShardMap) -> None:
    """Put the ownership check in front of every API that names groups (ListGroups lists the
    groups held here, which are those of the shards served here; on a single node it waits for
    every shard)."""
    single = shard_map.single_node

    def gate(api_key: ApiKey, request_type: type[RequestT], groups: Callable[[RequestT], list[str]]) -> None:
        def wrapper(inner: Handler[RequestT]) -> Handler[RequestT]:
            def handle(ctx: RequestContext, req: RequestT) -> Result:
                if single and not shard_map.loading:
                    return inner(ctx, req)
                names = groups(req)
                if len(names) == 1 and shard_map.status(names[0], ctx.now_ms) is ShardState.ACTIVE:
                    return inner(ctx, req)  # the common case on several nodes: no set built
                statuses = {shard_map.status(group_id, ctx.now_ms) for group_id in names}
                if not statuses or statuses == {ShardState.ACTIVE}:
                    return inner(ctx, req)
                response: Any
                if None in statuses:
                    if isinstance(req, JoinGroupRequest):
                        response = join_group_error(ctx.api_version, ErrorCode.NOT_COORDINATOR, req.member_id)
                    else:
                        response = error_response(api_key, ctx.api_version, req, ErrorCode.NOT_COORDINATOR)
                else:
                    for group_id in names:
                        shard_map.want(group_id)
                    response = load_in_progress_response(api_key, ctx.api_version, req)
                return reply(ctx, response)

            return handle

        routes.wrap(api_key, request_type, wrapper)

    for route in list(routes):
        if route.groups is not None and route.api_key not in _GATED_APART:
            gate(route.api_key, route.request_type, route.groups)
    if single:
        routes.wrap(ApiKey.LIST_GROUPS, ListGroupsRequest, _until_loaded(shard_map))
    refusal = _group_config_refusal(shard_map)
    routes.wrap(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, screen_describe(refusal))
    routes.wrap(ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest, screen_alter(refusal))


def _until_loaded(shard_map: ShardMap) -> Callable[[Handler[ListGroupsRequest]], Handler[ListGroupsRequest]]:
    def wrapper(inner: Handler[ListGroupsRequest]) -> Handler[ListGroupsRequest]:
        def handle(ctx: RequestContext, req: ListGroupsRequest) -> Result:
            if shard_map.loading:
                return reply(ctx, load_in_progress_response(ApiKey.LIST_GROUPS, ctx.api_version, req))
            return inner(ctx, req)

        return handle

    return wrapper


def _group_config_refusal(shard_map: ShardMap) -> Refusal:
    """GROUP resources of groups whose shard is not served here (an empty name passes: it is
    refused as invalid wherever it arrives)."""

    def refuse(ctx: RequestContext, resource_type: int, name: str) -> tuple[int, str | None] | None:
        if resource_type != GROUP or not name:
            return None
        status = shard_map.status(name, ctx.now_ms)
        if status is ShardState.ACTIVE:
            return None
        if status is None:
            return ErrorCode.NOT_COORDINATOR, f"group {name} is coordinated by another node"
        shard_map.want(name)
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None

    return refuse
