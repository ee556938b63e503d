"""KIP-848 consumer groups: their state, epochs, target assignment and reconciliation, member
sessions and how an operation's rows are written (Kafka's GroupMetadataManager, consumer part;
docs/groups.md#consumer-groups-kip-848).

Pure like every kind: handlers add replies and records to an :class:`Effects`; a reply is
released only once the records of its operation are durable. A failed write leaves memory ahead
of storage, so the group remembers what was not written and rewrites it with its next write.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from coordinator.core.clock import ShardClock
from coordinator.core.consumer.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, AssignmentMember
from coordinator.core.consumer.group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    apply_reconciled,
    normalize,
    reconcile,
)
from coordinator.core.consumer.records import GroupWrites, group_record, member_record
from coordinator.core.consumer.regex import RegexError, TopicPattern, compile_topic_regex
from coordinator.core.consumer.responses import Rejected, error_response
from coordinator.core.consumer.timer_keys import rebalance_key, session_key
from coordinator.core.context import RequestContext
from coordinator.core.dynamic_configs import DynamicGroupConfigs
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    INVALID_REGULAR_EXPRESSION,
    consumer_write_error,
)
from coordinator.core.events import (
    METADATA_CHANGED,
    Detail,
    GroupEvents,
    describe_metadata_change,
)
from coordinator.core.group import (
    EMPTY_CATALOG,
    ClassicProtocolApi,
    TopicCatalog,
)
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.registry import GroupRegistry
from coordinator.core.shared_values import shared_set
from coordinator.core.stats import CoreStats
from coordinator.core.timers import TimerKey, Timers
from protocol.messages import consumer_group_heartbeat as cgh
from storage.records import (
    ConsumerMemberTombstone,
    GroupMetadataRecord,
    Record,
)

log = logging.getLogger(__name__)


class ConsumerConversion(Protocol):
    """The conversions between consumer groups and the kind they come from and go back to
    (classic groups, docs/migration.md); coordinator/core/kinds.py plugs them in."""

    def to_consumer_group(self, group_id: str, fx: Effects) -> ConsumerGroup | None:
        """A consumer-protocol member joins ``group_id``, held by another kind: the group
        converted (its members kept), or None once an empty one was released. Raises Rejected."""
        ...

    def to_classic_group(
        self, group: ConsumerGroup, leaving_member_id: str, fx: Effects, rebalance: bool
    ) -> GroupMetadataRecord:
        """The group, gone from this kind, as a classic group of its classic members; returns
        the record to write."""
        ...


class ConsumerAssignment:
    """The state of one shard's consumer groups, their epochs and assignments."""

    def __init__(
        self,
        config: BrokerGroupSettings,
        timers: Timers[TimerKey],
        clock: ShardClock,
        stats: CoreStats,
        events: GroupEvents,
        registry: GroupRegistry,
        group_configs: DynamicGroupConfigs,
        enter: Callable[[int, int], None],
        new_member_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.config = config
        self.timers = timers
        self.clock = clock
        self.stats = stats
        self.events = events
        self.registry = registry  # the group id space and group.max.groups, shared by every kind
        self.enter = enter  # the shard's clock and operation, set for requests off the Effects path
        self.new_member_id = new_member_id
        # Per-group session timeout and heartbeat interval (GROUP config resources).
        self.group_configs = group_configs
        self.catalog: TopicCatalog = EMPTY_CATALOG
        self.groups: dict[str, ConsumerGroup] = {}
        self._regexes: dict[str, TopicPattern] = {}
        # Plugged in by coordinator/core/kinds.py: the classic-protocol members and the conversions.
        self.classic_members: ClassicProtocolApi | None = None
        self.conversion: ConsumerConversion | None = None

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
        before = dict(group.target)
        for member_id in group.members:
            assignment = normalize(new_target.get(member_id, {}))
            if assignment != before.get(member_id, {}):
                records.member(member_id)
            group.target[member_id] = assignment
        group.assignment_epoch = group.group_epoch
        self.events.target_computed(
            group.group_id, group.state, group.group_epoch, assignor_name, before, group.target
        )
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
        state = member.state
        return self.group_configs.intervals(group.group_id).for_member(
            state is MemberState.STABLE, state is MemberState.UNRELEASED_PARTITIONS, settling
        )

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
        member.last_heartbeat_ms = self.clock.now_ms
        self.timers.schedule(session_key(group.group_id, member.member_id), self.clock.now_ms + timeout)

    def _wire_assignment(self, assignment: Mapping[str, frozenset[int]]) -> list[tuple[bytes, list[int]]]:
        topics = self.catalog.topics
        return [
            (topics[name].topic_id, sorted(partitions))
            for name, partitions in sorted(assignment.items())
            if name in topics
        ]

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
            records.append(group_record(group))
        for member_id in sorted(members):
            member = group.members.get(member_id)
            if member is None:
                records.append(ConsumerMemberTombstone(group.group_id, member_id))
            else:
                records.append(member_record(group, member))
        if ctx is not None and response is not None:
            if records:
                fx.reply(
                    ctx.reply_to,
                    response,
                    if_failed or (lambda code: error_response(consumer_write_error(code))),
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
