"""The consumer groups of one shard as a kind of group (coordinator/core/group.py): their timers,
loading and unloading, deletion and the offset rules. The protocol is in heartbeat.py,
membership.py and assignment.py, classic-protocol members in classic_members.py."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from functools import partial

from coordinator.core.consumer.describe import describe_groups
from coordinator.core.consumer.group import (
    CONSUMER_GROUP_TYPE,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    normalize,
)
from coordinator.core.consumer.heartbeat import ConsumerHeartbeat
from coordinator.core.consumer.records import member_from_record
from coordinator.core.consumer.timer_keys import (
    JOIN_TIMER,
    REBALANCE_TIMER,
    SESSION_TIMER,
    SYNC_TIMER,
    rebalance_key,
    session_key,
)
from coordinator.core.consumer.view import ConsumerGroupView
from coordinator.core.effects import Effects
from coordinator.core.epoch_groups import delete_refusal, is_empty, selected, txn_offset_commit_error, unload
from coordinator.core.errors import (
    ILLEGAL_GENERATION,
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_VERSION,
)
from coordinator.core.events import (
    REBALANCE_TIMEOUT,
    SESSION_TIMEOUT,
    SYNC_TIMEOUT,
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
from coordinator.core.liveness import CLASSIC_INTERVAL_DIVISOR, CONSUMER_LATE_INTERVALS, MemberLiveness, judge
from protocol.messages import consumer_group_describe as cgd
from protocol.messages import consumer_group_heartbeat as cgh
from protocol.messages.offset_commit import OffsetCommitRequest
from storage.records import (
    ConsumerGroupRecord,
    ConsumerGroupTombstone,
    ConsumerMemberRecord,
    Record,
)

log = logging.getLogger(__name__)


class ConsumerGroupManager(ConsumerHeartbeat):
    """Owns the consumer groups of one shard."""

    name = CONSUMER_GROUP_TYPE

    # -- timers ------------------------------------------------------------------------------

    def _expired_member(self, group_id: str, member_id: str) -> tuple[ConsumerGroup, ConsumerMember] | None:
        """The group and member a member timer fired for, None when either is gone (every
        expiry handler starts here)."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return None
        return group, member

    def expire_session(self, group_id: str, member_id: str, fx: Effects) -> None:
        expired = self._expired_member(group_id, member_id)
        if expired is None:
            return
        group, member = expired
        self._fence(None, group, member, "fenced: session timeout expired", SESSION_TIMEOUT, None, fx)

    def expire_rebalance(self, group_id: str, member_id: str, fx: Effects) -> None:
        expired = self._expired_member(group_id, member_id)
        if expired is None:
            return
        group, member = expired
        epoch = member.rebalance_timer_epoch
        member.rebalance_timer_epoch = None
        if member.state is not MemberState.UNREVOKED_PARTITIONS or member.member_epoch != epoch:
            return
        self._fence(
            None,
            group,
            member,
            "fenced: did not revoke within the rebalance timeout",
            REBALANCE_TIMEOUT,
            None,
            fx,
        )

    def expire_classic_join(self, group_id: str, member_id: str, fx: Effects) -> None:
        expired = self._expired_member(group_id, member_id)
        if expired is None:
            return
        group, member = expired
        why = "fenced: the classic member did not rejoin within the rebalance timeout"
        self._fence(None, group, member, why, REBALANCE_TIMEOUT, None, fx)

    def expire_classic_sync(self, group_id: str, member_id: str, fx: Effects) -> None:
        expired = self._expired_member(group_id, member_id)
        if expired is None:
            return
        group, member = expired
        why = "fenced: the classic member did not send SyncGroup within the rebalance timeout"
        self._fence(None, group, member, why, SYNC_TIMEOUT, None, fx)

    # -- loading / unloading -------------------------------------------------------------------

    def load(self, records: Sequence[Record]) -> None:
        """Consumer groups: rebuild groups, ownership and timers from the stored rows."""
        groups = [r for r in records if isinstance(r, ConsumerGroupRecord)]
        members = [r for r in records if isinstance(r, ConsumerMemberRecord)]
        for record in groups:
            self.groups[record.group_id] = ConsumerGroup(
                record.group_id,
                group_epoch=record.group_epoch,
                assignment_epoch=record.assignment_epoch,
                state_ms=record.state_ms,
            )
        for m in sorted(members, key=lambda r: (r.group_id, -r.member_epoch, r.member_id)):
            group = self.groups.get(m.group_id)
            if group is None:
                log.warning("consumer member %s of unknown group %s ignored", m.member_id, m.group_id)
                continue
            member = member_from_record(m)
            # Rows written by different batches may disagree after a crash between them: a
            # partition claimed twice stays with the member of the higher epoch (sorted first).
            for source in (member.assigned, member.pending_revocation):
                for topic in list(source):
                    free = frozenset(p for p in source[topic] if (topic, p) not in group.owners)
                    if free:
                        source[topic] = free
                    else:
                        del source[topic]
            group.members[m.member_id] = member
            if m.instance_id is not None:
                group.static_members[m.instance_id] = m.member_id
            group.target[m.member_id] = normalize(dict(m.target))
            group.add_ownership(member)

    def on_loaded(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """Every loaded member gets a full session; members revoking get a full rebalance timeout.

        The subscription metadata is recomputed from the (already loaded) catalog; when the stored
        target no longer covers exactly those partitions -- the catalog changed and the group had
        not caught up before the restart -- the first heartbeat bumps the group epoch.
        ``group_ids``: only these groups were loaded (one shard taken over)."""
        for group in selected(self.groups, group_ids):
            metadata = self._subscription_metadata(group)
            covered = {(t, p) for target in group.target.values() for t, ps in target.items() for p in ps}
            wanted = {(t, p) for t, (_, count) in metadata.items() for p in range(count)}
            if covered == wanted or group.group_epoch > group.assignment_epoch:
                group.subscription_metadata = metadata
                group.catalog_version = self.catalog.version
            for member in group.members.values():
                self.reschedule_session(group, member)
                if member.state is MemberState.UNREVOKED_PARTITIONS and member.classic is None:
                    member.rebalance_timer_epoch = member.member_epoch
                    self.timers.schedule(
                        rebalance_key(group.group_id, member.member_id),
                        self.clock.now_ms + member.rebalance_timeout_ms,
                    )

    def unload(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """Nothing is parked in consumer groups: the groups (all, or those of ``group_ids``) just go."""
        unload(self.groups, group_ids)

    # -- DeleteGroups and the retention sweep --------------------------------------------------

    def remove_group(self, group: ConsumerGroup) -> None:
        del self.groups[group.group_id]
        group.dead = True
        self.events.group_removed(group.group_id, "consumer", group.group_epoch, "deleted or expired")

    def validate_delete(self, group_id: str) -> int:
        return delete_refusal(self.groups, group_id)

    def deletion(self, group_id: str, expiring: bool) -> PendingChange:
        return group_deletion(
            self.groups, group_id, [ConsumerGroupTombstone(group_id)], is_empty, self.remove_group
        )

    def timer_handlers(self) -> Mapping[str, TimerHandler]:
        return {
            SESSION_TIMER: lambda key, fx: self.expire_session(str(key[1]), str(key[2]), fx),
            REBALANCE_TIMER: lambda key, fx: self.expire_rebalance(str(key[1]), str(key[2]), fx),
            JOIN_TIMER: lambda key, fx: self.expire_classic_join(str(key[1]), str(key[2]), fx),
            SYNC_TIMER: lambda key, fx: self.expire_classic_sync(str(key[1]), str(key[2]), fx),
        }

    @staticmethod
    def is_subscribed_to_topic(group: ConsumerGroup, topic: str) -> bool:
        return topic in group.subscription_metadata or any(
            topic in m.subscribed_topic_names for m in group.members.values()
        )

    # -- offsets (the GroupKind rules, coordinator/core/group.py; Kafka's ConsumerGroup) ---------

    def validate_offset_commit(self, group_id: str, req: OffsetCommitRequest, version: int) -> int:
        group = self.groups[group_id]
        member_epoch = req.generation_id_or_member_epoch
        if member_epoch < 0 and not group.members:
            return NONE
        member = group.members.get(req.member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if member.classic is not None:
            # A classic member commits with its generation, which is its member epoch.
            return ILLEGAL_GENERATION if member_epoch != member.member_epoch else NONE
        if version < 9:
            return UNSUPPORTED_VERSION  # consumer-protocol members commit with OffsetCommit v9+
        if member_epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH
        return NONE

    def validate_txn_offset_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation_or_epoch: int
    ) -> int:
        return txn_offset_commit_error(self.groups[group_id], member_id, instance_id, generation_or_epoch)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        if member_id is None and member_epoch < 0:
            return NONE  # an admin fetch
        member = self.groups[group_id].members.get(member_id or "")
        if member is None:
            return UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ILLEGAL_GENERATION if member.classic is not None else STALE_MEMBER_EPOCH
        return NONE

    def offset_delete_rule(self, group_id: str) -> OffsetDeleteRule:
        """Any state (Kafka's Java coordinator); only topics members subscribe to are protected."""
        group = self.groups[group_id]
        return NONE, partial(self.is_subscribed_to_topic, group) if group.members else None

    def view(self, group_id: str) -> GroupView | None:
        group = self.groups.get(group_id)
        return None if group is None else ConsumerGroupView(group, self.preferred_assignor(group))

    def member_liveness(self, group_id: str, member_id: str, now_ms: int) -> MemberLiveness | None:
        """A KIP-848 member is told its interval: late once it missed a whole one; a classic-protocol
        member of the group picks its own, late after a third of its session."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if member is None:
            return None
        if member.classic is not None:
            late_after = member.classic.session_timeout_ms // CLASSIC_INTERVAL_DIVISOR
        else:
            late_after = CONSUMER_LATE_INTERVALS * self.group_configs.intervals(group_id).interval_ms
        deadline = self.timers.deadline(session_key(group_id, member_id))
        return judge(member.last_heartbeat_ms, deadline, late_after, now_ms)

    def offset_expiry(self, group_id: str) -> OffsetExpiry:
        """Offsets of topics no member subscribes to expire by commit time (Kafka's Java coordinator)."""
        group = self.groups[group_id]
        return OffsetExpiry(
            keep_topics=frozenset(group.subscription_metadata) if group.members else frozenset()
        )

    def expires_without_offsets(self, group_id: str) -> bool:
        return not self.groups[group_id].members

    # -- the other kinds -------------------------------------------------------------------------

    def attach_catalog(self, catalog: TopicCatalog) -> None:
        self.catalog = catalog

    def request_handlers(self) -> Mapping[type, RequestHandler]:
        return {
            cgh.ConsumerGroupHeartbeatRequest: self.heartbeat,
            cgd.ConsumerGroupDescribeRequest: lambda ctx, req, fx: fx.reply(
                ctx.reply_to, describe_groups(self, ctx, req)
            ),
        }

    def classic_protocol(self, group_id: str, joining: bool) -> ClassicProtocolApi | None:
        """Classic-protocol members of a consumer group (docs/migration.md); a JoinGroup to an
        empty consumer group turns it into a classic group instead."""
        if joining and not self.groups[group_id].members:
            return None
        return self.classic_members

    def release_empty(self, group_id: str, fx: Effects) -> None:
        log.info("group %s: converted from consumer to classic", group_id)
        self.remove_group(self.groups[group_id])
        fx.write([ConsumerGroupTombstone(group_id)])
