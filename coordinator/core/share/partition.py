"""One share-partition's delivery state (KIP-932): which records of a (share group, topic-partition)
are done, which are held by which member and until when, and how often each was delivered.

Pure: the runtime passes the time in (``now_ms``), fetches the records itself, and writes
:meth:`SharePartition.persisted` through storage before it answers the request that changed it.
The model, its transitions and what is persisted are in docs/share-groups.md.

The in-flight window runs from the start offset (SPSO: everything below it is done) to the end
offset (exclusive: the next offset never fetched yet). Its length is bounded by
``max_record_locks``, so the per-offset arrays below stay small (2,000 records by default).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import compress
from typing import Final

from coordinator.core import errors


class RecordState(IntEnum):
    """A record's delivery state; the values are the ones Kafka persists (ACQUIRED never is)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # archived, its dead-letter record not yet written (docs/share-groups.md)
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """The acknowledgement types of ShareFetch/ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


INVALID_RECORD_STATE: Final = 121

_AVAILABLE: Final = int(RecordState.AVAILABLE)
_ACQUIRED: Final = int(RecordState.ACQUIRED)
_ACKNOWLEDGED: Final = int(RecordState.ACKNOWLEDGED)
_ARCHIVING: Final = int(RecordState.ARCHIVING)
_ARCHIVED: Final = int(RecordState.ARCHIVED)
_DONE: Final = frozenset((_ACKNOWLEDGED, _ARCHIVED))

# Byte tables for bytearray.translate, so that whole windows are scanned in C, not per offset
# (docs/share-groups.md, "Performance"): 1 where a state is acquired, 1 where it is not done.
_IS_ACQUIRED: Final = bytes(int(b == _ACQUIRED) for b in range(256))
_NOT_DONE: Final = bytes(int(b not in _DONE) for b in range(256))
# A persisted run: a (state, count) byte pair repeated (the pairs of SharePartition.persisted).
_RUN: Final = re.compile(rb"(..)\1*", re.S)


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """The settings one share-partition runs under (the group's ``share.*`` configs, bounded by
    the broker's)."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """A run of offsets handed to one member, all with the same delivery count (ShareFetch's
    AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """One AcknowledgementBatch of a request: either one type for every offset of the range, or
    one type per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A persisted run of offsets with the same delivery state and count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class DeadLetterRun:
    """Archived offsets whose dead-letter records are still to be written, all with the same
    delivery count (which says why they were archived: at the limit, or rejected)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class PersistedShareState:
    """What storage keeps of a share-partition (the share coordinator's record in Kafka)."""

    start_offset: int
    state_epoch: int
    batches: tuple[StateBatch, ...]


@dataclass(slots=True)
class ShareCounters:
    """Totals since the partition was loaded, for metrics (the runtime may share one between the
    partitions of a group: docs/share-groups.md, "Metrics")."""

    acquired: int = 0
    redelivered: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    archived: int = 0  # for any reason: rejected, a gap, the delivery limit reached
    archived_at_limit: int = 0
    lock_expiries: int = 0


@dataclass(frozen=True, slots=True)
class AcknowledgeResult:
    """The outcome of one partition's acknowledgements: an error code (the whole partition's
    acknowledgements are applied or none are) and whether persisted state changed."""

    error_code: int
    changed: bool
    message: str | None = None


class SharePartition:
    """The delivery state of one share-partition; see the module docstring."""

    __slots__ = (
        "_count",
        "_deadline",
        "_owner",
        "_state",
        "counters",
        "dead_letter",
        "end_offset",
        "limits",
        "start_offset",
        "state_epoch",
    )

    def __init__(self, start_offset: int, limits: ShareLimits, state_epoch: int = 0) -> None:
        if start_offset < 0:
            raise ValueError("a share-partition starts at an offset >= 0")
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.state_epoch = state_epoch
        self.limits = limits
        self.counters = ShareCounters()
        # The group has a dead-letter topic: archived records stay ARCHIVING until the runtime
        # reports their dead-letter records written (dead_lettered).
        self.dead_letter = False
        self._state = bytearray()
        self._count = bytearray()
        self._owner: list[str | None] = []
        self._deadline: list[int] = []

    @classmethod
    def restore(cls, persisted: PersistedShareState, limits: ShareLimits) -> SharePartition:
        """The partition as storage kept it (see :meth:`persisted` for how acquired records were
        written)."""
        partition = cls(persisted.start_offset, limits, persisted.state_epoch)
        for batch in sorted(persisted.batches, key=lambda b: b.first_offset):
            if batch.last_offset < partition.start_offset:
                continue
            first = max(batch.first_offset, partition.start_offset)
            if first > partition.end_offset:
                partition._extend(first - partition.end_offset, _AVAILABLE, 0)
            elif first < partition.end_offset:
                raise ValueError("persisted share-partition batches overlap")
            partition._extend(batch.last_offset - first + 1, batch.delivery_state, batch.delivery_count)
        partition._advance_start()
        return partition

    # -- reading -------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Records between the start and the end offset (what ``max_record_locks`` bounds)."""
        return len(self._state)

    def state_of(self, offset: int) -> tuple[RecordState, int, str | None]:
        """(state, delivery count, owner) of one offset; below the window everything is done."""
        if offset < self.start_offset:
            return RecordState.ACKNOWLEDGED, 0, None
        if offset >= self.end_offset:
            return RecordState.AVAILABLE, 0, None
        i = offset - self.start_offset
        return RecordState(self._state[i]), self._count[i], self._owner[i]

    def has_archiving(self) -> bool:
        """Whether records wait for their dead-letter records (ARCHIVING)."""
        return _ARCHIVING in self._state

    def acquired_count(self, member_id: str | None = None) -> int:
        if member_id is None:
            return self._state.count(_ACQUIRED)
        return sum(1 for i, s in enumerate(self._state) if s == _ACQUIRED and self._owner[i] == member_id)

    def next_fetch_offset(self) -> int:
        """The first offset a fetch should read: an available record inside the window, or the
        end offset."""
        i = self._state.find(_AVAILABLE)
        return self.end_offset if i < 0 else self.start_offset + i

    def can_acquire(self) -> bool:
        return _AVAILABLE in self._state or len(self._state) < self.limits.max_record_locks

    def next_deadline(self) -> int | None:
        """When the earliest acquisition lock runs out, for the runtime's timer."""
        return min(compress(self._deadline, self._state.translate(_IS_ACQUIRED)), default=None)

    def persisted(self) -> PersistedShareState:
        """The state to write: every record of the window, runs merged. A lock does not outlive a
        restart, so an acquired record is written as its lock running out would leave it:
        available with its delivery count, or archived once the count has reached the limit.
        After a restart it is delivered again, counted, and never more often than the limit."""
        states = bytearray(self._state)
        if _ACQUIRED in states:
            limit = self.limits.delivery_count_limit
            acquired = states.translate(_IS_ACQUIRED)
            states = states.replace(bytes([_ACQUIRED]), bytes([_AVAILABLE]))
            if max(self._count) >= limit:
                archived = self._archived_state()
                i = acquired.find(1)
                while i >= 0:
                    if self._count[i] >= limit:
                        states[i] = archived
                    i = acquired.find(1, i + 1)
        # (state, count) pairs: a run of equal pairs is one persisted batch.
        pairs = bytearray(2 * len(states))
        pairs[0::2] = states
        pairs[1::2] = self._count
        start = self.start_offset
        batches = tuple(
            StateBatch(
                start + run.start() // 2,
                start + run.end() // 2 - 1,
                pairs[run.start()],
                pairs[run.start() + 1],
            )
            for run in _RUN.finditer(pairs)
        )
        return PersistedShareState(self.start_offset, self.state_epoch, batches)

    # -- acquiring -----------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        fetched_batches: Iterable[tuple[int, int]],
        max_records: int,
        now_ms: int,
        strict_record_limit: bool = False,
    ) -> list[AcquiredRange]:
        """Acquire records for ``member_id`` out of the record batches a fetch returned, given as
        (base offset, last offset) in log order. Available records inside the window are
        acquired again (their delivery count goes up); records past the end offset extend the
        window. Offsets a batch skips (a compacted log) are acquired too, and the member
        acknowledges them as GAP. At most ``max_records`` records, except that in the
        batch-optimized mode a batch once started is acquired whole, as Kafka does."""
        if max_records <= 0:
            return []
        deadline = now_ms + self.limits.record_lock_duration_ms
        taken = 0
        ranges: list[AcquiredRange] = []
        for base, last in fetched_batches:
            if taken >= max_records:
                break
            first = max(base, self.start_offset)
            if last < first:
                continue
            budget = max_records - taken if strict_record_limit else None
            taken += self._acquire_range(member_id, first, last, deadline, ranges, budget)
        return ranges

    def _acquire_range(
        self,
        member_id: str,
        first: int,
        last: int,
        deadline: int,
        ranges: list[AcquiredRange],
        budget: int | None,
    ) -> int:
        """Acquire what can be of ``first..last``; ``budget`` bounds the records taken (strict
        record limit), None takes the whole range."""
        taken = 0
        offset = first
        while offset <= last and (budget is None or taken < budget):
            if offset >= self.end_offset:
                room = self.limits.max_record_locks - len(self._state)
                if room <= 0:
                    break
                # New records, and the offsets a fetch skipped between the end and them.
                start = self.end_offset
                new_last = min(last, start + room - 1)
                if budget is not None:
                    new_last = min(new_last, offset + (budget - taken) - 1)
                self._extend(new_last - start + 1, _ACQUIRED, 1, member_id, deadline)
                self.counters.acquired += new_last - start + 1
                _append_range(ranges, start, new_last, 1)
                taken += new_last - offset + 1
                offset = new_last + 1
                continue
            i = offset - self.start_offset
            if self._state[i] == _AVAILABLE:
                count = min(self._count[i] + 1, 255)
                self._state[i] = _ACQUIRED
                self._count[i] = count
                self._owner[i] = member_id
                self._deadline[i] = deadline
                self.counters.acquired += 1
                if count > 1:
                    self.counters.redelivered += 1
                _append_range(ranges, offset, offset, count)
                taken += 1
            offset += 1
        return taken

    # -- acknowledging -------------------------------------------------------------------------

    def acknowledge(
        self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int
    ) -> AcknowledgeResult:
        """Apply one request's acknowledgements for this partition, all or none: every offset
        named must be acquired by ``member_id``; otherwise INVALID_RECORD_STATE and nothing
        changes. RENEW extends the lock and changes nothing persisted."""
        taken: list[tuple[int, int]] = []
        for batch in batches:
            problem = self._check_batch(member_id, batch, taken)
            if problem is not None:
                return problem
            taken.append((batch.first_offset, batch.last_offset))
        changed = False
        renew_deadline = now_ms + self.limits.record_lock_duration_ms
        for batch in batches:
            types = batch.acknowledge_types
            i, j = batch.first_offset - self.start_offset, batch.last_offset - self.start_offset + 1
            if len(types) == 1:
                # One type for the whole range: applied to it at once (the common case).
                changed = self._apply_range(i, j, types[0], renew_deadline) or changed
            else:
                for n, ack in enumerate(types):
                    changed = self._apply_range(i + n, i + n + 1, ack, renew_deadline) or changed
        if changed:
            self._advance_start()
        return AcknowledgeResult(errors.NONE, changed)

    def _apply_range(self, i: int, j: int, ack: int, renew_deadline: int) -> bool:
        """Apply one acknowledge type to the acquired records at indexes ``i..j-1``; whether
        persisted state changed (RENEW only extends their locks)."""
        n = j - i
        if ack == AcknowledgeType.RENEW:
            self._deadline[i:j] = [renew_deadline] * n
            return False
        self._owner[i:j] = [None] * n
        if ack == AcknowledgeType.ACCEPT:
            self._state[i:j] = bytes([_ACKNOWLEDGED]) * n
            self.counters.accepted += n
        elif ack == AcknowledgeType.RELEASE:
            self.counters.released += n
            for k in range(i, j):
                self._make_available_or_archive(k)
        elif ack == AcknowledgeType.REJECT:
            self.counters.rejected += n
            self.counters.archived += n
            self._state[i:j] = bytes([self._archived_state()]) * n
        else:  # GAP: no record there, nothing to dead-letter
            self.counters.archived += n
            self._state[i:j] = bytes([_ARCHIVED]) * n
        return True

    def _check_batch(
        self, member_id: str, batch: AcknowledgementBatch, taken: list[tuple[int, int]]
    ) -> AcknowledgeResult | None:
        """Why the batch cannot be applied, or None; ``taken``: the ranges of the request's
        batches before it (an offset may be acknowledged once per request)."""
        first, last, types = batch.first_offset, batch.last_offset, batch.acknowledge_types
        if first > last or not types or (len(types) != 1 and len(types) != last - first + 1):
            return AcknowledgeResult(errors.INVALID_REQUEST, False, "malformed acknowledgement batch")
        if not _KNOWN_TYPES.issuperset(types):
            return AcknowledgeResult(errors.INVALID_REQUEST, False, "unknown acknowledge type")
        if first < self.start_offset or last >= self.end_offset:
            return AcknowledgeResult(INVALID_RECORD_STATE, False, f"offsets {first}-{last} are not in flight")
        twice = min((max(first, lo) for lo, hi in taken if lo <= last and hi >= first), default=None)
        i, j = first - self.start_offset, last - self.start_offset + 1
        held = self._state.count(_ACQUIRED, i, j) == j - i and self._owner[i:j].count(member_id) == j - i
        not_held = None
        if not held:
            not_held = next(
                self.start_offset + k
                for k in range(i, j)
                if self._state[k] != _ACQUIRED or self._owner[k] != member_id
            )
        if twice is not None and (not_held is None or twice <= not_held):
            return AcknowledgeResult(errors.INVALID_REQUEST, False, f"offset {twice} acknowledged twice")
        if not_held is not None:
            return AcknowledgeResult(
                INVALID_RECORD_STATE, False, f"offset {not_held} is not acquired by this member"
            )
        return None

    # -- releasing -----------------------------------------------------------------------------

    def release_member(self, member_id: str) -> bool:
        """Make every record ``member_id`` holds available again (archived at the delivery
        limit): the member left, or its share session closed."""
        changed = False
        for i, owner in enumerate(self._owner):
            if owner == member_id and self._state[i] == _ACQUIRED:
                self._owner[i] = None
                self._make_available_or_archive(i)
                changed = True
        if changed:
            self._advance_start()
        return changed

    def expire_locks(self, now_ms: int) -> bool:
        """Release every record whose acquisition lock ran out by ``now_ms``."""
        changed = False
        for i, deadline in enumerate(self._deadline):
            if self._state[i] == _ACQUIRED and deadline <= now_ms:
                self._owner[i] = None
                self._make_available_or_archive(i)
                self.counters.lock_expiries += 1
                changed = True
        if changed:
            self._advance_start()
        return changed

    def reset_start_offset(self, offset: int) -> None:
        """Move the start offset (AlterShareGroupOffsets on an empty group, or the log start
        passing it): everything in flight is forgotten, and the state epoch goes up."""
        if offset < 0:
            raise ValueError("a share-partition starts at an offset >= 0")
        self.start_offset = self.end_offset = offset
        self.state_epoch += 1
        self._state.clear()
        self._count.clear()
        self._owner.clear()
        self._deadline.clear()

    def archive_acquired(
        self, member_id: str, ranges: list[AcquiredRange], hidden: Sequence[tuple[int, int]]
    ) -> list[AcquiredRange]:
        """Archive the offsets of ``hidden`` (first, last) that ``ranges`` (just acquired by
        ``member_id``) hold -- records of aborted transactions under read_committed, which
        Kafka's share-partition never delivers -- and return what is left to deliver."""
        kept: list[AcquiredRange] = []
        for r in ranges:
            for offset in range(r.first_offset, r.last_offset + 1):
                i = offset - self.start_offset
                if any(first <= offset <= last for first, last in hidden) and self._owner[i] == member_id:
                    self._state[i] = _ARCHIVED
                    self._owner[i] = None
                    self.counters.archived += 1
                else:
                    _append_range(kept, offset, offset, r.delivery_count)
        self._advance_start()
        return kept

    def move_start_to_log_start(self, log_start: int) -> bool:
        """The upstream deleted the records below ``log_start`` (retention, DeleteRecords): as
        Kafka's share-partition, the start offset follows it and what went unfinished is
        archived (an acquired record too: it can be neither delivered again nor acknowledged).
        Returns whether anything changed."""
        if log_start <= self.start_offset:
            return False
        gone = min(log_start, self.end_offset) - self.start_offset
        archived = sum(1 for state in self._state[:gone] if state not in _DONE and state != _ARCHIVING)
        self.counters.archived += archived
        del self._state[:gone]
        del self._count[:gone]
        del self._owner[:gone]
        del self._deadline[:gone]
        self.start_offset = log_start
        self.end_offset = max(self.end_offset, log_start)
        self._advance_start()
        return True

    # -- dead letters ---------------------------------------------------------------------------

    def dead_letter_runs(self) -> list[DeadLetterRun]:
        """The ARCHIVING offsets, in runs of the same delivery count."""
        runs: list[DeadLetterRun] = []
        i = self._state.find(_ARCHIVING)
        while i >= 0:
            offset, count = self.start_offset + i, self._count[i]
            if runs and runs[-1].last_offset == offset - 1 and runs[-1].delivery_count == count:
                runs[-1] = DeadLetterRun(runs[-1].first_offset, offset, count)
            else:
                runs.append(DeadLetterRun(offset, offset, count))
            i = self._state.find(_ARCHIVING, i + 1)
        return runs

    def dead_lettered(self, first_offset: int, last_offset: int) -> bool:
        """The dead-letter records of ``first..last`` are written (or cannot be): those still
        ARCHIVING become ARCHIVED. Whether anything changed."""
        changed = False
        for offset in range(max(first_offset, self.start_offset), min(last_offset, self.end_offset - 1) + 1):
            i = offset - self.start_offset
            if self._state[i] == _ARCHIVING:
                self._state[i] = _ARCHIVED
                changed = True
        if changed:
            self._advance_start()
        return changed

    # -- internals -----------------------------------------------------------------------------

    def _archived_state(self) -> int:
        return _ARCHIVING if self.dead_letter else _ARCHIVED

    def _make_available_or_archive(self, i: int) -> None:
        if self._count[i] >= self.limits.delivery_count_limit:
            self._state[i] = self._archived_state()
            self.counters.archived_at_limit += 1
            self.counters.archived += 1
        else:
            self._state[i] = _AVAILABLE

    def _extend(self, n: int, state: int, count: int, owner: str | None = None, deadline: int = 0) -> None:
        self._state.extend(bytes([state]) * n)
        self._count.extend(bytes([count]) * n)
        self._owner.extend([owner] * n)
        self._deadline.extend([deadline] * n)
        self.end_offset += n

    def _advance_start(self) -> None:
        done = self._state.translate(_NOT_DONE).find(1)
        if done < 0:
            done = len(self._state)
        if done:
            del self._state[:done]
            del self._count[:done]
            del self._owner[:done]
            del self._deadline[:done]
            self.start_offset += done


_KNOWN_TYPES: Final = frozenset(int(t) for t in AcknowledgeType)


def _append_range(ranges: list[AcquiredRange], first: int, last: int, count: int) -> None:
    if ranges and ranges[-1].last_offset == first - 1 and ranges[-1].delivery_count == count:
        previous = ranges[-1]
        ranges[-1] = AcquiredRange(previous.first_offset, last, count)
    else:
        ranges.append(AcquiredRange(first, last, count))
