"""Readiness recovers by itself: while storage is failing, a probe write proves it is back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.server.readiness import PROBE_RECORD, StorageProbe
from coordinator.server.runtime import Clock, Runtime
from protocol.errors import ErrorCode
from storage.memory import MemoryStore
from storage.url import open_store
from storage.writer import BatchWriter
from tests.server.test_runtime import commit, error_code

pytestmark = pytest.mark.asyncio

INTERVAL_S = 0.02


async def _runtime(store: MemoryStore) -> Runtime:
    await store.open()
    loop = asyncio.get_running_loop()
    clock = Clock(loop)
    shard = GroupCoordinator(BrokerGroupSettings())
    shard.load([], [], clock.now_ms(), clock.wall_ms())
    return Runtime(shard, BatchWriter(store), clock, write_timeout_ms=1000)


async def _fail_one_commit(runtime: Runtime) -> None:
    reply = commit(runtime, 7)
    await asyncio.wait_for(reply.done, 5)
    assert error_code(reply.response) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert runtime.storage_failing


async def _wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        if condition():
            return True
        await asyncio.sleep(INTERVAL_S / 2)
    return False


async def test_storage_that_recovers_is_marked_ready_without_any_client_write() -> None:
    store = MemoryStore()
    runtime = await _runtime(store)
    probe = StorageProbe(runtime, INTERVAL_S)
    probe.start()
    try:
        store.fail_next_writes(1)
        await _fail_one_commit(runtime)
        writes_before = store.write_calls
        assert await _wait_until(lambda: not runtime.storage_failing, 2), "the probe did not notice recovery"
        assert store.write_calls > writes_before  # it wrote, not just read
        assert all(not rows for rows in store.data.tables.values())  # and the probe write changed nothing
    finally:
        await probe.stop()
        runtime.stop_timers()


async def test_storage_that_still_fails_stays_not_ready() -> None:
    store = MemoryStore()
    runtime = await _runtime(store)
    probe = StorageProbe(runtime, INTERVAL_S)
    probe.start()
    try:
        store.fail_next_writes(1_000_000)
        await _fail_one_commit(runtime)
        probes_before = store.write_calls
        assert not await _wait_until(lambda: not runtime.storage_failing, INTERVAL_S * 10)
        assert store.write_calls > probes_before  # it kept probing
    finally:
        await probe.stop()
        runtime.stop_timers()


async def test_a_healthy_store_is_not_probed() -> None:
    store = MemoryStore()
    runtime = await _runtime(store)
    probe = StorageProbe(runtime, INTERVAL_S)
    probe.start()
    try:
        await asyncio.sleep(INTERVAL_S * 5)
        assert store.write_calls == 0
    finally:
        await probe.stop()
        runtime.stop_timers()


async def test_the_probe_write_changes_nothing_in_sqlite(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'c.db'}")
    await store.open()
    try:
        await store.write([PROBE_RECORD])
        loaded = await store.load()
        assert (loaded.credentials, loaded.groups, loaded.offsets, loaded.topics) == ([], [], [], [])
    finally:
        await store.close()
