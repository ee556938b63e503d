"""Answers for group requests that arrive while the coordinator is still loading its state.

Kafka answers COORDINATOR_LOAD_IN_PROGRESS (14, retriable) for a group whose partition is
loading, with two exceptions kept from the Scala coordinator (behaviour.md §9.2): Heartbeat
succeeds blindly (members of a Stable group must not be kicked out by a coordinator restart)
and SyncGroup answers REBALANCE_IN_PROGRESS (old clients do not understand 14 there; the
rebalance in flight was lost anyway, so the member rejoins).
"""

from __future__ import annotations

from typing import Any

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from protocol.messages.consumer_group_describe import DescribedGroup as ConsumerGroupDescribedGroup
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsResponse
from protocol.messages.describe_groups import DescribedGroup, DescribeGroupsResponse
from protocol.messages.heartbeat import HeartbeatResponse
from protocol.messages.join_group import JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupResponse
from protocol.messages.list_groups import ListGroupsResponse
from protocol.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from protocol.messages.offset_delete import OffsetDeleteResponse
from protocol.messages.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from protocol.messages.sync_group import SyncGroupResponse

LOADING = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

GROUP_APIS = frozenset(
    {
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.LIST_GROUPS,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
    }
)


def load_in_progress_response(api_key: int, version: int, request: Any) -> Any:
    """The response to a group request received while loading."""
    if api_key == ApiKey.HEARTBEAT:
        return HeartbeatResponse(error_code=ErrorCode.NONE)
    if api_key == ApiKey.SYNC_GROUP:
        return SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
    if api_key == ApiKey.JOIN_GROUP:
        return JoinGroupResponse(
            error_code=LOADING,
            generation_id=-1,
            protocol_name=None if version >= 7 else "",
            member_id=request.member_id,
        )
    if api_key == ApiKey.LEAVE_GROUP:
        return LeaveGroupResponse(error_code=LOADING)
    if api_key == ApiKey.OFFSET_COMMIT:
        return OffsetCommitResponse(
            topics=[
                OffsetCommitResponseTopic(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=[
                        OffsetCommitResponsePartition(p.partition_index, LOADING) for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )
    if api_key == ApiKey.OFFSET_FETCH:
        return _offset_fetch(version, request)
    if api_key == ApiKey.LIST_GROUPS:
        return ListGroupsResponse(error_code=LOADING)
    if api_key == ApiKey.DESCRIBE_GROUPS:
        return DescribeGroupsResponse(
            groups=[DescribedGroup(error_code=LOADING, group_id=g) for g in request.groups]
        )
    if api_key == ApiKey.DELETE_GROUPS:
        return DeleteGroupsResponse(results=[DeletableGroupResult(g, LOADING) for g in request.groups_names])
    if api_key == ApiKey.OFFSET_DELETE:
        return OffsetDeleteResponse(error_code=LOADING)
    if api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        return ConsumerGroupHeartbeatResponse(error_code=LOADING)
    if api_key == ApiKey.CONSUMER_GROUP_DESCRIBE:
        return ConsumerGroupDescribeResponse(
            groups=[ConsumerGroupDescribedGroup(error_code=LOADING, group_id=g) for g in request.group_ids]
        )
    raise ValueError(f"api {api_key} is not a group api")


def _offset_fetch(version: int, request: Any) -> OffsetFetchResponse:
    if version >= 8:
        return OffsetFetchResponse(
            groups=[OffsetFetchResponseGroup(group_id=g.group_id, error_code=LOADING) for g in request.groups]
        )
    if version >= 2:
        return OffsetFetchResponse(error_code=LOADING)
    # v0-1 have no top-level error: the error goes into every requested partition.
    return OffsetFetchResponse(
        topics=[
            OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    OffsetFetchResponsePartition(p, -1, -1, "", LOADING) for p in t.partition_indexes
                ],
            )
            for t in request.topics or []
        ]
    )
