"""Classic groups as stored: the group record written for a group and the group rebuilt from
it (docs/groups.md#loading)."""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.core.classic.group import SESSION_TIMER, ClassicGroup, Member
from coordinator.core.shared_values import shared_support
from coordinator.core.state import GroupState
from storage.records import GroupMetadataRecord, MemberRecord


def group_record(group: ClassicGroup, assignments: Mapping[str, bytes]) -> GroupMetadataRecord:
    protocol = group.protocol_name
    members = tuple(
        MemberRecord(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms,
            subscription=m.metadata(protocol) if protocol is not None else b"",
            assignment=assignments.get(m.member_id, b""),
        )
        for m in group.members.values()
    )
    return GroupMetadataRecord(
        group_id=group.group_id,
        protocol_type=group.protocol_type,
        generation_id=group.generation_id,
        protocol_name=protocol,
        leader_id=group.leader_id,
        state_ms=-1 if group.state_ms is None else group.state_ms,
        members=members,
    )


def group_from_record(record: GroupMetadataRecord) -> ClassicGroup:
    """docs/groups.md#loading: Stable at the persisted generation with its members, or Empty without members.

    The members go straight into the group (what ``add_member`` would leave for a member
    without a parked JoinGroup supporting only the group's protocol), and the subscribed topics
    are parsed when first read (docs/performance.md#restart-decoding)."""
    protocol = record.protocol_name or ""
    group_id = record.group_id
    protocol_type = record.protocol_type or ""
    group = ClassicGroup(
        group_id,
        state=GroupState.STABLE if record.members else GroupState.EMPTY,
        state_ms=record.state_ms if record.state_ms >= 0 else None,
        generation_id=record.generation_id,
        protocol_type=record.protocol_type or None,
        protocol_name=record.protocol_name,
        leader_id=record.leader_id,
    )
    members = group.members
    for m in record.members:
        member_id = m.member_id
        instance_id = m.group_instance_id
        if instance_id is not None:
            if instance_id in group.static_members:
                raise ValueError(f"static member {instance_id} is already in group {group_id}")
            group._set_static_member(instance_id, member_id)
        members[member_id] = Member(
            member_id,
            instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms if m.rebalance_timeout_ms >= 0 else m.session_timeout_ms,
            m.session_timeout_ms,
            protocol_type,
            ((protocol, m.subscription),),
            (SESSION_TIMER, group_id, member_id),
            m.assignment,
        )
    if record.members:
        group._support = shared_support(((protocol, len(record.members)),))
    if group.leader_id not in members:
        group.leader_id = next(iter(members), None)
    group.keep_subscriptions_unparsed()
    return group
