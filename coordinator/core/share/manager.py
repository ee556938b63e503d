"""The share groups of one shard as a kind of group (coordinator/core/group.py): loading,
timers, deletion, and the answers to what share groups do not take (the classic group APIs,
committed offsets). Membership is in membership.py, ShareGroupDescribe in describe.py."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.epoch_groups import delete_refusal, is_empty, selected, unload
from coordinator.core.errors import GROUP_ID_NOT_FOUND
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
from coordinator.core.share.delivery import (
    SHARE_LOCK_TIMER,
    ShareAcknowledgeOp,
    ShareAcquireOp,
    ShareDeadLetteredOp,
    ShareInitializeOp,
    ShareLogStartOp,
    ShareReleaseOp,
)
from coordinator.core.share.describe import describe_groups
from coordinator.core.share.group import ShareGroup
from coordinator.core.share.offsets_admin import ShareOffsetsAdmin
from coordinator.core.share.records import (
    member_from_record,
    partition_state_from_record,
    target_from_record,
)
from coordinator.core.share.timer_keys import (
    SHARE_ASSIGNMENT_TIMER,
    SHARE_SESSION_TIMER,
    assignment_key,
    session_key,
)
from coordinator.core.share.view import ShareGroupView
from protocol.apis import ApiKey
from protocol.error_responses import error_response
from protocol.messages import share_group_describe as sgd
from protocol.messages import share_group_heartbeat as sgh
from protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.sync_group import SyncGroupRequest
from storage.records import (
    Record,
    ShareGroupRecord,
    ShareGroupTombstone,
    ShareMemberRecord,
    SharePartitionStateRecord,
)

log = logging.getLogger(__name__)


class ShareGroupManager(ShareOffsetsAdmin):
    """Owns the share groups of one shard."""

    name = "share"

    # -- loading / unloading -------------------------------------------------------------------

    def load(self, records: Sequence[Record]) -> None:
        for record in records:
            if isinstance(record, ShareGroupRecord):
                self.groups[record.group_id] = ShareGroup(
                    record.group_id, group_epoch=record.group_epoch, assignment_epoch=record.assignment_epoch
                )
        for record in records:
            if isinstance(record, ShareMemberRecord):
                group = self.groups.get(record.group_id)
                if group is None:
                    log.warning(
                        "share member %s of unknown group %s ignored", record.member_id, record.group_id
                    )
                    continue
                member = member_from_record(record)
                group.members[member.member_id] = member
                group.target[member.member_id] = target_from_record(record)
            elif isinstance(record, SharePartitionStateRecord) and record.group_id in self.groups:
                self.partition_states[record.key] = partition_state_from_record(record)

    def on_loaded(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """Every loaded member gets a full session. The subscribed topics are read from the
        catalog; when the stored target does not cover exactly their partitions (the topics
        changed before the target caught up, or while the coordinator was down), the first
        heartbeat bumps the group epoch."""
        for group in selected(self.groups, group_ids):
            metadata = self._subscription_metadata(group)
            covered = {tp for target in group.target.values() for tp in target}
            wanted = {(t, p) for t, (_, count) in metadata.items() for p in range(count)}
            if covered == wanted or not group.members:
                group.subscription_metadata = metadata
                group.catalog_version = self.catalog.version
            # Otherwise the topics changed since the target was stored: the first heartbeat
            # finds the metadata changed and bumps the group epoch.
            for member in group.members.values():
                self._reschedule_session(group, member)
            if group.group_epoch > group.assignment_epoch:  # stored while waiting for its interval
                self.timers.schedule(assignment_key(group.group_id), self.clock.now_ms)

    def unload(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        unload(self.groups, group_ids)
        self.forget_partitions(None if group_ids is None else set(group_ids))
        kept = set(self.groups)
        self.partition_states = {k: v for k, v in self.partition_states.items() if k[0] in kept}

    def timer_handlers(self) -> Mapping[str, TimerHandler]:
        return {
            SHARE_SESSION_TIMER: lambda key, fx: self.expire_session(str(key[1]), str(key[2]), fx),
            SHARE_ASSIGNMENT_TIMER: lambda key, fx: self.assignment_due(str(key[1]), fx),
            SHARE_LOCK_TIMER: lambda key, fx: self.share_expire_locks(
                (str(key[1]), str(key[2]), int(key[3])), fx
            ),
        }

    def attach_catalog(self, catalog: TopicCatalog) -> None:
        self.catalog = catalog

    def request_handlers(self) -> Mapping[type, RequestHandler]:
        return {
            sgh.ShareGroupHeartbeatRequest: self.heartbeat,
            sgd.ShareGroupDescribeRequest: lambda ctx, req, fx: fx.reply(
                ctx.reply_to, describe_groups(self, req)
            ),
            DescribeShareGroupOffsetsRequest: self.describe_offsets,
            AlterShareGroupOffsetsRequest: self.alter_offsets,
            DeleteShareGroupOffsetsRequest: self.delete_offsets,
            ShareAcknowledgeOp: self.share_acknowledge,
            ShareAcquireOp: self.share_acquire,
            ShareInitializeOp: self.share_initialize,
            ShareLogStartOp: self.share_log_start,
            ShareReleaseOp: self.share_release,
            ShareDeadLetteredOp: self.share_dead_lettered,
        }

    def classic_protocol(self, group_id: str, joining: bool) -> ClassicProtocolApi | None:
        return REFUSE_CLASSIC

    def release_empty(self, group_id: str, fx: Effects) -> None:
        raise RuntimeError("share groups are never converted to another kind")

    # -- DeleteGroups and the retention sweep --------------------------------------------------

    def validate_delete(self, group_id: str) -> int:
        return delete_refusal(self.groups, group_id)

    def deletion(self, group_id: str, expiring: bool) -> PendingChange:
        return group_deletion(
            self.groups, group_id, [ShareGroupTombstone(group_id)], is_empty, self._remove_group
        )

    def _remove_group(self, group: ShareGroup) -> None:
        del self.groups[group.group_id]
        for key in [k for k in self.partition_states if k[0] == group.group_id]:
            del self.partition_states[key]
        self.forget_partitions({group.group_id})
        group.dead = True
        self.events.group_removed(group.group_id, "share", group.group_epoch, "deleted")

    def offset_expiry(self, group_id: str) -> OffsetExpiry | None:
        return None  # a share group has no committed offsets

    def expires_without_offsets(self, group_id: str) -> bool:
        return False  # an empty share group stays until deleted (Kafka)

    # -- offsets: a share group takes none (Kafka: "Group %s is not a consumer group.") ----------

    def validate_offset_commit(self, group_id: str, req: OffsetCommitRequest, version: int) -> int:
        return GROUP_ID_NOT_FOUND

    def validate_txn_offset_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation_or_epoch: int
    ) -> int:
        """Kafka 4.4 finds the group, then ShareGroup.validateOffsetCommit refuses it whatever
        the version: GROUP_ID_NOT_FOUND (docs/transactions.md)."""
        return GROUP_ID_NOT_FOUND

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        return GROUP_ID_NOT_FOUND

    def view(self, group_id: str) -> GroupView | None:
        group = self.groups.get(group_id)
        return None if group is None else ShareGroupView(group)

    def member_liveness(self, group_id: str, member_id: str, now_ms: int) -> MemberLiveness | None:
        """A share member is told its interval: late once it missed a whole one."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if member is None:
            return None
        late_after = CONSUMER_LATE_INTERVALS * self.settings_for(group_id).heartbeat_interval_ms
        deadline = self.timers.deadline(session_key(group_id, member_id))
        return judge(member.last_heartbeat_ms, deadline, late_after, now_ms)

    def offset_delete_rule(self, group_id: str) -> OffsetDeleteRule:
        return GROUP_ID_NOT_FOUND, None


class RefuseClassic:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup on a share group's id: Kafka's
    GROUP_ID_NOT_FOUND ("Group %s is not a classic group.")."""

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest, fx: Effects) -> None:
        fx.reply(ctx.reply_to, error_response(ApiKey.JOIN_GROUP, ctx.api_version, req, GROUP_ID_NOT_FOUND))

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, fx: Effects) -> None:
        fx.reply(ctx.reply_to, error_response(ApiKey.SYNC_GROUP, ctx.api_version, req, GROUP_ID_NOT_FOUND))

    def heartbeat(
        self, ctx: RequestContext, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> int:
        return GROUP_ID_NOT_FOUND

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest, fx: Effects) -> None:
        fx.reply(ctx.reply_to, error_response(ApiKey.LEAVE_GROUP, ctx.api_version, req, GROUP_ID_NOT_FOUND))


REFUSE_CLASSIC = RefuseClassic()
