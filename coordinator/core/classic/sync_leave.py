"""SyncGroup (v0-5), Heartbeat (v0-4) and LeaveGroup (v0-5) for classic groups
(docs/groups.md#sync-and-the-assignment)."""

from __future__ import annotations

import logging

from coordinator.core.classic.group import (
    ClassicGroup,
    session_key,
    sync_key,
)
from coordinator.core.classic.join import ClassicJoin
from coordinator.core.classic.rebalance import (
    COMPLETING_REBALANCE,
    DEAD,
    PREPARING_REBALANCE,
    STABLE,
)
from coordinator.core.classic.records import group_record
from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    COORDINATOR_NOT_AVAILABLE,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    group_write_error,
)
from coordinator.core.events import (
    ASSIGNMENT_WRITE_FAILED,
    MEMBER_LEFT,
    because,
)
from coordinator.core.members import (
    leave_group_response,
    static_member_check,
)
from coordinator.core.shared_values import shared_value
from protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    MemberResponse,
)
from protocol.messages.sync_group import SyncGroupRequest

log = logging.getLogger(__name__)


class ClassicSyncAndLeave(ClassicJoin):
    """SyncGroup, Heartbeat and LeaveGroup of classic groups."""

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, fx: Effects) -> None:
        code = self._validate_sync(ctx, req)
        if code:
            fx.reply(ctx.reply_to, self._sync_response(code))
            return
        group = self.groups[req.group_id]
        member = group.members[req.member_id]
        state = group.state
        if state is PREPARING_REBALANCE:
            fx.reply(ctx.reply_to, self._sync_response(REBALANCE_IN_PROGRESS))
        elif state is COMPLETING_REBALANCE:
            superseded = group.take_sync_reply(member)
            if superseded is not None:
                fx.reply(superseded[0], self._sync_response(REBALANCE_IN_PROGRESS))
            member.sync_reply = ctx.reply_to
            member.sync_version = ctx.api_version
            self._remove_pending_sync_member(group, member.member_id)
            if group.is_leader(member.member_id):
                self._store_assignment(group, req, fx)
        elif state is STABLE:
            self._remove_pending_sync_member(group, member.member_id)
            self.reschedule_session(member)
            fx.reply(ctx.reply_to, self._sync_response(NONE, group, member.assignment))
        else:
            fx.reply(ctx.reply_to, self._sync_response(UNKNOWN_MEMBER_ID))

    def _validate_sync(self, ctx: RequestContext, req: SyncGroupRequest) -> int:
        if ctx.api_version >= 5 and (req.protocol_type is None or req.protocol_name is None):
            return INCONSISTENT_GROUP_PROTOCOL
        if not req.group_id:
            return INVALID_GROUP_ID
        group = self.groups.get(req.group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.state is DEAD:
            return COORDINATOR_NOT_AVAILABLE
        code = group.validate_member(req.member_id, req.group_instance_id)
        if code:
            return code
        if req.generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if ctx.api_version >= 5 and (
            req.protocol_type != group.protocol_type or req.protocol_name != group.protocol_name
        ):
            return INCONSISTENT_GROUP_PROTOCOL
        return NONE

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.discard_pending_sync_member(member_id)
        if not group.pending_sync_members:
            self.timers.cancel(sync_key(group.group_id, group.generation_id))

    def _store_assignment(self, group: ClassicGroup, req: SyncGroupRequest, fx: Effects) -> None:
        """docs/groups.md#sync-and-the-assignment: persist the leader's assignment; only then answer the members and go Stable."""
        members = group.members
        # Assignments for unknown member ids are dropped; members without one get empty bytes. Kept
        # under the members' own ids, the bytes shared with equal assignments of other groups
        # (docs/performance.md#memory-per-idle-group).
        assignments: dict[str, bytes] = {}
        for a in req.assignments:
            member = members.get(a.member_id)
            if member is not None:
                assignments[member.member_id] = shared_value(a.assignment)
        for member_id in members:
            assignments.setdefault(member_id, b"")
        generation = group.generation_id

        def awaits_this_assignment() -> bool:
            # The change applies to the generation it was made for: a member that joined or left
            # while the write was in flight started another rebalance, which supersedes it.
            return (
                self.groups.get(group.group_id) is group
                and group.state is COMPLETING_REBALANCE
                and group.generation_id == generation
            )

        def on_durable(out: Effects) -> None:
            if not awaits_this_assignment():
                return
            for member in group.members.values():
                member.assignment = assignments.get(member.member_id, b"")
            self._propagate_assignment(group, NONE, out)
            self._transition(group, STABLE)
            consumer = group.uses_consumer_protocol()
            self.events.group_stable(group.group_id, generation, assignments if consumer else None)

        def on_failed(out: Effects, error_code: int) -> None:
            # Nothing to undo (nothing was applied); Kafka answers the parked SyncGroups with the
            # error and rebalances.
            if not awaits_this_assignment():
                return
            code = group_write_error(error_code)
            self._event(group, ASSIGNMENT_WRITE_FAILED, f"storing the assignment failed ({error_code})")
            self._reset_and_propagate_assignment_error(group, code, out)
            self._maybe_prepare_rebalance_or_complete_join(group, out)

        fx.write([group_record(group, assignments)], on_durable, on_failed)

    def heartbeat(
        self, ctx: RequestContext, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> int:
        if not group_id:
            return INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        state = group.state
        if state is DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if instance_id is not None:
            code = static_member_check(group.static_members, member_id, instance_id)
            if code:
                return code
        now_ms = ctx.now_ms
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if generation != group.generation_id:
            return ILLEGAL_GENERATION
        if state is STABLE or state is COMPLETING_REBALANCE:
            member.last_heartbeat_ms = now_ms
            self.timers.schedule(member.session_key, now_ms + member.session_timeout_ms)
            return NONE
        if state is PREPARING_REBALANCE:
            member.last_heartbeat_ms = now_ms
            self.timers.schedule(member.session_key, now_ms + member.session_timeout_ms)
            return REBALANCE_IN_PROGRESS
        return UNKNOWN_MEMBER_ID

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest, fx: Effects) -> None:
        version = ctx.api_version
        identities = req.members if version >= 3 else [MemberIdentity(req.member_id, None)]
        if not req.group_id:
            fx.reply(ctx.reply_to, LeaveGroupResponse(error_code=INVALID_GROUP_ID))
            return
        group = self.groups.get(req.group_id)
        if group is None:
            results = [
                MemberResponse(i.member_id, i.group_instance_id, UNKNOWN_MEMBER_ID) for i in identities
            ]
            fx.reply(ctx.reply_to, leave_group_response(version, NONE, results))
            return
        if group.state is DEAD:
            fx.reply(ctx.reply_to, LeaveGroupResponse(error_code=COORDINATOR_NOT_AVAILABLE))
            return
        results = []
        removed = False
        for identity in identities:
            code = self._leave_one(group, identity, fx)
            removed = removed or code == NONE
            results.append(MemberResponse(identity.member_id, identity.group_instance_id, code))
        if removed:
            state = group.state
            if state is STABLE or state is COMPLETING_REBALANCE:
                self._prepare_rebalance(group, fx)
            elif state is PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group, fx)
        fx.reply(ctx.reply_to, leave_group_response(version, NONE, results))

    def _leave_one(self, group: ClassicGroup, identity: MemberIdentity, fx: Effects) -> int:
        member_id = identity.member_id
        instance_id = identity.group_instance_id
        if member_id == "":
            # Administrative removal by group instance id (kafka-consumer-groups, KIP-345).
            mapped = None if instance_id is None else group.static_members.get(instance_id)
            if mapped is None:
                return UNKNOWN_MEMBER_ID
            self._event(
                group,
                MEMBER_LEFT,
                f"static member {instance_id} removed by instance id{because(identity.reason, '(')}",
                mapped,
                reason=identity.reason,
            )
            self._remove_member(group, group.members[mapped], fx)
            return NONE
        if member_id in group.pending_members:
            group.remove_member(member_id)
            self.timers.cancel(session_key(group.group_id, member_id))
            return NONE
        code = group.validate_member(member_id, instance_id)
        if code:
            return code
        self._event(
            group,
            MEMBER_LEFT,
            f"member {member_id} left{because(identity.reason, '(')}",
            member_id,
            reason=identity.reason,
        )
        self._remove_member(group, group.members[member_id], fx)
        return NONE
