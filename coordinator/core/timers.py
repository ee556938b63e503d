"""Keyed timers in coarse buckets (pure: the caller supplies the time).

One live deadline per key, kept in one dict (key -> deadline, nothing else per key). Keys are
*filed* in buckets of 2**_BUCKET_SHIFT ms by deadline (a list of keys per bucket, one heap item per
non-empty bucket, not per key). Re-arming a key to a *later* deadline -- a heartbeat pushing a
session timeout forward, the common case -- is one dict store: the key stays filed where it is,
and when that bucket comes up the key is filed again under its current deadline. Re-arming to an
*earlier* deadline files the key once more and orphans the old filing; cancelling orphans it too.
Orphans are dropped when their bucket comes up, and everything is re-filed once orphans exceed a
quarter of the live keys, so memory stays O(live keys).

Deadlines stay exact to the millisecond: a bucket whose start has come (or that could hold the
earliest deadline) is drained into a small heap of (deadline, seq, key) items, which hands keys
out earliest first. Only the keys of the earliest bucket or two are ever in that heap, so an idle
member costs a dict entry, its deadline and a list slot (docs/performance.md#timers-in-buckets).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from heapq import heappop, heappush
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# The shard's timer keys: a kind (the first element, which says who handles it) and its fields.
TimerKey = tuple[str | int, ...]

# Buckets of 1,024 ms: a session timeout (6 s to 30 min) spans several, so a heartbeating member
# is re-filed about once per session timeout, and a shard holds a few dozen buckets.
_BUCKET_SHIFT = 10
# Upper bound of the fix-ups next_deadline() does before answering with a lower bound.
_PEEK_FIXUPS = 64
# Filings moved out of buckets per next_deadline() call, and per pop_due() call unless its limit is
# higher: a bucket of many keys (a shard's members loaded together, expiring together) is drained
# over several loop turns.
_DRAIN_CHUNK = 4096
# Re-file everything once orphaned filings exceed a quarter of the live keys plus this much. Every
# classic group leaves two orphans behind when it forms (its join and sync timers, cancelled long
# before their deadlines, docs/performance.md#memory-per-idle-group). A rebuild costs O(live keys)
# once per live/4 orphans, so still O(1) per orphan.
_COMPACT_SLACK = 64


class Timers(Generic[K]):
    """schedule/cancel keys; poll(now) returns the keys whose deadline has passed."""

    __slots__ = ("_buckets", "_deadlines", "_due", "_earliest_scheduled", "_filed", "_heap", "_seq")

    def __init__(self) -> None:
        self._deadlines: dict[K, int] = {}
        # bucket number -> the keys filed there (some orphaned, some re-armed later since)
        self._buckets: dict[int, list[K]] = {}
        self._heap: list[int] = []  # the bucket numbers of _buckets, a heap
        # Keys of drained buckets, earliest first: (deadline when drained, seq, key).
        self._due: list[tuple[int, int, K]] = []
        self._filed = 0  # list slots in _buckets plus items in _due
        self._seq = 0
        self._earliest_scheduled: int | None = None

    def __len__(self) -> int:
        return len(self._deadlines)

    def __contains__(self, key: object) -> bool:
        return key in self._deadlines

    def deadline(self, key: K) -> int | None:
        return self._deadlines.get(key)

    def clear(self) -> None:
        self._deadlines.clear()
        self._buckets.clear()
        self._heap.clear()
        self._due.clear()
        self._filed = 0

    def schedule(self, key: K, deadline_ms: int) -> None:
        """Arm ``key`` for ``deadline_ms``, replacing any deadline it had."""
        earliest = self._earliest_scheduled
        if earliest is None or deadline_ms < earliest:
            self._earliest_scheduled = deadline_ms
        deadlines = self._deadlines
        old = deadlines.get(key)
        deadlines[key] = deadline_ms
        if old is not None and deadline_ms >= old:
            return  # later: filed at or before the bucket of its new deadline already
        self._filed += 1
        self._file(key, deadline_ms)
        if old is not None:
            self._maybe_compact()

    def take_earliest_scheduled(self) -> int | None:
        """The earliest deadline passed to schedule() since the last call (O(1)).

        Lets a driver that already has a wake-up armed skip next_deadline() when nothing was
        scheduled before it: extended deadlines only make an armed wake-up early, never late.
        """
        earliest, self._earliest_scheduled = self._earliest_scheduled, None
        return earliest

    def cancel(self, key: K) -> None:
        if self._deadlines.pop(key, None) is not None:
            self._maybe_compact()

    def cancel_where(self, matches: Callable[[K], bool]) -> None:
        """Cancel every key for which ``matches`` is true (a shard's groups being unloaded)."""
        for key in [key for key in self._deadlines if matches(key)]:
            del self._deadlines[key]
        self._maybe_compact()

    def next_deadline(self) -> int | None:
        """The earliest deadline, or a lower bound of it when many keys were re-armed."""
        deadlines = self._deadlines
        if not deadlines:
            return None
        heap = self._heap
        due = self._due
        budget = _DRAIN_CHUNK
        for _ in range(_PEEK_FIXUPS):
            if heap and (not due or heap[0] << _BUCKET_SHIFT <= due[0][0]):
                if budget <= 0:
                    break
                budget -= self._drain_first_bucket(budget)
                continue
            if not due:
                return None
            queued, _seq, key = due[0]
            deadline = deadlines.get(key)
            if deadline == queued:
                return queued
            heappop(due)
            self._filed -= 1
            if deadline is not None and deadline > queued:
                self._filed += 1
                self._file(key, deadline)
        bounds = [due[0][0]] if due else []
        if heap:
            bounds.append(heap[0] << _BUCKET_SHIFT)
        return min(bounds) if bounds else None

    def pop_due(self, now_ms: int, limit: int) -> tuple[K | None, int]:
        """Remove and return the earliest key due at ``now_ms`` (or None), and how many drained
        items were examined to find it (at most ``limit``).

        Popping one key at a time lets the caller handle it before looking at the next one, so a
        handler that re-arms or cancels another due key is seen (Kafka ignores a timeout whose
        key was re-scheduled after it fired).
        """
        heap = self._heap
        due = self._due
        deadlines = self._deadlines
        examined = 0
        budget = max(limit, _DRAIN_CHUNK)
        while examined < limit:
            if heap:
                start = heap[0] << _BUCKET_SHIFT
                if start <= now_ms and (not due or start <= due[0][0]):
                    # The bucket may hold a deadline before the earliest drained one.
                    if budget <= 0:
                        break  # the rest of it at the next call (next_deadline() <= now)
                    budget -= self._drain_first_bucket(budget)
                    continue
            if not due or due[0][0] > now_ms:
                break
            queued, _seq, key = heappop(due)
            self._filed -= 1
            examined += 1
            deadline = deadlines.get(key)
            if deadline is None or deadline < queued:
                continue  # cancelled, or an older filing of a key filed again earlier
            if deadline > queued:
                # Re-armed to a later deadline: filed again under it, even when it is due too,
                # so that keys due before it still come out first.
                self._filed += 1
                self._file(key, deadline)
                continue
            del deadlines[key]
            return key, examined
        return None, examined

    def poll(self, now_ms: int, limit: int) -> list[K]:
        """Remove and return the keys due at ``now_ms``, earliest first.

        At most ``limit`` drained items are examined (due, orphaned or re-armed), so a burst of
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

    def _file(self, key: K, deadline: int) -> None:
        bucket = deadline >> _BUCKET_SHIFT
        keys = self._buckets.get(bucket)
        if keys is None:
            self._buckets[bucket] = [key]
            heappush(self._heap, bucket)
        else:
            keys.append(key)

    def _drain_first_bucket(self, budget: int) -> int:
        """Move up to ``budget`` filings of the earliest bucket: keys whose deadline is in it to
        the due heap, keys re-armed later into the bucket of their deadline; orphans are dropped.
        Returns how many were moved (the bucket stays first while filings are left in it)."""
        bucket = self._heap[0]
        keys = self._buckets[bucket]
        if len(keys) > budget:
            chunk = keys[:budget]
            del keys[:budget]
        else:
            chunk = keys
            heappop(self._heap)
            del self._buckets[bucket]
        deadlines = self._deadlines
        due = self._due
        for key in chunk:
            deadline = deadlines.get(key)
            if deadline is None:
                self._filed -= 1  # cancelled
                continue
            filed_in = deadline >> _BUCKET_SHIFT
            if filed_in == bucket:
                self._seq += 1
                heappush(due, (deadline, self._seq, key))
            elif filed_in > bucket:
                self._file(key, deadline)
            else:
                self._filed -= 1  # filed again earlier: that filing was drained before this one
        return len(chunk)

    def _maybe_compact(self) -> None:
        live = len(self._deadlines)
        if self._filed > live + (live >> 2) + _COMPACT_SLACK:
            self._buckets = {}
            self._heap = []
            self._due = []
            self._filed = live
            for key, deadline in self._deadlines.items():
                self._file(key, deadline)
