"""Consumer groups as stored: one group row and one row per member (storage is a state table:
the newest row of each key wins), which rows an operation changed, and members rebuilt from rows."""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.core.consumer.group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    normalize,
)
from storage.records import (
    ConsumerGroupRecord,
    ConsumerMemberRecord,
)


class GroupWrites:
    """Which rows of one group an operation changed (written once, at the end)."""

    __slots__ = ("group_dirty", "members")

    def __init__(self) -> None:
        self.group_dirty = False
        self.members: set[str] = set()

    def group(self) -> None:
        self.group_dirty = True

    def member(self, member_id: str) -> None:
        self.members.add(member_id)


def group_record(group: ConsumerGroup) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(group.group_id, group.group_epoch, group.assignment_epoch, group.state_ms)


def member_record(group: ConsumerGroup, member: ConsumerMember) -> ConsumerMemberRecord:
    return ConsumerMemberRecord(
        group_id=group.group_id,
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=member.subscribed_topic_names,
        subscribed_topic_regex=member.subscribed_topic_regex,
        server_assignor=member.server_assignor,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        state=int(member.state),
        assigned=_as_list(member.assigned),
        pending_revocation=_as_list(member.pending_revocation),
        target=_as_list(group.target.get(member.member_id, {})),
        classic_session_timeout_ms=None if member.classic is None else member.classic.session_timeout_ms,
        classic_protocols=None if member.classic is None else member.classic.protocols,
    )


def member_from_record(m: ConsumerMemberRecord) -> ConsumerMember:
    """A member as stored (its ownership is checked against the group by the loader)."""
    return ConsumerMember(
        member_id=m.member_id,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=m.subscribed_topic_names,
        subscribed_topic_regex=m.subscribed_topic_regex,
        server_assignor=m.server_assignor,
        rebalance_timeout_ms=m.rebalance_timeout_ms,
        member_epoch=m.member_epoch,
        previous_member_epoch=m.previous_member_epoch,
        state=MemberState(m.state),
        assigned=normalize(dict(m.assigned)),
        pending_revocation=normalize(dict(m.pending_revocation)),
        classic=None
        if m.classic_session_timeout_ms is None or not m.classic_protocols
        else ClassicMemberMetadata(m.classic_session_timeout_ms, m.classic_protocols),
    )


def _as_list(assignment: Mapping[str, frozenset[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((topic, tuple(sorted(parts))) for topic, parts in sorted(assignment.items()) if parts)
