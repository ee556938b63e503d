"""Group commit in front of a Store.

The writer holds one *open* batch and at most one *flushing* batch. ``write()`` appends to the
open batch; if nothing is flushing, a flush starts right away. While a flush is in progress,
new writes accumulate and go out together in the next ``store.write()`` as soon as the
previous one finishes. Latency at low load is one commit; throughput at high load is one
commit (one fsync) per batch, whatever the number of writers.

One flush task exists while there is work and exits when the writer goes idle; ``write()``
itself creates only a future. Batches land in the order they were formed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from storage.base import Store, StoreError
from storage.records import Record

log = logging.getLogger(__name__)


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


@dataclass(slots=True)
class _Batch:
    records: list[Record] = field(default_factory=list)
    waiters: list[asyncio.Future[None]] = field(default_factory=list)


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
        if self._closing:
            raise StoreError("BatchWriter is closed")
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        batch = self._open
        batch.records.extend(records)
        batch.waiters.append(waiter)
        if self._flush_task is None:
            self._flush_task = loop.create_task(self._flush_loop(), name="storage-batch-writer")
        return waiter

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
            _fail(self._open.waiters, error)
            self._open = _Batch()
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
        started = time.perf_counter()
        try:
            await self._store.write(batch.records)
        except asyncio.CancelledError:
            _fail(batch.waiters, StoreError("BatchWriter cancelled while writing; outcome unknown"))
            raise
        except Exception as exc:
            stats.last_write_latency_s = time.perf_counter() - started
            stats.batches_failed += 1
            stats.records_failed += size
            if not isinstance(exc, StoreError):
                log.error("store.write raised a non-StoreError", exc_info=exc)
            _fail(batch.waiters, exc)
            return
        stats.last_write_latency_s = time.perf_counter() - started
        stats.batches_written += 1
        stats.records_written += size
        _succeed(batch.waiters)


def _succeed(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():  # a caller may have cancelled its own future
            waiter.set_result(None)


def _fail(waiters: list[asyncio.Future[None]], exc: BaseException) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_exception(exc)
