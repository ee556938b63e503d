"""Taking shards over on PostgreSQL, in process (a node on a throwaway PostgreSQL whose group
reads the test slows down or gates): the shards load one at a time, a shard a request waits for
first, and a read longer than a lease keeps the leases."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Collection
from typing import Any

import pytest
import pytest_asyncio

from coordinator.core.shard_map import ShardState
from coordinator.core.sharding import shard_of
from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import load_config
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from storage.postgres import PostgresStore
from storage.records import OffsetCommitRecord, TopicRecord
from tests.api.test_dispatcher import Client
from tests.support.ports import free_port

LEASE_MS = 600
SHARDS = 4


def group_in(shard: int) -> str:
    return next(f"g-{i}" for i in range(10_000) if shard_of(f"g-{i}", SHARDS) == shard)


async def node(pg_dsn: str, port: int = 0) -> RunningServer:
    config = load_config(
        cli={"host": "127.0.0.1", "port": port, "storage": pg_dsn, "offsets_topic_num_partitions": SHARDS,
             "group_coordinator_lease_ms": LEASE_MS, "group_coordinator_ownership_poll_ms": 50},
        env={},
    )  # fmt: skip
    return await start_server(config, init=True)  # the database was filled without a cluster id


async def serving(server: RunningServer) -> list[int]:
    assert server.ownership is not None
    local = server.ownership.shard_map.local
    return sorted(s for s, status in local.items() if status is ShardState.ACTIVE)


async def fetch_error(client: Client, shard: int) -> int:
    fetch = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group_in(shard), topics=None)])
    return int((await client.request(ApiKey.OFFSET_FETCH, 8, fetch)).groups[0].error_code)


async def until(condition: Any, what: str, seconds: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.02)


@pytest_asyncio.fixture
async def stored(pg_dsn: str) -> AsyncIterator[str]:
    """One group with an offset in every shard."""
    store = PostgresStore(pg_dsn)
    await store.open()
    now = 1_700_000_000_000
    await store.write(
        [
            TopicRecord("t", uuid.UUID(int=5).bytes, 1, 1, ()),
            *(OffsetCommitRecord(group_in(s), "t", 0, 10 + s, -1, "", now, None) for s in range(SHARDS)),
        ]
    )
    await store.close()
    yield pg_dsn


@pytest.mark.asyncio
async def test_shards_read_for_longer_than_a_lease_stay_owned(
    stored: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    original = PostgresStore.load_groups

    async def slow(self: PostgresStore, group_ids: Collection[str]) -> Any:
        await asyncio.sleep(3 * LEASE_MS / 1000)  # three leases: without renewals they expire
        return await original(self, group_ids)

    monkeypatch.setattr(PostgresStore, "load_groups", slow)
    caplog.set_level(logging.INFO, logger="coordinator.server.ownership")
    server = await node(stored)
    try:

        async def all_served() -> bool:
            return await serving(server) == list(range(SHARDS))

        await until(all_served, "every shard is served")
        await asyncio.sleep(3 * LEASE_MS / 1000)  # and they are kept
        assert server.ownership is not None and sorted(server.ownership.owned) == list(range(SHARDS))
        assert await serving(server) == list(range(SHARDS))
        assert "could not be renewed" not in caplog.text and "not renewed within" not in caplog.text
    finally:
        await server.shutdown()


@pytest.mark.asyncio
async def test_shards_load_one_at_a_time_and_a_wanted_one_first(
    stored: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = PostgresStore.load_groups
    gates = {shard: asyncio.Event() for shard in range(SHARDS)}
    read: list[list[int]] = []

    async def gated(self: PostgresStore, group_ids: Collection[str]) -> Any:
        shards = sorted({shard_of(g, SHARDS) for g in group_ids})
        read.append(shards)
        for shard in shards:
            await gates[shard].wait()
        return await original(self, group_ids)

    monkeypatch.setattr(PostgresStore, "load_groups", gated)
    # The start returns after the first ownership round, which loads the shards: it runs aside
    # while the test drives the reads (the listener is open before the round).
    port = free_port()
    starting = asyncio.create_task(node(stored, port))
    client = None
    for _ in range(500):
        try:
            client = await Client.connect(port, "take")
            break
        except OSError:
            await asyncio.sleep(0.02)
    assert client is not None, "the node never listened"
    try:

        async def first_read() -> bool:
            return read == [[0]]

        await until(first_read, "shard 0 is read")
        # A group of shard 3 is answered 14 and its shard is loaded right after shard 0.
        assert await fetch_error(client, 3) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        gates[0].set()

        async def wanted_next() -> bool:
            return read[:2] == [[0], [3]]  # one shard first, then the wanted one alone

        await until(wanted_next, "the wanted shard is read next")
        # Shard 0 is served (reads and writes) while the others load.
        assert await fetch_error(client, 0) == ErrorCode.NONE
        assert await fetch_error(client, 1) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        partition = OffsetCommitRequestPartition(partition_index=0, committed_offset=99)
        commit = OffsetCommitRequest(
            group_id=group_in(0), topics=[OffsetCommitRequestTopic(name="t", partitions=[partition])]
        )
        committed = await client.request(ApiKey.OFFSET_COMMIT, 8, commit)
        assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
        gates[3].set()

        async def three_served() -> bool:
            return await fetch_error(client, 3) == ErrorCode.NONE

        await until(three_served, "shard 3 is served")
        for gate in gates.values():
            gate.set()
        server = await asyncio.wait_for(starting, 30)
        assert server.ownership is not None
        await asyncio.wait_for(server.ownership.ready.wait(), 30)
        assert await serving(server) == list(range(SHARDS))
        assert read == [[0], [3], [1], [2]]  # shard 1 was asked for too; then what is left
    finally:
        for gate in gates.values():
            gate.set()
        await client.close()
        await (await starting).shutdown()
