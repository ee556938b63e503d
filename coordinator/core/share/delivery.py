"""The share-partition leader's state, held with the share groups of the shard (docs/share-groups.md,
"The data plane"): one live :class:`SharePartition` per (group, topic, partition), restored from
the stored rows on first use, changed by the operations below, written through the shard before
the operation is answered, its lock expiry a core timer.

The runtime (coordinator/server/share_fetch.py) reads the records and waits; it calls these
operations through ``GroupCoordinator.handle`` with a ``ReplyTo`` that takes the outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coordinator.core.context import RequestContext
from coordinator.core.dynamic_configs import SHARE_SETTINGS_CACHED
from coordinator.core.effects import Effects
from coordinator.core.errors import NONE, UNKNOWN_MEMBER_ID, consumer_write_error
from coordinator.core.share.group import ShareGroup, ShareMember
from coordinator.core.share.limits import share_limits
from coordinator.core.share.membership import ShareMembership
from coordinator.core.share.partition import (
    INVALID_RECORD_STATE,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRange,
    DeadLetterRun,
    RecordState,
    ShareCounters,
    ShareLimits,
    SharePartition,
)
from coordinator.core.share.records import partition_state_record
from coordinator.core.share_configs import ShareGroupSettings
from coordinator.core.timers import TimerKey
from storage.records import Record

SHARE_LOCK_TIMER = "sg-lock"
RENEW_DISABLED = "Renewing acquisition locks is not enabled for the group."
PartitionKey = tuple[str, str, int]  # (group id, topic, partition)
TopicPartition = tuple[str, int]


def lock_key(key: PartitionKey) -> TimerKey:
    return (SHARE_LOCK_TIMER, *key)


# ---- operations (what the runtime hands GroupCoordinator.handle) ----------------------------------


@dataclass(frozen=True, slots=True)
class FetchTarget:
    """Where a share fetch of one partition reads: ``offset`` (-1: the start offset is not known
    yet and must be looked up per ``share.auto.offset.reset``), or nothing when the window is full."""

    error_code: int = NONE
    offset: int = -1
    can_acquire: bool = True
    lock_duration_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class ShareAcknowledgeOp:
    """Apply one member's acknowledgements (ShareFetch's piggy-backed ones or ShareAcknowledge)."""

    group_id: str
    member_id: str
    acknowledgements: Mapping[TopicPartition, Sequence[AcknowledgementBatch]]


@dataclass(frozen=True, slots=True)
class ShareInitializeOp:
    """Start share-partitions that have no state yet at the offsets found (auto offset reset)."""

    group_id: str
    start_offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class ShareAcquireOp:
    """Acquire for ``member_id`` out of the record batches fetched, (base, last offset) each."""

    group_id: str
    member_id: str
    fetched: Mapping[TopicPartition, Sequence[tuple[int, int]]]
    max_records: int
    strict_record_limit: bool = False
    # Offsets of the fetched batches never to deliver (aborted transactions under
    # read_committed): acquired with the rest, then archived at once.
    hidden: Mapping[TopicPartition, Sequence[tuple[int, int]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShareLogStartOp:
    """The upstream's log starts past these share-partitions' start offsets (records deleted):
    their start offsets follow, what went unfinished is archived."""

    group_id: str
    log_starts: Mapping[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class ShareReleaseOp:
    """Everything ``member_id`` holds becomes available again (its share session closed)."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareDeadLetteredOp:
    """The dead-letter records of these ARCHIVING runs are written (or cannot be): they become
    ARCHIVED (docs/share-groups.md, "Dead-letter topics")."""

    group_id: str
    runs: Mapping[TopicPartition, Sequence[DeadLetterRun]]


@dataclass(slots=True)
class ShareOutcome:
    """What an operation's ReplyTo receives once its writes are durable: per partition an error
    code and message (acknowledgements), or the ranges acquired (acquisitions). ``write_error``:
    the write failed, nothing is reported as done."""

    errors: dict[TopicPartition, tuple[int, str | None]] = field(default_factory=dict)
    acquired: dict[TopicPartition, list[AcquiredRange]] = field(default_factory=dict)
    write_error: int = NONE


