"""Shard: the pure core of one coordinator shard (classic and consumer groups, their offsets).

The runtime calls one method per request, plus ``poll_timers`` when ``next_deadline`` has passed,
and applies every returned :class:`~coordinator.core.result.Result`: write its records as one atomic
batch, then send its replies and call ``on_durable`` -- or, if the write fails, call ``on_failed``
instead -- and apply the Results those return in the same way (docs/commit-path.md). Nothing here
reads a clock, sleeps or does I/O; all time comes from the request context or the caller, and
the shard's clock holds it for the managers.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from coordinator.core.classic_group import ClassicGroup
from coordinator.core.classic_group_manager import EMPTY, ClassicGroupManager
from coordinator.core.classic_members import ClassicMembers
from coordinator.core.clock import ShardClock
from coordinator.core.consumer_group import ConsumerGroup
from coordinator.core.consumer_group_manager import CONSUMER_GROUP_TYPE, ConsumerGroupManager, TopicCatalog
from coordinator.core.consumer_group_manager import session_key as consumer_session_key
from coordinator.core.context import RequestContext
from coordinator.core.dynamic_configs import DynamicGroupConfigs
from coordinator.core.effects import Effects, ResultBuilder
from coordinator.core.errors import GROUP_ID_NOT_FOUND, NONE, admin_write_error
from coordinator.core.events import GroupEvents
from coordinator.core.group_config import GroupConfig
from coordinator.core.heartbeat_interval import no_jitter
from coordinator.core.lifecycle import GroupLifecycle, PendingChange, TimerHandler
from coordinator.core.liveness import CLASSIC_INTERVAL_DIVISOR, CONSUMER_LATE_INTERVALS, MemberLiveness, judge
from coordinator.core.offset_manager import OffsetManager
from coordinator.core.result import Result
from coordinator.core.stats import CoreStats
from coordinator.core.timers import TimerKey, Timers
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_groups import ListedGroup, ListGroupsRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.sync_group import SyncGroupRequest
from storage.records import (
    ConsumerGroupRecord,
    ConsumerGroupTombstone,
    ConsumerMemberRecord,
    GroupConfigRecord,
    GroupMetadataRecord,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)

log = logging.getLogger(__name__)

RETENTION_TIMER: Final = "retention"
RETENTION_KEY: Final[TimerKey] = (RETENTION_TIMER,)


def default_member_id(prefix: str) -> str:
    """Kafka's member ids: "{client id or group instance id}-{uuid4}"."""
    return f"{prefix}-{uuid.uuid4()}"


@dataclass(slots=True, frozen=True)
class GroupSnapshot:
    group_id: str
    state: str
    protocol_type: str | None
    protocol_name: str | None
    generation_id: int
    leader_id: str | None
    member_ids: tuple[str, ...]


