"""A shard read that outlasts the lease: the node renews its leases meanwhile and keeps the shards
(an in-process node on a throwaway PostgreSQL whose shard reads are slowed down)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import Any

import pytest

from coordinator.core.shard_map import ShardStatus
from coordinator.server.app import start_server
from coordinator.server.config import load_config
from storage.postgres import PostgresStore

LEASE_MS = 600


@pytest.mark.asyncio
async def test_shards_read_for_longer_than_a_lease_stay_owned(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    original = PostgresStore.load_shards
    reads: list[Collection[int]] = []

    async def slow_load_shards(
        self: PostgresStore, shards: Collection[int], shard_of: Callable[[str], int]
    ) -> Any:
        reads.append(shards)
        await asyncio.sleep(3 * LEASE_MS / 1000)  # three leases: without renewals all would expire
        return await original(self, shards, shard_of)

    monkeypatch.setattr(PostgresStore, "load_shards", slow_load_shards)
    config = load_config(
        cli={"host": "127.0.0.1", "port": 0, "storage": pg_dsn, "offsets_topic_num_partitions": 4,
             "group_coordinator_lease_ms": LEASE_MS, "group_coordinator_ownership_poll_ms": 50},
        env={},
    )  # fmt: skip
    caplog.set_level(logging.INFO, logger="coordinator.server.ownership")
    server = await start_server(config)
    try:
        ownership = server.ownership
        assert ownership is not None
        shard_map = ownership.shard_map
        deadline = asyncio.get_running_loop().time() + 30
        while sorted(s for s, status in shard_map.local.items() if status == ShardStatus.SERVING) != [
            0,
            1,
            2,
            3,
        ]:
            assert asyncio.get_running_loop().time() < deadline, f"shards never served: {shard_map.local}"
            await asyncio.sleep(0.05)
        await asyncio.sleep(3 * LEASE_MS / 1000)  # and they are kept
        assert sorted(ownership.owned) == [0, 1, 2, 3]
        assert reads and all(status == ShardStatus.SERVING for status in shard_map.local.values())
        assert "could not be renewed" not in caplog.text
        assert "not renewed within" not in caplog.text
    finally:
        await server.shutdown()
