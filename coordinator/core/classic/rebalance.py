"""Classic groups: their state, the rebalance (join completion, the assignment handed out), the
member timers and the responses those build (Kafka's GroupMetadataManager, classic part;
docs/groups.md#classic-groups, transitions T1-T9 in docs/groups.md#classic-transitions).

Handlers add replies, records and continuations to an :class:`~coordinator.core.effects.Effects`
(see docs/commit-path.md). A state change that a write carries is applied when the write is
durable, to the group and generation it was computed for, as Kafka's append callbacks do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from coordinator.core.classic.group import (
    ClassicGroup,
    Member,
    session_key,
    sync_key,
)
from coordinator.core.classic.records import group_record
from coordinator.core.clock import ShardClock
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from coordinator.core.events import (
    REBALANCE_TIMEOUT,
    SESSION_TIMEOUT,
    SYNC_TIMEOUT,
    Detail,
    GroupEvents,
)
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.registry import GroupRegistry
from coordinator.core.state import GroupState
from coordinator.core.stats import CoreStats
from coordinator.core.timers import TimerKey, Timers
from protocol.error_responses import join_group_error
from protocol.messages.join_group import JoinGroupResponse, JoinGroupResponseMember
from protocol.messages.sync_group import SyncGroupResponse

log = logging.getLogger(__name__)

EMPTY: Final = GroupState.EMPTY
PREPARING_REBALANCE: Final = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE: Final = GroupState.COMPLETING_REBALANCE
STABLE: Final = GroupState.STABLE
DEAD: Final = GroupState.DEAD


class ClassicRebalance:
    """The state of one shard's classic groups and how they rebalance."""

    def __init__(
        self,
        config: BrokerGroupSettings,
        timers: Timers[TimerKey],
        clock: ShardClock,
        stats: CoreStats,
        new_member_id: Callable[[str], str],
        events: GroupEvents,
        registry: GroupRegistry,
    ) -> None:
        self.config = config
        self.events = events
        self.timers = timers
        self.clock = clock
        self.new_member_id = new_member_id
        self.groups: dict[str, ClassicGroup] = {}
        self.registry = registry  # the group id space and group.max.groups, shared by every kind
        self.stats = stats
        # Rebalance start (monotonic ms) per group, for the rebalance-duration metric.
        self._rebalance_started: dict[str, int] = {}

    def _transition(self, group: ClassicGroup, target: GroupState) -> None:
        if log.isEnabledFor(logging.DEBUG):  # the .value reads cost a call each otherwise
            log.debug("group %s: %s -> %s", group.group_id, group.state.value, target.value)
        group.transition_to(target, self.clock.wall_ms)
        if target is PREPARING_REBALANCE:
            self._rebalance_started.setdefault(group.group_id, self.clock.now_ms)
        elif target is STABLE or target is EMPTY or target is DEAD:
            started = self._rebalance_started.pop(group.group_id, None)
            if started is not None and target is STABLE:
                self.stats.rebalances_completed += 1
                self.stats.rebalance_durations_ms.observe(self.clock.now_ms - started)

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
        member.last_heartbeat_ms = self.clock.now_ms
        self.timers.schedule(member.session_key, self.clock.now_ms + timeout)

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
            fx.write([group_record(group, {})])
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

    def remove_group(self, group: ClassicGroup) -> None:
        """T8: an Empty group is deleted (DeleteGroups) or expired (retention sweep)."""
        for member_id in group.pending_members:
            self.timers.cancel(session_key(group.group_id, member_id))
        group.clear_pending_members()
        self.timers.cancel(group.join_key)
        self._transition(group, DEAD)
        del self.groups[group.group_id]
        self.events.group_removed(group.group_id, "classic", group.generation_id, "deleted or expired")