class Shard:
    def __init__(
        self,
        config: GroupConfig,
        member_id_factory: Callable[[str], str] | None = None,
        random_unit: Callable[[], float] | None = None,
    ) -> None:
        """``random_unit`` draws uniformly from [0, 1) for heartbeat jitter (None: no jitter)."""
        self.config = config
        self.clock = ShardClock()
        self.stats = CoreStats()
        self._timers: Timers[TimerKey] = Timers()
        self._results = ResultBuilder(self.clock)
        self.events = GroupEvents(self.clock)
        self._classic = ClassicGroupManager(
            config, self._timers, self.clock, self.stats, member_id_factory or default_member_id, self.events
        )
        self._consumer = ConsumerGroupManager(
            config, self._timers, self.clock, self.stats, self._classic, random_unit=random_unit or no_jitter
        )
        self._classic_members = ClassicMembers(self._consumer)
        self._offsets = OffsetManager(config, self.clock, self._classic)
        self._classic.other_groups = self._consumer.groups
        self._offsets.consumer = self._consumer
        self._managers: tuple[GroupLifecycle, ...] = (self._classic, self._consumer)
        self._timer_handlers: dict[str, TimerHandler] = {
            RETENTION_TIMER: lambda _key, fx: self._expire_offsets_and_groups(fx)
        }
        for manager in self._managers:
            for kind, handler in manager.timer_handlers().items():
                if kind in self._timer_handlers:
                    raise ValueError(f"timer kind {kind!r} registered twice")
                self._timer_handlers[kind] = handler
        self._loaded = False

    @property
    def group_configs(self) -> DynamicGroupConfigs:
        """The per-group configs (GROUP config resources) the consumer groups run with."""
        return self._consumer.group_configs

    def attach_catalog(self, catalog: TopicCatalog) -> None:
        """The topic catalog consumer groups assign from (read only; its version marks changes)."""
        self._consumer.catalog = catalog

    def _enter(self, now_ms: int, wall_ms: int) -> None:
        self.clock.set(now_ms, wall_ms)
        self.events.begin_operation()
        if RETENTION_KEY not in self._timers:
            self._timers.schedule(RETENTION_KEY, now_ms + self.config.offsets_retention_check_interval_ms)

    def _run(self, ctx: RequestContext, handler: Callable[[Effects], None]) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        fx = Effects()
        handler(fx)
        return self._results.to_result(fx)

    # -- lifecycle -------------------------------------------------------------------------------

    def load(
        self,
        groups: list[GroupMetadataRecord],
        offsets: list[OffsetCommitRecord],
        now_ms: int,
        wall_ms: int,
        consumer_groups: list[ConsumerGroupRecord] | None = None,
        consumer_members: list[ConsumerMemberRecord] | None = None,
        group_configs: list[GroupConfigRecord] | None = None,
    ) -> None:
        """docs/groups.md#loading: rebuild a fresh coordinator from its stored rows and restart
        member sessions: ``load_more`` of every shard at once."""
        if self._loaded or self.held_group_ids():
            raise RuntimeError("load() needs a coordinator that has not been loaded nor served anything")
        self.load_more(groups, offsets, now_ms, wall_ms, consumer_groups, consumer_members, group_configs)
        log.debug(
            "loaded %d classic groups, %d consumer groups and %d offsets",
            len(self._classic.groups),
            len(self._consumer.groups),
            self._offsets.offset_count(),
        )

    def load_more(
        self,
        groups: list[GroupMetadataRecord],
        offsets: list[OffsetCommitRecord],
        now_ms: int,
        wall_ms: int,
        consumer_groups: list[ConsumerGroupRecord] | None = None,
        consumer_members: list[ConsumerMemberRecord] | None = None,
        group_configs: list[GroupConfigRecord] | None = None,
    ) -> None:
        """docs/multinode.md#loading-a-shard: add the stored rows of shards taken over (none of
        their groups may be held here; unload_groups them first) and restart their member
        sessions, exactly as a restart loads them."""
        self._loaded = True
        self._enter(now_ms, wall_ms)
        consumer_groups = consumer_groups or []
        consumer_members = consumer_members or []
        group_configs = group_configs or []
        ids = {r.group_id for r in groups} | {r.group_id for r in consumer_groups}
        ids |= {r.group_id for r in offsets} | {r.group_id for r in consumer_members}
        held = [g for g in ids | {r.group_id for r in group_configs} if self._holds(g)]
        if held:
            raise RuntimeError(f"load_more() of groups already held: {sorted(held)[:5]}")
        self.group_configs.load(group_configs)  # before sessions restart at the groups' timeouts
        records: list[Record] = [*groups, *consumer_groups, *consumer_members]
        for manager in self._managers:
            manager.load(records)
        self._resolve_mixed({r.group_id for r in consumer_groups} & {r.group_id for r in groups})
        self._offsets.load(offsets)
        fx = Effects()
        for manager in self._managers:
            manager.on_loaded(fx, ids)
        if fx.records or fx.replies:
            raise RuntimeError("loading produced records or replies")  # cannot happen: nothing is parked

    def _resolve_mixed(self, group_ids: set[str]) -> None:
        """Groups stored as both classic and consumer group: only a conversion whose write failed
        leaves both (docs/migration.md); the type the group changed to last wrote the later
        state time."""
        for group_id in sorted(group_ids):
            classic_ms = self._classic.groups[group_id].state_ms or -1
            if self._consumer.groups[group_id].state_ms >= classic_ms:
                log.warning(
                    "group %s is stored as classic and consumer group; keeping the consumer group", group_id
                )
                del self._classic.groups[group_id]
            else:
                log.warning(
                    "group %s is stored as classic and consumer group; keeping the classic group", group_id
                )
                del self._consumer.groups[group_id]

    def unload_groups(self, group_ids: set[str], now_ms: int) -> Result:
        """docs/multinode.md: the shard holding ``group_ids`` is no longer ours: those groups go
        Dead, their parked requests are answered NOT_COORDINATOR, their offsets, group configs
        and timers go (the new owner loads them from storage)."""
        self.clock.now_ms = now_ms
        fx = Effects()
        for manager in self._managers:
            manager.unload(fx, group_ids)
        for group_id in group_ids:
            self._offsets.offsets.pop(group_id, None)
            self.group_configs.overrides.pop(group_id, None)
        self._timers.cancel_where(lambda key: len(key) > 1 and key[1] in group_ids)
        return self._results.to_result(fx)

    def held_group_ids(self) -> set[str]:
        """Every group id with state here (groups of either kind, offsets of simple groups, group
        configs)."""
        held = self._classic.groups.keys() | self._consumer.groups.keys() | self._offsets.offsets.keys()
        return held | self.group_configs.overrides.keys()

    def _holds(self, group_id: str) -> bool:
        """``group_id in held_group_ids()`` without building the set (a shard loading after
        others would build it over every group held so far)."""
        return (
            group_id in self._classic.groups
            or group_id in self._consumer.groups
            or group_id in self._offsets.offsets
            or group_id in self.group_configs.overrides
        )

    def unload(self, now_ms: int) -> Result:
        """The shard is gone (ownership lost, or reloaded after a failed write): every group goes
        Dead and every parked JoinGroup/SyncGroup is answered NOT_COORDINATOR."""
        self.clock.now_ms = now_ms
        fx = Effects()
        for manager in self._managers:
            manager.unload(fx)
        self._results.serving = False  # writes still in flight change nothing any more
        self._offsets.offsets.clear()
        self._timers.clear()
        return self._results.to_result(fx)

    # -- group membership ------------------------------------------------------------------------

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest) -> Result:
        return self._run(ctx, lambda fx: self._join_group(ctx, req, fx))

    def _join_group(self, ctx: RequestContext, req: JoinGroupRequest, fx: Effects) -> None:
        consumer_group = self._consumer.groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # docs/migration.md: a classic member of a consumer group, whatever the migration policy.
                self._classic_members.join(ctx, req, consumer_group, fx)
                return
            # An empty consumer group becomes a classic group (its offsets stay with the id).
            log.info("group %s: converted from consumer to classic", req.group_id)
            self._consumer.remove_group(consumer_group)
            fx.write([ConsumerGroupTombstone(req.group_id)])
        self._classic.join_group(ctx, req, fx)

    # -- KIP-848 consumer groups ---------------------------------------------------------------

    def consumer_group_heartbeat(self, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> Result:
        return self._run(ctx, lambda fx: self._consumer.heartbeat(ctx, req, fx))

    def consumer_group_describe(self, ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        return Result(replies=[(ctx.reply_to, self._consumer.describe(ctx, req))])

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest) -> Result:
        consumer_group = self._consumer.groups.get(req.group_id)
        if consumer_group is not None:
            return self._run(ctx, lambda fx: self._classic_members.sync(ctx, req, consumer_group, fx))
        return self._run(ctx, lambda fx: self._classic.sync_group(ctx, req, fx))

    def heartbeat(self, ctx: RequestContext, req: HeartbeatRequest) -> Result:
        consumer_group = self._consumer.groups.get(req.group_id)
        if consumer_group is not None:
            self._enter(ctx.now_ms, ctx.wall_ms)
            code = self._classic_members.heartbeat(
                consumer_group, req.member_id, req.group_instance_id, req.generation_id
            )
        else:
            code = self._classic.heartbeat(
                ctx.now_ms, req.group_id, req.member_id, req.group_instance_id, req.generation_id
            )
        return Result(replies=[(ctx.reply_to, HeartbeatResponse(error_code=code))])

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest) -> Result:
        consumer_group = self._consumer.groups.get(req.group_id)
        if consumer_group is not None:
            return self._run(ctx, lambda fx: self._classic_members.leave(ctx, req, consumer_group, fx))
        return self._run(ctx, lambda fx: self._classic.leave_group(ctx, req, fx))

    # -- offsets -----------------------------------------------------------------------------------

    def commit_offsets(self, ctx: RequestContext, req: OffsetCommitRequest) -> Result:
        return self._run(ctx, lambda fx: self._offsets.commit_offsets(ctx, req, fx))

    def fetch_offsets(self, ctx: RequestContext, req: OffsetFetchRequest) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        return Result(replies=[(ctx.reply_to, self._offsets.fetch_offsets(ctx, req))])

    def delete_offsets(self, ctx: RequestContext, req: OffsetDeleteRequest) -> Result:
        return self._run(ctx, lambda fx: self._offsets.delete_offsets(ctx, req, fx))

    def delete_topics(self, topics: list[str], now_ms: int, wall_ms: int) -> Result:
        """docs/groups.md#offsets-and-retention: tombstone every offset of deleted topics (no reply),
        unless offsets.retain.on.topic.deletion keeps them for retention to expire (docs/hardening.md)."""
        self._enter(now_ms, wall_ms)
        fx = Effects()
        if self.config.offsets_retain_on_topic_deletion:
            if topics:
                log.info(
                    "topics deleted, their committed offsets kept until they expire: %s", ", ".join(topics)
                )
            return self._results.to_result(fx)
        tombstones = self._offsets.topic_tombstones(topics)
        if tombstones:
            fx.write(tombstones, on_durable=lambda out: self._offsets.apply_tombstones(tombstones))
        return self._results.to_result(fx)

    # -- admin -------------------------------------------------------------------------------------

    def list_groups(self, ctx: RequestContext, req: ListGroupsRequest) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        response = self._classic.list_groups(ctx, req)
        version = ctx.api_version
        types = {t.lower() for t in req.types_filter} if version >= 5 and req.types_filter else None
        states = {s.lower() for s in req.states_filter} if version >= 4 and req.states_filter else None
        if types is None or CONSUMER_GROUP_TYPE in types:
            for group in self._consumer.groups.values():
                state = group.state
                if states is None or state.lower() in states:
                    response.groups.append(
                        ListedGroup(
                            group_id=group.group_id,
                            protocol_type=CONSUMER_GROUP_TYPE,
                            group_state=state,
                            group_type=CONSUMER_GROUP_TYPE,
                        )
                    )
        return Result(replies=[(ctx.reply_to, response)])

    def describe_groups(self, ctx: RequestContext, req: DescribeGroupsRequest) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        return Result(replies=[(ctx.reply_to, self._classic.describe_groups(ctx, req))])

    def delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest) -> Result:
        return self._run(ctx, lambda fx: self._delete_groups(ctx, req, fx))

    def _delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest, fx: Effects) -> None:
        """DeleteGroups (v0-2): only Empty groups; their offsets and record are tombstoned, and
        the groups are removed once the tombstones are durable."""
        results: list[DeletableGroupResult] = []
        changes: list[PendingChange] = []
        deleted_ids: set[str] = set()
        for group_id in req.groups_names:
            manager = self._manager_of(group_id)
            code = GROUP_ID_NOT_FOUND if manager is None else manager.validate_delete(group_id)
            if manager is not None and code == NONE:
                changes.append(manager.deletion(group_id, expiring=False))
                changes.append(self._offsets_deletion(group_id))
                deleted_ids.add(group_id)
            results.append(DeletableGroupResult(group_id, code))
        records = [record for change in changes for record in change.records]
        response = DeleteGroupsResponse(results=results)
        if not records:
            fx.reply(ctx.reply_to, response)
            return

        def failed_response(error_code: int) -> DeleteGroupsResponse:
            code = admin_write_error(error_code)
            return DeleteGroupsResponse(
                results=[
                    DeletableGroupResult(
                        r.group_id,
                        code if r.error_code == NONE and r.group_id in deleted_ids else r.error_code,
                    )
                    for r in results
                ]
            )

        fx.reply(ctx.reply_to, response, failed_response)
        fx.write(records, on_durable=lambda out: _apply_all(changes))

    def _manager_of(self, group_id: str) -> GroupLifecycle | None:
        return next((manager for manager in self._managers if manager.holds(group_id)), None)

    def _offsets_deletion(self, group_id: str) -> PendingChange:
        tombstones = self._offsets.group_tombstones(group_id)
        return PendingChange(list(tombstones), lambda: self._offsets.apply_tombstones(tombstones))

    # -- timers ------------------------------------------------------------------------------------

    def earliest_scheduled_since_last_call(self) -> int | None:
        return self._timers.take_earliest_scheduled()

    def next_deadline(self) -> int | None:
        """Monotonic time at which poll_timers has work (possibly a little early), or None."""
        return self._timers.next_deadline()

    def poll_timers(self, now_ms: int, wall_ms: int, limit: int = 10000) -> list[Result]:
        """Run the timers due at ``now_ms`` (at most ``limit`` heap items per call)."""
        self.clock.set(now_ms, wall_ms)
        results: list[Result] = []
        while limit > 0:
            # One key at a time: handling one expiry may re-arm or cancel another due timer.
            key, examined = self._timers.pop_due(now_ms, limit)
            limit -= examined
            if key is None:
                break
            fx = Effects()
            self.events.begin_operation()
            handler = self._timer_handlers.get(str(key[0]))
            if handler is None:
                raise ValueError(f"unknown timer {key!r}")
            handler(key, fx)
            if not fx.is_empty():
                results.append(self._results.to_result(fx))
        return results

    def _expire_offsets_and_groups(self, fx: Effects) -> None:
        """The retention sweep: expire offsets (KIP-211), then drop Empty groups left without any
        offset (docs/groups.md#offsets-and-retention); a group record is tombstoned only if one was ever written (generation > 0).
        Everything is applied once the tombstones are durable."""
        classic, offsets = self._classic, self._offsets
        self._timers.schedule(
            RETENTION_KEY, self.clock.now_ms + self.config.offsets_retention_check_interval_ms
        )
        wall_ms = self.clock.wall_ms
        expired: list[OffsetTombstone] = []
        removals: list[PendingChange] = []
        for cgroup in self._consumer.groups.values():
            keep = frozenset(cgroup.subscription_metadata) if cgroup.members else frozenset()
            tombstones = offsets.expired_consumer_group_offsets(cgroup.group_id, keep, wall_ms)
            expired.extend(tombstones)
            if not cgroup.members and not offsets.keeps_offsets_after(cgroup.group_id, tombstones):
                removals.append(self._consumer.deletion(cgroup.group_id, expiring=True))
        for group in classic.groups.values():
            tombstones = offsets.expired_offsets(group, wall_ms)
            expired.extend(tombstones)
            if group.state is EMPTY and not offsets.keeps_offsets_after(group.group_id, tombstones):
                removals.append(classic.deletion(group.group_id, expiring=True))
        if not expired and not removals:
            return
        log.info("retention sweep: %d offsets expired, %d groups removed", len(expired), len(removals))
        changes = [PendingChange(list(expired), lambda: offsets.apply_tombstones(expired)), *removals]

        def apply(out: Effects) -> None:
            self.stats.offsets_expired += len(expired)
            _apply_all(changes)

        records = [record for change in changes for record in change.records]
        if records:
            fx.write(records, on_durable=apply)
        else:  # Empty groups that never had a record nor offsets: nothing to write
            apply(fx)

    # -- read-only accessors for the runtime, metrics and tests -------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live group object (read it, never mutate it)."""
        return self._classic.groups.get(group_id)

    def groups_snapshot(self) -> list[GroupSnapshot]:
        return [
            GroupSnapshot(
                group_id=g.group_id,
                state=g.state.value,
                protocol_type=g.protocol_type,
                protocol_name=g.protocol_name,
                generation_id=g.generation_id,
                leader_id=g.leader_id,
                member_ids=tuple(g.members),
            )
            for g in self._classic.groups.values()
        ]

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The live KIP-848 group object (read it, never mutate it)."""
        return self._consumer.groups.get(group_id)

    def consumer_group_ids(self) -> list[str]:
        return list(self._consumer.groups)

    def consumer_group_assignor(self, group_id: str) -> str | None:
        """The server assignor a KIP-848 group's target is computed by (as DescribeGroups says)."""
        group = self._consumer.groups.get(group_id)
        return None if group is None else self._consumer.preferred_assignor(group)

    def member_liveness(self, group_id: str, member_id: str, now_ms: int) -> MemberLiveness | None:
        """A member's last heartbeat, session deadline and liveness at monotonic ``now_ms``
        (given by the caller: the core reads no clock); None for an unknown member."""
        classic = self._classic.groups.get(group_id)
        if classic is not None:
            member = classic.members.get(member_id)
            if member is None:
                return None
            return judge(
                member.last_heartbeat_ms,
                self._timers.deadline(member.session_key),
                member.session_timeout_ms // CLASSIC_INTERVAL_DIVISOR,
                now_ms,
                waiting=member.has_satisfied_heartbeat(),
            )
        cgroup = self._consumer.groups.get(group_id)
        cmember = None if cgroup is None else cgroup.members.get(member_id)
        if cmember is None:
            return None
        if cmember.classic is not None:
            late_after = cmember.classic.session_timeout_ms // CLASSIC_INTERVAL_DIVISOR
        else:
            late_after = CONSUMER_LATE_INTERVALS * self.group_configs.intervals(group_id).interval_ms
        deadline = self._timers.deadline(consumer_session_key(group_id, member_id))
        return judge(cmember.last_heartbeat_ms, deadline, late_after, now_ms)

    def group_count_by_state(self) -> dict[str, int]:
        """Classic and consumer groups by state name (both have Empty and Stable)."""
        counts: dict[str, int] = {}
        for group in self._classic.groups.values():
            counts[group.state.value] = counts.get(group.state.value, 0) + 1
        for cgroup in self._consumer.groups.values():
            counts[cgroup.state] = counts.get(cgroup.state, 0) + 1
        return counts

    def group_sizes(self) -> Iterator[tuple[str, str, int]]:
        """(group id, state, members) of every classic and consumer group."""
        for group in self._classic.groups.values():
            yield group.group_id, group.state.value, len(group.members)
        for cgroup in self._consumer.groups.values():
            yield cgroup.group_id, cgroup.state, len(cgroup.members)

    def last_commit_ms(self, group_id: str) -> int | None:
        """Wall-clock ms of the group's latest committed offset, None without offsets."""
        return max((record.commit_ms for record in self.committed_offsets(group_id)), default=None)

    def groups_by_protocol(self) -> tuple[int, int]:
        """(classic groups, consumer groups)."""
        return len(self._classic.groups), len(self._consumer.groups)

    def group_count(self) -> int:
        return len(self._classic.groups) + len(self._consumer.groups)

    def member_count(self) -> int:
        classic = sum(len(group.members) for group in self._classic.groups.values())
        return classic + sum(len(group.members) for group in self._consumer.groups.values())

    def offset_count(self) -> int:
        return self._offsets.offset_count()

    def committed_offsets(self, group_id: str) -> list[OffsetCommitRecord]:
        """The group's committed offsets, by topic and partition (read only)."""
        offsets = self._offsets.offsets.get(group_id)
        if offsets is None:
            return []
        found = (offsets.get(topic, p) for topic in offsets.topics() for p in offsets.partitions(topic))
        return [record for record in found if record is not None]


def _apply_all(changes: list[PendingChange]) -> None:
    for change in changes:
        change.apply()
