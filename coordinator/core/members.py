"""What the members of every kind of group share: how a member's host is reported, the
protocols a classic-protocol member offers, and the static-membership check (KIP-345)."""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.core.context import RequestContext
from coordinator.core.errors import FENCED_INSTANCE_ID, NONE, UNKNOWN_MEMBER_ID
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupResponse, MemberResponse

# Ordered (name, metadata) pairs, most preferred first, as sent in JoinGroup.
Protocols = tuple[tuple[str, bytes], ...]


def kafka_client_host(host: str) -> str:
    """Kafka reports (and persists) a member's host as Java's InetAddress.toString(): "/10.0.0.1"."""
    return host if not host or host.startswith("/") else "/" + host


def static_member_check(static_members: Mapping[str, str], member_id: str, instance_id: str) -> int:
    """A request naming a group instance id: UNKNOWN_MEMBER_ID when no member holds the id,
    FENCED_INSTANCE_ID when another member does, else NONE."""
    mapped = static_members.get(instance_id)
    if mapped is None:
        return UNKNOWN_MEMBER_ID
    if mapped != member_id:
        return FENCED_INSTANCE_ID
    return NONE


def leave_group_response(version: int, code: int, results: list[MemberResponse]) -> LeaveGroupResponse:
    """LeaveGroup v3+ answers per member; before, the first member error is the top-level error."""
    if version >= 3:
        return LeaveGroupResponse(error_code=code, members=results)
    if code == NONE:
        code = next((r.error_code for r in results if r.error_code != NONE), NONE)
    return LeaveGroupResponse(error_code=code)


def join_rebalance_timeout(ctx: RequestContext, req: JoinGroupRequest) -> int:
    """JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout. A negative value
    from a newer client would make every rebalance time out at once (KAFKA-8653), so it is
    treated the same way."""
    if ctx.api_version == 0 or req.rebalance_timeout_ms < 0:
        return req.session_timeout_ms
    return req.rebalance_timeout_ms
