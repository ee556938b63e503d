"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, Describe/ListGroups, the
rebalance timers, and rebuilding groups from their records (Kafka's GroupMetadataManager, classic
part; docs/groups.md#classic-groups, transitions T1-T9 in docs/groups.md#classic-transitions).

Handlers add replies, records and continuations to an :class:`~coordinator.core.effects.Effects`
(see docs/commit-path.md). A state change that a write carries is applied when the write is
durable, to the group and generation it was computed for, as Kafka's append callbacks do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Final

from coordinator.core.classic_group import (
    JOIN_TIMER,
    SESSION_TIMER,
    SYNC_TIMER,
    ClassicGroup,
    Member,
    Protocols,
    protocol_names,
    session_key,
    sync_key,
)
from coordinator.core.clock import ShardClock
from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    group_write_error,
)
from coordinator.core.events import (
    ASSIGNMENT_WRITE_FAILED,
    LEADER_REJOINED,
    LOADED,
    MEMBER_JOINED,
    MEMBER_LEFT,
    MEMBER_REJOINED,
    REBALANCE_TIMEOUT,
    SESSION_TIMEOUT,
    STATIC_MEMBER_REPLACED,
    SUBSCRIPTION_CHANGED,
    SYNC_TIMEOUT,
    Detail,
    GroupEvents,
    because,
)
from coordinator.core.group_config import GroupConfig
from coordinator.core.lifecycle import PendingChange, TimerHandler
from coordinator.core.state import STATE_BY_LOWER_NAME, GroupState
from coordinator.core.stats import CoreStats
from coordinator.core.timers import TimerKey, Timers
from protocol.error_responses import join_group_error
from protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember
from protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    MemberResponse,
)
from protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from storage.records import GroupMetadataRecord, GroupTombstone, MemberRecord, Record

log = logging.getLogger(__name__)

EMPTY: Final = GroupState.EMPTY
PREPARING_REBALANCE: Final = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE: Final = GroupState.COMPLETING_REBALANCE
STABLE: Final = GroupState.STABLE
DEAD: Final = GroupState.DEAD

# DescribeGroups v3+: INT32_MIN means "not requested". When requested, the core reports what Kafka
# reports without an authorizer: every operation a group supports (READ=3, DELETE=6, DESCRIBE=8).
AUTHORIZED_OPERATIONS_OMITTED: Final = -(2**31)
GROUP_AUTHORIZED_OPERATIONS: Final = (1 << 3) | (1 << 6) | (1 << 8)

CLASSIC_GROUP_TYPE: Final = "classic"


def kafka_client_host(host: str) -> str:
    """Kafka reports (and persists) a member's host as Java's InetAddress.toString(): "/10.0.0.1"."""
    return host if not host or host.startswith("/") else "/" + host


