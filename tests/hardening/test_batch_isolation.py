"""One request's bad record fails that request only, not the group-commit batch it shares."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from storage.base import StoreError
from storage.memory import MemoryStore
from storage.records import Record
from storage.sqlite import SQLiteStore
from storage.writer import ISOLATION_MAX_FAILURE_S, BatchWriter
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio

POISON = 13


class RefusesPoison(MemoryStore):
    """Refuses any batch holding offset 13, as a database refuses a value it cannot store."""

    def __init__(self, delay_s: float = 0.0) -> None:
        super().__init__()
        self.delay_s = delay_s

    async def write(self, records: Sequence[Record]) -> None:
        if any(getattr(r, "offset", 0) == POISON for r in records):
            self.write_calls += 1
            await asyncio.sleep(self.delay_s)
            raise StoreError("value out of range")
        await super().write(records)


async def _gather(futures: list[asyncio.Future[None]]) -> list[BaseException | None]:
    return list(await asyncio.gather(*futures, return_exceptions=True))


async def test_poison_write_fails_alone_in_a_shared_batch() -> None:
    store = RefusesPoison()
    await store.open()
    writer = BatchWriter(store)
    futures = [writer.write([offset(partition=p, offset=POISON if p == 37 else 100 + p)]) for p in range(100)]
    results = await _gather(futures)
    assert [p for p, r in enumerate(results) if r is not None] == [37]
    assert isinstance(results[37], StoreError)
    landed = {o.partition: o.offset for o in (await store.load()).offsets}
    assert landed == {p: 100 + p for p in range(100) if p != 37}
    # Bisection: about two writes per level, not one write per waiter.
    assert writer.stats.isolation_writes <= 2 * 7
    await writer.close()


async def test_several_poison_writes_fail_alone() -> None:
    store = RefusesPoison()
    await store.open()
    writer = BatchWriter(store)
    bad = {0, 50, 99}
    futures = [
        writer.write([offset(partition=p, offset=POISON if p in bad else 100 + p)]) for p in range(100)
    ]
    results = await _gather(futures)
    assert {p for p, r in enumerate(results) if r is not None} == bad
    await writer.close()


async def test_slow_failure_is_an_outage_and_is_not_multiplied() -> None:
    store = RefusesPoison(delay_s=ISOLATION_MAX_FAILURE_S + 0.1)
    await store.open()
    writer = BatchWriter(store)
    futures = [writer.write([offset(partition=p, offset=POISON)]) for p in range(50)]
    results = await _gather(futures)
    assert all(isinstance(r, StoreError) for r in results)
    assert store.write_calls == 1 and writer.stats.isolation_writes == 0
    await writer.close()


async def test_isolation_keeps_the_order_of_writes() -> None:
    store = RefusesPoison()
    await store.open()
    writer = BatchWriter(store)
    futures = [writer.write([offset(offset=n)]) for n in range(1, 31)]  # one key, 13 is poison
    results = await _gather(futures)
    assert [n for n, r in zip(range(1, 31), results, strict=True) if r is not None] == [POISON]
    assert {o.offset for o in (await store.load()).offsets} == {30}
    await writer.close()


async def test_sqlite_overflowing_expiry_fails_only_its_own_commit(tmp_path: Path) -> None:
    """OffsetCommit v2 with RetentionTimeMs 2**63-1 once overflowed the expiry and failed everyone."""
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    writer = BatchWriter(store)
    try:
        futures = [
            writer.write([offset(partition=p, offset=p, expire_ms=2**63 - 1 + p if p == 5 else None)])
            for p in range(20)
        ]
        results = await _gather(futures)
        assert [p for p, r in enumerate(results) if r is not None] == [5]
        assert len((await store.load()).offsets) == 19
    finally:
        await writer.close()
        await store.close()
