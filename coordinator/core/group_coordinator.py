"""GroupCoordinator: the pure core of the group coordinator -- one object for every shard this
process serves (which shard a group is in is ``sharding.py``'s business): the groups of every
kind, their offsets, the retention sweep.

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
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from typing import Final, TypeVar

from coordinator.core.clock import ShardClock
from coordinator.core.context import ReplyTo, RequestContext
from coordinator.core.dynamic_configs import DynamicGroupConfigs
from coordinator.core.effects import Effects, ResultBuilder
from coordinator.core.errors import GROUP_ID_NOT_FOUND, NONE, admin_write_error
from coordinator.core.events import GroupEvents
from coordinator.core.group import (
    Group,
    GroupView,
    PendingChange,
    RequestHandler,
    TimerHandler,
    TopicCatalog,
)
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.heartbeat_interval import no_jitter
from coordinator.core.kinds import register_kinds
from coordinator.core.liveness import MemberLiveness
from coordinator.core.offset_manager import OffsetManager
from coordinator.core.registry import GroupRegistry
from coordinator.core.result import Result
from coordinator.core.stats import CoreStats
from coordinator.core.timers import TimerKey, Timers
from coordinator.core.txn_offsets import OpenTransaction, Resolution, TransactionalOffsets
from protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.sync_group import SyncGroupRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from storage.records import (
    GroupConfigRecord,
    GroupRow,
    OffsetCommitRecord,
    OffsetTombstone,
    TxnOffsetRecord,
    offset_rows,
)

log = logging.getLogger(__name__)
_ROW_GROUP_ID: Final = itemgetter(0)

RETENTION_TIMER: Final = "retention"
RETENTION_KEY: Final[TimerKey] = (RETENTION_TIMER,)


def default_member_id(prefix: str) -> str:
    """Kafka's member ids: "{client id or group instance id}-{uuid4}"."""
    return f"{prefix}-{uuid.uuid4()}"


K = TypeVar("K")


