"""Classic groups as stored: the group record written for a group and the group rebuilt from
it (docs/groups.md#loading)."""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.core.classic.group import (
    ClassicGroup,
    Member,
    session_key,
)
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
    """docs/groups.md#loading: Stable at the persisted generation with its members, or Empty without members."""
    protocol = record.protocol_name or ""
    group = ClassicGroup(
        record.group_id,
        state=GroupState.STABLE if record.members else GroupState.EMPTY,
        state_ms=record.state_ms if record.state_ms >= 0 else None,
        generation_id=record.generation_id,
        protocol_type=record.protocol_type or None,
        protocol_name=record.protocol_name,
        leader_id=record.leader_id,
    )
    for m in record.members:
        member = Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms
            if m.rebalance_timeout_ms >= 0
            else m.session_timeout_ms,
            session_timeout_ms=m.session_timeout_ms,
            protocol_type=record.protocol_type or "",
            protocols=((protocol, m.subscription),),
            session_key=session_key(record.group_id, m.member_id),
            assignment=m.assignment,
        )
        group.add_member(member, None, 0)
    group.protocol_type = record.protocol_type or None  # add_member set it from the members
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members), None)
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