class ClassicGroupManager:
    """Owns the classic groups of one shard."""

    def __init__(
        self,
        config: GroupConfig,
        timers: Timers[TimerKey],
        clock: ShardClock,
        stats: CoreStats,
        new_member_id: Callable[[str], str],
        events: GroupEvents | None = None,
    ) -> None:
        self.config = config
        self.events = events if events is not None else GroupEvents(clock)
        self.timers = timers
        self.clock = clock
        self.new_member_id = new_member_id
        self.groups: dict[str, ClassicGroup] = {}
        # Consumer groups share the group id space and group.max.groups (set by the coordinator).
        self.other_groups: Mapping[str, object] = {}
        self.stats = stats
        # Rebalance start (monotonic ms) per group, for the rebalance-duration metric.
        self._rebalance_started: dict[str, int] = {}

    def _transition(self, group: ClassicGroup, target: GroupState) -> None:
        log.debug("group %s: %s -> %s", group.group_id, group.state.value, target.value)
        group.transition_to(target, self.clock.wall_ms)
        if target is PREPARING_REBALANCE:
            self._rebalance_started.setdefault(group.group_id, self.clock.now_ms)
        elif target is STABLE or target is EMPTY or target is DEAD:
            started = self._rebalance_started.pop(group.group_id, None)
            if started is not None and target is STABLE:
                self.stats.rebalances_completed += 1
                self.stats.rebalance_durations_ms.append(self.clock.now_ms - started)

    def _event(
        self, group: ClassicGroup, kind: str, message: str, member_id: str | None = None, **details: Detail
    ) -> None:
        self.events.record(
            group.group_id,
            kind,
            "classic",
            group.state.value,
            group.generation_id,
            message,
            member_id,
            **details,
        )

    def reschedule_session(self, member: Member, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timers.schedule(member.session_key, self.clock.now_ms + timeout)

    def group_record(self, group: ClassicGroup, assignments: Mapping[str, bytes]) -> GroupMetadataRecord:
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

    def at_group_limit(self) -> bool:
        """group.max.groups reached: no new group may be created (Kafka's share-group rule)."""
        if len(self.groups) + len(self.other_groups) < self.config.group_max_groups:
            return False
        log.warning("refusing a new group: group.max.groups (%d) reached", self.config.group_max_groups)
        return True

    def create_group(self, group_id: str) -> ClassicGroup:
        """T1: a new Empty group (JoinGroup with an empty member id, or a simple-consumer commit)."""
        group = ClassicGroup(group_id, state_ms=self.clock.wall_ms)
        self.groups[group_id] = group
        return group

    # -- responses ---------------------------------------------------------------------------

    @staticmethod
    def join_error(version: int, code: int, member_id: str = "") -> JoinGroupResponse:
        return join_group_error(version, code, member_id)

    @staticmethod
    def _join_success(
        group: ClassicGroup,
        member_id: str,
        version: int,
        *,
        leader: str | None,
        members: list[JoinGroupResponseMember],
        skip_assignment: bool = False,
    ) -> JoinGroupResponse:
        return JoinGroupResponse(
            error_code=NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name if version >= 7 else group.protocol_name or "",
            leader=leader or "",
            skip_assignment=skip_assignment,
            member_id=member_id,
            members=members,
        )

    @staticmethod
    def _join_members(group: ClassicGroup) -> list[JoinGroupResponseMember]:
        """The member list only the leader receives: every member's metadata for the protocol."""
        protocol = group.protocol_name or ""
        return [
            JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in group.members.values()
        ]

    @staticmethod
    def _sync_response(
        code: int, group: ClassicGroup | None = None, assignment: bytes = b""
    ) -> SyncGroupResponse:
        # v5+ echoes the protocol type and name on success; errors carry nulls.
        if group is None:
            return SyncGroupResponse(error_code=code, assignment=assignment)
        return SyncGroupResponse(
            error_code=code,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=assignment,
        )

    # -- JoinGroup (v0-9) ----------------------------------------------------------------------
    # v0: no RebalanceTimeoutMs (the session timeout is used); v4+: KIP-394 MEMBER_ID_REQUIRED for
    # new dynamic members; v5+: GroupInstanceId (KIP-345); v7+: ProtocolType in the response and a
    # nullable ProtocolName; v8: Reason (logged); v9: SkipAssignment for a static leader.

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
            if self.at_group_limit():
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
    def rebalance_timeout(ctx: RequestContext, req: JoinGroupRequest) -> int:
        # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout. A negative value
        # from a newer client would make every rebalance time out at once (KAFKA-8653), so it is
        # treated the same way.
        if ctx.api_version == 0 or req.rebalance_timeout_ms < 0:
            return req.session_timeout_ms
        return req.rebalance_timeout_ms

    @staticmethod
    def _protocols(req: JoinGroupRequest) -> Protocols:
        return tuple((p.name, p.metadata) for p in req.protocols)

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
            group.add_pending_member(new_member_id)
            self.timers.schedule(
                session_key(group.group_id, new_member_id), self.clock.now_ms + req.session_timeout_ms
            )
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
        if member_id in group.pending_members and req.group_instance_id is None:
            self._add_member_and_rebalance(ctx, req, group, member_id, protocols, fx)
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
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=ctx.client_id,
            client_host=kafka_client_host(ctx.client_host),
            rebalance_timeout_ms=self.rebalance_timeout(ctx, req),
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=protocols,
            session_key=session_key(group.group_id, member_id),
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
            client_id=ctx.client_id,
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
            self.rebalance_timeout(ctx, req),
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
            self.rebalance_timeout(ctx, req),
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
                fx.write([self.group_record(group, assignments)], on_durable, on_failed)
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

    # -- rebalance -----------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, fx: Effects) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, fx)
        else:
            self._maybe_complete_join_phase(group, fx)

    def _maybe_complete_join_phase(self, group: ClassicGroup, fx: Effects) -> None:
        if group.state is not PREPARING_REBALANCE:
            return
        if group.previous_state is EMPTY:
            return  # the initial delayed join only completes on its timer
        if group.has_all_members_joined():
            self._complete_join(group, fx)

    def _prepare_rebalance(self, group: ClassicGroup, fx: Effects) -> None:
        if group.state is COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, REBALANCE_IN_PROGRESS, fx)
        self._remove_sync_expiration(group)
        self.events.rebalance_started(group.group_id, group.state.value, group.generation_id)
        if group.state is EMPTY:
            # Initial delayed join: give other members of a (re)forming group time to arrive.
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.initial_join_delay = (delay, remaining)
            self.timers.schedule(group.join_key, self.clock.now_ms + delay)
            self._transition(group, PREPARING_REBALANCE)
            return
        self._transition(group, PREPARING_REBALANCE)
        if group.has_all_members_joined():
            self._complete_join(group, fx)
        else:
            group.initial_join_delay = None
            self.timers.schedule(group.join_key, self.clock.now_ms + group.rebalance_timeout_ms())

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.clear_pending_sync_members()
        self.timers.cancel(sync_key(group.group_id, group.generation_id))

    def _complete_join(self, group: ClassicGroup, fx: Effects) -> None:
        """docs/groups.md#join-completion: end the join phase and start the next generation."""
        self.timers.cancel(group.join_key)
        group.initial_join_delay = None
        for member in group.not_yet_rejoined_dynamic_members():
            self._event(
                group,
                REBALANCE_TIMEOUT,
                f"member {member.member_id} removed: it did not rejoin within the rebalance timeout",
                member.member_id,
            )
            self._remove_member(group, member, fx)
        if group.state is DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them (their session
            # expiry removes them) instead of starting a generation nobody joined.
            self.timers.schedule(group.join_key, self.clock.now_ms + group.rebalance_timeout_ms())
            return
        group.generation_id += 1
        group.clear_pending_sync_members()
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            self._transition(group, EMPTY)
            self.events.group_empty(group.group_id, group.generation_id)
            # Kafka only logs a failure of this write: no member depends on it.
            fx.write([self.group_record(group, {})])
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        self._transition(group, COMPLETING_REBALANCE)
        self.events.generation_formed(
            group.group_id, group.generation_id, len(group.members), group.protocol_name, group.leader_id
        )
        leader_id = group.leader_id
        for member in group.members.values():
            parked = group.take_join_reply(member)
            if parked is not None:
                reply_to, version = parked
                members = self._join_members(group) if member.member_id == leader_id else []
                fx.reply(
                    reply_to,
                    self._join_success(group, member.member_id, version, leader=leader_id, members=members),
                )
            self.reschedule_session(member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self.timers.schedule(
            sync_key(group.group_id, group.generation_id), self.clock.now_ms + group.rebalance_timeout_ms()
        )

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, code: int, fx: Effects) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, code, fx)

    def _propagate_assignment(self, group: ClassicGroup, code: int, fx: Effects) -> None:
        for member in group.members.values():
            parked = group.take_sync_reply(member)
            if parked is None:
                continue
            if code == NONE:
                fx.reply(parked[0], self._sync_response(NONE, group, member.assignment))
            else:
                fx.reply(parked[0], self._sync_response(code))
            # Delivering the assignment counts as a heartbeat; an expiry that happened while the
            # member waited was ignored and did not re-arm its timer.
            self.reschedule_session(member)

    def _remove_member(self, group: ClassicGroup, member: Member, fx: Effects) -> None:
        """Remove a member; its parked requests get UNKNOWN_MEMBER_ID (so a live client rejoins)."""
        parked_join = group.take_join_reply(member)
        if parked_join is not None:
            fx.reply(parked_join[0], self.join_error(parked_join[1], UNKNOWN_MEMBER_ID))
        parked_sync = group.take_sync_reply(member)
        if parked_sync is not None:
            fx.reply(parked_sync[0], self._sync_response(UNKNOWN_MEMBER_ID))
        self.timers.cancel(member.session_key)
        group.remove_member(member.member_id)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member, fx: Effects) -> None:
        self._remove_member(group, member, fx)
        state = group.state
        if state is STABLE or state is COMPLETING_REBALANCE:
            self._prepare_rebalance(group, fx)
        elif state is PREPARING_REBALANCE:
            # Without this re-check a group whose last missing member dies waits for the whole
            # rebalance timeout.
            self._maybe_complete_join_phase(group, fx)

    # -- timers --------------------------------------------------------------------------------

    def expire_session(self, group_id: str, member_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return
        if member_id in group.pending_members:
            # DEBUG: a client looping on JoinGroup makes thousands of these at once.
            log.debug("group %s: pending member %s expired", group_id, member_id)
            group.remove_member(member_id)
            self._maybe_complete_join_phase(group, fx)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self._event(group, SESSION_TIMEOUT, f"session timeout of member {member_id}", member_id)
        self._remove_member_and_update_group(group, member, fx)

    def expire_join(self, group_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state is not PREPARING_REBALANCE:
            return
        delay = group.initial_join_delay
        if delay is not None:
            delay_ms, remaining_ms = delay
            if group.new_member_added and remaining_ms > 0:
                # A member joined during the delay: wait another delay, within the rebalance timeout.
                group.new_member_added = False
                next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
                group.initial_join_delay = (next_delay, max(remaining_ms - delay_ms, 0))
                self.timers.schedule(group.join_key, self.clock.now_ms + next_delay)
                return
        self._complete_join(group, fx)

    def expire_pending_sync(self, group_id: str, generation_id: int, fx: Effects) -> None:
        """KAFKA-12890: members that never sent SyncGroup for this generation are removed."""
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation_id:
            return
        if group.state is not COMPLETING_REBALANCE and group.state is not STABLE:
            return
        if not group.pending_sync_members:
            return
        missing = [group.members[m] for m in group.pending_sync_members if m in group.members]
        missing_ids = [m.member_id for m in missing]
        self._event(
            group, SYNC_TIMEOUT, f"members did not sync: {', '.join(missing_ids)}", None, members=missing_ids
        )
        for member in missing:
            self._remove_member(group, member, fx)
        group.clear_pending_sync_members()
        self._prepare_rebalance(group, fx)

    # -- SyncGroup (v0-5) ------------------------------------------------------------------------
    # v3+: GroupInstanceId; v5+: ProtocolType and ProtocolName, mandatory, checked against the group
    # and echoed in the response.

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
        # Assignments for unknown member ids are dropped; members without one get empty bytes.
        assignments = {a.member_id: a.assignment for a in req.assignments if a.member_id in members}
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

        fx.write([self.group_record(group, assignments)], on_durable, on_failed)

    # -- Heartbeat (v0-4) ------------------------------------------------------------------------
    # v3+: GroupInstanceId. The hot path: no allocation besides the caller's response.

    def heartbeat(
        self, now_ms: int, group_id: str, member_id: str, instance_id: str | None, generation: int
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
            mapped = group.static_members.get(instance_id)
            if mapped is None:
                return UNKNOWN_MEMBER_ID
            if mapped != member_id:
                return FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if generation != group.generation_id:
            return ILLEGAL_GENERATION
        if state is STABLE or state is COMPLETING_REBALANCE:
            self.timers.schedule(member.session_key, now_ms + member.session_timeout_ms)
            return NONE
        if state is PREPARING_REBALANCE:
            self.timers.schedule(member.session_key, now_ms + member.session_timeout_ms)
            return REBALANCE_IN_PROGRESS
        return UNKNOWN_MEMBER_ID

    # -- LeaveGroup (v0-5) -----------------------------------------------------------------------
    # v0-2: one MemberId, the member's error is the top-level error; v3+ (KIP-345): a batch of
    # {MemberId, GroupInstanceId}, per-member errors; v5: per-member Reason (logged only).

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
            fx.reply(ctx.reply_to, self.leave_response(version, NONE, results))
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
        fx.reply(ctx.reply_to, self.leave_response(version, NONE, results))

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

    @staticmethod
    def leave_response(version: int, code: int, results: list[MemberResponse]) -> LeaveGroupResponse:
        if version >= 3:
            return LeaveGroupResponse(error_code=code, members=results)
        if code == NONE:
            code = next((r.error_code for r in results if r.error_code != NONE), NONE)
        return LeaveGroupResponse(error_code=code)

    # -- ListGroups (v0-5) / DescribeGroups (v0-5) -------------------------------------------------
    # ListGroups v4+: StatesFilter, v5+: TypesFilter (classic groups are "classic"), both
    # case-insensitive. DescribeGroups v3+: authorized operations, v4+: member GroupInstanceId,
    # v6: GROUP_ID_NOT_FOUND for unknown groups (not served, handled for completeness).

    def list_groups(self, ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
        states: set[GroupState] | None = None
        if ctx.api_version >= 4 and req.states_filter:
            states = {s for name in req.states_filter if (s := STATE_BY_LOWER_NAME.get(name.lower()))}
        if (
            ctx.api_version >= 5
            and req.types_filter
            and CLASSIC_GROUP_TYPE not in {t.lower() for t in req.types_filter}
        ):
            return ListGroupsResponse(error_code=NONE, groups=[])
        groups = [
            ListedGroup(
                group_id=group.group_id,
                protocol_type=group.protocol_type or "",
                group_state=group.state.value,
                group_type=CLASSIC_GROUP_TYPE,
            )
            for group in self.groups.values()
            if states is None or group.state in states
        ]
        return ListGroupsResponse(error_code=NONE, groups=groups)

    def describe_groups(self, ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
        operations = (
            GROUP_AUTHORIZED_OPERATIONS
            if ctx.api_version >= 3 and req.include_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED
        )
        described = [self._describe_group(ctx.api_version, group_id, operations) for group_id in req.groups]
        return DescribeGroupsResponse(groups=described)

    def _describe_group(self, version: int, group_id: str, operations: int) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            if version >= 6:
                return DescribedGroup(
                    error_code=GROUP_ID_NOT_FOUND,
                    error_message=f"Group {group_id} not found.",
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

    # -- OffsetCommit support ----------------------------------------------------------------------

    @staticmethod
    def validate_offset_commit(
        group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        """Kafka's ClassicGroup.validateOffsetCommit for non-transactional commits."""
        state = group.state
        if state is DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and state is EMPTY:
            # Generation -1 comes from admin tools or consumers with manual assignment: they may
            # commit as long as the group has no members.
            return NONE
        if generation_id >= 0 or member_id or instance_id is not None:
            code = group.validate_member(member_id, instance_id)
            if code:
                return code
            if generation_id != group.generation_id:
                return ILLEGAL_GENERATION
        elif state is not EMPTY:
            return UNKNOWN_MEMBER_ID  # only members may commit to a live group
        if state is COMPLETING_REBALANCE:
            # The member has the new generation but not its assignment yet: have it finish the
            # rebalance first.
            return REBALANCE_IN_PROGRESS
        return NONE

    # -- DeleteGroups support ----------------------------------------------------------------------

    def validate_delete(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return GROUP_ID_NOT_FOUND
        if group.state is not EMPTY:
            return NON_EMPTY_GROUP
        return NONE

    def remove_group(self, group: ClassicGroup) -> None:
        """T8: an Empty group is deleted (DeleteGroups) or expired (retention sweep)."""
        for member_id in group.pending_members:
            self.timers.cancel(session_key(group.group_id, member_id))
        group.clear_pending_members()
        self.timers.cancel(group.join_key)
        self._transition(group, DEAD)
        del self.groups[group.group_id]
        self.events.group_removed(group.group_id, "classic", group.generation_id, "deleted or expired")

    # -- online migration (docs/migration.md) ------------------------------------------------------

    def release_for_upgrade(self, group: ClassicGroup, fx: Effects) -> None:
        """The group becomes a consumer group: parked JoinGroups and SyncGroups are answered
        REBALANCE_IN_PROGRESS (their members rejoin the consumer group) and its timers stop."""
        for member in group.members.values():
            parked_join = group.take_join_reply(member)
            if parked_join is not None:
                fx.reply(
                    parked_join[0], self.join_error(parked_join[1], REBALANCE_IN_PROGRESS, member.member_id)
                )
            parked_sync = group.take_sync_reply(member)
            if parked_sync is not None:
                fx.reply(parked_sync[0], self._sync_response(REBALANCE_IN_PROGRESS))
            self.timers.cancel(member.session_key)
        for member_id in group.pending_members:
            self.timers.cancel(session_key(group.group_id, member_id))
        self.timers.cancel(group.join_key)
        self.timers.cancel(sync_key(group.group_id, group.generation_id))
        self._rebalance_started.pop(group.group_id, None)
        del self.groups[group.group_id]

    def adopt_downgraded(
        self, group: ClassicGroup, fx: Effects, rebalance: bool = True
    ) -> GroupMetadataRecord:
        """A consumer group converted back (Stable at its epoch): sessions start and, unless a
        replacing member just joined, the group rebalances at once (T3); returns the group record
        to write."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.reschedule_session(member)
        record = self.group_record(group, {m.member_id: m.assignment for m in group.members.values()})
        log.info(
            "group %s: converted from consumer to classic at generation %d",
            group.group_id,
            group.generation_id,
        )
        if rebalance:
            self._prepare_rebalance(group, fx)
        return record

    def holds(self, group_id: str) -> bool:
        return group_id in self.groups

    def deletion(self, group_id: str, expiring: bool) -> PendingChange:
        """DeleteGroups always tombstones the group; the retention sweep only when a record of
        it was ever written (generation > 0)."""
        group = self.groups[group_id]

        def apply() -> None:
            if self.groups.get(group_id) is not group:
                return
            if group.state is EMPTY:
                self.remove_group(group)
            else:
                log.info("group %s: deleted while members joined; it stays", group_id)

        records: list[Record] = [] if expiring and group.generation_id == 0 else [GroupTombstone(group_id)]
        return PendingChange(records, apply)

    # -- timers ----------------------------------------------------------------------------------

    def timer_handlers(self) -> Mapping[str, TimerHandler]:
        return {
            SESSION_TIMER: lambda key, fx: self.expire_session(str(key[1]), str(key[2]), fx),
            JOIN_TIMER: lambda key, fx: self.expire_join(str(key[1]), fx),
            SYNC_TIMER: lambda key, fx: self.expire_pending_sync(str(key[1]), int(key[2]), fx),
        }

    # -- loading / unloading ---------------------------------------------------------------------

    def load(self, records: Sequence[Record]) -> None:
        for record in records:
            if isinstance(record, GroupMetadataRecord):
                self.load_group(record)

    def load_group(self, record: GroupMetadataRecord) -> ClassicGroup:
        """docs/groups.md#loading: Stable at the persisted generation with its members, or Empty without members."""
        protocol = record.protocol_name or ""
        group = ClassicGroup(
            record.group_id,
            state=STABLE if record.members else EMPTY,
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
        self.groups[record.group_id] = group
        return group

    def on_loaded(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """Restart every loaded member's session with a full timeout; rebalance oversized groups.
        ``group_ids``: only these groups were loaded (one shard taken over)."""
        max_size = self.config.group_max_size
        for group in _selected(self.groups, group_ids):
            for member in group.members.values():
                self.reschedule_session(member)
            if len(group.members) > max_size:
                self._event(group, LOADED, f"loaded with {len(group.members)} members, over group.max.size")
                self._prepare_rebalance(group, fx)

    def unload(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """T9: the shard is no longer ours: every group (or those of ``group_ids``) goes Dead and
        parked requests are answered NOT_COORDINATOR so that clients look the coordinator up again."""
        unloaded = list(_selected(self.groups, group_ids))
        for group in unloaded:
            self._transition(group, DEAD)
            for member in group.members.values():
                parked_join = group.take_join_reply(member)
                if parked_join is not None:
                    fx.reply(
                        parked_join[0], self.join_error(parked_join[1], NOT_COORDINATOR, member.member_id)
                    )
                parked_sync = group.take_sync_reply(member)
                if parked_sync is not None:
                    fx.reply(parked_sync[0], self._sync_response(NOT_COORDINATOR))
        for group in unloaded:
            del self.groups[group.group_id]


def _selected(groups: dict[str, ClassicGroup], group_ids: Collection[str] | None) -> Iterable[ClassicGroup]:
    if group_ids is None:
        return groups.values()
    return [groups[group_id] for group_id in group_ids if group_id in groups]
