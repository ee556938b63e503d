"""Answers for group requests that arrive while the coordinator is still loading its state.

Kafka answers COORDINATOR_LOAD_IN_PROGRESS (14, retriable) for a group whose partition is
loading, with two exceptions kept from the Scala coordinator (docs/groups.md, "Loading"):
Heartbeat succeeds blindly (members of a Stable group must not be kicked out by a coordinator
restart) and SyncGroup answers REBALANCE_IN_PROGRESS (old clients do not understand 14 there;
the rebalance in flight was lost anyway, so the member rejoins). JoinGroup echoes the member id.
"""

from __future__ import annotations

from typing import Any

from protocol.apis import ApiKey
from protocol.error_responses import error_response, join_group_error
from protocol.errors import ErrorCode
from protocol.messages.heartbeat import HeartbeatResponse
from protocol.messages.sync_group import SyncGroupResponse

LOADING = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def load_in_progress_response(api_key: int, version: int, request: Any) -> Any:
    """The response to a group request (a route with ``groups``, coordinator/api/table.py)
    received while loading."""
    if api_key == ApiKey.HEARTBEAT:
        return HeartbeatResponse(error_code=ErrorCode.NONE)
    if api_key == ApiKey.SYNC_GROUP:
        return SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
    if api_key == ApiKey.JOIN_GROUP:
        return join_group_error(version, LOADING, request.member_id)
    return error_response(api_key, version, request, LOADING)
