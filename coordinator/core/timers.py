"""Keyed timers over a lazily-pruned heap (pure: the caller supplies the time).

One live deadline per key. Re-arming a key to a *later* deadline -- a heartbeat pushing a session
timeout forward, the common case -- only updates the key's entry: no heap push, no cancelled
handle left behind. The stale heap item is noticed when it reaches the top and is pushed back
once with the current deadline. Re-arming to an *earlier* deadline pushes a new item and orphans
the old one; cancelling orphans it too. Orphans are dropped when popped, and the heap is rebuilt
when they exceed a quarter of the live keys, so memory stays O(live keys).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from heapq import heapify, heappop, heappush
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# The shard's timer keys: a kind (the first element, which says who handles it) and its fields.
TimerKey = tuple[str | int, ...]

# Upper bound of the heap fix-ups next_deadline() does before answering with a lower bound.
_PEEK_FIXUPS = 64
# Rebuild the heap once orphaned items exceed a quarter of the live keys plus this much. Every
# classic group leaves two orphans behind when it forms (its join and sync timers, cancelled long
# before their deadlines): at twice the live keys the heap held two items per idle group, each with
# its key and ints (docs/performance.md#memory-per-idle-group). A rebuild costs O(live keys) once
# per live/4 orphans, so still O(1) per orphan.
_COMPACT_SLACK = 1024


class _Entry:
    __slots__ = ("deadline", "queued", "seq")

    def __init__(self, deadline: int, seq: int) -> None:
        self.deadline = deadline  # the key's current deadline
        self.queued = deadline  # deadline of the key's live heap item (<= deadline)
        self.seq = seq  # sequence number of the key's live heap item


class Timers(Generic[K]):
    """schedule/cancel keys; poll(now) returns the keys whose deadline has passed."""

    __slots__ = ("_earliest_scheduled", "_entries", "_heap", "_seq")

    def __init__(self) -> None:
        self._entries: dict[K, _Entry] = {}
        self._heap: list[tuple[int, int, K]] = []
        self._seq = 0
        self._earliest_scheduled: int | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def deadline(self, key: K) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.deadline

    def clear(self) -> None:
        self._entries.clear()
        self._heap.clear()

    def schedule(self, key: K, deadline_ms: int) -> None:
        """Arm ``key`` for ``deadline_ms``, replacing any deadline it had."""
        if self._earliest_scheduled is None or deadline_ms < self._earliest_scheduled:
            self._earliest_scheduled = deadline_ms
        entry = self._entries.get(key)
        if entry is None:
            self._seq += 1
            self._entries[key] = _Entry(deadline_ms, self._seq)
            heappush(self._heap, (deadline_ms, self._seq, key))
            return
        entry.deadline = deadline_ms
        if deadline_ms < entry.queued:
            self._requeue(key, entry)
            self._maybe_compact()

    def take_earliest_scheduled(self) -> int | None:
        """The earliest deadline passed to schedule() since the last call (O(1)).

        Lets a driver that already has a wake-up armed skip next_deadline() when nothing was
        scheduled before it: extended deadlines only make an armed wake-up early, never late.
        """
        earliest, self._earliest_scheduled = self._earliest_scheduled, None
        return earliest

    def cancel(self, key: K) -> None:
        if self._entries.pop(key, None) is not None:
            self._maybe_compact()

    def cancel_where(self, matches: Callable[[K], bool]) -> None:
        """Cancel every key for which ``matches`` is true (a shard's groups being unloaded)."""
        for key in [key for key in self._entries if matches(key)]:
            del self._entries[key]
        self._maybe_compact()

    def next_deadline(self) -> int | None:
        """The earliest deadline, or a lower bound of it when many items were re-armed."""
        heap = self._heap
        entries = self._entries
        if not entries:
            return None
        for _ in range(_PEEK_FIXUPS):
            if not heap:
                return None
            queued, seq, key = heap[0]
            entry = entries.get(key)
            if entry is None or entry.seq != seq:
                heappop(heap)
            elif entry.deadline > queued:
                heappop(heap)
                self._requeue(key, entry)
            else:
                return queued
        return heap[0][0] if heap else None

    def pop_due(self, now_ms: int, limit: int) -> tuple[K | None, int]:
        """Remove and return the earliest key due at ``now_ms`` (or None), and how many heap
        items were examined to find it (at most ``limit``).

        Popping one key at a time lets the caller handle it before looking at the next one, so a
        handler that re-arms or cancels another due key is seen (Kafka ignores a timeout whose
        key was re-scheduled after it fired).
        """
        heap = self._heap
        entries = self._entries
        examined = 0
        while heap and heap[0][0] <= now_ms and examined < limit:
            examined += 1
            queued, seq, key = heappop(heap)
            entry = entries.get(key)
            if entry is None or entry.seq != seq:
                continue
            if entry.deadline > queued:
                # Re-armed to a later deadline: back in the heap at that deadline, even when it is
                # due too, so that keys due before it still come out first.
                self._requeue(key, entry)
                continue
            del entries[key]
            return key, examined
        return None, examined

    def poll(self, now_ms: int, limit: int) -> list[K]:
        """Remove and return the keys due at ``now_ms``, earliest first.

        At most ``limit`` heap items are examined (due, orphaned or re-armed), so a burst of
        deadlines is spread over several calls; ``next_deadline()`` stays <= now until it is done.
        """
        due: list[K] = []
        while limit > 0:
            key, examined = self.pop_due(now_ms, limit)
            limit -= examined
            if key is None:
                break
            due.append(key)
        return due

    def _requeue(self, key: K, entry: _Entry) -> None:
        self._seq += 1
        entry.seq = self._seq
        entry.queued = entry.deadline
        heappush(self._heap, (entry.deadline, self._seq, key))

    def _maybe_compact(self) -> None:
        live = len(self._entries)
        if len(self._heap) > live + (live >> 2) + _COMPACT_SLACK:
            heap: list[tuple[int, int, K]] = []
            for key, entry in self._entries.items():
                self._seq += 1
                entry.seq = self._seq
                entry.queued = entry.deadline
                heap.append((entry.deadline, self._seq, key))
            heapify(heap)
            self._heap = heap
