"""The imperative shell around the pure core: persistence, reply release and the timer tick.

Results from the core are applied here: records go to the BatchWriter (group commit); once they
are durable the core applies the state change they carry (``on_durable``) and only then are the
replies released; a failed write is handed back to the core through ``on_failed``, which applies
nothing and answers. See docs/commit-path.md. One ``loop.call_at`` stays armed for
the core's earliest deadline (rounded up to a coarse tick); there is no per-member timer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.result import Result
from protocol.errors import ErrorCode
from storage.base import StoreError
from storage.ownership import ShardFenced
from storage.records import LoadedState
from storage.writer import BatchWriter

log = logging.getLogger(__name__)

TIMER_TICK_MS = 10
# Deadlines handled per timer pass; more due ones run in the next pass, after pending input.
TIMER_POLL_LIMIT = 1000
# A tick this much later than asked means the loop was stalled (one huge request, a slow
# disk): heartbeats that arrived meanwhile still sit in socket buffers. Expiry then waits
# STALL_GRACE_MS, in which the loop reads them; nobody is expired for a heartbeat the server
# has not looked at yet.
STALL_LATENESS_MS = 100
STALL_GRACE_MS = 50


class Clock:
    """Monotonic milliseconds for deadlines, wall-clock milliseconds for persisted timestamps."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now_ms(self) -> int:
        return int(self._loop.time() * 1000)

    @staticmethod
    def wall_ms() -> int:
        return int(time.time() * 1000)


class _PendingWrite:
    __slots__ = ("deadline", "result", "settled", "timed_out")

    def __init__(self, result: Result, deadline: float) -> None:
        self.result = result
        self.deadline = deadline  # loop time after which it is answered as timed out
        self.settled = False
        self.timed_out = False


