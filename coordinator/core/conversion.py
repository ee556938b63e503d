"""Online migration: a classic group as a consumer group and back (docs/migration.md).

Kafka's ``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup``, as pure
functions from one group object to a new one; the managers take care of timers, records and
parked requests.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from coordinator.core.classic.group import ClassicGroup, Member, session_key
from coordinator.core.classic.manager import ClassicGroupManager
from coordinator.core.consumer.group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    normalize,
)
from coordinator.core.consumer.manager import ConsumerGroupManager
from coordinator.core.consumer.responses import Rejected
from coordinator.core.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    MalformedConsumerProtocol,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from coordinator.core.effects import Effects
from coordinator.core.errors import GROUP_ID_NOT_FOUND
from coordinator.core.state import GroupState
from storage.records import GroupMetadataRecord, GroupTombstone, TopicRecord

log = logging.getLogger(__name__)


def consumer_group_from_classic(
    classic: ClassicGroup, topics: Mapping[str, TopicRecord], wall_ms: int
) -> ConsumerGroup:
    """Every classic member becomes a Stable member at the generation, owning (and targeted at)
    its last assignment. A member also owns the partitions its last JoinGroup reported as owned
    (ConsumerProtocol v1+) that no assignment gives to another: a cooperative client keeps its
    partitions through a rebalance whose assignments were cleared (Kafka counts only the
    assignments, and would hand those partitions out while the client still holds them).
    Partitions of unknown topics are dropped; a partition claimed twice stays with its first
    claim, assignments before reported ownership.
    Raises MalformedConsumerProtocol when a member's metadata or assignment does not parse."""
    epoch = classic.generation_id
    group = ConsumerGroup(classic.group_id, group_epoch=epoch, assignment_epoch=epoch, state_ms=wall_ms)
    subscriptions = {}
    for m in classic.members.values():
        protocol = classic.protocol_name
        metadata = (
            m.metadata(protocol) if protocol is not None and _supports(m, protocol) else m.protocols[0][1]
        )
        subscriptions[m.member_id] = decode_subscription(metadata)
    claims: dict[tuple[str, int], str] = {}
    for source in ("assignment", "owned"):
        for m in classic.members.values():
            partitions = (
                decode_assignment(m.assignment)
                if source == "assignment"
                else subscriptions[m.member_id].owned
            )
            for topic, parts in partitions.items():
                record = topics.get(topic)
                if record is None:
                    continue
                for p in parts:
                    if p < record.num_partitions:
                        claims.setdefault((topic, p), m.member_id)
    assigned_by_member: dict[str, dict[str, set[int]]] = {m: {} for m in classic.members}
    for (topic, p), member_id in claims.items():
        assigned_by_member[member_id].setdefault(topic, set()).add(p)
    for m in classic.members.values():
        subscription = subscriptions[m.member_id]
        member = ConsumerMember(
            member_id=m.member_id,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=subscription.topics,
            subscribed_topic_regex=None,
            server_assignor=None,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_epoch=epoch,
            previous_member_epoch=epoch,
            state=MemberState.STABLE,
            assigned=normalize(assigned_by_member[m.member_id]),
            classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
        )
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
        group.target[m.member_id] = dict(member.assigned)
        group.add_ownership(member)
    return group


def classic_group_from_consumer(group: ConsumerGroup, leaving_member_id: str, wall_ms: int) -> ClassicGroup:
    """A Stable classic group at the group epoch with every member but the leaving one (all of
    them classic members), each assigned its target assignment in ConsumerProtocol bytes."""
    classic = ClassicGroup(
        group.group_id,
        state=GroupState.STABLE,
        state_ms=wall_ms,
        generation_id=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
    )
    for member_id, member in group.members.items():
        if member_id == leaving_member_id or member.classic is None:
            continue
        classic.add_member(
            Member(
                member_id=member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                session_timeout_ms=member.classic.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=member.classic.protocols,
                session_key=session_key(group.group_id, member_id),
            ),
            None,
            0,
        )
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member_id, classic_member in classic.members.items():
        classic_member.assignment = encode_assignment(
            group.target.get(member_id, {}), classic_member.metadata(classic.protocol_name)
        )
    return classic


def _supports(member: Member, protocol: str) -> bool:
    return any(name == protocol for name, _ in member.protocols)


class ClassicConsumerConversion:
    """The one place that knows both kinds: a classic group becomes a consumer group when a
    consumer-protocol member joins it, and a consumer group goes back when its last
    consumer-protocol member leaves (Kafka's convertToConsumerGroup / convertToClassicGroup)."""

    def __init__(self, classic: ClassicGroupManager, consumer: ConsumerGroupManager) -> None:
        self.classic = classic
        self.consumer = consumer
        self.config = consumer.config
        self.clock = consumer.clock

    def to_consumer_group(self, group_id: str, fx: Effects) -> ConsumerGroup | None:
        classic = self.classic.groups.get(group_id)
        if classic is None:  # held by a kind that does not convert
            raise Rejected(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if classic.members:
            return self._upgrade(classic, fx)
        if classic.pending_members:
            raise Rejected(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        # An empty classic group becomes a consumer group (offsets stay with the id).
        self.classic.release_empty(group_id, fx)
        return None

    def _upgrade_refusal(self, classic: ClassicGroup) -> str | None:
        """Kafka's validateOnlineUpgrade: why the classic group cannot become a consumer group."""
        if not self.config.online_upgrade_enabled:
            return "the online upgrade is disabled"
        if not classic.uses_consumer_protocol():
            return "the group does not use the consumer embedded protocol"
        if len(classic.members) > self.config.group_consumer_max_size:
            return "the group size exceeds the consumer group maximum size"
        return None

    def _upgrade(self, classic: ClassicGroup, fx: Effects) -> ConsumerGroup:
        """A consumer-protocol member joins a classic group with members: the group becomes a
        consumer group that keeps them."""
        group_id = classic.group_id
        why = self._upgrade_refusal(classic)
        if why is not None:
            log.info("group %s: cannot upgrade the classic group to a consumer group: %s", group_id, why)
            raise Rejected(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        try:
            group = consumer_group_from_classic(classic, self.consumer.catalog.topics, self.clock.wall_ms)
        except MalformedConsumerProtocol as exc:
            log.warning("group %s: cannot upgrade the classic group: %s", group_id, exc)
            raise Rejected(
                GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {group_id} to consumer group because the embedded "
                "consumer protocol is malformed.",
            ) from None
        self.classic.release_for_upgrade(classic, fx)
        fx.write([GroupTombstone(group_id)])
        return group

    def to_classic_group(
        self, group: ConsumerGroup, leaving_member_id: str, fx: Effects, rebalance: bool
    ) -> GroupMetadataRecord:
        classic = classic_group_from_consumer(group, leaving_member_id, self.clock.wall_ms)
        return self.classic.adopt_downgraded(classic, fx, rebalance)

    def resolve_stored_twice(self, group_ids: set[str]) -> None:
        """Groups stored as both classic and consumer group: only a conversion whose write failed
        leaves both (docs/migration.md); the type the group changed to last wrote the later
        state time."""
        for group_id in sorted(group_ids):
            classic_ms = self.classic.groups[group_id].state_ms or -1
            if self.consumer.groups[group_id].state_ms >= classic_ms:
                log.warning(
                    "group %s is stored as classic and consumer group; keeping the consumer group", group_id
                )
                del self.classic.groups[group_id]
            else:
                log.warning(
                    "group %s is stored as classic and consumer group; keeping the classic group", group_id
                )
                del self.consumer.groups[group_id]
