"""The shard's notion of now: monotonic milliseconds for deadlines, wall-clock milliseconds for
persisted timestamps. The shard sets it from each request or timer poll; the managers read it.

Continuations (a write became durable) only get a monotonic time: their wall time is derived
from the offset between both clocks at the last request.
"""

from __future__ import annotations


class ShardClock:
    __slots__ = ("now_ms", "wall_offset_ms")

    def __init__(self) -> None:
        self.now_ms = 0
        self.wall_offset_ms = 0

    def set(self, now_ms: int, wall_ms: int) -> None:
        self.now_ms = now_ms
        self.wall_offset_ms = wall_ms - now_ms

    @property
    def wall_ms(self) -> int:
        return self.now_ms + self.wall_offset_ms