class ShareDelivery(ShareMembership):
    """The live share-partitions of the shard's share groups (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.live: dict[PartitionKey, SharePartition] = {}
        self.unwritten_partitions: set[PartitionKey] = set()
        # Per group, the delivery totals of its share-partitions since the group was loaded
        # (one object shared by its live partitions, so it outlives a partition dropped and
        # restored), bounded by the groups the shard holds.
        self.counters_by_group: dict[str, ShareCounters] = {}
        # Told once records that wait ARCHIVING for their dead letters are durable (the gateway's
        # dead-letter writer: docs/share-groups.md, "Dead-letter topics").
        self.dead_letters_due: Callable[[], None] | None = None
        self._archiving_written: set[PartitionKey] = set()
        # Per group, the limits made from its settings object (a new object when they change).
        self._limits: dict[str, tuple[ShareGroupSettings, ShareLimits]] = {}

    # -- reading ---------------------------------------------------------------------------------

    def limits_of(self, group_id: str) -> ShareLimits:
        """The group's share-partition bounds: its validated settings, clamped into the broker's
        bounds (docs/share-groups.md, "Settings")."""
        settings = self.settings_for(group_id)
        cached = self._limits.get(group_id)
        if cached is None or cached[0] is not settings:
            if len(self._limits) >= SHARE_SETTINGS_CACHED:
                self._limits.clear()
            cached = self._limits[group_id] = (settings, share_limits(settings))
        return cached[1]

    def partition(self, key: PartitionKey) -> SharePartition | None:
        """The live share-partition, restored from storage on first use; None if it never started."""
        live = self.live.get(key)
        if live is None:
            stored = self.partition_states.get(key)
            if stored is None:
                return None
            live = SharePartition.restore(stored, self.limits_of(key[0]))
            self._go_live(key, live)
        # Read on every use: a dead-letter topic set or removed applies to live partitions at once.
        live.dead_letter = bool(self.settings_for(key[0]).dlq_topic_name.strip())
        return live

    def _go_live(self, key: PartitionKey, partition: SharePartition) -> None:
        partition.counters = self.counters_by_group.setdefault(key[0], ShareCounters())
        self.live[key] = partition

    def share_metrics(self) -> list[tuple[str, ShareCounters, int, int]]:
        """Per share group with counters: (group id, its totals, records in flight, records
        acquired now) over its live share-partitions."""
        in_flight: dict[str, int] = {}
        acquired: dict[str, int] = {}
        for (group_id, _, _), partition in self.live.items():
            in_flight[group_id] = in_flight.get(group_id, 0) + partition.in_flight
            acquired[group_id] = acquired.get(group_id, 0) + partition.acquired_count()
        return [
            (group_id, counters, in_flight.get(group_id, 0), acquired.get(group_id, 0))
            for group_id, counters in self.counters_by_group.items()
        ]

    def dead_letters_pending(self) -> dict[PartitionKey, list[DeadLetterRun]]:
        """Every share-partition's ARCHIVING runs, stored ones included (a restart resumes them)."""
        pending: dict[PartitionKey, list[DeadLetterRun]] = {}
        for key, state in self.partition_states.items():
            if key not in self.live and any(b.delivery_state == RecordState.ARCHIVING for b in state.batches):
                self.partition(key)
        for key, partition in self.live.items():
            runs = partition.dead_letter_runs()
            if runs:
                pending[key] = runs
        return pending

    def member_of(self, group_id: str, member_id: str) -> tuple[ShareGroup, ShareMember] | None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        return None if group is None or member is None else (group, member)

    def fetch_targets(
        self, group_id: str, member_id: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, FetchTarget]:
        """Where each partition's fetch reads (read only)."""
        known = self.member_of(group_id, member_id) is not None
        lock_ms = self.limits_of(group_id).record_lock_duration_ms
        targets: dict[TopicPartition, FetchTarget] = {}
        for topic, index in partitions:
            if not known:
                targets[(topic, index)] = FetchTarget(UNKNOWN_MEMBER_ID, lock_duration_ms=lock_ms)
                continue
            partition = self.partition((group_id, topic, index))
            if partition is None:
                targets[(topic, index)] = FetchTarget(lock_duration_ms=lock_ms)
            else:
                targets[(topic, index)] = FetchTarget(
                    NONE, partition.next_fetch_offset(), partition.can_acquire(), lock_ms
                )
        return targets

    # -- operations ------------------------------------------------------------------------------

    def share_acknowledge(self, ctx: RequestContext, op: ShareAcknowledgeOp, fx: Effects) -> None:
        outcome = ShareOutcome()
        changed: list[PartitionKey] = []
        known = self.member_of(op.group_id, op.member_id) is not None
        renew_enabled = self.settings_for(op.group_id).renew_acknowledge_enable
        for tp, batches in op.acknowledgements.items():
            if not known:
                outcome.errors[tp] = (UNKNOWN_MEMBER_ID, None)
                continue
            key = (op.group_id, *tp)
            partition = self.partition(key)
            if partition is None:
                outcome.errors[tp] = (INVALID_RECORD_STATE, f"no records of {tp[0]}-{tp[1]} were acquired")
                continue
            if not renew_enabled and any(AcknowledgeType.RENEW in b.acknowledge_types for b in batches):
                # Kafka's SharePartition refuses RENEW when share.renew.acknowledge.enable is false;
                # the partition's acknowledgements are all or none, so none is applied.
                outcome.errors[tp] = (INVALID_RECORD_STATE, RENEW_DISABLED)
                continue
            result = partition.acknowledge(op.member_id, batches, ctx.now_ms)
            outcome.errors[tp] = (result.error_code, result.message)
            if result.changed:
                changed.append(key)
            self._schedule_lock_timer(key, partition)
        self._write_and_reply(ctx, changed, outcome, fx)

    def share_initialize(self, ctx: RequestContext, op: ShareInitializeOp, fx: Effects) -> None:
        changed: list[PartitionKey] = []
        limits = self.limits_of(op.group_id)
        if op.group_id in self.groups:
            for (topic, index), offset in op.start_offsets.items():
                key = (op.group_id, topic, index)
                if self.partition(key) is None:
                    self._go_live(key, SharePartition(max(offset, 0), limits))
                    changed.append(key)
        self._write_and_reply(ctx, changed, ShareOutcome(), fx)

    def share_acquire(self, ctx: RequestContext, op: ShareAcquireOp, fx: Effects) -> None:
        outcome = ShareOutcome()
        changed: list[PartitionKey] = []
        known = self.member_of(op.group_id, op.member_id) is not None
        budget = op.max_records
        for tp, batches in op.fetched.items():
            key = (op.group_id, *tp)
            partition = self.partition(key) if known else None
            if partition is None:
                outcome.errors[tp] = (NONE if known else UNKNOWN_MEMBER_ID, None)
                continue
            ranges = partition.acquire(op.member_id, batches, budget, ctx.now_ms, op.strict_record_limit)
            hidden = op.hidden.get(tp)
            if ranges and hidden:
                changed.append(key)
                ranges = partition.archive_acquired(op.member_id, ranges, hidden)
            if ranges:
                budget -= sum(r.last_offset - r.first_offset + 1 for r in ranges)
                outcome.acquired[tp] = ranges
                changed.append(key)
                self._schedule_lock_timer(key, partition)
        self._write_and_reply(ctx, changed, outcome, fx)

    def share_log_start(self, ctx: RequestContext, op: ShareLogStartOp, fx: Effects) -> None:
        changed: list[PartitionKey] = []
        for (topic, index), log_start in op.log_starts.items():
            key = (op.group_id, topic, index)
            partition = self.partition(key)
            if partition is not None and partition.move_start_to_log_start(log_start):
                changed.append(key)
                self._schedule_lock_timer(key, partition)
        self._write_and_reply(ctx, changed, ShareOutcome(), fx)

    def share_release(self, ctx: RequestContext, op: ShareReleaseOp, fx: Effects) -> None:
        changed = self._release_member(op.group_id, op.member_id)
        self._write_and_reply(ctx, changed, ShareOutcome(), fx)

    def share_dead_lettered(self, ctx: RequestContext, op: ShareDeadLetteredOp, fx: Effects) -> None:
        changed: list[PartitionKey] = []
        for tp, runs in op.runs.items():
            key = (op.group_id, *tp)
            partition = self.partition(key)
            if partition is None:
                continue
            if [partition.dead_lettered(r.first_offset, r.last_offset) for r in runs].count(True):
                changed.append(key)
        self._write_and_reply(ctx, changed, ShareOutcome(), fx)

    def share_expire_locks(self, key: PartitionKey, fx: Effects) -> None:
        partition = self.live.get(key)
        if partition is None:
            return
        if partition.expire_locks(self.clock.now_ms):
            self._write(fx, [key])
        self._schedule_lock_timer(key, partition)

    # -- membership hooks ------------------------------------------------------------------------

    def remove_member(self, group: ShareGroup, member: ShareMember, why: str, message: str) -> None:
        super().remove_member(group, member, why, message)
        self.unwritten_partitions.update(self._release_member(group.group_id, member.member_id))

    def partition_records(self, group: ShareGroup) -> list[Record]:
        """The share-partitions of ``group`` changed by a membership operation (a member left)."""
        keys = sorted(k for k in self.unwritten_partitions if k[0] == group.group_id)
        self.unwritten_partitions.difference_update(keys)
        return [self._record(k) for k in keys if k in self.live]

    def finish(
        self, ctx: RequestContext | None, group: ShareGroup, response: object | None, fx: Effects
    ) -> None:
        super().finish(ctx, group, response, fx)
        self._tell_dead_letters_due(fx)

    def forget_partitions(self, group_ids: set[str] | None) -> None:
        """The groups were unloaded or deleted: their live state goes (storage has it)."""
        for key in [k for k in self.live if group_ids is None or k[0] in group_ids]:
            del self.live[key]
            self.timers.cancel(lock_key(key))
        for group_id in list(self.counters_by_group if group_ids is None else group_ids):
            self.counters_by_group.pop(group_id, None)

    # -- internals -------------------------------------------------------------------------------

    def _release_member(self, group_id: str, member_id: str) -> list[PartitionKey]:
        changed: list[PartitionKey] = []
        for key, partition in self.live.items():
            if key[0] == group_id and partition.release_member(member_id):
                changed.append(key)
                self._schedule_lock_timer(key, partition)
        return changed

    def _schedule_lock_timer(self, key: PartitionKey, partition: SharePartition) -> None:
        deadline = partition.next_deadline()
        if deadline is None:
            self.timers.cancel(lock_key(key))
        else:
            self.timers.schedule(lock_key(key), deadline)

    def _record(self, key: PartitionKey) -> Record:
        partition = self.live[key]
        if partition.dead_letter and partition.has_archiving():
            self._archiving_written.add(key)
        persisted = partition.persisted()
        self.partition_states[key] = persisted
        return partition_state_record(key[0], key[1], key[2], persisted)

    def _write(self, fx: Effects, changed: list[PartitionKey]) -> None:
        keys = set(changed)

        def on_failed(out: Effects, error_code: int) -> None:
            # Memory is ahead of storage: the next write of these partitions carries it.
            self.unwritten_partitions.update(keys)

        fx.write([self._record(k) for k in sorted(keys)], on_failed=on_failed)
        self._tell_dead_letters_due(fx)

    def _tell_dead_letters_due(self, fx: Effects) -> None:
        """Records written ARCHIVING: the dead-letter writer is told once they are durable (it
        writes their dead letters only then; its periodic scan is a fallback)."""
        if not self._archiving_written:
            return
        self._archiving_written.clear()
        due = self.dead_letters_due
        if due is not None and fx.records:
            fx.after_durable(lambda _fx: due())

    def _write_and_reply(
        self, ctx: RequestContext, changed: list[PartitionKey], outcome: ShareOutcome, fx: Effects
    ) -> None:
        keys = set(changed) | {k for k in self.unwritten_partitions if k[0] in {c[0] for c in changed}}
        self.unwritten_partitions.difference_update(keys)
        keys = {k for k in keys if k in self.live}
        if not keys:
            fx.reply(ctx.reply_to, outcome)
            return
        fx.reply(ctx.reply_to, outcome, lambda code: ShareOutcome(write_error=consumer_write_error(code)))
        self._write(fx, sorted(keys))
