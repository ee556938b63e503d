"""GroupCoordinator: the pure core of one coordinator shard (classic groups and their offsets).

The runtime calls one method per request, plus ``poll_timers`` when ``next_deadline`` has passed,
and applies every returned :class:`~coordinator.core.result.Result`: write its records as one atomic
batch, then send its replies and call ``on_durable`` -- or, if the write fails, call ``on_failed``
instead -- and apply the Results those return in the same way. Nothing here reads a clock, sleeps
or does I/O; all time comes from the request context or the caller.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from coordinator.core.classic_group import ClassicGroup
from coordinator.core.classic_group_manager import (
    EMPTY,
    INCONSISTENT_GROUP_PROTOCOL,
    NON_EMPTY_GROUP,
    NONE,
    CoreStats,
    Effects,
    GroupManager,
    admin_write_error,
)
from coordinator.core.consumer_group import ConsumerGroup
from coordinator.core.consumer_group_manager import CONSUMER_GROUP_TYPE, ConsumerGroupManager, TopicCatalog
from coordinator.core.context import RequestContext
from coordinator.core.group_config import GroupConfig
from coordinator.core.offset_manager import OffsetManager, Removal
from coordinator.core.result import Result
from coordinator.core.timers import Timers
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
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    Record,
)

log = logging.getLogger(__name__)

TimerKey = tuple[str | int, ...]
RETENTION_KEY: Final[TimerKey] = ("retention",)


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


class GroupCoordinator:
    def __init__(self, config: GroupConfig, member_id_factory: Callable[[str], str] | None = None) -> None:
        self.config = config
        self._timers: Timers[TimerKey] = Timers()
        self._groups = GroupManager(config, self._timers, member_id_factory or default_member_id)
        self._offsets = OffsetManager(config, self._groups)
        self._consumer = ConsumerGroupManager(config, self._timers, self._groups)
        self._groups.other_groups = self._consumer.groups
        self._offsets.consumer = self._consumer
        self._loaded = False

    def attach_catalog(self, catalog: TopicCatalog) -> None:
        """The topic catalog consumer groups assign from (read only; its version marks changes)."""
        self._consumer.catalog = catalog

    def _enter(self, now_ms: int, wall_ms: int) -> None:
        self._groups.set_clock(now_ms, wall_ms)
        if RETENTION_KEY not in self._timers:
            self._timers.schedule(RETENTION_KEY, now_ms + self.config.offsets_retention_check_interval_ms)

    def _run(self, ctx: RequestContext, handler: Callable[[Effects], None]) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        fx = Effects()
        handler(fx)
        return self._groups.to_result(fx)

    # -- lifecycle -------------------------------------------------------------------------------

    def load(
        self,
        groups: list[GroupMetadataRecord],
        offsets: list[OffsetCommitRecord],
        now_ms: int,
        wall_ms: int,
        consumer_groups: list[ConsumerGroupRecord] | None = None,
        consumer_members: list[ConsumerMemberRecord] | None = None,
    ) -> None:
        """docs/groups.md#loading: rebuild a fresh coordinator from its stored rows and restart member sessions."""
        if self._loaded or self._groups.groups or self._offsets.offsets or self._consumer.groups:
            raise RuntimeError("load() needs a coordinator that has not been loaded nor served anything")
        self._loaded = True
        self._enter(now_ms, wall_ms)
        for record in groups:
            self._groups.load_group(record)
        self._consumer.load(consumer_groups or [], consumer_members or [])
        for group_id in self._consumer.groups.keys() & self._groups.groups.keys():
            log.warning(
                "group %s is stored as classic and consumer group; keeping the consumer group", group_id
            )
            del self._groups.groups[group_id]
        self._offsets.load(offsets)
        fx = Effects()
        self._groups.on_loaded(fx)
        self._consumer.on_loaded()
        if not fx.is_empty():
            raise RuntimeError("loading produced replies or records")  # cannot happen: nothing is parked
        log.info(
            "loaded %d classic groups, %d consumer groups and %d offsets",
            len(self._groups.groups),
            len(self._consumer.groups),
            self._offsets.offset_count(),
        )

    def unload(self, now_ms: int) -> Result:
        """The shard is gone (ownership lost, or reloaded after a failed write): every group goes
        Dead and every parked JoinGroup/SyncGroup is answered NOT_COORDINATOR."""
        self._groups.now_ms = now_ms
        fx = Effects()
        self._groups.unload(fx)
        self._consumer.unload()
        self._offsets.offsets.clear()
        self._timers.clear()
        return self._groups.to_result(fx)

    # -- group membership ------------------------------------------------------------------------

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest) -> Result:
        return self._run(ctx, lambda fx: self._join_group(ctx, req, fx))

    def _join_group(self, ctx: RequestContext, req: JoinGroupRequest, fx: Effects) -> None:
        consumer_group = self._consumer.groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # No mixed groups (docs/groups.md#mixed-groups): classic members cannot join a live consumer group.
                fx.reply(
                    ctx.reply_to,
                    GroupManager.join_error(ctx.api_version, INCONSISTENT_GROUP_PROTOCOL, req.member_id),
                )
                return
            # An empty consumer group becomes a classic group (its offsets stay with the id).
            log.info("group %s: converted from consumer to classic", req.group_id)
            self._consumer.remove_group(consumer_group)
            fx.write([ConsumerGroupTombstone(req.group_id)])
        self._groups.join_group(ctx, req, fx)

    # -- KIP-848 consumer groups ---------------------------------------------------------------

    def consumer_group_heartbeat(self, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> Result:
        return self._run(ctx, lambda fx: self._consumer.heartbeat(ctx, req, fx))

    def consumer_group_describe(self, ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        return Result(replies=[(ctx.reply_to, self._consumer.describe(ctx, req))])

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest) -> Result:
        return self._run(ctx, lambda fx: self._groups.sync_group(ctx, req, fx))

    def heartbeat(self, ctx: RequestContext, req: HeartbeatRequest) -> Result:
        code = self._groups.heartbeat(
            ctx.now_ms, req.group_id, req.member_id, req.group_instance_id, req.generation_id
        )
        return Result(replies=[(ctx.reply_to, HeartbeatResponse(error_code=code))])

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest) -> Result:
        return self._run(ctx, lambda fx: self._groups.leave_group(ctx, req, fx))

    # -- offsets -----------------------------------------------------------------------------------

    def commit_offsets(self, ctx: RequestContext, req: OffsetCommitRequest) -> Result:
        return self._run(ctx, lambda fx: self._offsets.commit_offsets(ctx, req, fx))

    def fetch_offsets(self, ctx: RequestContext, req: OffsetFetchRequest) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        return Result(replies=[(ctx.reply_to, self._offsets.fetch_offsets(ctx, req))])

    def delete_offsets(self, ctx: RequestContext, req: OffsetDeleteRequest) -> Result:
        return self._run(ctx, lambda fx: self._offsets.delete_offsets(ctx, req, fx))

    def delete_topics(self, topics: list[str], now_ms: int, wall_ms: int) -> Result:
        """docs/groups.md#offsets-and-retention: tombstone every offset of deleted topics (no reply)."""
        self._enter(now_ms, wall_ms)
        fx = Effects()
        removal = self._offsets.delete_topics(topics)
        if removal.tombstones:
            fx.write(removal.tombstones, on_failed=lambda out, _error: self._offsets.restore(removal))
        return self._groups.to_result(fx)

    # -- admin -------------------------------------------------------------------------------------

    def list_groups(self, ctx: RequestContext, req: ListGroupsRequest) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        response = self._groups.list_groups(ctx, req)
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
        return Result(replies=[(ctx.reply_to, self._groups.describe_groups(ctx, req))])

    def delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest) -> Result:
        return self._run(ctx, lambda fx: self._delete_groups(ctx, req, fx))

    def _delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest, fx: Effects) -> None:
        """DeleteGroups (v0-2): only Empty groups; their offsets and record are tombstoned."""
        results: list[DeletableGroupResult] = []
        records: list[Record] = []
        deleted: list[tuple[ClassicGroup | ConsumerGroup, Removal]] = []
        for group_id in req.groups_names:
            consumer_group = self._consumer.groups.get(group_id)
            if consumer_group is not None:
                code = NON_EMPTY_GROUP if consumer_group.members else NONE
            else:
                code = self._groups.validate_delete(group_id)
            if code == NONE:
                group: ClassicGroup | ConsumerGroup
                tombstone: Record
                if consumer_group is not None:
                    group, tombstone = consumer_group, ConsumerGroupTombstone(group_id)
                    self._consumer.remove_group(consumer_group)
                else:
                    group, tombstone = self._groups.groups[group_id], GroupTombstone(group_id)
                    self._groups.remove_group(group)
                removal = self._offsets.drop_group(group_id)
                records.extend(removal.tombstones)
                records.append(tombstone)
                deleted.append((group, removal))
            results.append(DeletableGroupResult(group_id, code))
        response = DeleteGroupsResponse(results=results)
        if not records:
            fx.reply(ctx.reply_to, response)
            return
        deleted_ids = {group.group_id for group, _ in deleted}

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

        def on_failed(out: Effects, error_code: int) -> None:
            for group, removal in deleted:
                self._restore_group(group)
                self._offsets.restore(removal)

        fx.reply(ctx.reply_to, response, failed_response)
        fx.write(records, on_failed=on_failed)

    def _restore_group(self, group: ClassicGroup | ConsumerGroup) -> None:
        if isinstance(group, ConsumerGroup):
            self._consumer.restore_group(group)
        else:
            self._groups.restore_group(group)

    # -- timers ------------------------------------------------------------------------------------

    def earliest_scheduled_since_last_call(self) -> int | None:
        return self._timers.take_earliest_scheduled()

    def next_deadline(self) -> int | None:
        """Monotonic time at which poll_timers has work (possibly a little early), or None."""
        return self._timers.next_deadline()

    def poll_timers(self, now_ms: int, wall_ms: int, limit: int = 10000) -> list[Result]:
        """Run the timers due at ``now_ms`` (at most ``limit`` heap items per call)."""
        self._groups.set_clock(now_ms, wall_ms)
        results: list[Result] = []
        while limit > 0:
            # One key at a time: handling one expiry may re-arm or cancel another due timer.
            key, examined = self._timers.pop_due(now_ms, limit)
            limit -= examined
            if key is None:
                break
            fx = Effects()
            match key:
                case ("session", str() as group_id, str() as member_id):
                    self._groups.expire_session(group_id, member_id, fx)
                case ("join", str() as group_id):
                    self._groups.expire_join(group_id, fx)
                case ("sync", str() as group_id, int() as generation_id):
                    self._groups.expire_pending_sync(group_id, generation_id, fx)
                case ("cg-session", str() as group_id, str() as member_id):
                    self._consumer.expire_session(group_id, member_id, fx)
                case ("cg-rebalance", str() as group_id, str() as member_id):
                    self._consumer.expire_rebalance(group_id, member_id, fx)
                case ("retention",):
                    self._expire_offsets_and_groups(fx)
                case _:
                    raise ValueError(f"unknown timer {key!r}")
            if not fx.is_empty():
                results.append(self._groups.to_result(fx))
        return results

    def _expire_offsets_and_groups(self, fx: Effects) -> None:
        """The retention sweep: expire offsets (KIP-211), then drop Empty groups left without any
        offset (docs/groups.md#offsets-and-retention); a group record is tombstoned only if one was ever written (generation > 0)."""
        groups, offsets = self._groups, self._offsets
        self._timers.schedule(RETENTION_KEY, groups.now_ms + self.config.offsets_retention_check_interval_ms)
        wall_ms = groups.wall_ms
        expired = Removal()
        group_tombstones: list[Record] = []
        removed_groups: list[ClassicGroup | ConsumerGroup] = []
        consumer = self._consumer
        for cgroup in list(consumer.groups.values()):
            keep = frozenset(cgroup.subscription_metadata) if cgroup.members else frozenset()
            offsets.expire_consumer_group_offsets(cgroup.group_id, keep, wall_ms, expired)
            if not cgroup.members and not offsets.has_offsets(cgroup.group_id):
                consumer.remove_group(cgroup)
                offsets.drop_group(cgroup.group_id)
                removed_groups.append(cgroup)
                group_tombstones.append(ConsumerGroupTombstone(cgroup.group_id))
        for group in list(groups.groups.values()):
            offsets.expire_offsets(group, wall_ms, expired)
            if group.state is EMPTY and not offsets.has_offsets(group.group_id):
                groups.remove_group(group)
                offsets.drop_group(group.group_id)
                removed_groups.append(group)
                if group.generation_id > 0:
                    group_tombstones.append(GroupTombstone(group.group_id))
        if expired.tombstones or removed_groups:
            log.info(
                "retention sweep: %d offsets expired, %d groups removed",
                len(expired.tombstones),
                len(removed_groups),
            )
        records: list[Record] = [*expired.tombstones, *group_tombstones]
        if records:

            def on_failed(out: Effects, error_code: int) -> None:
                for group in removed_groups:
                    self._restore_group(group)
                offsets.restore(expired)

            fx.write(records, on_failed=on_failed)

    # -- read-only accessors for the runtime, metrics and tests -------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live group object (read it, never mutate it)."""
        return self._groups.groups.get(group_id)

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
            for g in self._groups.groups.values()
        ]

    @property
    def stats(self) -> CoreStats:
        return self._groups.stats

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The live KIP-848 group object (read it, never mutate it)."""
        return self._consumer.groups.get(group_id)

    def group_count_by_state(self) -> dict[str, int]:
        """Classic and consumer groups by state name (both have Empty and Stable)."""
        counts: dict[str, int] = {}
        for group in self._groups.groups.values():
            counts[group.state.value] = counts.get(group.state.value, 0) + 1
        for cgroup in self._consumer.groups.values():
            counts[cgroup.state] = counts.get(cgroup.state, 0) + 1
        return counts

    def group_count(self) -> int:
        return len(self._groups.groups) + len(self._consumer.groups)

    def member_count(self) -> int:
        classic = sum(len(group.members) for group in self._groups.groups.values())
        return classic + sum(len(group.members) for group in self._consumer.groups.values())

    def offset_count(self) -> int:
        return self._offsets.offset_count()
