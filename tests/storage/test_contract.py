"""The Store contract, run against every backend (memory, sqlite, postgres)."""

from __future__ import annotations

import random

import pytest

from storage.base import Store, StoreError
from storage.records import (
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
    TopicRecord,
    TopicTombstone,
)
from tests.storage.conftest import StoreFactory
from tests.storage.helpers import Snapshot, apply_model, group, member, offset, snapshot, topic

pytestmark = pytest.mark.asyncio


async def test_empty_store_loads_nothing(store: Store) -> None:
    state = await store.load()
    assert (state.topics, state.groups, state.offsets) == ([], [], [])


async def test_offset_round_trip(store: Store) -> None:
    records = [
        offset("g", "t", 0, 0),
        offset("g", "t", 1, 2**63 - 1, leader_epoch=2**31 - 1, metadata="x" * 4096, commit_ms=2**62),
        offset("g", "t", 2, -1, leader_epoch=-1, metadata="", expire_ms=0),
        offset("g", "t", 3, 5, metadata="ünïcødé ☃ \U0001f600", expire_ms=1_800_000_000_000),
        offset("g", "t", 4, 6, metadata="nul\x00inside"),
        offset("g2", "other-topic", 2**31 - 1, 7, commit_ms=-5),
        offset("", "t", 0, 8),  # Kafka allows an empty group id for simple consumers
    ]
    await store.write(records)
    loaded = snapshot(await store.load()).offsets
    assert sorted(loaded.values(), key=_offset_key) == sorted(records, key=_offset_key)
    assert loaded[("g", "t", 2)].expire_ms == 0
    assert loaded[("g", "t", 0)].expire_ms is None
    assert loaded[("g", "t", 2)].metadata == ""


async def test_group_round_trip_keeps_bytes_and_none_exactly(store: Store) -> None:
    every_byte = bytes(range(256))
    members = (
        member("m-1", group_instance_id=None, subscription=every_byte, assignment=b""),
        member(
            "m-2",
            group_instance_id="",
            client_id="",
            client_host="",
            subscription=b"\x00",
            assignment=every_byte * 40,
        ),
        member("m-3☃", group_instance_id="static-3", rebalance_timeout_ms=2**31 - 1, session_timeout_ms=-1),
    )
    records = [
        group("stable", generation_id=7, members=members),
        group("empty-simple", generation_id=0, protocol_type=None, protocol_name=None, leader_id=None),
        group("empty-strings", generation_id=2**31 - 1, protocol_type="", protocol_name="", leader_id=""),
    ]
    await store.write(records)
    loaded = snapshot(await store.load()).groups
    assert loaded == {g.group_id: g for g in records}
    assert loaded["stable"].members[0].group_instance_id is None
    assert loaded["stable"].members[1].group_instance_id == ""
    assert loaded["empty-simple"].protocol_type is None
    assert loaded["empty-strings"].protocol_type == ""
    assert type(loaded["stable"].members[0].subscription) is bytes
    assert type(loaded["stable"].members) is tuple


async def test_topic_round_trip(store: Store) -> None:
    records = [
        topic("a", configs=()),
        topic(
            "b", num_partitions=1, configs=(("cleanup.policy", "compact"), ("retention.ms", None), ("x", ""))
        ),
        TopicRecord("c", b"\x00" * 16, 2**31 - 1, 3, (("z", "1"), ("a", "2"), ('\x00odd"', "\\"))),
    ]
    await store.write(records)
    loaded = snapshot(await store.load()).topics
    assert loaded == {t.name: t for t in records}
    assert loaded["b"].configs[1] == ("retention.ms", None)
    assert loaded["b"].configs[2] == ("x", "")
    assert type(loaded["c"].topic_id) is bytes


