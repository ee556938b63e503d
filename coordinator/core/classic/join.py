"""JoinGroup (v0-9) for classic groups: new, known and static members, KIP-394 pending member ids
(docs/groups.md#classic-groups, docs/groups.md#static-membership)."""

from __future__ import annotations

import logging

from coordinator.core.classic.group import (
    ClassicGroup,
    Member,
    SessionKey,
    protocol_names,
    session_key,
)
from coordinator.core.classic.rebalance import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicRebalance,
)
from coordinator.core.classic.records import group_record
from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_MAX_SIZE_REACHED,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    group_write_error,
)
from coordinator.core.events import (
    LEADER_REJOINED,
    MEMBER_JOINED,
    MEMBER_REJOINED,
    STATIC_MEMBER_REPLACED,
    SUBSCRIPTION_CHANGED,
    because,
)
from coordinator.core.members import (
    Protocols,
    join_rebalance_timeout,
    kafka_client_host,
)
from coordinator.core.shared_values import shared_value
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse

log = logging.getLogger(__name__)


class ClassicJoin(ClassicRebalance):
    """JoinGroup of classic groups."""

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest, fx: Effects) -> None:
        version = ctx.api_version
        if req.reason and log.isEnabledFor(logging.DEBUG):
            log.debug("group %s: JoinGroup from %r, reason: %s", req.group_id, req.member_id, req.reason)
        if not req.group_id:
            fx.reply(ctx.reply_to, self.join_error(version, INVALID_GROUP_ID, req.member_id))
            return
        session_timeout = req.session_timeout_ms
        config = self.config
        if not config.group_min_session_timeout_ms <= session_timeout <= config.group_max_session_timeout_ms:
            fx.reply(ctx.reply_to, self.join_error(version, INVALID_SESSION_TIMEOUT, req.member_id))
            return
        group = self.groups.get(req.group_id)
        is_unknown_member = req.member_id == ""
        if group is None:
            if not is_unknown_member:
                fx.reply(ctx.reply_to, self.join_error(version, UNKNOWN_MEMBER_ID, req.member_id))
                return
            if self.registry.at_group_limit():
                fx.reply(ctx.reply_to, self.join_error(version, GROUP_MAX_SIZE_REACHED))
                return
            group = self.create_group(req.group_id)

        if not self._accept_joining_member(group, req.member_id):
            # Also kicks out a known member that had not rejoined, so that a lowered group.max.size
            # evicts the last rejoiners (Kafka).
            self._drop_member_silently(group, req.member_id)
            fx.reply(ctx.reply_to, self.join_error(version, GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._join_new_member(ctx, req, group, fx)
        else:
            self._join_existing_member(ctx, req, group, fx)

    @staticmethod
    def _protocols(req: JoinGroupRequest) -> Protocols:
        return shared_value(tuple((p.name, p.metadata) for p in req.protocols))

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.group_max_size
        state = group.state
        if state is EMPTY or state is DEAD:
            return True
        member = group.members.get(member_id)
        if state is PREPARING_REBALANCE:
            # Counting the members that already rejoined (not the group size, which may exceed a
            # lowered limit) lets the last rejoiners be evicted.
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < max_size
        return member is not None or len(group.members) < max_size

    def _drop_member_silently(self, group: ClassicGroup, member_id: str) -> None:
        member = group.remove_member(member_id)
        self.timers.cancel(session_key(group.group_id, member_id) if member is None else member.session_key)

    def _join_new_member(
        self, ctx: RequestContext, req: JoinGroupRequest, group: ClassicGroup, fx: Effects
    ) -> None:
        version = ctx.api_version
        if group.state is DEAD:
            fx.reply(ctx.reply_to, self.join_error(version, COORDINATOR_NOT_AVAILABLE))
            return
        protocols = self._protocols(req)
        if not group.supports_protocols(req.protocol_type, protocol_names(protocols)):
            fx.reply(ctx.reply_to, self.join_error(version, INCONSISTENT_GROUP_PROTOCOL))
            return
        instance_id = req.group_instance_id
        new_member_id = self.new_member_id(ctx.client_id if instance_id is None else instance_id)
        if instance_id is not None:
            old_member_id = group.static_members.get(instance_id)
            if old_member_id is not None:
                log.info(
                    "group %s: static member %s rejoins in %s, replacing member %s with %s",
                    group.group_id,
                    instance_id,
                    group.state.value,
                    old_member_id,
                    new_member_id,
                )
                self._update_static_member_and_rebalance(ctx, req, group, old_member_id, new_member_id, fx)
            else:
                self._add_member_and_rebalance(ctx, req, group, new_member_id, protocols, fx)
        elif version >= 4:
            # KIP-394: hand out the member id first and admit the member only when it rejoins with
            # it, so that retries after a lost response do not leave ghost members behind.
            if len(group.pending_members) >= self.config.group_max_size:
                # Pending ids are held for a session timeout: without a bound a client looping
                # on JoinGroup would fill memory.
                fx.reply(ctx.reply_to, self.join_error(version, GROUP_MAX_SIZE_REACHED))
                return
            key = session_key(group.group_id, new_member_id)
            group.add_pending_member(key)
            self.timers.schedule(key, self.clock.now_ms + req.session_timeout_ms)
            fx.reply(ctx.reply_to, self.join_error(version, MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(ctx, req, group, new_member_id, protocols, fx)

    def _join_existing_member(
        self, ctx: RequestContext, req: JoinGroupRequest, group: ClassicGroup, fx: Effects
    ) -> None:
        version = ctx.api_version
        member_id = req.member_id
        if group.state is DEAD:
            fx.reply(ctx.reply_to, self.join_error(version, COORDINATOR_NOT_AVAILABLE, member_id))
            return
        protocols = self._protocols(req)
        if not group.supports_protocols(req.protocol_type, protocol_names(protocols)):
            fx.reply(ctx.reply_to, self.join_error(version, INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        pending_key = group.pending_session_key(member_id)
        if pending_key is not None and req.group_instance_id is None:
            # The id and timer key handed out with MEMBER_ID_REQUIRED, not the request's copies.
            self._add_member_and_rebalance(ctx, req, group, pending_key[2], protocols, fx, pending_key)
            return
        # A pending member id sent with an instance id is a client bug (Kafka throws an
        # IllegalStateException); member validation answers it with UNKNOWN_MEMBER_ID instead.
        code = group.validate_member(member_id, req.group_instance_id)
        if code:
            fx.reply(ctx.reply_to, self.join_error(version, code, member_id))
            return
        member = group.members[member_id]
        state = group.state
        if state is PREPARING_REBALANCE:
            self._update_member_and_rebalance(ctx, req, group, member, protocols, fx)
        elif state is COMPLETING_REBALANCE:
            if member.protocols == protocols:
                # Same metadata: the JoinGroup response was probably lost; answer with the
                # current generation (the leader gets the member list again).
                members = self._join_members(group) if group.is_leader(member_id) else []
                response = self._join_success(
                    group, member_id, version, leader=group.leader_id, members=members
                )
                fx.reply(ctx.reply_to, response)
            else:
                self._update_member_and_rebalance(ctx, req, group, member, protocols, fx)
        elif state is STABLE:
            if group.is_leader(member_id) or member.protocols != protocols:
                # The leader rejoining always rebalances: that is how it forces a new assignment
                # after changes the member metadata does not show (e.g. new partitions).
                self._update_member_and_rebalance(ctx, req, group, member, protocols, fx)
            else:
                response = self._join_success(group, member_id, version, leader=group.leader_id, members=[])
                fx.reply(ctx.reply_to, response)
        else:
            fx.reply(ctx.reply_to, self.join_error(version, UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(
        self,
        ctx: RequestContext,
        req: JoinGroupRequest,
        group: ClassicGroup,
        member_id: str,
        protocols: Protocols,
        fx: Effects,
        key: SessionKey | None = None,
    ) -> None:
        # Every member repeats its client's id and host, protocol type and timeouts: one object
        # each (docs/performance.md#memory-per-idle-group).
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=shared_value(ctx.client_id),
            client_host=shared_value(kafka_client_host(ctx.client_host)),
            rebalance_timeout_ms=shared_value(join_rebalance_timeout(ctx, req)),
            session_timeout_ms=shared_value(req.session_timeout_ms),
            protocol_type=shared_value(req.protocol_type),
            protocols=protocols,
            session_key=session_key(group.group_id, member_id) if key is None else key,
            is_new=True,
        )
        if group.state is PREPARING_REBALANCE and group.previous_state is EMPTY:
            # Extends the initial delayed join (docs/groups.md#where-kafkas-two-coordinators-differ).
            group.new_member_added = True
        group.add_member(member, ctx.reply_to, ctx.api_version)
        self._event(
            group,
            MEMBER_JOINED,
            f"member {member_id} joined (client {ctx.client_id}"
            f"{f', instance {req.group_instance_id}' if req.group_instance_id else ''}) from {member.client_host}"
            f"{because(req.reason)}",
            member_id,
            client_id=member.client_id,
            client_host=member.client_host,
            instance_id=req.group_instance_id,
        )
        # New members cannot heartbeat (they do not know their id yet) and a parked JoinGroup cannot
        # detect a disconnect: their timer is the new-member join timeout (KAFKA-7610).
        self.reschedule_session(member, self.config.group_new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, fx)

    def _update_member_and_rebalance(
        self,
        ctx: RequestContext,
        req: JoinGroupRequest,
        group: ClassicGroup,
        member: Member,
        protocols: Protocols,
        fx: Effects,
    ) -> None:
        self._answer_superseded_join(group, member, fx)
        self._event_rejoin(group, member, protocols, req.reason)
        group.update_member(
            member,
            protocols,
            join_rebalance_timeout(ctx, req),
            req.session_timeout_ms,
            ctx.reply_to,
            ctx.api_version,
        )
        self._maybe_prepare_rebalance_or_complete_join(group, fx)

    def _event_rejoin(
        self, group: ClassicGroup, member: Member, protocols: Protocols, why: str | None
    ) -> None:
        member_id = member.member_id
        if member.protocols != protocols:
            self._event(
                group,
                SUBSCRIPTION_CHANGED,
                f"member {member_id} changed its subscription or metadata",
                member_id,
            )
        elif group.state is STABLE and group.is_leader(member_id):
            self._event(
                group,
                LEADER_REJOINED,
                f"leader {member_id} rejoined{because(why, '(')}",
                member_id,
                reason=why,
            )
        else:
            self._event(group, MEMBER_REJOINED, f"member {member_id} rejoined", member_id)

    def _answer_superseded_join(self, group: ClassicGroup, member: Member, fx: Effects) -> None:
        # A second JoinGroup for a member that already has one parked (a retry on a new
        # connection): Kafka overwrites the parked one and never answers it; we answer it so that
        # no parked reply is leaked.
        parked = group.take_join_reply(member)
        if parked is not None:
            fx.reply(parked[0], self.join_error(parked[1], REBALANCE_IN_PROGRESS, member.member_id))

    def _update_static_member_and_rebalance(
        self,
        ctx: RequestContext,
        req: JoinGroupRequest,
        group: ClassicGroup,
        old_member_id: str,
        new_member_id: str,
        fx: Effects,
    ) -> None:
        """docs/groups.md#static-membership: a known group instance id rejoins with an empty member id."""
        version = ctx.api_version
        leader_before = group.leader_id
        old_member = group.members[old_member_id]
        new_member = group.replace_static_member(
            old_member_id, new_member_id, session_key(group.group_id, new_member_id)
        )
        self._fence_replaced_member(group, old_member, fx)
        self._event(
            group,
            STATIC_MEMBER_REPLACED,
            f"static member {old_member_id} replaced by {new_member_id} (instance {old_member.group_instance_id})",
            new_member_id,
            instance_id=old_member.group_instance_id,
            replaced_member_id=old_member_id,
        )
        self.timers.cancel(old_member.session_key)
        self.reschedule_session(new_member)
        old_protocols = new_member.protocols
        old_rebalance_timeout = new_member.rebalance_timeout_ms
        old_session_timeout = new_member.session_timeout_ms
        group.update_member(
            new_member,
            self._protocols(req),
            join_rebalance_timeout(ctx, req),
            req.session_timeout_ms,
            ctx.reply_to,
            version,
        )
        state = group.state
        if state is STABLE:
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: persist the new member id and hand
                # out the current generation, without a rebalance.
                generation = group.generation_id

                def still_current() -> bool:
                    return (
                        self.groups.get(group.group_id) is group
                        and group.state is STABLE
                        and group.generation_id == generation
                        and group.members.get(new_member_id) is new_member
                        and new_member.join_reply is ctx.reply_to
                    )

                def on_durable(out: Effects) -> None:
                    if not still_current():
                        return  # a rebalance started meanwhile; it answers this JoinGroup
                    group.take_join_reply(new_member)
                    out.reply(
                        ctx.reply_to,
                        self._static_rejoin_response(group, new_member_id, version, leader_before),
                    )

                def on_failed(out: Effects, error_code: int) -> None:
                    if not still_current():
                        return
                    group.update_member(
                        new_member, old_protocols, old_rebalance_timeout, old_session_timeout, None, 0
                    )
                    restored = group.replace_static_member(
                        new_member_id, old_member_id, old_member.session_key
                    )
                    self.timers.cancel(new_member.session_key)
                    self.reschedule_session(restored)
                    response = self._join_success(group, "", version, leader=leader_before, members=[])
                    response.error_code = group_write_error(error_code)
                    out.reply(ctx.reply_to, response)

                assignments = {m.member_id: m.assignment for m in group.members.values()}
                fx.write([group_record(group, assignments)], on_durable, on_failed)
            else:
                self._maybe_prepare_rebalance_or_complete_join(group, fx)
        elif state is COMPLETING_REBALANCE:
            # The leader may already have been given the old member id: assign again.
            self._prepare_rebalance(group, fx)
        else:
            self._maybe_complete_join_phase(group, fx)

    def _static_rejoin_response(
        self, group: ClassicGroup, member_id: str, version: int, leader_before: str | None
    ) -> JoinGroupResponse:
        if version >= 9:
            # KIP-814: a static leader that rejoins gets the member list but must not reassign.
            is_leader = group.is_leader(member_id)
            return self._join_success(
                group,
                member_id,
                version,
                leader=group.leader_id,
                members=self._join_members(group) if is_leader else [],
                skip_assignment=is_leader,
            )
        # Older clients cannot skip the assignment: the leader id they get is the one before the
        # replacement, which is not their new id, so a rejoining leader acts as a follower.
        return self._join_success(group, member_id, version, leader=leader_before, members=[])

    def _fence_replaced_member(self, group: ClassicGroup, old_member: Member, fx: Effects) -> None:
        parked_join = group.take_join_reply(old_member)
        if parked_join is not None:
            reply_to, version = parked_join
            fx.reply(reply_to, self.join_error(version, FENCED_INSTANCE_ID, old_member.member_id))
        parked_sync = group.take_sync_reply(old_member)
        if parked_sync is not None:
            fx.reply(parked_sync[0], self._sync_response(FENCED_INSTANCE_ID))
