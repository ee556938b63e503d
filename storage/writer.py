"""Group commit in front of a Store.

The writer holds one *open* batch and at most one *flushing* batch. ``write()`` appends to the
open batch; if nothing is flushing, a flush starts right away. While a flush is in progress,
new writes accumulate and go out together in the next ``store.write()`` as soon as the
previous one finishes. Latency at low load is one commit; throughput at high load is one
commit (one fsync) per batch, whatever the number of writers.

One flush task exists while there is work and exits when the writer goes idle; ``write()``
itself creates only a future, ``write_then()`` not even that: its callback is called from the
flush task as soon as the batch settles, without a trip through the event loop's ready queue.
Batches land in the order they were formed, and their waiters are settled in that order.

A failed batch does not fail every writer in it: one request's bad record (a value the
database refuses) must not cost anyone else their commit. When a batch of several writes fails
quickly, it is split in halves and each half is written again, in order, down to single
writes; only the writes that fail on their own get the error. A failure that took long
(``ISOLATION_MAX_FAILURE_S``: a hung or unreachable store, not a bad value) or a split that
runs out of its write budget fails the rest at once, so an outage is not multiplied.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from storage.base import Store, StoreError
from storage.records import Record

log = logging.getLogger(__name__)

# A write that failed faster than this may hold a bad record: split its batch to find it.
ISOLATION_MAX_FAILURE_S: Final = 0.5


@dataclass(slots=True)
class WriterStats:
    """Counters for metrics; read them, do not write them."""

    batches_written: int = 0
    records_written: int = 0
    batches_failed: int = 0
    records_failed: int = 0
    last_batch_size: int = 0  # records in the last batch handed to the store
    last_batch_writes: int = 0  # write() calls coalesced into it
    last_write_latency_s: float = 0.0  # duration of the last store.write()
    isolation_writes: int = 0  # store.write() calls made to isolate a failing write in a batch
    writes_failed: int = 0  # write() calls whose records were not stored (each counted once)


class _Waiter(Protocol):
    """What the writer needs of a waiter: an ``asyncio.Future[None]`` or a :class:`_Callback`."""

    def done(self) -> bool: ...
    def set_result(self, result: None, /) -> None: ...
    def set_exception(self, exception: BaseException, /) -> None: ...


class _Callback:
    """A waiter that calls ``fn(None)`` when its records are durable, ``fn(error)`` when not."""

    __slots__ = ("fn", "settled")

    def __init__(self, fn: Callable[[BaseException | None], None]) -> None:
        self.fn = fn
        self.settled = False

    def done(self) -> bool:
        return self.settled

    def set_result(self, result: None, /) -> None:
        self._settle(None)

    def set_exception(self, exception: BaseException, /) -> None:
        self._settle(exception)

    def _settle(self, error: BaseException | None) -> None:
        self.settled = True
        try:
            self.fn(error)
        except Exception:
            # As the event loop does for a future's callback: the other waiters still settle.
            log.exception("a write callback raised")


@dataclass(slots=True)
class _Batch:
    records: list[Record] = field(default_factory=list)
    waiters: list[_Waiter] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # waiter i's records are records[ends[i-1]:ends[i]]

    def part(self, first: int, stop: int) -> list[Record]:
        """The records of waiters ``first`` .. ``stop - 1``."""
        start = self.ends[first - 1] if first > 0 else 0
        return self.records[start : self.ends[stop - 1]]


class BatchWriter:
    def __init__(self, store: Store, *, linger_ms: float = 0.0) -> None:
        """``linger_ms``: wait this long after the first write of an idle writer before flushing
        (Kafka's ``append.linger.ms``). 0 flushes at once; batching still happens under load
        because writes made during a flush share the next one."""
        self._store = store
        self._linger_s = linger_ms / 1000
        self._open = _Batch()
        self._flush_task: asyncio.Task[None] | None = None
        self._closing = False
        self.stats = WriterStats()

    @property
    def pending_records(self) -> int:
        """Records accepted but not yet handed to the store (for backpressure watermarks)."""
        return len(self._open.records)

    def write(self, records: Sequence[Record]) -> asyncio.Future[None]:
        """Queue records; the future completes when they are durable, or raises StoreError.

        Cancelling the returned future does not take the records back. An empty ``records``
        gives a barrier: it completes once every earlier write has been attempted.
        """
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._enqueue(records, waiter)
        return waiter

    def write_then(self, records: Sequence[Record], callback: Callable[[BaseException | None], None]) -> None:
        """Queue records; ``callback(None)`` once they are durable, ``callback(error)`` if not.

        The callback runs inside the writer's flush (an exception it raises is logged), in batch
        order; records written from it go into the next batch. Raises StoreError when closed.
        """
        self._enqueue(records, _Callback(callback))

    def _enqueue(self, records: Sequence[Record], waiter: _Waiter) -> None:
        if self._closing:
            raise StoreError("BatchWriter is closed")
        batch = self._open
        batch.records.extend(records)
        batch.waiters.append(waiter)
        batch.ends.append(len(batch.records))
        if self._flush_task is None:
            self._flush_task = asyncio.get_running_loop().create_task(
                self._flush_loop(), name="storage-batch-writer"
            )

    async def close(self) -> None:
        """Stop accepting writes and wait until everything queued has been attempted.

        The store is not closed: it belongs to the caller.
        """
        self._closing = True
        if self._flush_task is not None:
            await asyncio.shield(self._flush_task)

    async def _flush_loop(self) -> None:
        try:
            if self._linger_s > 0:
                await asyncio.sleep(self._linger_s)
            while self._open.waiters:
                batch, self._open = self._open, _Batch()
                await self._flush(batch)
        except BaseException as exc:
            # Cancelled (loop shutting down): nobody may be left waiting forever.
            error = StoreError(f"BatchWriter stopped: {exc!r}")
            while self._open.waiters:  # a callback may write again: fail that too
                batch, self._open = self._open, _Batch()
                self._fail_waiters(batch.waiters, error)
            raise
        finally:
            self._flush_task = None

    async def _flush(self, batch: _Batch) -> None:
        stats = self.stats
        size = len(batch.records)
        stats.last_batch_size = size
        stats.last_batch_writes = len(batch.waiters)
        if size == 0:
            _succeed(batch.waiters)
            return
        try:
            await self._write_batch(batch)
        except asyncio.CancelledError:
            self._fail_waiters(
                batch.waiters, StoreError("BatchWriter cancelled while writing; outcome unknown")
            )
            raise

    async def _write_batch(self, batch: _Batch) -> None:
        stats = self.stats
        error = await self._write(batch.records)
        if error is None:
            _succeed(batch.waiters)
            return
        failed_after = stats.last_write_latency_s
        if len(batch.waiters) == 1 or failed_after > ISOLATION_MAX_FAILURE_S:
            self._fail_waiters(batch.waiters, error)
            return
        # Enough writes to find a few bad writes by bisection (about 2*log2(n) each).
        budget = [8 * len(batch.waiters).bit_length() + 4]
        half = len(batch.waiters) // 2
        await self._isolate(batch, 0, half, budget)
        await self._isolate(batch, half, len(batch.waiters), budget)

    async def _isolate(self, batch: _Batch, first: int, stop: int, budget: list[int]) -> None:
        """Write waiters ``first`` .. ``stop - 1`` again; split further while they fail fast."""
        waiters = batch.waiters[first:stop]
        if all(waiter.done() for waiter in waiters):
            return  # every caller gave up (cancelled): their records are not retried
        if budget[0] <= 0:
            self._fail_waiters(waiters, StoreError("a write in the same batch failed; not retried"))
            return
        records = batch.part(first, stop)
        if not records:
            _succeed(waiters)  # barriers only
            return
        budget[0] -= 1
        self.stats.isolation_writes += 1
        error = await self._write(records)
        if error is None:
            _succeed(waiters)
            return
        if stop - first == 1 or self.stats.last_write_latency_s > ISOLATION_MAX_FAILURE_S:
            self._fail_waiters(waiters, error)
            return
        middle = (first + stop) // 2
        await self._isolate(batch, first, middle, budget)
        await self._isolate(batch, middle, stop, budget)

    async def _write(self, records: list[Record]) -> Exception | None:
        """One store.write(); its error (already counted) or None."""
        stats = self.stats
        size = len(records)
        started = time.perf_counter()
        try:
            await self._store.write(records)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            stats.last_write_latency_s = time.perf_counter() - started
            stats.batches_failed += 1
            stats.records_failed += size
            if not isinstance(exc, StoreError):
                log.error("store.write raised a non-StoreError", exc_info=exc)
            return exc
        stats.last_write_latency_s = time.perf_counter() - started
        stats.batches_written += 1
        stats.records_written += size
        return None

    def _fail_waiters(self, waiters: list[_Waiter], error: Exception) -> None:
        self.stats.writes_failed += sum(1 for waiter in waiters if not waiter.done())
        _fail(waiters, error)


def _succeed(waiters: list[_Waiter]) -> None:
    for waiter in waiters:
        if not waiter.done():  # a caller may have cancelled its own future
            waiter.set_result(None)


def _fail(waiters: list[_Waiter], exc: BaseException) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_exception(exc)
