"""ShareGroupHeartbeat (v1): joining, leaving, session timeouts, the group epoch and the target
assignment of share groups, and how an operation's rows are written (Kafka's
GroupMetadataManager, share part; docs/share-groups.md, "Membership").

A share group has no revocation: the target assignment is handed out as it is, so a member's
epoch becomes the assignment epoch with the heartbeat after the target changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordinator.core.assignment_interval import assignment_due as interval_over
from coordinator.core.clock import ShardClock
from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.epoch_groups import invalid_ids
from coordinator.core.errors import (
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    INVALID_REQUEST,
    UNKNOWN_MEMBER_ID,
    consumer_write_error,
)
from coordinator.core.events import MEMBER_JOINED, MEMBER_LEFT, SESSION_TIMEOUT, GroupEvents
from coordinator.core.group import EMPTY_CATALOG, TopicCatalog
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.members import kafka_client_host
from coordinator.core.registry import GroupRegistry
from coordinator.core.share.assignor import ShareMemberSpec, TopicPartition, assign_share_partitions
from coordinator.core.share.group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    SHARE_GROUP_TYPE,
    ShareGroup,
    ShareMember,
)
from coordinator.core.share.partition import PersistedShareState
from coordinator.core.share.records import group_record, member_record
from coordinator.core.share.timer_keys import assignment_key, session_key
from coordinator.core.share_configs import ShareGroupSettings, share_settings
from coordinator.core.stats import CoreStats
from coordinator.core.timers import TimerKey, Timers
from protocol.messages import share_group_heartbeat as sgh
from storage.records import Record, ShareMemberTombstone

log = logging.getLogger(__name__)


class Rejected(Exception):
    """A heartbeat refused with a Kafka error code and message."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(code: int, message: str | None = None) -> sgh.ShareGroupHeartbeatResponse:
    return sgh.ShareGroupHeartbeatResponse(error_code=code, error_message=message)


