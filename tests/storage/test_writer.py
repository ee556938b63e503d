"""BatchWriter: group commit, ordering, failure isolation between batches, close."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from storage.base import StoreError
from storage.memory import MemoryStore
from storage.records import LoadedState, OffsetTombstone, Record
from storage.sqlite import SQLiteStore
from storage.writer import BatchWriter
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio


async def _store(latency_ms: float = 0) -> MemoryStore:
    store = MemoryStore(latency_ms=latency_ms)
    await store.open()
    return store


async def _offsets(store: MemoryStore) -> dict[int, int]:
    return {o.partition: o.offset for o in (await store.load()).offsets}


async def test_single_write_is_durable_when_its_future_completes() -> None:
    store = await _store()
    writer = BatchWriter(store)
    await writer.write([offset(offset=7)])
    assert await _offsets(store) == {0: 7}
    assert (writer.stats.batches_written, writer.stats.records_written, writer.stats.last_batch_size) == (
        1,
        1,
        1,
    )
    assert writer.stats.last_write_latency_s > 0
    await writer.close()


async def test_a_lone_write_goes_out_at_once() -> None:
    store = await _store(latency_ms=20)
    writer = BatchWriter(store)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await writer.write([offset()])
    assert loop.time() - started < 0.2  # one commit, no linger
    await writer.close()


async def test_concurrent_writes_coalesce_into_few_store_writes() -> None:
    store = await _store(latency_ms=20)
    writer = BatchWriter(store)

    async def client(i: int) -> None:
        await writer.write([offset(partition=i, offset=i)])

    await asyncio.gather(*(client(i) for i in range(200)))
    assert await _offsets(store) == {i: i for i in range(200)}
    # All 200 writes arrive before the flush task first runs: one store write.
    assert store.write_calls == 1
    assert sum(store.batch_sizes) == 200
    assert writer.stats.batches_written == store.write_calls
    assert writer.stats.records_written == 200
    await writer.close()


async def test_writes_made_during_a_flush_go_out_together_next() -> None:
    store = await _store(latency_ms=30)
    writer = BatchWriter(store)
    first = writer.write([offset(partition=0)])
    await asyncio.sleep(0.005)  # first batch is now in the store
    later = [writer.write([offset(partition=p)]) for p in range(1, 11)]
    await asyncio.gather(first, *later)
    assert store.batch_sizes == [1, 10]
    assert writer.stats.last_batch_writes == 10
    await writer.close()


async def test_order_is_preserved_across_batches() -> None:
    store = await _store(latency_ms=1)
    writer = BatchWriter(store)
    futures = []
    for n in range(1, 101):
        futures.append(writer.write([offset(offset=n)]))
        if n % 7 == 0:
            futures.append(writer.write([OffsetTombstone("g", "t", 0)]))
        if n % 13 == 0:
            await asyncio.sleep(0.002)  # spread the writes over several batches
    await asyncio.gather(*futures)
    assert await _offsets(store) == {0: 100}
    assert store.write_calls > 3
    await writer.close()


async def test_a_failed_batch_fails_exactly_its_own_waiters() -> None:
    store = await _store(latency_ms=20)
    writer = BatchWriter(store)
    w1 = writer.write([offset(partition=1)])
    await asyncio.sleep(0.005)  # batch 1 is in flight
    w2 = writer.write([offset(partition=2)])
    w3 = writer.write([offset(partition=3)])
    store.fail_next_writes(3)  # batch 2 = {w2, w3} will fail, and so will each alone
    await w1
    # w1's completion started batch 2; this lands in batch 3.
    w4 = writer.write([offset(partition=4)])
    results = await asyncio.gather(w2, w3, w4, return_exceptions=True)
    assert isinstance(results[0], StoreError)
    assert isinstance(results[1], StoreError)
    assert results[2] is None
    assert store.batch_sizes == [1, 2, 1, 1, 1]
    assert set(await _offsets(store)) == {1, 4}
    assert (writer.stats.batches_failed, writer.stats.records_failed) == (3, 4)
    assert writer.stats.batches_written == 2
    assert writer.stats.isolation_writes == 2
    assert writer.stats.writes_failed == 2  # w2 and w3, once each, however many retries it took
    await writer.close()


async def test_later_batches_are_still_attempted_after_failures() -> None:
    store = await _store()
    writer = BatchWriter(store)
    store.broken = True
    with pytest.raises(StoreError):
        await writer.write([offset(offset=1)])
    with pytest.raises(StoreError):
        await writer.write([offset(offset=2)])
    store.broken = False
    await writer.write([offset(offset=3)])
    assert await _offsets(store) == {0: 3}
    await writer.close()


async def test_a_non_store_error_reaches_the_waiters_and_the_writer_survives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Buggy(MemoryStore):
        async def write(self, records: Sequence[Record]) -> None:
            if any(getattr(r, "offset", 0) == 13 for r in records):
                raise RuntimeError("bug in a backend")
            await super().write(records)

    store = Buggy()
    await store.open()
    writer = BatchWriter(store)
    with pytest.raises(RuntimeError, match="bug"):
        await writer.write([offset(offset=13)])
    await writer.write([offset(offset=14)])
    assert "non-StoreError" in caplog.text
    await writer.close()


async def test_cancelling_one_waiter_does_not_affect_the_others() -> None:
    store = await _store(latency_ms=20)
    writer = BatchWriter(store)
    await asyncio.sleep(0)
    a = writer.write([offset(partition=1)])
    b = writer.write([offset(partition=2)])
    a.cancel()
    await b
    assert set(await _offsets(store)) == {1, 2}  # cancelling does not take records back
    await writer.close()


async def test_empty_write_is_a_barrier() -> None:
    store = await _store(latency_ms=10)
    writer = BatchWriter(store)
    w = writer.write([offset()])
    barrier = writer.write([])
    await barrier
    assert w.done()
    await writer.close()


async def test_close_flushes_everything_pending_and_refuses_new_writes() -> None:
    store = await _store(latency_ms=10)
    writer = BatchWriter(store)
    futures = [writer.write([offset(partition=p)]) for p in range(50)]
    await writer.close()
    assert all(f.done() and f.exception() is None for f in futures)
    assert len(await _offsets(store)) == 50
    assert writer.pending_records == 0
    with pytest.raises(StoreError, match="closed"):
        writer.write([offset()])
    await writer.close()  # idempotent


async def test_linger_batches_an_idle_burst() -> None:
    store = await _store()
    writer = BatchWriter(store, linger_ms=20)
    futures = [writer.write([offset(partition=p)]) for p in range(3)]
    await asyncio.sleep(0.005)
    futures.append(writer.write([offset(partition=3)]))
    await asyncio.gather(*futures)
    assert store.batch_sizes == [4]
    await writer.close()


async def test_cancelled_flush_fails_all_waiters() -> None:
    store = await _store(latency_ms=1000)
    writer = BatchWriter(store)
    in_flight = writer.write([offset(partition=1)])
    await asyncio.sleep(0.01)
    queued = writer.write([offset(partition=2)])
    task = writer._flush_task
    assert task is not None
    task.cancel()
    for future in (in_flight, queued):
        with pytest.raises(StoreError):
            await future


async def test_writer_over_sqlite(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    writer = BatchWriter(store)
    try:
        await asyncio.gather(*(writer.write([offset(partition=p, offset=p)]) for p in range(500)))
        state: LoadedState = await store.load()
        assert len(state.offsets) == 500
        assert writer.stats.batches_written < 500
    finally:
        await writer.close()
        await store.close()


async def test_write_then_calls_back_in_batch_order_and_a_raising_callback_spoils_nothing() -> None:
    store = await _store(latency_ms=5)
    writer = BatchWriter(store)
    settled: list[tuple[int, BaseException | None]] = []
    written_from_callback = asyncio.get_running_loop().create_future()

    def callback(i: int) -> Callable[[BaseException | None], None]:
        def done(error: BaseException | None) -> None:
            settled.append((i, error))
            if i == 0:
                # Written from inside the flush: goes out in the next batch, not lost.
                writer.write_then([offset(partition=99, offset=1)], written_from_callback.set_result)
            if i == 1:
                raise RuntimeError("a caller's bug")

        return done

    for i in range(5):
        writer.write_then([offset(partition=i, offset=i)], callback(i))
    await writer.write([])  # a barrier behind all five
    assert settled == [(i, None) for i in range(5)]
    assert await asyncio.wait_for(written_from_callback, 5) is None
    assert (await _offsets(store))[99] == 1
    await writer.close()


async def test_write_then_reports_the_stores_error() -> None:
    store = await _store()
    writer = BatchWriter(store)
    store.broken = True
    errors: list[BaseException | None] = []
    writer.write_then([offset()], errors.append)
    await writer.write([])
    assert len(errors) == 1 and isinstance(errors[0], StoreError)
    await writer.close()
    with pytest.raises(StoreError):
        writer.write_then([offset()], errors.append)
