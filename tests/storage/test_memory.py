"""MemoryStore's test hooks: failure injection, latency, reopening on the same data."""

from __future__ import annotations

import time

import pytest

from storage.base import StoreError
from storage.memory import MemoryData, MemoryStore
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio


async def test_fail_next_writes_fails_exactly_n_writes_and_applies_nothing() -> None:
    store = MemoryStore()
    await store.open()
    store.fail_next_writes(2)
    for _ in range(2):
        with pytest.raises(StoreError, match="injected"):
            await store.write([offset(offset=1)])
    assert (await store.load()).offsets == []
    await store.write([offset(offset=2)])
    assert [o.offset for o in (await store.load()).offsets] == [2]
    assert store.write_calls == 3
    assert store.batch_sizes == [1, 1, 1]


async def test_broken_store_fails_everything_until_repaired() -> None:
    store = MemoryStore()
    await store.open()
    store.broken = True
    with pytest.raises(StoreError):
        await store.write([offset()])
    with pytest.raises(StoreError):
        await store.load()
    store.broken = False
    await store.write([offset()])
    assert len((await store.load()).offsets) == 1


async def test_latency_delays_writes() -> None:
    store = MemoryStore(latency_ms=50)
    await store.open()
    started = time.monotonic()
    await store.write([offset()])
    assert time.monotonic() - started >= 0.045


async def test_history_and_reopen_on_the_same_data() -> None:
    data = MemoryData()
    store = MemoryStore(data, history=True)
    await store.open()
    await store.write([offset(offset=1), offset(offset=2)])
    await store.close()
    assert [o.offset for o in data.history] == [1, 2]
    again = MemoryStore(data)
    await again.open()
    assert [o.offset for o in (await again.load()).offsets] == [2]