class ShareMembership:
    """The share groups of one shard: membership, epochs and assignment."""

    def __init__(
        self,
        config: BrokerGroupSettings,
        timers: Timers[TimerKey],
        clock: ShardClock,
        stats: CoreStats,
        events: GroupEvents,
        registry: GroupRegistry,
    ) -> None:
        self.config = config
        self.timers = timers
        self.clock = clock
        self.stats = stats
        self.events = events
        self.registry = registry
        self.catalog: TopicCatalog = EMPTY_CATALOG
        self.groups: dict[str, ShareGroup] = {}
        # The persisted state of every share-partition of these groups, as loaded: (group id,
        # topic, partition) -> state, for the share-partition leader to restore.
        self.partition_states: dict[tuple[str, str, int], PersistedShareState] = {}
        # The settings a group runs under: its share.* group configs, else the broker's
        # (DynamicGroupConfigs.share_settings once the coordinator wires it).
        self.settings_for: Callable[[str], ShareGroupSettings] = lambda _group_id: share_settings(config, {})

    # -- ShareGroupHeartbeat ---------------------------------------------------------------------

    def heartbeat(self, ctx: RequestContext, req: sgh.ShareGroupHeartbeatRequest, fx: Effects) -> None:
        try:
            _validate(req)
            if req.member_epoch == LEAVE_EPOCH:
                self._leave(ctx, req, fx)
            else:
                self._heartbeat(ctx, req, fx)
        except Rejected as rejected:
            fx.reply(ctx.reply_to, error_response(rejected.code, rejected.message))

    def _group_for(self, group_id: str, create: bool) -> ShareGroup:
        """Kafka's getOrMaybeCreateShareGroup: the id space is shared with every other kind."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self.registry.holds(group_id):
            raise Rejected(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise Rejected(GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        if self.registry.at_group_limit():
            raise Rejected(GROUP_MAX_SIZE_REACHED, "The coordinator holds group.max.groups groups.")
        return ShareGroup(group_id)

    def _heartbeat(self, ctx: RequestContext, req: sgh.ShareGroupHeartbeatRequest, fx: Effects) -> None:
        joining = req.member_epoch == JOIN_EPOCH
        group = self._group_for(req.group_id, create=joining)
        member = group.members.get(req.member_id)
        if member is None:
            if not joining:
                raise Rejected(
                    UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}."
                )
            if len(group.members) >= self.config.group_share_max_size:
                raise Rejected(
                    GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of "
                    f"{self.config.group_share_max_size} members.",
                )
            member = ShareMember(req.member_id)
        else:
            _check_epoch(member, req.member_epoch)
        if group.group_id not in self.groups:
            self.groups[group.group_id] = group
            group.unwritten_group = True
        is_new = req.member_id not in group.members
        group.members[member.member_id] = member

        member_changed = is_new
        subscription_changed = is_new
        if req.subscribed_topic_names is not None:
            names = tuple(req.subscribed_topic_names)
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                subscription_changed = member_changed = True
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id = req.rack_id
            member_changed = True
        client_host = kafka_client_host(ctx.client_host)
        if member.client_id != ctx.client_id or member.client_host != client_host:
            member.client_id, member.client_host = ctx.client_id, client_host
            member_changed = True
        if is_new:
            self._event(group, MEMBER_JOINED, f"member {member.member_id} joined", member.member_id)

        group_changed = self._update_epochs(group, subscription_changed)
        previous = member.assigned
        if member.member_epoch != group.assignment_epoch or member.assigned != group.target.get(
            member.member_id, frozenset()
        ):
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
            member.assigned = group.target.get(member.member_id, frozenset())
            member_changed = True
        self._reschedule_session(group, member)
        response = sgh.ShareGroupHeartbeatResponse(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.settings_for(group.group_id).heartbeat_interval_ms,
            assignment=self._wire_assignment(member.assigned)
            if joining or member.assigned != previous
            else None,
        )
        if member_changed:
            group.unwritten_members.add(member.member_id)
        if group_changed:
            group.unwritten_group = True
        self.finish(ctx, group, response, fx)

    def _leave(self, ctx: RequestContext, req: sgh.ShareGroupHeartbeatRequest, fx: Effects) -> None:
        group = self._group_for(req.group_id, create=False)
        member = group.members.get(req.member_id)
        if member is None:
            raise Rejected(
                UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}."
            )
        self.remove_member(group, member, MEMBER_LEFT, f"member {member.member_id} left")
        response = sgh.ShareGroupHeartbeatResponse(member_id=member.member_id, member_epoch=LEAVE_EPOCH)
        self.finish(ctx, group, response, fx)

    def expire_session(self, group_id: str, member_id: str, fx: Effects) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        self.remove_member(group, member, SESSION_TIMEOUT, f"member {member_id}: session timeout expired")
        self.finish(None, group, None, fx)

    def remove_member(self, group: ShareGroup, member: ShareMember, why: str, message: str) -> None:
        """The member goes (left, fenced, timed out): the group epoch moves and the target is
        recomputed without it."""
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        self.timers.cancel(session_key(group.group_id, member.member_id))
        self._event(group, why, message, member.member_id)
        group.unwritten_members.add(member.member_id)
        self._update_epochs(group, subscription_changed=True)
        group.unwritten_group = True

    # -- epochs and the target assignment ------------------------------------------------------

    def _update_epochs(self, group: ShareGroup, subscription_changed: bool) -> bool:
        """Bump the group epoch when the members, their subscriptions or the subscribed topics
        changed; recompute the target when it is behind. Returns whether the group row changed."""
        catalog = self.catalog
        changed = False
        if subscription_changed or group.catalog_version != catalog.version:
            metadata = self._subscription_metadata(group)
            group.catalog_version = catalog.version
            if subscription_changed or metadata != group.subscription_metadata:
                group.subscription_metadata = metadata
                group.group_epoch += 1
                self.stats.share_group_rebalances += 1
                self.events.epoch_bumped(
                    group.group_id, group.state_name, group.group_epoch, SHARE_GROUP_TYPE
                )
                changed = True
        if group.group_epoch > group.assignment_epoch and self._assignment_due(group):
            self._compute_target(group)
            changed = True
        return changed

    def _assignment_due(self, group: ShareGroup) -> bool:
        """At most once per share.assignment.interval.ms (Kafka 4.4)."""
        interval = self.settings_for(group.group_id).assignment_interval_ms
        key = assignment_key(group.group_id)
        return interval_over(self.timers, key, self.clock.now_ms, group.last_assignment_ms, interval)

    def assignment_due(self, group_id: str, fx: Effects) -> None:
        """The assignment interval of a group whose target is behind has passed."""
        group = self.groups.get(group_id)
        if group is None or group.group_epoch <= group.assignment_epoch:
            return
        self._compute_target(group)
        group.unwritten_group = True
        self.finish(None, group, None, fx)

    def _subscription_metadata(self, group: ShareGroup) -> dict[str, tuple[bytes, int]]:
        topics = self.catalog.topics
        return {
            name: (topics[name].topic_id, topics[name].num_partitions)
            for name in sorted(group.subscribed_topics())
            if name in topics
        }

    def _compute_target(self, group: ShareGroup) -> None:
        specs = [
            ShareMemberSpec(
                member_id=m.member_id,
                subscribed_topics=frozenset(
                    n for n in m.subscribed_topic_names if n in group.subscription_metadata
                ),
                current=group.target.get(m.member_id, frozenset()),
            )
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        ]
        partitions = {name: count for name, (_, count) in group.subscription_metadata.items()}
        target = assign_share_partitions(specs, partitions) if specs else {}
        new_target = {m.member_id: frozenset(target.get(m.member_id, frozenset())) for m in specs}
        before = {member_id: _by_topic(parts) for member_id, parts in group.target.items()}
        for member_id, partitions_now in new_target.items():
            if group.target.get(member_id) != partitions_now:
                group.unwritten_members.add(member_id)  # its stored target changes
        group.target = new_target
        group.assignment_epoch = group.group_epoch
        group.last_assignment_ms = self.clock.now_ms
        after = {member_id: _by_topic(parts) for member_id, parts in new_target.items()}
        self.events.target_computed(
            group.group_id, group.state_name, group.group_epoch, "simple", before, after, SHARE_GROUP_TYPE
        )

    def _wire_assignment(self, assigned: frozenset[TopicPartition]) -> sgh.Assignment:
        topics = self.catalog.topics
        by_topic: dict[str, list[int]] = {}
        for topic, partition in assigned:
            by_topic.setdefault(topic, []).append(partition)
        return sgh.Assignment(
            topic_partitions=[
                sgh.TopicPartitions(topic_id=topics[name].topic_id, partitions=sorted(parts))
                for name, parts in sorted(by_topic.items())
                if name in topics
            ]
        )

    def _reschedule_session(self, group: ShareGroup, member: ShareMember) -> None:
        member.last_heartbeat_ms = self.clock.now_ms
        deadline = self.clock.now_ms + self.settings_for(group.group_id).session_timeout_ms
        self.timers.schedule(session_key(group.group_id, member.member_id), deadline)

    def _event(self, group: ShareGroup, kind: str, message: str, member_id: str | None = None) -> None:
        self.events.record(
            group.group_id, kind, SHARE_GROUP_TYPE, group.state_name, group.group_epoch, message, member_id
        )

    def partition_records(self, group: ShareGroup) -> list[Record]:
        """The share-partition states the operation changed (delivery.py: a member left)."""
        return []

    # -- persistence ---------------------------------------------------------------------------

    def finish(
        self, ctx: RequestContext | None, group: ShareGroup, response: object | None, fx: Effects
    ) -> None:
        """Write what the operation (and any earlier failed write) changed; the reply leaves
        once it is durable. A failed write leaves memory ahead: it is retried with the next one."""
        members = group.unwritten_members
        write_group = group.unwritten_group
        records: list[Record] = []
        if write_group:
            records.append(group_record(group))
        for member_id in sorted(members):
            member = group.members.get(member_id)
            if member is None:
                records.append(ShareMemberTombstone(group.group_id, member_id))
            else:
                records.append(member_record(group, member))
        records.extend(self.partition_records(group))
        if ctx is not None and response is not None:
            fx.reply(ctx.reply_to, response, _write_failed if records else None)
        if not records:
            return
        group.unwritten_members = set()
        group.unwritten_group = False

        def on_failed(out: Effects, error_code: int) -> None:
            group.unwritten_members |= members
            group.unwritten_group = group.unwritten_group or write_group

        fx.write(records, on_failed=on_failed)


def _write_failed(code: int) -> object:
    return error_response(consumer_write_error(code))


def _validate(req: sgh.ShareGroupHeartbeatRequest) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid, in its order."""
    if not req.member_id.strip():
        raise Rejected(INVALID_REQUEST, None)  # Kafka 4.4 answers this one without a message
    invalid = invalid_ids(None, req.group_id, None, req.rack_id)  # a share member has no instance id
    if invalid is not None:
        raise Rejected(INVALID_REQUEST, invalid)
    if req.member_epoch == JOIN_EPOCH:
        if not req.subscribed_topic_names:
            raise Rejected(INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_EPOCH:
        raise Rejected(INVALID_REQUEST, "MemberEpoch is invalid.")


def _check_epoch(member: ShareMember, received: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid (epoch 0 rejoins)."""
    if received == JOIN_EPOCH:
        return
    if received > member.member_epoch:
        raise Rejected(
            FENCED_MEMBER_EPOCH,
            f"The share group member has a greater member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin.",
        )
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise Rejected(
            FENCED_MEMBER_EPOCH,
            f"The share group member has a smaller member epoch ({received}) than the one known by "
            f"the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin.",
        )


def _by_topic(assigned: frozenset[TopicPartition]) -> dict[str, frozenset[int]]:
    """topic -> partitions, the shape the group events count moves in."""
    topics: dict[str, set[int]] = {}
    for topic, partition in assigned:
        topics.setdefault(topic, set()).add(partition)
    return {topic: frozenset(partitions) for topic, partitions in topics.items()}
