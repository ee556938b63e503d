"""Classic-protocol members inside a consumer group (docs/migration.md).

A consumer group keeps serving members that speak JoinGroup / SyncGroup / Heartbeat / LeaveGroup
(Kafka's classicGroupJoinToConsumerGroup and its siblings): a JoinGroup is a full heartbeat of
the consumer protocol (subscription from the ConsumerProtocol metadata, owned partitions for the
revocation handshake) answered at once with the member epoch as generation; SyncGroup hands out
the member's current assignment as ConsumerProtocol bytes; Heartbeat answers REBALANCE_IN_PROGRESS
whenever the member has to rejoin to make progress. The server computes every assignment: a
classic member is never the leader.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from coordinator.core.consumer.group import (
    JOIN_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from coordinator.core.consumer.manager import ConsumerGroupManager
from coordinator.core.consumer.records import GroupWrites
from coordinator.core.consumer.responses import Rejected
from coordinator.core.consumer.timer_keys import join_key, sync_key
from coordinator.core.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    MalformedConsumerProtocol,
    Subscription,
    decode_subscription,
    encode_assignment,
)
from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    FENCED_INSTANCE_ID,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    consumer_write_error,
)
from coordinator.core.events import MEMBER_LEFT, SUBSCRIPTION_CHANGED
from coordinator.core.members import (
    Protocols,
    join_rebalance_timeout,
    kafka_client_host,
    leave_group_response,
    static_member_check,
)
from protocol.error_responses import join_group_error
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    MemberResponse,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

log = logging.getLogger(__name__)


class ClassicMembers:
    """The classic group APIs of a consumer group's classic-protocol members."""

    def __init__(self, consumer: ConsumerGroupManager) -> None:
        self.consumer = consumer
        self.config = consumer.config
        self.timers = consumer.timers
        self.clock = consumer.clock

    # -- JoinGroup -------------------------------------------------------------------------------

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest, fx: Effects) -> None:
        group = self.consumer.groups[req.group_id]
        version = ctx.api_version
        config = self.config
        if (
            not config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= config.group_max_session_timeout_ms
        ):
            fx.reply(ctx.reply_to, join_group_error(version, INVALID_SESSION_TIMEOUT, req.member_id))
            return
        try:
            self._join(ctx, req, group, fx)
        except Rejected as rejected:
            fx.reply(ctx.reply_to, join_group_error(version, rejected.code, req.member_id))

    def _join(self, ctx: RequestContext, req: JoinGroupRequest, group: ConsumerGroup, fx: Effects) -> None:
        consumer = self.consumer
        version = ctx.api_version
        unknown = req.member_id == ""
        member_id = consumer.new_member_id() if unknown else req.member_id
        if len(group.members) >= self.config.group_consumer_max_size and (
            unknown or member_id not in group.members
        ):
            raise Rejected(GROUP_MAX_SIZE_REACHED)
        protocols: Protocols = tuple((p.name, p.metadata) for p in req.protocols)
        if not _supports_protocols(group, req.protocol_type, protocols):
            log.info("group %s: member %s's protocols are not supported", group.group_id, member_id)
            raise Rejected(INCONSISTENT_GROUP_PROTOCOL)
        if unknown and version >= 4 and req.group_instance_id is None:
            # KIP-394: the member rejoins with this id; nothing is kept until then.
            fx.reply(ctx.reply_to, join_group_error(version, MEMBER_ID_REQUIRED, member_id))
            return
        try:
            subscription = decode_subscription(protocols[0][1])
        except MalformedConsumerProtocol as exc:
            log.info(
                "group %s: member %s sent malformed consumer protocol metadata: %s",
                group.group_id,
                member_id,
                exc,
            )
            raise Rejected(INCONSISTENT_GROUP_PROTOCOL) from None

        records = GroupWrites()
        replaced_id = group.static_members.get(req.group_instance_id) if req.group_instance_id else None
        replaced = (
            group.members.get(replaced_id) if replaced_id is not None and replaced_id != member_id else None
        )
        member, changed = self._member_for(ctx, req, group, member_id, subscription, records)
        member.classic = ClassicMemberMetadata(req.session_timeout_ms, protocols)
        member.rebalance_timeout_ms = join_rebalance_timeout(ctx, req)
        member.client_id, member.client_host = ctx.client_id, kafka_client_host(ctx.client_host)
        records.member(member.member_id)
        consumer.update_epochs(group, changed, records)
        consumer.reconcile_member(group, member, subscription.owned, records)
        consumer.events.member_reconciled(group, member.member_id)

        response = JoinGroupResponse(
            error_code=NONE,
            generation_id=member.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=member.classic.protocol_name,
            leader="",
            skip_assignment=False,
            member_id=member.member_id,
            members=[],
        )

        def if_failed(code: int) -> JoinGroupResponse:
            return join_group_error(version, consumer_write_error(code), member_id)

        if replaced is not None and consumer.downgrade_allowed_on_replacement(group, replaced):
            # The last consumer-protocol member was replaced: a classic group again, no rebalance.
            consumer.downgrade(group, None, fx, (ctx, response, if_failed), rebalance=False)
            return
        self.timers.cancel(join_key(group.group_id, member.member_id))
        consumer.reschedule_session(group, member)
        self.timers.schedule(
            sync_key(group.group_id, member.member_id), self.clock.now_ms + member.rebalance_timeout_ms
        )
        consumer.finish(ctx, group, records, response, fx, if_failed)

    def _member_for(
        self,
        ctx: RequestContext,
        req: JoinGroupRequest,
        group: ConsumerGroup,
        member_id: str,
        subscription: Subscription,
        records: GroupWrites,
    ) -> tuple[ConsumerMember, bool]:
        """The joining member (found, created, or replacing a static member) with its new
        subscription; and whether the group epoch must be bumped."""
        consumer = self.consumer
        instance_id = req.group_instance_id
        existing_id = group.static_members.get(instance_id) if instance_id is not None else None
        member = group.members.get(member_id)
        if existing_id is not None and existing_id != member_id:
            # A new process with a known instance id replaces the old member (classic members
            # fence the old one, whatever protocol it used).
            old = group.members[existing_id]
            member = _new_member(ctx, req, member_id, subscription)
            consumer.replace_static(group, old, member, records)
            member.previous_member_epoch = JOIN_EPOCH
            member.subscribed_topic_names = old.subscribed_topic_names
            member.rack_id = old.rack_id
            member.resolved_version = -1
            return member, self._update_subscription(group, member, subscription)
        if member is None:
            member = _new_member(ctx, req, member_id, subscription)
            consumer.add_member(group, member, ctx, instance_id, " with the classic protocol")
            return member, True
        return member, self._update_subscription(group, member, subscription)

    def _update_subscription(
        self, group: ConsumerGroup, member: ConsumerMember, subscription: Subscription
    ) -> bool:
        changed = False
        if subscription.topics != member.subscribed_topic_names:
            member.subscribed_topic_names = subscription.topics
            member.resolved_version = -1
            changed = True
        if subscription.rack_id is not None and subscription.rack_id != member.rack_id:
            member.rack_id = subscription.rack_id
            changed = True
        if changed:
            self.consumer.event(
                group,
                SUBSCRIPTION_CHANGED,
                f"member {member.member_id} changed its subscription",
                member.member_id,
            )
        return changed

    # -- SyncGroup ---------------------------------------------------------------------------------

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, fx: Effects) -> None:
        group = self.consumer.groups[req.group_id]
        try:
            member = self._classic_member(group, req.member_id, req.group_instance_id)
            if req.generation_id != member.member_epoch:
                raise Rejected(ILLEGAL_GENERATION)
            classic = member.classic
            assert classic is not None
            if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                req.protocol_name is not None and req.protocol_name != classic.protocol_name
            ):
                raise Rejected(INCONSISTENT_GROUP_PROTOCOL)
            self._raise_if_rebalancing(group, member)
        except Rejected as rejected:
            fx.reply(ctx.reply_to, SyncGroupResponse(error_code=rejected.code, assignment=b""))
            return
        self.timers.cancel(sync_key(group.group_id, member.member_id))
        self.consumer.reschedule_session(group, member)
        assignment = encode_assignment(member.assigned, classic.protocols[0][1])
        fx.reply(
            ctx.reply_to,
            SyncGroupResponse(
                error_code=NONE,
                protocol_type=req.protocol_type,
                protocol_name=req.protocol_name,
                assignment=assignment,
            ),
        )

    def _raise_if_rebalancing(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A newer group epoch means a rebalance the member must rejoin for -- unless it is still
        revoking, which its next rejoin finishes."""
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._arm_join_timer(group, member)
            raise Rejected(REBALANCE_IN_PROGRESS)

    def _arm_join_timer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        key = join_key(group.group_id, member.member_id)
        if key not in self.timers:
            self.timers.schedule(key, self.clock.now_ms + member.rebalance_timeout_ms)

    # -- Heartbeat ---------------------------------------------------------------------------------

    def heartbeat(
        self, ctx: RequestContext, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> int:
        self.consumer.enter(ctx.now_ms, ctx.wall_ms)
        group = self.consumer.groups[group_id]
        try:
            member = self._classic_member(group, member_id, instance_id)
        except Rejected as rejected:
            return rejected.code
        if generation != member.member_epoch:
            return ILLEGAL_GENERATION
        self.consumer.reschedule_session(group, member)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not _waits_for_others(group, member))
        ):
            self._arm_join_timer(group, member)
            return REBALANCE_IN_PROGRESS
        return NONE

    # -- LeaveGroup --------------------------------------------------------------------------------

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest, fx: Effects) -> None:
        group = self.consumer.groups[req.group_id]
        version = ctx.api_version
        identities = req.members if version >= 3 else [MemberIdentity(req.member_id, None)]
        records = GroupWrites()
        results: list[MemberResponse] = []
        removed = False
        for identity in identities:
            try:
                member = self._leaving_member(group, identity)
            except Rejected as rejected:
                results.append(MemberResponse(identity.member_id, identity.group_instance_id, rejected.code))
                continue
            self.consumer.remove_member(
                group, member, records, "left the group (LeaveGroup)", MEMBER_LEFT, bump=False
            )
            results.append(MemberResponse(member.member_id, identity.group_instance_id, NONE))
            removed = True
        if removed:
            self.consumer.bump_after_removal(group, records)
        response = leave_group_response(version, NONE, results)
        self.consumer.finish(
            ctx,
            group,
            records,
            response,
            fx,
            lambda code: LeaveGroupResponse(error_code=consumer_write_error(code)),
        )

    def _leaving_member(self, group: ConsumerGroup, identity: MemberIdentity) -> ConsumerMember:
        instance_id = identity.group_instance_id
        if instance_id is None:
            member = group.members.get(identity.member_id)
        else:
            static_id = group.static_members.get(instance_id)
            if static_id is None:
                raise Rejected(UNKNOWN_MEMBER_ID)
            # An admin tool removes a static member by instance id alone.
            if identity.member_id and identity.member_id != static_id:
                raise Rejected(FENCED_INSTANCE_ID)
            member = group.members.get(static_id)
        if member is None or member.classic is None:
            raise Rejected(UNKNOWN_MEMBER_ID)
        return member

    # -- shared checks -----------------------------------------------------------------------------

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is not None:
            code = static_member_check(group.static_members, member_id, instance_id)
            if code:
                raise Rejected(code)
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            raise Rejected(UNKNOWN_MEMBER_ID)
        return member


def _new_member(
    ctx: RequestContext, req: JoinGroupRequest, member_id: str, subscription: Subscription
) -> ConsumerMember:
    return ConsumerMember(
        member_id=member_id,
        instance_id=req.group_instance_id,
        rack_id=subscription.rack_id,
        client_id=ctx.client_id,
        client_host=kafka_client_host(ctx.client_host),
        subscribed_topic_names=subscription.topics,
        subscribed_topic_regex=None,
        server_assignor=None,
        rebalance_timeout_ms=join_rebalance_timeout(ctx, req),
    )


def _supports_protocols(group: ConsumerGroup, protocol_type: str, protocols: Protocols) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: a ``consumer`` protocol type and a protocol
    every classic member of the group also supports."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return False
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(c.supports(name) for c in classic) for name, _ in protocols)


def _waits_for_others(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Whether a partition of the member's target is still owned by another member."""
    target: Mapping[str, frozenset[int]] = group.target.get(member.member_id, {})
    owners = group.owners
    for topic, partitions in target.items():
        assigned = member.assigned.get(topic, frozenset())
        for p in partitions - assigned:
            owner = owners.get((topic, p))
            if owner is not None and owner != member.member_id:
                return True
    return False
