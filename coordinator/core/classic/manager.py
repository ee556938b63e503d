"""The classic groups of one shard as a kind of group (coordinator/core/group.py): loading and
unloading, deletion, the offset rules, and the online migration's two hooks (docs/migration.md).
The protocol itself is in rebalance.py, join.py and sync_leave.py."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence

from coordinator.core.classic.describe import describe_groups
from coordinator.core.classic.group import (
    CLASSIC_GROUP_TYPE,
    JOIN_TIMER,
    SESSION_TIMER,
    SYNC_TIMER,
    ClassicGroup,
    session_key,
    sync_key,
)
from coordinator.core.classic.rebalance import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
)
from coordinator.core.classic.records import group_from_record, group_record
from coordinator.core.classic.sync_leave import ClassicSyncAndLeave
from coordinator.core.classic.view import ClassicGroupView
from coordinator.core.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_ID_NOT_FOUND,
    ILLEGAL_GENERATION,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from coordinator.core.events import (
    LOADED,
)
from coordinator.core.group import (
    ClassicProtocolApi,
    GroupView,
    OffsetDeleteRule,
    OffsetExpiry,
    PendingChange,
    RequestHandler,
    TimerHandler,
    TopicCatalog,
    group_deletion,
)
from coordinator.core.liveness import CLASSIC_INTERVAL_DIVISOR, MemberLiveness, judge
from protocol.messages.describe_groups import (
    DescribeGroupsRequest,
)
from protocol.messages.offset_commit import OffsetCommitRequest
from storage.records import GroupMetadataRecord, GroupTombstone, Record

log = logging.getLogger(__name__)


class ClassicGroupManager(ClassicSyncAndLeave):
    """Owns the classic groups of one shard (the default kind: it answers the classic group APIs
    for unknown ids and holds the groups that only have offsets)."""

    name = CLASSIC_GROUP_TYPE

    # -- offsets (the GroupKind rules, coordinator/core/group.py) ----------------------------------

    def validate_offset_commit(self, group_id: str, req: OffsetCommitRequest, version: int) -> int:
        """A commit accepted from a member of a Stable or rebalancing group counts as a heartbeat;
        during PreparingRebalance the member learns about the rebalance from its next heartbeat."""
        group = self.groups[group_id]
        code = validate_offset_commit(
            group, req.member_id, req.group_instance_id, req.generation_id_or_member_epoch
        )
        if code == NONE:
            member = group.members.get(req.member_id)
            if member is not None and (group.state is STABLE or group.state is PREPARING_REBALANCE):
                self.reschedule_session(member)
        return code

    def validate_txn_offset_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation_or_epoch: int
    ) -> int:
        return validate_offset_commit(
            self.groups[group_id], member_id, instance_id, generation_or_epoch, transactional=True
        )

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        return NONE  # classic groups ignore OffsetFetch v9's member id and epoch

    def offset_delete_rule(self, group_id: str) -> OffsetDeleteRule:
        """Only Empty groups, or consumer-protocol groups for the topics they do not consume."""
        group = self.groups[group_id]
        if group.state is EMPTY:
            return NONE, None
        if not group.uses_consumer_protocol():
            return NON_EMPTY_GROUP, None
        return NONE, group.is_subscribed_to_topic

    def view(self, group_id: str) -> GroupView | None:
        group = self.groups.get(group_id)
        return None if group is None else ClassicGroupView(group)

    def member_liveness(self, group_id: str, member_id: str, now_ms: int) -> MemberLiveness | None:
        """A classic client picks its own heartbeat interval: late after a third of the session."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if member is None:
            return None
        return judge(
            member.last_heartbeat_ms,
            self.timers.deadline(member.session_key),
            member.session_timeout_ms // CLASSIC_INTERVAL_DIVISOR,
            now_ms,
            waiting=member.has_satisfied_heartbeat(),
        )

    def offset_expiry(self, group_id: str) -> OffsetExpiry | None:
        """KIP-211 (docs/groups.md#offsets-and-retention): an Empty group's offsets expire from the
        moment it became Empty; a Stable consumer keeps what it consumes; simple groups (no
        protocol) expire by commit time; other groups keep everything."""
        group = self.groups[group_id]
        protocol_type = group.protocol_type
        if protocol_type is None:
            return OffsetExpiry()
        if group.state is EMPTY:
            return OffsetExpiry(base_ms=group.state_ms)
        if (
            protocol_type == CONSUMER_PROTOCOL_TYPE
            and group.subscribed_topics is not None
            and group.state is STABLE
        ):
            return OffsetExpiry(keep_topics=group.subscribed_topics)
        return None  # rebalancing, non-consumer protocol, or unknown subscription

    def expires_without_offsets(self, group_id: str) -> bool:
        return self.groups[group_id].state is EMPTY

    def create_offsets_group(self, group_id: str) -> ClassicGroup:
        """A "simple" group: no protocol type, only offsets (a commit with generation -1)."""
        return self.create_group(group_id)

    # -- the other kinds -------------------------------------------------------------------------

    def attach_catalog(self, catalog: TopicCatalog) -> None:
        pass  # classic groups leave the assignment to their leader

    def request_handlers(self) -> Mapping[type, RequestHandler]:
        return {
            DescribeGroupsRequest: lambda ctx, req, fx: fx.reply(
                ctx.reply_to, describe_groups(self.groups, ctx, req, self.registry.holds)
            )
        }

    def classic_protocol(self, group_id: str, joining: bool) -> ClassicProtocolApi:
        return self

    def release_empty(self, group_id: str, fx: Effects) -> None:
        group = self.groups[group_id]
        log.info("group %s: converted from classic to consumer", group_id)
        self.remove_group(group)
        if group.generation_id > 0:
            fx.write([GroupTombstone(group_id)])

    # -- DeleteGroups and the retention sweep -----------------------------------------------------

    def validate_delete(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return GROUP_ID_NOT_FOUND
        if group.state is not EMPTY:
            return NON_EMPTY_GROUP
        return NONE

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
        record = group_record(group, {m.member_id: m.assignment for m in group.members.values()})
        log.info(
            "group %s: converted from consumer to classic at generation %d",
            group.group_id,
            group.generation_id,
        )
        if rebalance:
            self._prepare_rebalance(group, fx)
        return record

    def deletion(self, group_id: str, expiring: bool) -> PendingChange:
        """DeleteGroups always tombstones the group; the retention sweep only when a record of
        it was ever written (generation > 0)."""
        written = not expiring or self.groups[group_id].generation_id > 0
        records: list[Record] = [GroupTombstone(group_id)] if written else []
        return group_deletion(self.groups, group_id, records, _is_empty, self.remove_group)

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
                group = group_from_record(record)
                self.groups[group.group_id] = group

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


def _is_empty(group: ClassicGroup) -> bool:
    return group.state is EMPTY


def _selected(groups: dict[str, ClassicGroup], group_ids: Collection[str] | None) -> Iterable[ClassicGroup]:
    if group_ids is None:
        return groups.values()
    return [groups[group_id] for group_id in group_ids if group_id in groups]


def validate_offset_commit(
    group: ClassicGroup,
    member_id: str,
    instance_id: str | None,
    generation_id: int,
    transactional: bool = False,
) -> int:
    """Kafka's ClassicGroup.validateOffsetCommit; a transactional commit (TxnOffsetCommit) need
    not name a member and is taken while the group completes a rebalance."""
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
    elif state is not EMPTY and not transactional:
        return UNKNOWN_MEMBER_ID  # only members may commit to a live group
    if state is COMPLETING_REBALANCE and not transactional:
        # The member has the new generation but not its assignment yet: have it finish the
        # rebalance first.
        return REBALANCE_IN_PROGRESS
    return NONE