async def test_upserts_overwrite(store: Store) -> None:
    await store.write([offset(offset=1), group(generation_id=1), topic(num_partitions=1)])
    o, g, t = (
        offset(offset=2, leader_epoch=4, metadata="m", expire_ms=9),
        group(generation_id=2, members=(member(),)),
        topic(num_partitions=8, configs=(("k", "v"),)),
    )
    await store.write([o, g, t])
    snap = snapshot(await store.load())
    assert list(snap.offsets.values()) == [o]
    assert list(snap.groups.values()) == [g]
    assert list(snap.topics.values()) == [t]


async def test_tombstones_delete_only_their_key(store: Store) -> None:
    await store.write(
        [
            offset("g", "t", 0),
            offset("g", "t", 1),
            offset("h", "t", 0),
            group("g"),
            group("h"),
            topic("t"),
            topic("u"),
        ]
    )
    await store.write([OffsetTombstone("g", "t", 0), GroupTombstone("g"), TopicTombstone("t")])
    snap = snapshot(await store.load())
    assert set(snap.offsets) == {("g", "t", 1), ("h", "t", 0)}  # no cascade from the group tombstone
    assert set(snap.groups) == {"h"}
    assert set(snap.topics) == {"u"}


async def test_deleting_missing_keys_is_fine(store: Store) -> None:
    await store.write([OffsetTombstone("nope", "t", 0), GroupTombstone("nope"), TopicTombstone("nope")])
    await store.write([offset(), OffsetTombstone("g", "t", 0), OffsetTombstone("g", "t", 0)])
    state = await store.load()
    assert (state.topics, state.groups, state.offsets) == ([], [], [])


async def test_order_within_a_batch_is_respected(store: Store) -> None:
    batch: list[Record] = [
        # upsert, tombstone, upsert -> present with the last value
        offset("g", "t", 0, 1),
        OffsetTombstone("g", "t", 0),
        offset("g", "t", 0, 3),
        group("g", generation_id=1),
        GroupTombstone("g"),
        group("g", generation_id=3),
        topic("t", num_partitions=1),
        TopicTombstone("t"),
        topic("t", num_partitions=3),
        # upsert, tombstone -> absent
        offset("g", "t", 1, 1),
        OffsetTombstone("g", "t", 1),
        group("h"),
        GroupTombstone("h"),
        topic("u"),
        TopicTombstone("u"),
        # two upserts of one key -> the later one
        offset("g", "t", 2, 1),
        offset("g", "t", 2, 2),
    ]
    await store.write(batch)
    snap = snapshot(await store.load())
    assert {k: o.offset for k, o in snap.offsets.items()} == {("g", "t", 0): 3, ("g", "t", 2): 2}
    assert {k: g.generation_id for k, g in snap.groups.items()} == {"g": 3}
    assert {k: t.num_partitions for k, t in snap.topics.items()} == {"t": 3}


async def test_tombstone_then_upsert_across_batches(store: Store) -> None:
    await store.write([offset(offset=1)])
    await store.write([OffsetTombstone("g", "t", 0)])
    await store.write([offset(offset=2)])
    assert [o.offset for o in (await store.load()).offsets] == [2]


@pytest.mark.parametrize(
    "poison",
    [
        pytest.param(offset("g", "t", -1, 5), id="negative-partition"),
        pytest.param(offset("g", "t", 9, 2**63), id="offset-beyond-int64"),
        pytest.param(offset("g", "t", 2**31, 5), id="partition-beyond-int32"),
        pytest.param(TopicRecord("bad", b"short", 1, 1, ()), id="topic-id-not-16-bytes"),
        pytest.param(
            group("bad", members=(member(session_timeout_ms=2**31),)), id="member-timeout-beyond-int32"
        ),
    ],
)
async def test_a_failing_batch_leaves_nothing(store: Store, poison: Record) -> None:
    before: list[Record] = [offset("g", "t", 0, 1), offset("g", "t", 1, 1), group("g"), topic("t")]
    await store.write(before)
    expected = snapshot(await store.load())
    batch: list[Record] = [
        OffsetTombstone("g", "t", 0),  # deletes run before upserts in the SQL backends
        GroupTombstone("g"),
        TopicTombstone("t"),
        topic("new-topic"),
        group("new-group"),
        *[offset("g", "t", p, 2) for p in range(1, 50)],
        poison,
        *[offset("g", "t", p, 2) for p in range(50, 100)],
    ]
    with pytest.raises(StoreError):
        await store.write(batch)
    assert snapshot(await store.load()) == expected
    # The store is still usable afterwards.
    await store.write([offset("g", "t", 0, 3)])
    assert snapshot(await store.load()).offsets[("g", "t", 0)].offset == 3


