"""The process-wide budget of buffered request and response bytes (docs/gateway.md#back-pressure).

Kafka's broker gives every request its memory from one pool (``queued.max.request.bytes``) and
mutes a connection whose next request does not fit. This is that pool, for requests read from
clients and for responses read from upstream brokers: a reader reserves the whole size of the
frame it has begun to read, as soon as the frame's length prefix is known; when the reservation
is refused it stops reading until bytes are given back. A frame larger than the whole budget is
granted only while nothing else is reserved, so it can always complete.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

UNLIMITED = 2**62


class ByteBudget:
    """Bytes reserved by every reader together, never more than ``limit`` (but for one frame
    larger than the limit, granted alone)."""

    def __init__(self, limit: int = UNLIMITED) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._waiting: deque[Callable[[], None]] = deque()
        self._waking = False

    def reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes if they fit (or if nothing is reserved at all)."""
        if size <= 0:
            return True
        if self.used + size > self.limit and self.used > 0:
            return False
        self.take(size)
        return True

    def reserve_within(self, size: int) -> bool:
        """Reserve ``size`` bytes only if they fit under the limit (never granted alone): for
        memory that is only worth having while there is room, such as records read ahead for
        share fetches (docs/share-groups.md, "Reading ahead")."""
        if size <= 0:
            return True
        if self.used + size > self.limit:
            return False
        self.take(size)
        return True

    def take(self, size: int) -> None:
        """Count bytes that are already in memory (read before a refusal could stop them)."""
        self.used += size
        if self.used > self.peak:
            self.peak = self.used

    def give_back(self, size: int) -> None:
        if size <= 0:
            return
        self.used -= size
        if self._waiting:
            self._wake()

    def wait(self, retry: Callable[[], None]) -> None:
        """Call ``retry`` once bytes have been given back (readers retry in arrival order)."""
        self._waiting.append(retry)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _wake(self) -> None:
        if self._waking:
            return  # a retry gave bytes back: the loop below goes on with the next waiter
        self._waking = True
        try:
            # Each waiter retries once per wake; one that is refused again waits again.
            for _ in range(len(self._waiting)):
                if not self._waiting or self.used >= self.limit:
                    break
                self._waiting.popleft()()
        finally:
            self._waking = False
