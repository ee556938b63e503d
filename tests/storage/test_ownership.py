"""Shard leases on PostgreSQL (docs/multinode.md): registration, take, renew, expiry, release, and
the fence that stops a write from a node whose lease epoch is stale."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from storage.ownership import Fence, LeaseTable, NodeIdInUse, ShardCountMismatch, ShardFenced
from storage.postgres import PostgresStore
from storage.records import (
    AclRecord,
    AclTombstone,
    GroupConfigRecord,
    GroupConfigTombstone,
    OffsetCommitRecord,
    TopicRecord,
    TopicTombstone,
)

pytestmark = [pytest.mark.postgres, pytest.mark.asyncio]

SHARDS = 4
LEASE_MS = 600


def by_first_letter(group_id: str) -> int:
    """A shard function the test can reason about: "a..." -> 0, "b..." -> 1, ..."""
    return (ord(group_id[0]) - ord("a")) % SHARDS


def commit(group_id: str, offset: int = 1) -> OffsetCommitRecord:
    return OffsetCommitRecord(group_id, "t", 0, offset, -1, "", 1000, None)


@pytest_asyncio.fixture
async def store(pg_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(pg_dsn)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


@pytest_asyncio.fixture
async def tables(store: PostgresStore) -> AsyncIterator[list[LeaseTable]]:
    made: list[LeaseTable] = []
    yield made
    for table in made:
        await table.close()


async def node(
    store: PostgresStore, tables: list[LeaseTable], node_id: int, shards: int = SHARDS
) -> LeaseTable:
    table = store.lease_table(node_id, shards, LEASE_MS)
    tables.append(table)
    await table.register("127.0.0.1", 9000 + node_id)
    return table


async def test_registration_creates_leases_and_lists_the_node(
    store: PostgresStore, tables: list[LeaseTable]
) -> None:
    one = await node(store, tables, 1)
    view = await one.view()
    assert [(row.shard, row.owner, row.epoch) for row in view.leases] == [(s, None, 0) for s in range(SHARDS)]
    assert [(n.node_id, n.host, n.port) for n in view.live_nodes] == [(1, "127.0.0.1", 9001)]


async def test_a_live_node_id_is_refused_and_a_dead_ones_reused(
    store: PostgresStore, tables: list[LeaseTable]
) -> None:
    first = await node(store, tables, 1)
    with pytest.raises(
        NodeIdInUse, match=r"node id 1 is already in use by a live node \(advertised 127.0.0.1:9001"
    ):
        await node(store, tables, 1)
    await first.close()  # the process died: its session and lock are gone
    again = await node(store, tables, 1)
    assert [n.node_id for n in (await again.view()).live_nodes] == [1]


async def test_a_different_shard_count_is_refused(store: PostgresStore, tables: list[LeaseTable]) -> None:
    await node(store, tables, 1)
    with pytest.raises(
        ShardCountMismatch, match=r"offsets\.topic\.num\.partitions is 4 in the database but 8 here"
    ):
        await node(store, tables, 2, shards=8)


async def test_take_renew_and_expiry(store: PostgresStore, tables: list[LeaseTable]) -> None:
    one, two = await node(store, tables, 1), await node(store, tables, 2)
    assert await one.take({0: 0}) == {0: 1}
    assert await two.take({0: 0}) == {}  # the epoch moved on
    assert await two.take({0: 1}) == {}  # owned, unexpired, owner alive
    assert await one.renew({0: 1}) == {0}
    assert await one.renew({0: 7}) == set()  # not at that epoch
    await asyncio.sleep(LEASE_MS / 1000 + 0.2)
    row = (await two.view()).leases[0]
    assert (row.owner, row.epoch, row.unexpired, row.owner_alive) == (1, 1, False, True)
    assert await one.renew({0: 1}) == set()  # expired: lost, even though nobody took it yet
    assert await two.take({0: 1}) == {0: 2}  # a hung owner's lease is taken after expiry, epoch + 1


async def test_a_dead_owners_shards_are_free_at_once(store: PostgresStore, tables: list[LeaseTable]) -> None:
    one, two = await node(store, tables, 1), await node(store, tables, 2)
    assert await one.take({3: 0}) == {3: 1}
    await one.close()  # the process died: its connections closed
    row = (await two.view()).leases[3]
    assert (row.owner, row.unexpired, row.owner_alive) == (1, True, False)
    assert await two.take({3: 1}) == {3: 2}  # no waiting for the lease


async def test_release_frees_the_shard(store: PostgresStore, tables: list[LeaseTable]) -> None:
    one, two = await node(store, tables, 1), await node(store, tables, 2)
    assert await one.take({2: 0}) == {2: 1}
    await one.release({2: 1})
    assert (await two.view()).leases[2].owner is None
    assert await two.take({2: 1}) == {2: 2}


async def test_a_write_with_a_stale_epoch_is_rejected_and_nothing_lands(
    store: PostgresStore, tables: list[LeaseTable], pg_dsn: str
) -> None:
    one, two = await node(store, tables, 1), await node(store, tables, 2)
    assert await one.take({0: 0}) == {0: 1}
    store.fence = Fence(1, by_first_letter, {0: 1})
    await store.write([commit("alpha", 1)])  # shard 0 at epoch 1: ours
    await asyncio.sleep(LEASE_MS / 1000 + 0.2)  # node 1 hangs past its lease ...
    assert await two.take({0: 1}) == {0: 2}  # ... and node 2 takes over
    with pytest.raises(ShardFenced, match=r"no longer holds the lease of shards \[0\]") as fenced:
        await store.write([commit("alpha", 2), commit("axe", 2)])
    assert fenced.value.shards == {0}
    # A shard it never held is refused before touching the database.
    with pytest.raises(ShardFenced, match=r"shards \[1\] are not owned by node 1"):
        await store.write([commit("beta", 3)])
    # Records of no group (topics) are not fenced.
    await store.write([TopicRecord("t", b"\x01" * 16, 1, 1, ())])
    conn = await asyncpg.connect(pg_dsn)
    try:
        offsets = await conn.fetch("SELECT group_id, committed_offset FROM offsets ORDER BY group_id")
    finally:
        await conn.close()
    assert [(r["group_id"], r["committed_offset"]) for r in offsets] == [("alpha", 1)]
    # The write connection is healthy after the refusal.
    store.fence = Fence(2, by_first_letter, {0: 2})
    await store.write([commit("alpha", 5)])


async def test_group_config_writes_are_fenced(store: PostgresStore, tables: list[LeaseTable]) -> None:
    one, two = await node(store, tables, 1), await node(store, tables, 2)
    assert await one.take({0: 0}) == {0: 1}
    store.fence = Fence(1, by_first_letter, {0: 1})
    await store.write([GroupConfigRecord("ace", "consumer.session.timeout.ms", "50000")])
    with pytest.raises(ShardFenced, match=r"shards \[1\] are not owned by node 1"):
        await store.write([GroupConfigRecord("bee", "consumer.session.timeout.ms", "50000")])
    await asyncio.sleep(LEASE_MS / 1000 + 0.2)
    assert await two.take({0: 1}) == {0: 2}
    with pytest.raises(ShardFenced):
        await store.write([GroupConfigTombstone("ace", "consumer.session.timeout.ms")])
    assert [r.group_id for r in (await store.load()).group_configs] == ["ace"]


async def test_a_paused_writers_transaction_does_not_hold_a_takeover_up(
    store: PostgresStore, tables: list[LeaseTable]
) -> None:
    one, two = await node(store, tables, 1), await node(store, tables, 2)
    assert await one.take({0: 0}) == {0: 1}
    store.use_fence(Fence(1, by_first_letter, {0: 1}), transaction_idle_timeout_ms=300)
    await store.write([commit("alpha", 1)])
    # Node 1 pauses inside a write transaction: BEGIN and the fence check ran, COMMIT never comes.
    paused = store._conn  # the write session the store just opened with the idle timeout
    await paused.execute("BEGIN")
    await paused.fetch("SELECT shard FROM shard_leases WHERE shard = 0 AND owner = 1 AND epoch = 1 FOR SHARE")
    await asyncio.sleep(LEASE_MS / 1000 + 0.1)
    started = asyncio.get_running_loop().time()
    assert await two.take({0: 1}) == {0: 2}  # waits for the paused transaction's end, not forever
    assert asyncio.get_running_loop().time() - started < 2.0
    with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError)):  # the server ended it
        await paused.execute("COMMIT")


async def test_acl_changes_move_the_counter_every_poll_reads(
    store: PostgresStore, tables: list[LeaseTable]
) -> None:
    one = await node(store, tables, 1)
    store.fence = Fence(1, by_first_letter, {})  # as a node of several sets it
    assert (await one.view()).acls_version == 0
    acl = AclRecord(3, "g", 3, "User:alice", "*", 3, 3)
    await store.write([acl])
    assert (await one.view()).acls_version == 1
    assert await one.acls() == [acl]
    await store.write([TopicRecord("t", b"\x01" * 16, 1, 1, ())])  # other writes leave it alone
    await store.write([AclTombstone(acl)])
    assert (await one.view()).acls_version == 2
    assert await one.acls() == []


async def test_a_group_config_change_made_elsewhere_lands_unfenced_and_moves_its_counter(
    store: PostgresStore, tables: list[LeaseTable]
) -> None:
    one, two = await node(store, tables, 1), await node(store, tables, 2)
    assert await one.take({0: 0}) == {0: 1}  # node 1 owns the groups of shard 0, node 2 none
    store.fence = Fence(1, by_first_letter, {0: 1})
    await store.write([GroupConfigRecord("ace", "consumer.heartbeat.interval.ms", "6000")])
    assert (await two.view()).group_configs_version == 0  # the owner's own writes leave it alone
    session = GroupConfigRecord("ace", "consumer.session.timeout.ms", "50000")
    await two.change_group_configs([session, GroupConfigTombstone("ace", "consumer.heartbeat.interval.ms")])
    assert (await one.view()).group_configs_version == 1
    assert await one.group_configs() == [session]
    assert await two.group_configs(["bee"]) == []
    assert (await one.view()).acls_version == 0


async def test_a_topic_tombstone_deletes_its_offsets_in_every_group(store: PostgresStore) -> None:
    """Also of groups whose shard the writing node does not hold (no fence needed: no group record)."""
    other = OffsetCommitRecord("bravo", "other", 0, 1, -1, "", 1000, None)
    await store.write([TopicRecord("t", b"\x01" * 16, 1, 1, ()), commit("alpha"), commit("bravo"), other])
    store.fence = Fence(1, by_first_letter, {})
    await store.write([TopicTombstone("t")])
    assert (await store.load()).offsets == [other]
    # offsets.retain.on.topic.deletion: they stay for retention to expire.
    store.delete_offsets_with_topics = False
    await store.write([TopicRecord("other", b"\x02" * 16, 1, 1, ())])
    await store.write([TopicTombstone("other")])
    assert (await store.load()).offsets == [other]