async def test_data_survives_close_and_reopen(store_factory: StoreFactory) -> None:
    first = await store_factory.opened()
    o, g, t = (
        offset("g", "t", 0, 42, metadata="meta"),
        group("g", members=(member(),)),
        topic("t", configs=(("a", None),)),
    )
    await first.write([o, g, t])
    await first.close()
    second = await store_factory.opened()
    snap = snapshot(await second.load())
    assert snap == Snapshot(topics={"t": t}, groups={"g": g}, offsets={("g", "t", 0): o})


async def test_reopening_is_idempotent(store_factory: StoreFactory) -> None:
    for i in range(3):
        store = await store_factory.opened()
        await store.write([offset(partition=i)])
        await store.close()
    store = await store_factory.opened()
    assert sorted(o.partition for o in (await store.load()).offsets) == [0, 1, 2]


async def test_close_is_idempotent_and_final(store_factory: StoreFactory) -> None:
    store = await store_factory.opened()
    await store.close()
    await store.close()
    with pytest.raises(StoreError):
        await store.write([offset()])
    with pytest.raises(StoreError):
        await store.load()


async def test_unopened_store_refuses_work(store_factory: StoreFactory) -> None:
    store = store_factory()
    with pytest.raises(StoreError):
        await store.write([offset()])


async def test_empty_write_is_a_no_op(store: Store) -> None:
    await store.write([])
    assert (await store.load()).offsets == []


async def test_large_batch(store: Store) -> None:
    records = [offset(f"group-{i % 100}", f"topic-{i % 7}", i, i * 3, metadata=str(i)) for i in range(10_000)]
    await store.write(records)
    # Half of them again, overwritten, plus deletes, in one batch.
    second: list[Record] = [offset(r.group_id, r.topic, r.partition, -r.offset) for r in records[:5000]]
    second += [OffsetTombstone(r.group_id, r.topic, r.partition) for r in records[5000:6000]]
    await store.write(second)
    loaded = snapshot(await store.load()).offsets
    assert len(loaded) == 9000
    assert loaded[("group-1", "topic-1", 1)].offset == -3
    assert loaded[("group-0", "topic-1", 6000)].offset == 18000
    assert ("group-0", "topic-2", 5000) not in loaded


async def test_random_batches_match_the_reference_model(store: Store) -> None:
    rng = random.Random(20240611)
    model = Snapshot({}, {}, {})
    for _ in range(30):
        batch: list[Record] = []
        for _ in range(rng.randint(1, 40)):
            g, t, p = rng.choice("abc"), rng.choice("xy"), rng.randrange(3)
            kind = rng.randrange(6)
            if kind == 0:
                batch.append(offset(g, t, p, rng.randrange(1000), metadata=rng.choice(["", "m"])))
            elif kind == 1:
                batch.append(OffsetTombstone(g, t, p))
            elif kind == 2:
                batch.append(
                    group(g, generation_id=rng.randrange(10), members=(member(f"m{p}"),) * rng.randrange(2))
                )
            elif kind == 3:
                batch.append(GroupTombstone(g))
            elif kind == 4:
                batch.append(topic(t, num_partitions=rng.randrange(1, 5)))
            else:
                batch.append(TopicTombstone(t))
        apply_model(model, batch)
        await store.write(batch)
    assert snapshot(await store.load()) == model


def _offset_key(o: OffsetCommitRecord) -> tuple[str, str, int]:
    return (o.group_id, o.topic, o.partition)
