"""Who is a member of a consumer group: joining (dynamic and static members), leaving, being
fenced, and the group going back to a classic group when its last consumer-protocol member
leaves (docs/groups.md#reconciliation, docs/migration.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordinator.core.consumer.assignment import ConsumerAssignment, ConsumerConversion
from coordinator.core.consumer.group import (
    CG_ASSIGNING,
    JOIN_EPOCH,
    LEAVE_STATIC_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    is_subset,
)
from coordinator.core.consumer.records import GroupWrites
from coordinator.core.consumer.responses import Rejected, error_response, heartbeat_response
from coordinator.core.consumer.timer_keys import join_key, rebalance_key, session_key, sync_key
from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    FENCED_MEMBER_EPOCH,
    GROUP_MAX_SIZE_REACHED,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    consumer_write_error,
)
from coordinator.core.events import (
    MEMBER_JOINED,
    MEMBER_LEFT,
    STATIC_MEMBER_REPLACED,
)
from coordinator.core.members import kafka_client_host, static_member_check
from protocol.messages import consumer_group_heartbeat as cgh
from storage.records import (
    ConsumerGroupTombstone,
)

log = logging.getLogger(__name__)


class ConsumerMembership(ConsumerAssignment):
    """Members joining, leaving and fenced."""

    def _create_group(self, group_id: str, fx: Effects) -> ConsumerGroup:
        if self.registry.holds(group_id):
            converted = self._conversion().to_consumer_group(group_id, fx)
            if converted is not None:
                return self.adopt_upgraded(converted)
        elif self.registry.at_group_limit():
            raise Rejected(GROUP_MAX_SIZE_REACHED, "The coordinator holds group.max.groups groups.")
        group = ConsumerGroup(group_id, state_ms=self.clock.wall_ms)
        group.unwritten_group = True
        self.groups[group_id] = group
        return group

    def _conversion(self) -> ConsumerConversion:
        if self.conversion is None:
            raise RuntimeError("consumer groups built without their conversions")
        return self.conversion

    def adopt_upgraded(self, group: ConsumerGroup) -> ConsumerGroup:
        """A group converted from a classic group joins this kind: its classic members' sessions
        start, and all of it is written with the next write."""
        group.subscription_metadata = self._subscription_metadata(group)
        group.catalog_version = self.catalog.version
        group.unwritten_group = True
        group.unwritten_members = set(group.members)
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.reschedule_session(group, member)
        log.info(
            "group %s: converted from classic to consumer at epoch %d with %d classic members",
            group.group_id,
            group.group_epoch,
            len(group.members),
        )
        return group

    def _downgrade_allowed(self, group: ConsumerGroup, leaving: ConsumerMember) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember: the last consumer-protocol member
        leaves and classic members remain."""
        if leaving.classic is not None or len(group.members) <= 1:
            return False
        if any(m.classic is None for m in group.members.values() if m is not leaving):
            return False
        if not self._online_downgrade_enabled(group):
            return False
        if len(group.members) - 1 > self.config.group_max_size:
            log.info(
                "group %s: cannot downgrade to a classic group: more members than group.max.size",
                group.group_id,
            )
            return False
        return True

    def _online_downgrade_enabled(self, group: ConsumerGroup) -> bool:
        if not self.config.online_downgrade_enabled:
            log.info(
                "group %s: cannot downgrade to a classic group: the online downgrade is disabled",
                group.group_id,
            )
        return self.config.online_downgrade_enabled

    def _fence(
        self,
        ctx: RequestContext | None,
        group: ConsumerGroup,
        member: ConsumerMember,
        why: str,
        cause: str,
        response: object | None,
        fx: Effects,
    ) -> None:
        """A member leaves for good or is fenced; the group converts back to a classic group
        when that leaves only classic members (Kafka's consumerGroupFenceMember)."""
        if not self._downgrade_allowed(group, member):
            records = GroupWrites()
            self.remove_member(group, member, records, why, cause)
            self.finish(ctx, group, records, response, fx)
            return
        self.event(
            group, cause, f"member {member.member_id} {why} at epoch {member.member_epoch}", member.member_id
        )
        reply = None
        if ctx is not None and response is not None:
            reply = (ctx, response, lambda code: error_response(consumer_write_error(code)))
        self.downgrade(group, member.member_id, fx, reply, rebalance=True)

    def downgrade_allowed_on_replacement(self, group: ConsumerGroup, replaced: ConsumerMember) -> bool:
        """Kafka's validateOnlineDowngradeWithReplacedMemberId: a classic member's JoinGroup
        replaced the last consumer-protocol (static) member."""
        if replaced.classic is not None or any(m.classic is None for m in group.members.values()):
            return False
        if not self._online_downgrade_enabled(group):
            return False
        return len(group.members) <= self.config.group_max_size

    def downgrade(
        self,
        group: ConsumerGroup,
        leaving_member_id: str | None,
        fx: Effects,
        reply: tuple[RequestContext, object, Callable[[int], object]] | None,
        rebalance: bool,
    ) -> None:
        """Kafka's convertToClassicGroup: the group becomes a classic group of its classic members
        at the group epoch; it rebalances at once unless a replacing member joined."""
        for member_id in list(group.members):
            self._cancel_member_timers(group.group_id, member_id)
        del self.groups[group.group_id]
        group.dead = True
        record = self._conversion().to_classic_group(group, leaving_member_id or "", fx, rebalance)
        if reply is not None:
            fx.reply(reply[0].reply_to, reply[1], reply[2])
        fx.write([ConsumerGroupTombstone(group.group_id), record])

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        for key in (
            session_key(group_id, member_id),
            rebalance_key(group_id, member_id),
            join_key(group_id, member_id),
            sync_key(group_id, member_id),
        ):
            self.timers.cancel(key)

    def _member_for(
        self,
        ctx: RequestContext,
        group: ConsumerGroup,
        req: cgh.ConsumerGroupHeartbeatRequest,
        records: GroupWrites,
    ) -> tuple[ConsumerMember, bool]:
        """docs/groups.md#reconciliation: capacity, member lookup (dynamic and static), epoch fencing."""
        epoch = req.member_epoch
        member_id = req.member_id
        instance_id = req.instance_id
        member = group.members.get(member_id) if member_id else None
        if epoch != JOIN_EPOCH:
            if member is None:
                raise Rejected(
                    UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
                )
            if instance_id is not None:
                self._check_static(group, member_id, instance_id)
            if epoch > member.member_epoch:
                raise Rejected(
                    FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a greater member epoch ({epoch}) than the one known "
                    f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                    "partitions and rejoin.",
                )
            if epoch < member.member_epoch and (
                epoch != member.previous_member_epoch
                or not is_subset(self._owned(req.topic_partitions), member.assigned)
            ):
                raise Rejected(
                    FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
                    f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                    "partitions and rejoin.",
                )
            return member, False

        # Joining (epoch 0).
        previous_static: ConsumerMember | None = None
        if instance_id is not None:
            static_id = group.static_members.get(instance_id)
            if static_id is not None and static_id != member_id:
                previous_static = group.members[static_id]
                if previous_static.member_epoch != LEAVE_STATIC_EPOCH:
                    raise Rejected(
                        UNRELEASED_INSTANCE_ID,
                        f"Static member {static_id} with instance id {instance_id} is not released yet.",
                    )
        if member is not None:
            # A known member rejoining (it was fenced, or lost its state): it owns nothing now and
            # starts over from epoch 0 with its current target.
            if member.instance_id != instance_id and instance_id is not None:
                self._check_static(group, member_id, instance_id)
            self._release(group, member)
            member.member_epoch = JOIN_EPOCH
            member.previous_member_epoch = -1
            member.state = MemberState.STABLE
            records.member(member_id)
            return member, False
        if previous_static is None and len(group.members) >= self.config.group_consumer_max_size:
            raise Rejected(
                GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config.group_consumer_max_size} members.",
            )
        if not member_id:
            member_id = self.new_member_id()  # v0: the coordinator names the member
        member = ConsumerMember(
            member_id=member_id,
            instance_id=instance_id,
            rack_id=req.rack_id,
            client_id=ctx.client_id,
            client_host=kafka_client_host(ctx.client_host),
            subscribed_topic_names=tuple(req.subscribed_topic_names or ()),
            subscribed_topic_regex=(req.subscribed_topic_regex or None) if ctx.api_version >= 1 else None,
            server_assignor=req.server_assignor,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
        )
        records.member(member_id)
        if previous_static is not None:
            # docs/groups.md#static-members-of-consumer-groups: the new process takes over the departed static member and its assignment.
            self.replace_static(group, previous_static, member, records)
            same = (
                member.subscribed_topic_names == previous_static.subscribed_topic_names
                and member.subscribed_topic_regex == previous_static.subscribed_topic_regex
                and member.server_assignor == previous_static.server_assignor
                and member.rack_id == previous_static.rack_id
            )
            return member, not same
        self.add_member(group, member, ctx, instance_id)
        return member, True

    def add_member(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        ctx: RequestContext,
        instance_id: str | None,
        protocol: str = "",
    ) -> None:
        """A new member joins ``group`` (``protocol``: how it speaks, when not the consumer protocol)."""
        group.members[member.member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member.member_id
        group.state_ms = self.clock.wall_ms
        # A join bumps the group epoch in the same operation: the event carries the state after
        # it (Assigning at the next epoch), not the in-between one (a first member at epoch 0
        # would read Stable at epoch 0).
        self.events.record(
            group.group_id,
            MEMBER_JOINED,
            "consumer",
            CG_ASSIGNING,
            group.group_epoch + 1,
            f"member {member.member_id} joined{protocol} (client {ctx.client_id}"
            f"{f', instance {instance_id}' if instance_id else ''}) from {member.client_host}",
            member.member_id,
            client_id=ctx.client_id,
            client_host=member.client_host,
            instance_id=instance_id,
        )

    @staticmethod
    def _check_static(group: ConsumerGroup, member_id: str, instance_id: str) -> None:
        code = static_member_check(group.static_members, member_id, instance_id)
        if code == UNKNOWN_MEMBER_ID:
            raise Rejected(code, f"Instance id {instance_id} is unknown.")
        if code:
            static_id = group.static_members[instance_id]
            raise Rejected(
                code,
                f"Static member {member_id} with instance id {instance_id} was fenced by member {static_id}.",
            )

    def replace_static(
        self, group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember, records: GroupWrites
    ) -> None:
        group.remove_ownership(old)
        self._forget_member(group, old, records)
        new.assigned = dict(old.assigned)
        new.member_epoch = JOIN_EPOCH
        group.members[new.member_id] = new
        group.static_members[new.instance_id or ""] = new.member_id
        target = group.target.pop(old.member_id, None)
        if target is not None:
            group.target[new.member_id] = target
        group.add_ownership(new)
        self.event(
            group,
            STATIC_MEMBER_REPLACED,
            f"static member {old.member_id} replaced by {new.member_id} (instance {new.instance_id})",
            new.member_id,
            instance_id=new.instance_id,
            replaced_member_id=old.member_id,
        )

    # -- leaving -----------------------------------------------------------------------------

    def _leave(
        self, ctx: RequestContext, group: ConsumerGroup, req: cgh.ConsumerGroupHeartbeatRequest, fx: Effects
    ) -> None:
        """docs/groups.md#leaving: epoch -1 leaves for good; epoch -2 (static) keeps the assignment for the session."""
        if req.instance_id is not None:
            self._check_static(group, req.member_id, req.instance_id)
        member = group.members.get(req.member_id)
        if member is None:
            raise Rejected(
                UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
            )
        records = GroupWrites()
        if req.member_epoch == LEAVE_STATIC_EPOCH:
            group.remove_ownership(member)
            member.pending_revocation = {}
            member.state = MemberState.STABLE
            if member.member_epoch != LEAVE_STATIC_EPOCH:
                member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_STATIC_EPOCH
            group.add_ownership(member)
            self._cancel_rebalance_timer(group, member)
            self.reschedule_session(group, member)
            records.member(member.member_id)
            self.event(
                group, MEMBER_LEFT, f"static member {member.member_id} left temporarily", member.member_id
            )
            response = heartbeat_response(member.member_id, req.member_epoch, 0, None)
            self.finish(ctx, group, records, response, fx)
        else:
            response = heartbeat_response(member.member_id, req.member_epoch, 0, None)
            self._fence(ctx, group, member, "left the group", MEMBER_LEFT, response, fx)

    def _release(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        group.remove_ownership(member)
        member.assigned = {}
        member.pending_revocation = {}
        self._cancel_rebalance_timer(group, member)

    def _forget_member(self, group: ConsumerGroup, member: ConsumerMember, records: GroupWrites) -> None:
        del group.members[member.member_id]
        if (
            member.instance_id is not None
            and group.static_members.get(member.instance_id) == member.member_id
        ):
            del group.static_members[member.instance_id]
        self._cancel_member_timers(group.group_id, member.member_id)
        records.member(member.member_id)  # not in the group any more: written as a tombstone

    def remove_member(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        records: GroupWrites,
        why: str,
        cause: str,
        bump: bool = True,
    ) -> None:
        group.remove_ownership(member)
        self._forget_member(group, member, records)
        group.target.pop(member.member_id, None)
        group.state_ms = self.clock.wall_ms
        self.event(
            group, cause, f"member {member.member_id} {why} at epoch {member.member_epoch}", member.member_id
        )
        if bump:
            self.bump_after_removal(group, records)

    def bump_after_removal(self, group: ConsumerGroup, records: GroupWrites) -> None:
        group.subscription_metadata = self._subscription_metadata(group)
        self._bump(group, records)
        if not group.members:
            # KAFKA-20442: an Empty group has equal epochs and no target.
            group.target.clear()
            group.assignment_epoch = group.group_epoch
