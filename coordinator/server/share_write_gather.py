"""Starting the commits of several share consumers together (docs/share-groups.md, Performance,
"Third round: several consumers").

Each acquisition and each acknowledgement is durable before its answer leaves: one commit each.
The group commit (storage/writer.py) joins the writes made while a commit is under way, so with
several consumers the commits alternate: one member's operation commits alone while the others
come back, and theirs commit together next, each waiting for the commit before its own. Where a
commit takes longer than a consumer needs to come back with its next request (a slow disk), it
is quicker for everyone to wait for the others and commit once: ``2 * commit`` for those
arriving during a commit becomes ``turnaround + commit`` for all.

:class:`WriteGather` holds a share operation before it is applied while other members that
operated recently (within ``recent_s``) have not come yet, when that is worth it: when the
members' turnaround (from an operation's outcome to the member's next operation, a moving
average) is below two thirds of the commit time (then the sum of the completion times falls),
and a commit takes more than ``SLOW_COMMIT_S`` (a disk in trouble: with commits of 1-2 ms the
bench measured holding as no gain).
The operations held are applied together as soon as every member expected has come, or after
twice the commit time at most (never more than ``max_wait_s``). A member alone is never held,
nor is anyone when commits are quick. Nothing else changes: the operations are the same,
applied in the order they came, and each answer still waits for its own write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from typing import Final

RECENT_S: Final = 0.05  # a member that wrote this recently is expected to write again soon
MAX_WAIT_S: Final = 0.02
# Only commits slower than this are gathered: measured on the bench, holding members for commits
# of 1-2 ms cost more than it saved (docs/share-groups.md, "Third round").
SLOW_COMMIT_S: Final = 0.003


class WriteGather:
    def __init__(
        self,
        last_commit_s: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
        recent_s: float = RECENT_S,
        max_wait_s: float = MAX_WAIT_S,
    ) -> None:
        self.last_commit_s = last_commit_s
        self.clock = clock
        self.recent_s = recent_s
        self.max_wait_s = max_wait_s
        self._last: dict[Hashable, float] = {}  # member: when its last operation was applied
        self._answered: dict[Hashable, float] = {}  # member: when its last outcome came
        self._held: dict[Hashable, asyncio.Future[None]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.turnaround_s: float | None = None  # moving average over the members
        self.commit_s: float | None = None  # moving average of the last commit's time
        self.held = 0  # operations held, for tests and the bench
        self.gathered = 0  # times the last member expected came and released the others

    def answered(self, member: Hashable) -> None:
        """``member``'s operation has its outcome (its write is durable)."""
        self._answered[member] = self.clock()

    async def turn(self, member: Hashable) -> None:
        """Return when ``member``'s operation may be applied (at once, or with the others)."""
        now = self.clock()
        self._forget(now)
        self._learn(member, now)
        if member in self._held or not self._worth_it() or not self._expected(member):
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
            self._timer = loop.call_later(min(2 * (self.commit_s or 0.0), self.max_wait_s), self._release)
        try:
            await arrived
        finally:
            if self._held.get(member) is arrived:
                del self._held[member]
        self._last[member] = self.clock()

    def _learn(self, member: Hashable, now: float) -> None:
        commit = self.last_commit_s()
        self.commit_s = commit if self.commit_s is None else self.commit_s + (commit - self.commit_s) / 4
        answered = self._answered.pop(member, None)
        if answered is not None and now - answered < self.recent_s:
            back = now - answered
            average = self.turnaround_s
            self.turnaround_s = back if average is None else average + (back - average) / 4

    def _worth_it(self) -> bool:
        """Waiting for the others lowers the sum of completion times: with a turnaround ``t``
        and a commit ``c``, three members take ``c + 2c + 2c`` alternating and ``3 (t + c)``
        gathered."""
        turnaround, commit = self.turnaround_s, self.commit_s
        if turnaround is None or commit is None or commit < SLOW_COMMIT_S:
            return False  # quick commits: the alternation measured as fast as gathering, or faster
        return 3 * turnaround < 2 * commit

    def _expected(self, member: Hashable) -> bool:
        """Whether another member that operated recently has not come yet."""
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
        for member in [m for m, at in self._answered.items() if at < oldest]:
            del self._answered[member]
