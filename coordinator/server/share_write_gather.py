"""Starting the commits of several share consumers together (docs/share-groups.md, "Gathering
the writes of several consumers").

Each acquisition and each acknowledgement is durable before its answer leaves: one commit each.
The consumers of share groups on a node tend to work in step (each asks, waits for its answer,
works on its records and asks again), so their requests come within a fraction of a commit of
one another. The group commit (storage/writer.py) joins the writes made while a commit is under
way, but the first write of such a run finds the writer idle and commits alone, and the others
wait for that commit and then commit again: two commits, each of them waited for, where one
would do.

:class:`WriteGather` holds a share operation for a moment before it is applied, when the writer
is idle and other members that wrote recently (within ``recent_s``) are expected: as soon as
every one of them has come, or after at most the time the last commit took (never more than
``max_wait_s``), the operations held are applied together and their writes start one commit. A
member alone is never held, nor is anyone while a commit is under way (a write made then joins
the next commit anyway). Nothing else changes: the operations are the same, applied in the order
they came, and each answer still waits for its own write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from typing import Final

RECENT_S: Final = 0.05  # a member that wrote this recently is expected to write again soon
MAX_WAIT_S: Final = 0.002
MIN_WAIT_S: Final = 0.0002


class WriteGather:
    def __init__(
        self,
        writer_idle: Callable[[], bool],
        last_commit_s: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
        recent_s: float = RECENT_S,
        max_wait_s: float = MAX_WAIT_S,
    ) -> None:
        self.writer_idle = writer_idle
        self.last_commit_s = last_commit_s
        self.clock = clock
        self.recent_s = recent_s
        self.max_wait_s = max_wait_s
        self._last: dict[Hashable, float] = {}  # member: when its last operation was applied
        self._held: dict[Hashable, asyncio.Future[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.held = 0  # operations held, for tests and the bench
        self.gathered = 0  # of them, released by the arrival of the last one expected

    async def turn(self, member: Hashable) -> None:
        """Return when ``member``'s operation may be applied (at once, or with the others)."""
        now = self.clock()
        self._forget(now)
        if member in self._held or not self.writer_idle() or not self._expected(member):
            if self._held:
                self.gathered += 1
            self._release()  # everyone held goes with this one
            self._last[member] = now
            return
        loop = asyncio.get_running_loop()
        arrived: asyncio.Future[None] = loop.create_future()
        self._held[member] = arrived
        self.held += 1
        if self._timer is None:
            wait = min(max(self.last_commit_s(), MIN_WAIT_S), self.max_wait_s)
            self._timer = loop.call_later(wait, self._release)
        try:
            await arrived
        finally:
            if self._held.get(member) is arrived:
                del self._held[member]
        self._last[member] = self.clock()

    def _expected(self, member: Hashable) -> bool:
        """Whether another member that wrote recently has not come yet."""
        return any(m != member and m not in self._held for m in self._last)

    def _release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        held, self._held = self._held, {}
        for arrived in held.values():  # resumed in the order they came
            if not arrived.done():
                arrived.set_result(None)

    def _forget(self, now: float) -> None:
        oldest = now - self.recent_s
        for member in [m for m, at in self._last.items() if at < oldest]:
            del self._last[member]
