"""DescribeGroups (v0-5) of classic groups: v3+ authorized operations, v4+ member GroupInstanceId,
v6 GROUP_ID_NOT_FOUND for unknown groups (not served, handled for completeness)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coordinator.core.classic.group import (
    ClassicGroup,
)
from coordinator.core.classic.rebalance import DEAD, STABLE
from coordinator.core.context import RequestContext
from coordinator.core.errors import (
    GROUP_ID_NOT_FOUND,
    NONE,
)
from coordinator.core.group import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_AUTHORIZED_OPERATIONS,
)
from protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)


def describe_groups(
    groups: Mapping[str, ClassicGroup],
    ctx: RequestContext,
    req: DescribeGroupsRequest,
    held_by_another_kind: Callable[[str], bool] = lambda _group_id: False,
) -> DescribeGroupsResponse:
    operations = (
        GROUP_AUTHORIZED_OPERATIONS
        if ctx.api_version >= 3 and req.include_authorized_operations
        else AUTHORIZED_OPERATIONS_OMITTED
    )
    described = [
        _describe_group(
            groups.get(group_id), ctx.api_version, group_id, operations, held_by_another_kind(group_id)
        )
        for group_id in req.groups
    ]
    return DescribeGroupsResponse(groups=described)


def _describe_group(
    group: ClassicGroup | None, version: int, group_id: str, operations: int, other_kind: bool
) -> DescribedGroup:
    if group is None or group.state is DEAD:
        if version >= 6:
            # Kafka's classicGroup(): an id held by a consumer or share group is "not a classic group".
            message = (
                f"Group {group_id} is not a classic group."
                if group is None and other_kind
                else f"Group {group_id} not found."
            )
            return DescribedGroup(
                error_code=GROUP_ID_NOT_FOUND,
                error_message=message,
                group_id=group_id,
                group_state=DEAD.value,
                authorized_operations=operations,
            )
        return DescribedGroup(group_id=group_id, group_state=DEAD.value, authorized_operations=operations)
    protocol = group.protocol_name if group.state is STABLE else None
    members = [
        DescribedGroupMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            # Metadata and assignment only in Stable (docs/groups.md#where-kafkas-two-coordinators-differ).
            member_metadata=m.metadata(protocol) if protocol is not None else b"",
            member_assignment=m.assignment if protocol is not None else b"",
        )
        for m in group.members.values()
    ]
    return DescribedGroup(
        error_code=NONE,
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=protocol or "",
        members=members,
        authorized_operations=operations,
    )