class Runtime:
    def __init__(
        self, coordinator: GroupCoordinator, writer: BatchWriter, clock: Clock, write_timeout_ms: int = 5000
    ) -> None:
        self.coordinator = coordinator
        self.write_timeout_ms = write_timeout_ms
        self.writer = writer
        self.clock = clock
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._timer_due = 0  # when the armed tick should run: max(deadline, time of arming)
        self._stall_grace_until: int | None = None
        self._pending_writes = 0
        # Writes in the order they were made, so their deadlines ascend: one timer, armed for
        # the oldest unsettled one, replaces a timer handle per write.
        self._unsettled: deque[_PendingWrite] = deque()
        self._write_timer: asyncio.TimerHandle | None = None
        self._storage_failing = False
        # Called with the shards a write was refused for because their lease is gone.
        self.on_fenced: Callable[[frozenset[int]], None] | None = None

    # ---- results -------------------------------------------------------------------------
    def apply(self, result: Result) -> None:
        if result.records:
            self._write(result)
        elif result.on_durable is None:
            # Result.deliver without a state to apply, inlined (heartbeats: every request).
            for reply_to, response in result.replies:
                reply_to.send(response)
        else:
            self._release(result)
        self.rearm_timer()

    def _release(self, result: Result) -> None:
        # Result.deliver applies the state before sending: a reply may dispatch the connection's
        # next (pipelined) request at once, and that request must see what the reply reports.
        # Only on_durable reads the time: most Results (heartbeats) carry none.
        follow_up = result.deliver(self.clock.now_ms() if result.on_durable is not None else 0)
        if follow_up is not None:
            self.apply(follow_up)

    def _write(self, result: Result) -> None:
        self._pending_writes += 1
        write = _PendingWrite(result, self._loop.time() + self.write_timeout_ms / 1000)
        try:
            self.writer.write_then(result.records, lambda error: self._written(write, error))
        except StoreError as exc:  # the writer is closed: we are shutting down
            self._loop.call_soon(self._written, write, exc)
        self._unsettled.append(write)
        if self._write_timer is None:
            self._write_timer = self._loop.call_at(write.deadline, self._write_deadline)

    def _write_deadline(self) -> None:
        """The oldest unsettled write's deadline passed: time out every write now overdue."""
        self._write_timer = None
        unsettled = self._unsettled
        now = self._loop.time()
        while unsettled and (unsettled[0].settled or unsettled[0].deadline <= now):
            write = unsettled.popleft()
            if not write.settled:
                self._timed_out(write)
        if unsettled:
            self._write_timer = self._loop.call_at(unsettled[0].deadline, self._write_deadline)

    def _timed_out(self, write: _PendingWrite) -> None:
        """offsets.commit.timeout.ms passed: answer now (Kafka: REQUEST_TIMED_OUT, mapped per API)."""
        write.timed_out = True
        if not self._storage_failing:
            self._storage_failing = True
            log.error(
                "storage write failed: no answer within %d ms (offsets.commit.timeout.ms); "
                "answering with retriable errors until it recovers",
                self.write_timeout_ms,
            )
        if write.result.on_failed is not None:
            self.apply(write.result.on_failed(self.clock.now_ms(), ErrorCode.REQUEST_TIMED_OUT))

    def _written(self, write: _PendingWrite, error: BaseException | None) -> None:
        self._pending_writes -= 1
        write.settled = True
        unsettled = self._unsettled
        while unsettled and unsettled[0].settled:  # writes settle in order: usually just this one
            unsettled.popleft()
        if not unsettled and self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        result = write.result
        if error is None:
            if self._storage_failing:
                self._storage_failing = False
                log.warning("storage writes succeed again")
            if write.timed_out:
                # Answered already; the records did land, so the core still catches up with them.
                if result.on_durable is not None:
                    self.apply(result.on_durable(self.clock.now_ms()))
            else:
                self._release(result)
            self.rearm_timer()
            return
        if write.timed_out:
            return  # answered at the deadline
        if isinstance(error, ShardFenced):
            # Another node took the shard (docs/multinode.md): nothing landed; clients move on.
            if self.on_fenced is not None:
                self.on_fenced(error.shards)
            if result.on_failed is not None:
                self.apply(result.on_failed(self.clock.now_ms(), ErrorCode.NOT_COORDINATOR))
            self.rearm_timer()
            return
        if not self._storage_failing:
            # One log line per incident, not per failed write.
            self._storage_failing = True
            log.error("storage write failed; answering with retriable errors until it recovers: %s", error)
        code = (
            ErrorCode.COORDINATOR_NOT_AVAILABLE
            if isinstance(error, StoreError)
            else ErrorCode.UNKNOWN_SERVER_ERROR
        )
        if not isinstance(error, StoreError):
            log.error("unexpected error while writing %d records", len(result.records), exc_info=error)
        if result.on_failed is None:
            log.error(
                "a write failed and the core gave no failure handler; %d replies dropped", len(result.replies)
            )
        else:
            self.apply(result.on_failed(self.clock.now_ms(), code))
        self.rearm_timer()

    def storage_recovered(self, how: str) -> None:
        """Storage answers again although no client write has proved it yet (readiness probe)."""
        if self._storage_failing:
            self._storage_failing = False
            log.warning("storage writes succeed again (%s)", how)

    @property
    def storage_failing(self) -> bool:
        return self._storage_failing

    @property
    def pending_writes(self) -> int:
        return self._pending_writes

    # ---- loading ---------------------------------------------------------------------------
    def load_groups(self, state: LoadedState) -> None:
        """Stored groups, offsets and group configs into the core, their timers armed (a shard
        loaded in the background, or taken over from another node)."""
        clock = self.clock
        self.coordinator.load_more(
            state.group_rows(),
            state.offsets,
            clock.now_ms(),
            clock.wall_ms(),
            state.group_configs,
            state.txn_offsets,
        )
        self.rearm_timer()

    # ---- timers --------------------------------------------------------------------------
    def rearm_timer(self) -> None:
        earliest_new = self.coordinator.earliest_scheduled_since_last_call()
        armed = self._timer_deadline if self._timer is not None else None
        if armed is not None and (earliest_new is None or earliest_new >= armed):
            return  # the armed wake-up is still early enough (hot path: heartbeats)
        deadline = self.coordinator.next_deadline()
        if deadline is None:
            return
        if deadline > self.clock.now_ms() + TIMER_TICK_MS:
            # Far deadlines share coarse ticks; due ones (e.g. a 0 ms initial delay) run at once.
            deadline = -(-deadline // TIMER_TICK_MS) * TIMER_TICK_MS
        if self._timer is not None and self._timer_deadline is not None and self._timer_deadline <= deadline:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._arm(deadline)

    def _arm(self, deadline: int) -> None:
        self._timer_deadline = deadline
        self._timer_due = max(deadline, self.clock.now_ms())
        self._timer = self._loop.call_at(deadline / 1000, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._timer_deadline = None
        if self._expiry_put_off(self.clock.now_ms()):
            return
        results = self.coordinator.poll_timers(self.clock.now_ms(), self.clock.wall_ms(), TIMER_POLL_LIMIT)
        for result in results:
            self.apply(result)
        self.rearm_timer()

    def _expiry_put_off(self, now: int) -> bool:
        """After a stall, wait STALL_GRACE_MS before polling the timers (True: re-armed)."""
        grace = self._stall_grace_until
        if grace is None:
            late_ms = now - self._timer_due
            if late_ms < STALL_LATENESS_MS:
                return False
            grace = self._stall_grace_until = now + STALL_GRACE_MS
            log.warning(
                "event loop stalled for %d ms: reading waiting requests before expiring members", late_ms
            )
        if now < grace:
            self._arm(grace)
            return True
        self._stall_grace_until = None
        return False

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> None:
        self._loop.call_later(delay_ms / 1000, callback)

    def stop_timers(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_deadline = None
