"""KIP-848 consumer groups: ConsumerGroupHeartbeat, ConsumerGroupDescribe, their timers, target
assignment and persistence (Kafka's GroupMetadataManager, consumer part; docs/groups.md#consumer-groups-kip-848).

Pure like the classic manager: handlers add replies and records to an :class:`Effects`; a reply
is released only once the records of its operation are durable. A failed write leaves memory
ahead of storage, so the group remembers what was not written and rewrites it with its next
write (storage is a state table: the newest row of each key wins).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final, Protocol

from coordinator.core.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, AssignmentMember
from coordinator.core.classic_group import ClassicGroup
from coordinator.core.classic_group_manager import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_AUTHORIZED_OPERATIONS,
    ClassicGroupManager,
    kafka_client_host,
)
from coordinator.core.clock import ShardClock
from coordinator.core.consumer_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    apply_reconciled,
    is_subset,
    normalize,
    reconcile,
)
from coordinator.core.consumer_protocol import MalformedConsumerProtocol
from coordinator.core.context import RequestContext
from coordinator.core.dynamic_configs import DynamicGroupConfigs
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    FENCED_INSTANCE_ID,
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INVALID_GROUP_ID,
    INVALID_REGULAR_EXPRESSION,
    INVALID_REQUEST,
    NON_EMPTY_GROUP,
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
    UNSUPPORTED_VERSION,
    consumer_write_error,
)
from coordinator.core.events import (
    MEMBER_JOINED,
    MEMBER_LEFT,
    METADATA_CHANGED,
    REBALANCE_TIMEOUT,
    SESSION_TIMEOUT,
    STATIC_MEMBER_REPLACED,
    SUBSCRIPTION_CHANGED,
    SYNC_TIMEOUT,
    Detail,
    describe_metadata_change,
    taken_from_others,
)
from coordinator.core.group_config import GroupConfig
from coordinator.core.group_conversion import classic_group_from_consumer, consumer_group_from_classic
from coordinator.core.heartbeat_interval import no_jitter
from coordinator.core.lifecycle import PendingChange, TimerHandler
from coordinator.core.regex import RegexError, TopicPattern, compile_topic_regex
from coordinator.core.shared_values import shared_set
from coordinator.core.stats import CoreStats
from coordinator.core.timers import TimerKey, Timers
from protocol.messages import consumer_group_describe as cgd
from protocol.messages import consumer_group_heartbeat as cgh
from storage.records import (
    ConsumerGroupRecord,
    ConsumerGroupTombstone,
    ConsumerMemberRecord,
    ConsumerMemberTombstone,
    GroupTombstone,
    Record,
    TopicRecord,
)

log = logging.getLogger(__name__)

CONSUMER_GROUP_TYPE: Final = "consumer"
MEMBER_TYPE_CLASSIC: Final = 0
MEMBER_TYPE_CONSUMER: Final = 1

MemberTimerKey = tuple[str, str, str]  # (kind, group id, member id)


# Timer kinds of consumer groups (the first element of their timer keys).
SESSION_TIMER: Final = "cg-session"
REBALANCE_TIMER: Final = "cg-rebalance"
# Classic members inside a consumer group: rejoin after REBALANCE_IN_PROGRESS, SyncGroup after JoinGroup.
JOIN_TIMER: Final = "cg-join"
SYNC_TIMER: Final = "cg-sync"


def session_key(group_id: str, member_id: str) -> MemberTimerKey:
    return (SESSION_TIMER, group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> MemberTimerKey:
    return (REBALANCE_TIMER, group_id, member_id)


def join_key(group_id: str, member_id: str) -> MemberTimerKey:
    return (JOIN_TIMER, group_id, member_id)


def sync_key(group_id: str, member_id: str) -> MemberTimerKey:
    return (SYNC_TIMER, group_id, member_id)


class TopicCatalog(Protocol):
    """What the core reads of the topic catalog: names, ids, partition counts, and a version
    that changes whenever any of them does."""

    @property
    def version(self) -> int: ...

    @property
    def topics(self) -> Mapping[str, TopicRecord]: ...

    def topic_by_id(self, topic_id: bytes) -> TopicRecord | None: ...


class EmptyCatalog:
    version = 0
    topics: Mapping[str, TopicRecord] = {}

    def topic_by_id(self, topic_id: bytes) -> TopicRecord | None:
        return None


class Rejected(Exception):
    """A request refused with a Kafka error code (and a message where the API carries one)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ConsumerGroupManager:
    """Owns the consumer groups of one shard."""

    def __init__(
        self,
        config: GroupConfig,
        timers: Timers[TimerKey],
        clock: ShardClock,
        stats: CoreStats,
        classic: ClassicGroupManager,
        new_member_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        random_unit: Callable[[], float] = no_jitter,
    ) -> None:
        self.config = config
        self.timers = timers
        self.clock = clock
        self.stats = stats
        self.classic = classic  # the classic half of the group id space
        self.events = classic.events
        self.new_member_id = new_member_id
        # Per-group session timeout and heartbeat interval (GROUP config resources).
        self.group_configs = DynamicGroupConfigs(config, random_unit)
        self.catalog: TopicCatalog = EmptyCatalog()
        self.groups: dict[str, ConsumerGroup] = {}
        self._regexes: dict[str, TopicPattern] = {}

    # -- ConsumerGroupHeartbeat (v0-1) -------------------------------------------------------

    def heartbeat(self, ctx: RequestContext, req: cgh.ConsumerGroupHeartbeatRequest, fx: Effects) -> None:
        if self._steady_heartbeat(ctx, req, fx):
            return
        converted = len(self.groups)
        try:
            self._heartbeat(ctx, req, fx)
        except Rejected as rejected:
            fx.reply(ctx.reply_to, _error_response(rejected.code, rejected.message))
            group = self.groups.get(req.group_id)
            if group is not None and len(self.groups) != converted:
                # The group was created or upgraded before the member was refused: store it.
                self.finish(None, group, GroupWrites(), None, fx)

    def _steady_heartbeat(
        self, ctx: RequestContext, req: cgh.ConsumerGroupHeartbeatRequest, fx: Effects
    ) -> bool:
        """The common case on its own path: a reconciled member of a settled group heartbeats and
        changes nothing. Returns False whenever the full handling might do anything else."""
        group = self.groups.get(req.group_id)
        if (
            group is None
            or req.member_epoch <= 0
            or group.group_epoch != req.member_epoch
            or group.assignment_epoch != req.member_epoch
            or group.catalog_version != self.catalog.version
            or group.unwritten_group
            or group.unwritten_members
            or req.topic_partitions is not None
            or req.subscribed_topic_names is not None
            or req.subscribed_topic_regex is not None
            or req.server_assignor is not None
            or req.instance_id is not None
            or req.rack_id is not None
            or req.rebalance_timeout_ms != -1
        ):
            return False
        member = group.members.get(req.member_id)
        if (
            member is None
            or member.member_epoch != req.member_epoch
            or member.state is not MemberState.STABLE
            or member.client_id != ctx.client_id
            or member.client_host != kafka_client_host(ctx.client_host)
        ):
            return False
        self.reschedule_session(group, member)
        interval = self._heartbeat_interval(group, member)
        fx.reply(ctx.reply_to, _heartbeat_response(member.member_id, member.member_epoch, interval, None))
        return True

    def _validate(self, version: int, req: cgh.ConsumerGroupHeartbeatRequest) -> None:
        """docs/groups.md#validation, in Kafka's order: INVALID_REQUEST with a message, then UNSUPPORTED_ASSIGNOR."""
        epoch = req.member_epoch
        if version >= 1 and not req.member_id.strip():
            raise Rejected(INVALID_REQUEST, "MemberId can't be empty.")
        if not req.group_id.strip():
            raise Rejected(INVALID_REQUEST, "GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id.strip():
            raise Rejected(INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise Rejected(INVALID_REQUEST, "RackId can't be empty.")
        regex = req.subscribed_topic_regex if version >= 1 else None
        if epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise Rejected(INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise Rejected(INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if version == 0 and not req.subscribed_topic_names:
                raise Rejected(INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
            if req.subscribed_topic_names is None and regex is None:
                raise Rejected(
                    INVALID_REQUEST,
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                )
        elif epoch == LEAVE_STATIC_EPOCH:
            if req.instance_id is None:
                raise Rejected(INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_STATIC_EPOCH:
            raise Rejected(INVALID_REQUEST, "MemberEpoch is invalid.")
        if epoch != JOIN_EPOCH and not req.member_id.strip():
            raise Rejected(INVALID_REQUEST, "MemberId can't be empty.")
        if req.rebalance_timeout_ms < -1:
            raise Rejected(INVALID_REQUEST, "RebalanceTimeoutMs must be -1 or a non-negative duration.")
        assignor = req.server_assignor
        if assignor is not None and assignor not in self.config.group_consumer_assignors:
            raise Rejected(
                UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.group_consumer_assignors)}.",
            )
        if regex:
            self._regex(regex)

    def _regex(self, regex: str) -> TopicPattern:
        pattern = self._regexes.get(regex)
        if pattern is None:
            try:
                pattern = compile_topic_regex(regex)
            except RegexError as exc:
                raise Rejected(
                    INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}.",
                ) from None
            if len(self._regexes) > 10000:
                self._regexes.clear()
            self._regexes[regex] = pattern
        return pattern

    def _heartbeat(self, ctx: RequestContext, req: cgh.ConsumerGroupHeartbeatRequest, fx: Effects) -> None:
        version = ctx.api_version
        self._validate(version, req)
        epoch = req.member_epoch
        group_id = req.group_id
        group = self.groups.get(group_id)
        if group is None:
            if epoch != JOIN_EPOCH:
                raise Rejected(GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = self._create_group(group_id, fx)
        if epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            self._leave(ctx, group, req, fx)
            return

        records = GroupWrites()
        member, is_new = self._member_for(ctx, group, req, records)
        owned = self._owned(req.topic_partitions)
        full = epoch == JOIN_EPOCH or (
            req.rebalance_timeout_ms != -1
            and (
                req.subscribed_topic_names is not None
                or (version >= 1 and req.subscribed_topic_regex is not None)
            )
            and req.topic_partitions is not None
        )

        # Apply the fields the request changes (null / -1 = unchanged).
        subscription_changed = is_new
        if req.subscribed_topic_names is not None:
            names = tuple(req.subscribed_topic_names)
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                member.resolved_version = -1
                subscription_changed = True
        if version >= 1 and req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                member.resolved_version = -1
                subscription_changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            subscription_changed = True
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id = req.rack_id
            subscription_changed = True
        if req.rebalance_timeout_ms != -1 and req.rebalance_timeout_ms != member.rebalance_timeout_ms:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
            records.member(member.member_id)
        client_host = kafka_client_host(ctx.client_host)
        if member.client_id != ctx.client_id or member.client_host != client_host:
            member.client_id, member.client_host = ctx.client_id, client_host
            records.member(member.member_id)
        if subscription_changed:
            records.member(member.member_id)
            if not is_new:
                self.event(
                    group,
                    SUBSCRIPTION_CHANGED,
                    f"member {member.member_id} changed its subscription",
                    member.member_id,
                )

        self.update_epochs(group, subscription_changed, records)

        assigned_changed = self.reconcile_member(group, member, owned, records)
        self.events.member_reconciled(group, member)
        self.reschedule_session(group, member)
        response = _heartbeat_response(
            member.member_id,
            member.member_epoch,
            self._heartbeat_interval(group, member),
            # Also when the member is behind (an older epoch, or it reports partitions other than
            # its assignment): a response that carried its assignment was lost, or replaced by an
            # error after a failed write whose state memory kept.
            self._wire_assignment(member.assigned)
            if full
            or assigned_changed
            or epoch != member.member_epoch
            or (owned is not None and owned != member.assigned)
            else None,
        )
        self.finish(ctx, group, records, response, fx)

    def update_epochs(self, group: ConsumerGroup, subscription_changed: bool, records: GroupWrites) -> None:
        """Bump the group epoch when a subscription or the subscribed topics changed, and compute
        the target assignment when it is behind the group epoch."""
        catalog = self.catalog
        if subscription_changed or group.catalog_version != catalog.version:
            metadata = self._subscription_metadata(group)
            group.catalog_version = catalog.version
            if metadata != group.subscription_metadata:
                if not subscription_changed:
                    self.event(
                        group,
                        METADATA_CHANGED,
                        f"subscribed topics changed: {describe_metadata_change(group.subscription_metadata, metadata)}",
                    )
                group.subscription_metadata = metadata
                subscription_changed = True
        if subscription_changed:
            self._bump(group, records)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, records)

    def _create_group(self, group_id: str, fx: Effects) -> ConsumerGroup:
        classic = self.classic.groups.get(group_id)
        if classic is not None:
            if classic.members:
                return self._upgrade(classic, fx)
            if classic.pending_members:
                raise Rejected(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            # An empty classic group becomes a consumer group (offsets stay with the id).
            log.info("group %s: converted from classic to consumer", group_id)
            self.classic.remove_group(classic)
            if classic.generation_id > 0:
                fx.write([GroupTombstone(group_id)])
        elif self.classic.at_group_limit():
            raise Rejected(GROUP_MAX_SIZE_REACHED, "The coordinator holds group.max.groups groups.")
        group = ConsumerGroup(group_id, state_ms=self.clock.wall_ms)
        group.unwritten_group = True
        self.groups[group_id] = group
        return group

    # -- online migration (docs/migration.md) --------------------------------------------------

    def _upgrade_refusal(self, classic: ClassicGroup) -> str | None:
        """Kafka's validateOnlineUpgrade: why the classic group cannot become a consumer group."""
        if not self.config.online_upgrade_enabled:
            return "the online upgrade is disabled"
        if not classic.uses_consumer_protocol():
            return "the group does not use the consumer embedded protocol"
        if len(classic.members) > self.config.group_consumer_max_size:
            return "the group size exceeds the consumer group maximum size"
        return None

    def _upgrade(self, classic: ClassicGroup, fx: Effects) -> ConsumerGroup:
        """A consumer-protocol member joins a classic group with members: the group becomes a
        consumer group that keeps them (Kafka's convertToConsumerGroup)."""
        group_id = classic.group_id
        why = self._upgrade_refusal(classic)
        if why is not None:
            log.info("group %s: cannot upgrade the classic group to a consumer group: %s", group_id, why)
            raise Rejected(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        try:
            group = consumer_group_from_classic(classic, self.catalog.topics, self.clock.wall_ms)
        except MalformedConsumerProtocol as exc:
            log.warning("group %s: cannot upgrade the classic group: %s", group_id, exc)
            raise Rejected(
                GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {group_id} to consumer group because the embedded "
                "consumer protocol is malformed.",
            ) from None
        self.classic.release_for_upgrade(classic, fx)
        fx.write([GroupTombstone(group_id)])
        group.subscription_metadata = self._subscription_metadata(group)
        group.catalog_version = self.catalog.version
        group.unwritten_group = True
        group.unwritten_members = set(group.members)
        self.groups[group_id] = group
        for member in group.members.values():
            self.reschedule_session(group, member)
        log.info(
            "group %s: converted from classic to consumer at epoch %d with %d classic members",
            group_id,
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
            reply = (ctx, response, lambda code: _error_response(consumer_write_error(code)))
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
        classic = classic_group_from_consumer(group, leaving_member_id or "", self.clock.wall_ms)
        for member_id in list(group.members):
            self._cancel_member_timers(group.group_id, member_id)
        del self.groups[group.group_id]
        group.dead = True
        record = self.classic.adopt_downgraded(classic, fx, rebalance)
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
        self.event(
            group,
            MEMBER_JOINED,
            f"member {member.member_id} joined{protocol} (client {ctx.client_id}"
            f"{f', instance {instance_id}' if instance_id else ''}) from {member.client_host}",
            member.member_id,
            client_id=ctx.client_id,
            client_host=member.client_host,
            instance_id=instance_id,
        )

    @staticmethod
    def _check_static(group: ConsumerGroup, member_id: str, instance_id: str) -> None:
        static_id = group.static_members.get(instance_id)
        if static_id is None:
            raise Rejected(UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if static_id != member_id:
            raise Rejected(
                FENCED_INSTANCE_ID,
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

    def _owned(
        self, topic_partitions: Sequence[cgh.TopicPartitions] | None
    ) -> dict[str, frozenset[int]] | None:
        if topic_partitions is None:
            return None
        by_id = self.catalog.topic_by_id
        owned: dict[str, frozenset[int]] = {}
        for entry in topic_partitions:
            topic = by_id(entry.topic_id)
            if topic is not None and entry.partitions:
                owned[topic.name] = owned.get(topic.name, frozenset()) | frozenset(entry.partitions)
        return owned

    # -- leaving -----------------------------------------------------------------------------

    def _leave(
        self, ctx: RequestContext, group: ConsumerGroup, req: cgh.ConsumerGroupHeartbeatRequest, fx: Effects
    ) -> None:
        """docs/groups.md#leaving: epoch -1 leaves for good; epoch -2 (static) keeps the assignment for the session."""
        instance_id = req.instance_id
        if instance_id is not None:
            static_id = group.static_members.get(instance_id)
            if static_id is None:
                raise Rejected(UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if static_id != req.member_id:
                raise Rejected(
                    FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {instance_id} was fenced by member "
                    f"{static_id}.",
                )
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
            response = _heartbeat_response(member.member_id, req.member_epoch, 0, None)
            self.finish(ctx, group, records, response, fx)
        else:
            response = _heartbeat_response(member.member_id, req.member_epoch, 0, None)
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

    # -- epochs, target assignment, reconciliation --------------------------------------------

    def _bump(self, group: ConsumerGroup, records: GroupWrites) -> None:
        group.group_epoch += 1
        group.settling_until_ms = (
            self.clock.now_ms + self.group_configs.intervals(group.group_id).settle_window_ms
        )
        self.stats.consumer_group_rebalances += 1
        self.events.epoch_bumped(group.group_id, group.state, group.group_epoch)
        records.group()

    def event(
        self, group: ConsumerGroup, kind: str, message: str, member_id: str | None = None, **details: Detail
    ) -> None:
        self.events.record(
            group.group_id, kind, "consumer", group.state, group.group_epoch, message, member_id, **details
        )

    def _resolved_topics(self, member: ConsumerMember) -> frozenset[str]:
        catalog = self.catalog
        if member.resolved_version == catalog.version:
            return member.resolved_topics
        topics = catalog.topics
        resolved = {name for name in member.subscribed_topic_names if name in topics}
        if member.subscribed_topic_regex:
            pattern = self._regex(member.subscribed_topic_regex)
            resolved.update(name for name in topics if pattern.fullmatch(name))
        member.resolved_topics = shared_set(frozenset(resolved))
        member.resolved_version = catalog.version
        return member.resolved_topics

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, tuple[bytes, int]]:
        topics = self.catalog.topics
        names: set[str] = set()
        for member in group.members.values():
            names |= self._resolved_topics(member)
        return {name: (topics[name].topic_id, topics[name].num_partitions) for name in sorted(names)}

    def preferred_assignor(self, group: ConsumerGroup) -> str:
        """The server assignor most members ask for, else the configured default."""
        configured = self.config.group_consumer_assignors
        counts = Counter(m.server_assignor for m in group.members.values() if m.server_assignor in configured)
        if not counts:
            return configured[0] if configured else DEFAULT_ASSIGNOR
        best = max(counts.values())
        return next(name for name in configured if counts.get(name) == best)

    def _compute_target(self, group: ConsumerGroup, records: GroupWrites) -> None:
        assignor_name = self.preferred_assignor(group)
        assignor = ASSIGNORS[assignor_name]
        members = {
            member_id: AssignmentMember(
                member_id=member_id,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                subscribed_topics=self._resolved_topics(member),
                current=group.target.get(member_id, {}),
            )
            for member_id, member in group.members.items()
        }
        topics = {name: partitions for name, (_, partitions) in group.subscription_metadata.items()}
        new_target = assignor.assign(members, topics) if members else {}
        moved = 0
        for member_id in group.members:
            assignment = normalize(new_target.get(member_id, {}))
            previous = group.target.get(member_id, {})
            if assignment != previous:
                records.member(member_id)
                moved += taken_from_others(group.owners, member_id, assignment, previous)
            group.target[member_id] = assignment
        group.assignment_epoch = group.group_epoch
        self.events.target_computed(group.group_id, group.state, group.group_epoch, assignor_name, moved)
        records.group()

    def reconcile_member(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        owned: Mapping[str, frozenset[int]] | None,
        records: GroupWrites,
    ) -> bool:
        result = reconcile(group, member, owned)
        if result is None:
            return False
        changed = apply_reconciled(group, member, result)
        records.member(member.member_id)
        if member.classic is not None:
            pass  # classic members have join and sync timers instead (Kafka)
        elif member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.rebalance_timer_epoch != member.member_epoch:
                member.rebalance_timer_epoch = member.member_epoch
                self.timers.schedule(
                    rebalance_key(group.group_id, member.member_id),
                    self.clock.now_ms + member.rebalance_timeout_ms,
                )
        else:
            self._cancel_rebalance_timer(group, member)
        return changed

    def _heartbeat_interval(self, group: ConsumerGroup, member: ConsumerMember) -> int:
        """The interval the member is told to heartbeat at (rules in heartbeat_interval.py)."""
        settling = self.clock.now_ms < group.settling_until_ms
        return self.group_configs.intervals(group.group_id).for_member(member.state, settling)

    def _cancel_rebalance_timer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.rebalance_timer_epoch is not None:
            member.rebalance_timer_epoch = None
            self.timers.cancel(rebalance_key(group.group_id, member.member_id))

    def reschedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        timeout = (
            self.group_configs.session_timeout_ms(group.group_id)
            if member.classic is None
            else member.classic.session_timeout_ms
        )
        self.timers.schedule(session_key(group.group_id, member.member_id), self.clock.now_ms + timeout)

    def _wire_assignment(self, assignment: Mapping[str, frozenset[int]]) -> list[tuple[bytes, list[int]]]:
        topics = self.catalog.topics
        return [
            (topics[name].topic_id, sorted(partitions))
            for name, partitions in sorted(assignment.items())
            if name in topics
        ]

    # -- timers ------------------------------------------------------------------------------

    def expire_session(self, group_id: str, member_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        self._fence(None, group, member, "fenced: session timeout expired", SESSION_TIMEOUT, None, fx)

    def expire_rebalance(self, group_id: str, member_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
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
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        why = "fenced: the classic member did not rejoin within the rebalance timeout"
        self._fence(None, group, member, why, REBALANCE_TIMEOUT, None, fx)

    def expire_classic_sync(self, group_id: str, member_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        why = "fenced: the classic member did not send SyncGroup within the rebalance timeout"
        self._fence(None, group, member, why, SYNC_TIMEOUT, None, fx)

    # -- persistence ---------------------------------------------------------------------------

    def finish(
        self,
        ctx: RequestContext | None,
        group: ConsumerGroup,
        writes: GroupWrites,
        response: object | None,
        fx: Effects,
        if_failed: Callable[[int], object] | None = None,
    ) -> None:
        members = writes.members | group.unwritten_members
        write_group = writes.group_dirty or group.unwritten_group
        records: list[Record] = []
        if write_group:
            records.append(self.group_record(group))
        for member_id in sorted(members):
            member = group.members.get(member_id)
            if member is None:
                records.append(ConsumerMemberTombstone(group.group_id, member_id))
            else:
                records.append(self.member_record(group, member))
        if ctx is not None and response is not None:
            if records:
                fx.reply(
                    ctx.reply_to,
                    response,
                    if_failed or (lambda code: _error_response(consumer_write_error(code))),
                )
            else:
                fx.reply(ctx.reply_to, response)
        if not records:
            return
        group.unwritten_members = set()
        group.unwritten_group = False

        def on_failed(out: Effects, error_code: int) -> None:
            group.unwritten_members |= members
            group.unwritten_group = group.unwritten_group or write_group

        fx.write(records, on_failed=on_failed)

    def group_record(self, group: ConsumerGroup) -> ConsumerGroupRecord:
        return ConsumerGroupRecord(group.group_id, group.group_epoch, group.assignment_epoch, group.state_ms)

    def member_record(self, group: ConsumerGroup, member: ConsumerMember) -> ConsumerMemberRecord:
        return ConsumerMemberRecord(
            group_id=group.group_id,
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed_topic_names,
            subscribed_topic_regex=member.subscribed_topic_regex,
            server_assignor=member.server_assignor,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=int(member.state),
            assigned=_as_list(member.assigned),
            pending_revocation=_as_list(member.pending_revocation),
            target=_as_list(group.target.get(member.member_id, {})),
            classic_session_timeout_ms=None if member.classic is None else member.classic.session_timeout_ms,
            classic_protocols=None if member.classic is None else member.classic.protocols,
        )

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
            member = ConsumerMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                server_assignor=m.server_assignor,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                member_epoch=m.member_epoch,
                previous_member_epoch=m.previous_member_epoch,
                state=MemberState(m.state),
                assigned=normalize(dict(m.assigned)),
                pending_revocation=normalize(dict(m.pending_revocation)),
                classic=None
                if m.classic_session_timeout_ms is None or not m.classic_protocols
                else ClassicMemberMetadata(m.classic_session_timeout_ms, m.classic_protocols),
            )
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
        for group in self._selected(group_ids):
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
        for group in self._selected(group_ids):
            group.dead = True
            del self.groups[group.group_id]

    def _selected(self, group_ids: Collection[str] | None) -> list[ConsumerGroup]:
        if group_ids is None:
            return list(self.groups.values())
        return [self.groups[group_id] for group_id in group_ids if group_id in self.groups]

    # -- group lifecycle for DeleteGroups and the retention sweep ------------------------------

    def remove_group(self, group: ConsumerGroup) -> None:
        del self.groups[group.group_id]
        group.dead = True
        self.events.group_removed(group.group_id, "consumer", group.group_epoch, "deleted or expired")

    def holds(self, group_id: str) -> bool:
        return group_id in self.groups

    def validate_delete(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return GROUP_ID_NOT_FOUND
        return NON_EMPTY_GROUP if group.members else NONE

    def deletion(self, group_id: str, expiring: bool) -> PendingChange:
        group = self.groups[group_id]

        def apply() -> None:
            if self.groups.get(group_id) is not group:
                return
            if not group.members:
                self.remove_group(group)
            else:
                log.info("group %s: deleted while members joined; it stays", group_id)

        return PendingChange([ConsumerGroupTombstone(group_id)], apply)

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

    # -- OffsetCommit / OffsetFetch validation (Kafka's ConsumerGroup.validateOffsetCommit/Fetch) -

    @staticmethod
    def validate_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int, version: int) -> int:
        if member_epoch < 0 and not group.members:
            return NONE
        member = group.members.get(member_id)
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

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int:
        if member_id is None and member_epoch < 0:
            return NONE  # an admin fetch
        member = group.members.get(member_id or "")
        if member is None:
            return UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ILLEGAL_GENERATION if member.classic is not None else STALE_MEMBER_EPOCH
        return NONE

    # -- ConsumerGroupDescribe (v0-1) -----------------------------------------------------------

    def describe(
        self, ctx: RequestContext, req: cgd.ConsumerGroupDescribeRequest
    ) -> cgd.ConsumerGroupDescribeResponse:
        operations = (
            GROUP_AUTHORIZED_OPERATIONS
            if req.include_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED
        )
        described: list[cgd.DescribedGroup] = []
        for group_id in req.group_ids:
            group = self.groups.get(group_id)
            if not group_id:
                described.append(
                    cgd.DescribedGroup(
                        error_code=INVALID_GROUP_ID, error_message="Group id can't be empty.", group_id=""
                    )
                )
            elif group is None:
                message = (
                    f"Group {group_id} is not a consumer group."
                    if group_id in self.classic.groups
                    else f"Group {group_id} not found."
                )
                described.append(
                    cgd.DescribedGroup(
                        error_code=GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id
                    )
                )
            else:
                described.append(self._describe_group(group, operations))
        return cgd.ConsumerGroupDescribeResponse(groups=described)

    def _describe_group(self, group: ConsumerGroup, operations: int) -> cgd.DescribedGroup:
        topics = self.catalog.topics

        def wire(assignment: Mapping[str, frozenset[int]]) -> cgd.Assignment:
            return cgd.Assignment(
                topic_partitions=[
                    cgd.TopicPartitions(
                        topic_id=topics[name].topic_id, topic_name=name, partitions=sorted(parts)
                    )
                    for name, parts in sorted(assignment.items())
                    if name in topics
                ]
            )

        members = [
            cgd.Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                # Kafka's ConsumerGroupMember has "" for no regex (docs/kafka-differences.md).
                subscribed_topic_regex=m.subscribed_topic_regex or "",
                assignment=wire(m.assigned),
                target_assignment=wire(group.target.get(m.member_id, {})),
                member_type=MEMBER_TYPE_CONSUMER if m.classic is None else MEMBER_TYPE_CLASSIC,
            )
            for m in group.members.values()
        ]
        return cgd.DescribedGroup(
            error_code=NONE,
            group_id=group.group_id,
            group_state=group.state,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=self.preferred_assignor(group),
            members=members,
            authorized_operations=operations,
        )


class GroupWrites:
    """Which rows of one group an operation changed (written once, at the end)."""

    __slots__ = ("group_dirty", "members")

    def __init__(self) -> None:
        self.group_dirty = False
        self.members: set[str] = set()

    def group(self) -> None:
        self.group_dirty = True

    def member(self, member_id: str) -> None:
        self.members.add(member_id)


def _as_list(assignment: Mapping[str, frozenset[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((topic, tuple(sorted(parts))) for topic, parts in sorted(assignment.items()) if parts)


def _error_response(code: int, message: str | None = None) -> cgh.ConsumerGroupHeartbeatResponse:
    return cgh.ConsumerGroupHeartbeatResponse(error_code=code, error_message=message)


def _heartbeat_response(
    member_id: str, epoch: int, interval_ms: int, assignment: list[tuple[bytes, list[int]]] | None
) -> cgh.ConsumerGroupHeartbeatResponse:
    return cgh.ConsumerGroupHeartbeatResponse(
        error_code=NONE,
        member_id=member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=interval_ms,
        assignment=None
        if assignment is None
        else cgh.Assignment(
            topic_partitions=[
                cgh.TopicPartitions(topic_id=tid, partitions=parts) for tid, parts in assignment
            ]
        ),
    )