class GroupCoordinator:
    """The groups and offsets of every shard this process serves, and the requests on them."""

    def __init__(
        self,
        config: BrokerGroupSettings,
        member_id_factory: Callable[[str], str] | None = None,
        random_unit: Callable[[], float] | None = None,
    ) -> None:
        """``random_unit`` draws uniformly from [0, 1) for heartbeat jitter (None: no jitter)."""
        self.config = config
        self.clock = ShardClock()
        self.stats = CoreStats()
        self._timers: Timers[TimerKey] = Timers()
        # The earliest deadline scheduled since the last call (Timers.take_earliest_scheduled),
        # bound here rather than wrapped: the runtime asks after every request.
        self.earliest_scheduled_since_last_call: Callable[[], int | None] = (
            self._timers.take_earliest_scheduled
        )
        self._results = ResultBuilder(self.clock)
        self.events = GroupEvents(self.clock)
        # The per-group configs (GROUP config resources) the groups run with.
        self.group_configs = DynamicGroupConfigs(config, random_unit or no_jitter)
        self._groups = GroupRegistry(config.group_max_groups)
        register_kinds(
            self._groups,
            config,
            self._timers,
            self.clock,
            self.stats,
            self.events,
            self.group_configs,
            self._enter,
            member_id_factory or default_member_id,
        )
        self._offsets = OffsetManager(config, self.clock, self._groups)
        self._txn_offsets = TransactionalOffsets(self._offsets)
        self._offsets.txn_pending = self._txn_offsets.is_pending
        # Whether something outside the core learns transaction outcomes and calls
        # complete_transaction (gateway mode): only then is TxnOffsetCommit taken (docs/transactions.md).
        self.accepts_transactional_offsets = False
        self._timer_handlers: dict[str, TimerHandler] = {
            RETENTION_TIMER: lambda _key, fx: self._expire_offsets_and_groups(fx)
        }
        self._request_handlers: dict[type, RequestHandler] = {}
        for kind in self._groups.kinds:
            for timer, handler in kind.timer_handlers().items():
                if timer in self._timer_handlers:
                    raise ValueError(f"timer kind {timer!r} registered twice")
                self._timer_handlers[timer] = handler
            for request_type, request_handler in kind.request_handlers().items():
                if request_type in self._request_handlers:
                    raise ValueError(f"{request_type.__name__} served by two kinds of group")
                self._request_handlers[request_type] = request_handler
        self._loaded = False

    def attach_catalog(self, catalog: TopicCatalog) -> None:
        """The topic catalog groups assign from (read only; its version marks changes)."""
        for kind in self._groups.kinds:
            kind.attach_catalog(catalog)

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
        group_rows: Sequence[GroupRow],
        offsets: Sequence[OffsetCommitRecord],
        now_ms: int,
        wall_ms: int,
        group_configs: list[GroupConfigRecord] | None = None,
        txn_offsets: list[TxnOffsetRecord] | None = None,
    ) -> None:
        """docs/groups.md#loading: rebuild a fresh coordinator from its stored rows (the rows of
        groups of every kind, ``LoadedState.group_rows``) and restart member sessions:
        ``load_more`` of every shard at once."""
        if self._loaded or self.held_group_ids():
            raise RuntimeError("load() needs a coordinator that has not been loaded nor served anything")
        self.load_more(group_rows, offsets, now_ms, wall_ms, group_configs, txn_offsets)
        log.debug(
            "loaded %s groups and %d offsets",
            ", ".join(f"{len(kind.groups)} {kind.name}" for kind in self._groups.kinds),
            self._offsets.offset_count(),
        )

    def load_more(
        self,
        group_rows: Sequence[GroupRow],
        offsets: Sequence[OffsetCommitRecord],
        now_ms: int,
        wall_ms: int,
        group_configs: list[GroupConfigRecord] | None = None,
        txn_offsets: list[TxnOffsetRecord] | None = None,
    ) -> None:
        """docs/multinode.md#loading-a-shard: add the stored rows of shards taken over (none of
        their groups may be held here; unload_groups them first) and restart their member
        sessions, exactly as a restart loads them."""
        self._loaded = True
        self._enter(now_ms, wall_ms)
        group_configs = group_configs or []
        txn_offsets = txn_offsets or []
        # Offsets as rows, straight into the offsets' columns (records are not built for them
        # when the store kept its rows: docs/performance.md#offsets-in-parallel-arrays).
        rows = offset_rows(offsets)
        ids = (
            {r.group_id for r in group_rows}
            | set(map(_ROW_GROUP_ID, rows))
            | {r.group_id for r in txn_offsets}
        )
        held = [g for g in ids | {r.group_id for r in group_configs} if self._holds(g)]
        if held:
            raise RuntimeError(f"load_more() of groups already held: {sorted(held)[:5]}")
        self.group_configs.load(group_configs)  # before sessions restart at the groups' timeouts
        for kind in self._groups.kinds:
            kind.load(group_rows)
        self._groups.resolve_stored_twice(ids)
        self._offsets.load_rows(rows)
        self._txn_offsets.load(txn_offsets)
        fx = Effects()
        for kind in self._groups.kinds:
            kind.on_loaded(fx, ids)
        if fx.records or fx.replies:
            raise RuntimeError("loading produced records or replies")  # cannot happen: nothing is parked

    def unload_groups(self, group_ids: set[str], now_ms: int) -> Result:
        """docs/multinode.md: the shard holding ``group_ids`` is no longer ours: those groups go
        Dead, their parked requests are answered NOT_COORDINATOR, their offsets, group configs
        and timers go (the new owner loads them from storage)."""
        self.clock.now_ms = now_ms
        fx = Effects()
        for kind in self._groups.kinds:
            kind.unload(fx, group_ids)
        for group_id in group_ids:
            self._offsets.offsets.pop(group_id, None)
            self.group_configs.overrides.pop(group_id, None)
        self._txn_offsets.unload(group_ids)
        self._timers.cancel_where(lambda key: len(key) > 1 and key[1] in group_ids)
        return self._results.to_result(fx)

    def held_group_ids(self) -> set[str]:
        """Every group id with state here (groups of every kind, offsets, group configs)."""
        return (
            self._groups.ids()
            | self._offsets.offsets.keys()
            | self.group_configs.overrides.keys()
            | self._txn_offsets.pending.keys()
        )

    def _holds(self, group_id: str) -> bool:
        """``group_id in held_group_ids()`` without building the set (a shard loading after
        others would build it over every group held so far)."""
        return (
            self._groups.holds(group_id)
            or group_id in self._offsets.offsets
            or group_id in self.group_configs.overrides
            or self._txn_offsets.has_pending(group_id)
        )

    def unload(self, now_ms: int) -> Result:
        """The shard is gone (ownership lost, or reloaded after a failed write): every group goes
        Dead and every parked JoinGroup/SyncGroup is answered NOT_COORDINATOR."""
        self.clock.now_ms = now_ms
        fx = Effects()
        for kind in self._groups.kinds:
            kind.unload(fx)
        self._results.serving = False  # writes still in flight change nothing any more
        self._offsets.offsets.clear()
        self._txn_offsets.clear()
        self._timers.clear()
        return self._results.to_result(fx)

    # -- the classic group APIs, answered by the kind holding the group ---------------------------

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest) -> Result:
        return self._run(ctx, lambda fx: self._join_group(ctx, req, fx))

    def _join_group(self, ctx: RequestContext, req: JoinGroupRequest, fx: Effects) -> None:
        kind = self._groups.holder(req.group_id)
        api = None if kind is None else kind.classic_protocol(req.group_id, True)
        if api is not None:
            api.join_group(ctx, req, fx)
            return
        if kind is not None:
            # An empty group of a kind that does not take JoinGroups becomes a group of the
            # default kind (its offsets stay with the id), docs/migration.md.
            kind.release_empty(req.group_id, fx)
        self._groups.default.join_group(ctx, req, fx)

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest) -> Result:
        api = self._groups.classic_protocol(req.group_id)
        return self._run(ctx, lambda fx: api.sync_group(ctx, req, fx))

    def heartbeat(self, ctx: RequestContext, req: HeartbeatRequest) -> Result:
        api = self._groups.classic_protocol(req.group_id)
        code = api.heartbeat(ctx, req.group_id, req.member_id, req.group_instance_id, req.generation_id)
        return Result(replies=[(ctx.reply_to, HeartbeatResponse(error_code=code))])

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest) -> Result:
        api = self._groups.classic_protocol(req.group_id)
        return self._run(ctx, lambda fx: api.leave_group(ctx, req, fx))

    # -- the APIs of one kind (ConsumerGroupHeartbeat, DescribeGroups, ...) -----------------------

    def handle(self, ctx: RequestContext, req: object) -> Result:
        """A request one kind of group serves (``GroupKind.request_handlers``)."""
        handler = self._request_handlers.get(type(req))
        if handler is None:
            raise LookupError(f"no kind of group serves {type(req).__name__}")
        return self._run(ctx, lambda fx: handler(ctx, req, fx))

    # -- offsets -----------------------------------------------------------------------------------

    def commit_offsets(self, ctx: RequestContext, req: OffsetCommitRequest) -> Result:
        return self._run(ctx, lambda fx: self._offsets.commit_offsets(ctx, req, fx))

    def fetch_offsets(self, ctx: RequestContext, req: OffsetFetchRequest) -> Result:
        self._enter(ctx.now_ms, ctx.wall_ms)
        return Result(replies=[(ctx.reply_to, self._offsets.fetch_offsets(ctx, req))])

    def txn_commit_offsets(self, ctx: RequestContext, req: TxnOffsetCommitRequest) -> Result:
        """TxnOffsetCommit: offsets pending until their transaction completes (docs/transactions.md)."""
        return self._run(ctx, lambda fx: self._txn_offsets.commit(ctx, req, fx))

    def complete_transaction(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        reply_to: ReplyTo,
        now_ms: int,
        wall_ms: int,
    ) -> Result:
        """The transaction of (producer id, epoch) committed or aborted: its pending offsets are
        materialised or discarded; ``reply_to`` gets a ``Resolution`` once that is durable (or
        the write's error code when it failed: nothing changed, the offsets stay pending)."""
        self._enter(now_ms, wall_ms)
        fx = Effects()
        resolved = self._txn_offsets.complete(producer_id, producer_epoch, committed, fx)
        fx.reply(reply_to, Resolution(resolved, NONE), lambda code: Resolution(0, code))
        return self._results.to_result(fx)

    def open_transactions(self) -> list[OpenTransaction]:
        """Producers with pending transactional offsets, by group (read only)."""
        return self._txn_offsets.open_transactions()

    def pending_txn_offsets(self, group_id: str) -> list[TxnOffsetRecord]:
        """A group's pending transactional offsets (read only)."""
        return self._txn_offsets.pending_of(group_id)

    def pending_txn_offset_count(self) -> int:
        return self._txn_offsets.pending_count()

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
        """ListGroups v4+: StatesFilter, v5+: TypesFilter, both case-insensitive."""
        self._enter(ctx.now_ms, ctx.wall_ms)
        version = ctx.api_version
        types = {t.lower() for t in req.types_filter} if version >= 5 and req.types_filter else None
        states = {s.lower() for s in req.states_filter} if version >= 4 and req.states_filter else None
        listed = [
            group.listed()
            for kind in self._groups.kinds
            if types is None or kind.name in types
            for group in kind.groups.values()
            if states is None or group.state_name.lower() in states
        ]
        return Result(replies=[(ctx.reply_to, ListGroupsResponse(error_code=NONE, groups=listed))])

    def delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest) -> Result:
        return self._run(ctx, lambda fx: self._delete_groups(ctx, req, fx))

    def _delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest, fx: Effects) -> None:
        """DeleteGroups (v0-2): only Empty groups; their offsets and record are tombstoned, and
        the groups are removed once the tombstones are durable."""
        results: list[DeletableGroupResult] = []
        changes: list[PendingChange] = []
        deleted_ids: set[str] = set()
        for group_id in req.groups_names:
            kind = self._groups.holder(group_id)
            code = GROUP_ID_NOT_FOUND if kind is None else kind.validate_delete(group_id)
            if kind is not None and code == NONE:
                changes.append(kind.deletion(group_id, expiring=False))
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

    def _offsets_deletion(self, group_id: str) -> PendingChange:
        """The group's offsets and its pending transactional offsets (Kafka's deleteAllOffsets)."""
        tombstones = self._offsets.group_tombstones(group_id)
        pending = self._txn_offsets.group_tombstones(group_id)

        def apply() -> None:
            self._offsets.apply_tombstones(tombstones)
            self._txn_offsets.apply_tombstones(pending)

        return PendingChange([*tombstones, *pending], apply)

    # -- timers ------------------------------------------------------------------------------------

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
        offsets = self._offsets
        self._timers.schedule(
            RETENTION_KEY, self.clock.now_ms + self.config.offsets_retention_check_interval_ms
        )
        wall_ms = self.clock.wall_ms
        expired: list[OffsetTombstone] = []
        removals: list[PendingChange] = []
        for kind in self._groups.kinds:
            for group_id in kind.groups:
                expiry = kind.offset_expiry(group_id)
                tombstones = [] if expiry is None else offsets.expired_offsets(group_id, expiry, wall_ms)
                expired.extend(tombstones)
                if (
                    kind.expires_without_offsets(group_id)
                    and not offsets.keeps_offsets_after(group_id, tombstones)
                    and not self._txn_offsets.has_pending(group_id)  # Kafka keeps it too
                ):
                    removals.append(kind.deletion(group_id, expiring=True))
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

    def group(self, group_id: str) -> Group | None:
        """The live group of any kind (read it, never mutate it)."""
        return self._groups.group(group_id)

    def kind(self, cls: type[K]) -> K:
        """The registered kind of group of class ``cls`` (typed access for views and tests)."""
        return self._groups.kind(cls)

    def member_liveness(self, group_id: str, member_id: str, now_ms: int) -> MemberLiveness | None:
        """A member's last heartbeat, session deadline and liveness at monotonic ``now_ms``
        (given by the caller: the core reads no clock); None for an unknown member."""
        holder = self._groups.holder(group_id)
        return None if holder is None else holder.member_liveness(group_id, member_id, now_ms)

    def group_view(self, group_id: str) -> GroupView | None:
        """How the console and the HTTP API show the group, whatever its kind; None if unknown."""
        holder = self._groups.holder(group_id)
        return None if holder is None else holder.view(group_id)

    def group_views(self) -> dict[str, GroupView]:
        """Every group's view by group id, kind by kind in registration order."""
        views: dict[str, GroupView] = {}
        for kind in self._groups.kinds:
            for group_id in list(kind.groups):
                view = kind.view(group_id)
                if view is not None:
                    views[group_id] = view
        return views

    def group_count_by_state(self) -> dict[str, int]:
        """Groups of every kind by state name (the kinds share Empty and Stable)."""
        counts: dict[str, int] = {}
        for group in self._groups:
            state = group.state_name
            counts[state] = counts.get(state, 0) + 1
        return counts

    def group_sizes(self) -> Iterator[tuple[str, str, int]]:
        """(group id, state, members) of every group."""
        for group in self._groups:
            yield group.group_id, group.state_name, group.member_count

    def last_commit_ms(self, group_id: str) -> int | None:
        """Wall-clock ms of the group's latest committed offset, None without offsets."""
        return max((record.commit_ms for record in self.committed_offsets(group_id)), default=None)

    def groups_by_protocol(self) -> dict[str, int]:
        """Groups of each kind by the kind's name, in registration order."""
        return {kind.name: len(kind.groups) for kind in self._groups.kinds}

    def group_count(self) -> int:
        return self._groups.count()

    def member_count(self) -> int:
        return sum(group.member_count for group in self._groups)

    def offset_count(self) -> int:
        return self._offsets.offset_count()

    def committed_offsets(self, group_id: str) -> list[OffsetCommitRecord]:
        """The group's committed offsets, by topic and partition (read only)."""
        offsets = self._offsets.offsets.get(group_id)
        if offsets is None:
            return []
        return offsets.records()


def _apply_all(changes: list[PendingChange]) -> None:
    for change in changes:
        change.apply()
