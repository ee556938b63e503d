"""The streams groups of one shard as a kind of group (coordinator/core/group.py): timers,
loading, deletion and the offset rules. The protocol is in heartbeat.py."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from coordinator.core.effects import Effects
from coordinator.core.epoch_groups import delete_refusal, is_empty, selected, txn_offset_commit_error, unload
from coordinator.core.errors import (
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_VERSION,
)
from coordinator.core.events import REBALANCE_TIMEOUT as REBALANCE_TIMEOUT_EVENT
from coordinator.core.events import SESSION_TIMEOUT as SESSION_TIMEOUT_EVENT
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
from coordinator.core.liveness import CONSUMER_LATE_INTERVALS, MemberLiveness, judge
from coordinator.core.streams.classic_refusal import ClassicRefusal
from coordinator.core.streams.describe import describe_groups
from coordinator.core.streams.group import STREAMS_GROUP_TYPE, MemberState, StreamsGroup, tasks_of
from coordinator.core.streams.heartbeat import (
    ASSIGNMENT_TIMER,
    INITIAL_DELAY_TIMER,
    REBALANCE_TIMER,
    SESSION_TIMER,
    Rejected,
    StreamsHeartbeat,
)
from coordinator.core.streams.records import (
    add_member_from_record,
    group_from_record,
    group_record,
    member_record,
)
from coordinator.core.streams.view import StreamsGroupView
from protocol.messages import streams_group_describe as sgd
from protocol.messages import streams_group_heartbeat as sgh
from protocol.messages.offset_commit import OffsetCommitRequest
from storage.records import Record, StreamsGroupRecord, StreamsGroupTombstone, StreamsMemberRecord

log = logging.getLogger(__name__)


class StreamsGroupManager(StreamsHeartbeat):
    """Owns the streams groups of one shard."""

    name = STREAMS_GROUP_TYPE
    classic_refusal = ClassicRefusal()

    # -- timers ------------------------------------------------------------------------------

    def expire_session(self, group_id: str, member_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        log.info("streams group %s: member %s fenced: session timeout expired", group_id, member_id)
        self.fence(group, member, SESSION_TIMEOUT_EVENT, "fenced: session timeout expired")
        self.persist(group, fx)

    def expire_rebalance(self, group_id: str, member_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.state is not MemberState.UNREVOKED_TASKS:
            return
        log.info(
            "streams group %s: member %s fenced: did not revoke within the rebalance timeout",
            group_id,
            member_id,
        )
        self.fence(
            group, member, REBALANCE_TIMEOUT_EVENT, "fenced: did not revoke within the rebalance timeout"
        )
        self.persist(group, fx)

    def initial_delay_over(self, group_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        if group is not None and self.end_initial_delay(group):
            log.info("streams group %s: initial rebalance delay over, assigned at epoch %d", group_id,
                     group.group_epoch)  # fmt: skip
            self.persist(group, fx)

    def assignment_interval_over(self, group_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        if group is not None and self.compute_waiting_target(group):
            self.persist(group, fx)

    def timer_handlers(self) -> Mapping[str, TimerHandler]:
        return {
            ASSIGNMENT_TIMER: lambda key, fx: self.assignment_interval_over(str(key[1]), fx),
            INITIAL_DELAY_TIMER: lambda key, fx: self.initial_delay_over(str(key[1]), fx),
            SESSION_TIMER: lambda key, fx: self.expire_session(str(key[1]), str(key[2]), fx),
            REBALANCE_TIMER: lambda key, fx: self.expire_rebalance(str(key[1]), str(key[2]), fx),
        }

    # -- loading / unloading -------------------------------------------------------------------

    def load(self, records: Sequence[Record]) -> None:
        """Rebuild groups, members, targets and task ownership from the stored rows."""
        for record in records:
            if isinstance(record, StreamsGroupRecord):
                self.groups[record.group_id] = group_from_record(record)
        for record in records:
            if isinstance(record, StreamsMemberRecord):
                group = self.groups.get(record.group_id)
                if group is None:
                    log.warning(
                        "streams member %s of unknown group %s ignored", record.member_id, record.group_id
                    )
                    continue
                add_member_from_record(group, record)
        for group in self.groups.values():
            self.written[group.group_id] = {group.group_id: group_record(group)} | {
                (group.group_id, m.member_id): member_record(group, m) for m in group.members.values()
            }

    def on_loaded(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """Every member gets a full session. The topology is configured against the catalog;
        when the stored target still covers exactly the tasks it gives (the catalog did not
        change meanwhile), the group goes on at its epoch, else the first heartbeat bumps it. A
        target stored behind its group epoch (waiting for its assignment interval, or the initial
        delay, neither of which is stored) is computed at once, by the assignment timer."""
        for group in selected(self.groups, group_ids):
            self._restore_configuration(group)
            for member in group.members.values():
                self.reschedule_session(group, member)
            if group.members and group.group_epoch > group.assignment_epoch:
                self.timers.schedule((ASSIGNMENT_TIMER, group.group_id), self.clock.now_ms)

    def _restore_configuration(self, group: StreamsGroup) -> None:
        if group.topology is None:
            return
        try:
            configured = self.configured_for(group.topology)
        except Rejected:
            return
        targeted = {t for target in group.target.values() for t in tasks_of(target.active)}
        wanted = {(s, p) for s, n in configured.tasks.items() for p in range(n)}
        if targeted == wanted or group.group_epoch > group.assignment_epoch:
            group.configured = configured
            group.configured_version = self.catalog.version

    def unload(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        unload(self.groups, group_ids)

    def attach_catalog(self, catalog: TopicCatalog) -> None:
        self.catalog = catalog

    def request_handlers(self) -> Mapping[type, RequestHandler]:
        return {
            sgh.StreamsGroupHeartbeatRequest: self.heartbeat,
            sgd.StreamsGroupDescribeRequest: lambda ctx, req, fx: fx.reply(
                ctx.reply_to, describe_groups(self.groups, self.registry, req)
            ),
        }

    def classic_protocol(self, group_id: str, joining: bool) -> ClassicProtocolApi | None:
        """A streams group takes no classic member; a JoinGroup to an empty one releases the
        id (release_empty) and makes a classic group, as the registry does for every kind."""
        if joining and not self.groups[group_id].members:
            return None
        return self.classic_refusal

    def release_empty(self, group_id: str, fx: Effects) -> None:
        group = self.groups.pop(group_id)
        group.dead = True
        self.written.pop(group_id, None)
        fx.write([StreamsGroupTombstone(group_id)])

    # -- DeleteGroups and the retention sweep --------------------------------------------------

    def validate_delete(self, group_id: str) -> int:
        return delete_refusal(self.groups, group_id)

    def deletion(self, group_id: str, expiring: bool) -> PendingChange:
        return group_deletion(
            self.groups, group_id, [StreamsGroupTombstone(group_id)], is_empty, self._remove_group
        )

    def _remove_group(self, group: StreamsGroup) -> None:
        del self.groups[group.group_id]
        self.written.pop(group.group_id, None)
        group.dead = True

    def offset_expiry(self, group_id: str) -> OffsetExpiry:
        """Offsets of topics the topology does not read expire by commit time (Kafka's StreamsGroup)."""
        group = self.groups[group_id]
        if not group.members or group.topology is None:
            return OffsetExpiry()
        inputs = frozenset(
            t
            for s in group.topology.subtopologies
            for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))
        )
        return OffsetExpiry(keep_topics=inputs)

    def expires_without_offsets(self, group_id: str) -> bool:
        return not self.groups[group_id].members

    # -- offsets (Kafka's StreamsGroup.validateOffsetCommit / validateOffsetFetch) -------------

    def validate_offset_commit(self, group_id: str, req: OffsetCommitRequest, version: int) -> int:
        group = self.groups[group_id]
        epoch = req.generation_id_or_member_epoch
        if epoch < 0 and not group.members:
            return NONE  # an admin commit to an empty group (kafka-streams-application-reset)
        member = group.members.get(req.member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if version < 9:
            return UNSUPPORTED_VERSION
        if epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH
        return NONE

    def validate_txn_offset_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation_or_epoch: int
    ) -> int:
        """Kafka 4.4's StreamsGroup.validateOffsetCommit with isTransactional (any version)."""
        return txn_offset_commit_error(self.groups[group_id], member_id, instance_id, generation_or_epoch)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        if member_id is None and member_epoch < 0:
            return NONE
        member = self.groups[group_id].members.get(member_id or "")
        if member is None:
            return UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH
        return NONE

    def view(self, group_id: str) -> GroupView | None:
        group = self.groups.get(group_id)
        return None if group is None else StreamsGroupView(group)

    def member_liveness(self, group_id: str, member_id: str, now_ms: int) -> MemberLiveness | None:
        """A streams member is told its interval (docs/streams-groups.md#the-heartbeat): late
        once it missed a whole one."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return None
        late_after = CONSUMER_LATE_INTERVALS * self.interval(group, member)
        deadline = self.timers.deadline((SESSION_TIMER, group_id, member_id))
        return judge(member.last_heartbeat_ms, deadline, late_after, now_ms)

    def offset_delete_rule(self, group_id: str) -> OffsetDeleteRule:
        group = self.groups[group_id]
        keep = self.offset_expiry(group_id).keep_topics
        return NONE, (lambda topic: topic in keep) if group.members else None
