"""The Store contract, run against every backend (memory, sqlite, postgres)."""

from __future__ import annotations

import random
import sqlite3

import asyncpg
import pytest

from storage.base import Store, StoreError
from storage.records import (
    AclRecord,
    ConsumerGroupTombstone,
    ConsumerMemberRecord,
    ConsumerMemberTombstone,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
    TopicPartitionList,
    TopicRecord,
    TopicTombstone,
    UserCredentialRecord,
)
from storage.schema import load_migrations
from tests.storage.conftest import StoreFactory
from tests.storage.helpers import (
    Snapshot,
    apply_model,
    consumer_group,
    consumer_member,
    group,
    member,
    offset,
    snapshot,
    topic,
)

pytestmark = pytest.mark.asyncio


async def test_empty_store_loads_nothing(store: Store) -> None:
    state = await store.load()
    assert (state.topics, state.groups, state.offsets) == ([], [], [])
    assert (state.consumer_groups, state.consumer_members) == ([], [])


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


# -- KIP-848 consumer groups ------------------------------------------------------------------


def _members_of(snap: Snapshot, group_id: str) -> dict[str, ConsumerMemberRecord]:
    return {m: r for (g, m), r in snap.consumer_members.items() if g == group_id}


async def test_consumer_group_round_trip(store: Store) -> None:
    groups = [
        consumer_group("cg", group_epoch=7, assignment_epoch=6),
        consumer_group("", group_epoch=0, assignment_epoch=0, state_ms=0),
        consumer_group(
            "grüppe ☃ \U0001f600", group_epoch=2**31 - 1, assignment_epoch=-(2**31), state_ms=2**63 - 1
        ),
        consumer_group("negative", group_epoch=-1, assignment_epoch=-2, state_ms=-(2**63)),
    ]
    await store.write(groups)
    loaded = snapshot(await store.load())
    assert loaded.consumer_groups == {g.group_id: g for g in groups}
    assert (loaded.groups, loaded.offsets) == ({}, {})


async def test_consumer_member_round_trip_keeps_none_empty_and_order(store: Store) -> None:
    big: TopicPartitionList = tuple((f"topic-{i:03d}", tuple(range(i % 50))) for i in range(300))
    members = [
        # every nullable None, every list empty
        consumer_member(
            "cg", "nulls", assigned=(), target=(), subscribed_topic_names=(), server_assignor=None, state=0
        ),
        # empty strings are not None
        consumer_member(
            "cg",
            "empties",
            instance_id="",
            rack_id="",
            client_id="",
            client_host="",
            subscribed_topic_regex="",
            server_assignor="",
            assigned=(("", ()),),
            pending_revocation=(("t", ()),),
            target=(),
        ),
        consumer_member(
            "cg",
            "ünïcødé-☃-\U0001f600",
            instance_id="static-☃",
            rack_id="rack-ä",
            client_id="clïent",
            client_host="/::1",
            subscribed_topic_names=("tøpic", "\U0001f600", "nul\x00in-a-topic-name", "a" * 249),
            subscribed_topic_regex="^tøp.*$",
            member_epoch=2**31 - 1,
            previous_member_epoch=-(2**31),
            rebalance_timeout_ms=2**31 - 1,
            state=2,
            assigned=(("tøpic", (0, 2**31 - 1)), ("\U0001f600", (5,))),
            pending_revocation=(("tøpic", (1,)),),
            target=(("nul\x00in-a-topic-name", (3, 2, 1)),),  # order kept as given
        ),
        consumer_member(
            "cg",
            "big",
            subscribed_topic_names=tuple(name for name, _ in big),
            member_epoch=-1,  # a leaving member
            state=1,
            assigned=big,
            pending_revocation=big[:100],
            target=big[::-1],
        ),
        consumer_member("other-group", "nulls"),  # same member id, other group
        # a classic member inside a consumer group (online migration)
        consumer_member(
            "cg",
            "classic",
            classic_session_timeout_ms=2**31 - 1,
            classic_protocols=(("cooperative-sticky", b"\x00\x01meta"), ("range", b""), ("", b"\x00")),
        ),
    ]
    await store.write(members)
    loaded = snapshot(await store.load()).consumer_members
    assert loaded == {(m.group_id, m.member_id): m for m in members}
    nulls = loaded[("cg", "nulls")]
    assert (nulls.instance_id, nulls.rack_id, nulls.subscribed_topic_regex, nulls.server_assignor) == (
        None,
        None,
        None,
        None,
    )
    empties = loaded[("cg", "empties")]
    assert (empties.instance_id, empties.rack_id, empties.subscribed_topic_regex) == ("", "", "")
    big_member = loaded[("cg", "big")]
    assert type(big_member.assigned) is tuple
    assert type(big_member.assigned[1]) is tuple
    assert type(big_member.assigned[1][1]) is tuple
    assert type(big_member.subscribed_topic_names) is tuple
    assert sum(len(p) for _, p in big_member.target) == sum(i % 50 for i in range(300))


async def test_many_consumer_members(store: Store) -> None:
    members = [
        consumer_member(f"cg-{i % 20}", f"member-{i:05d}", assigned=(("t", (i,)),), member_epoch=i)
        for i in range(5000)
    ]
    await store.write([*(consumer_group(f"cg-{g}") for g in range(20)), *members])
    snap = snapshot(await store.load())
    assert len(snap.consumer_groups) == 20
    assert snap.consumer_members == {(m.group_id, m.member_id): m for m in members}
    # Wipe half the groups and rewrite a member of one of them, in one batch.
    batch: list[Record] = [ConsumerGroupTombstone(f"cg-{g}") for g in range(10)]
    batch.append(consumer_member("cg-0", "member-new"))
    await store.write(batch)
    snap = snapshot(await store.load())
    assert set(snap.consumer_groups) == {f"cg-{g}" for g in range(10, 20)}
    assert len(snap.consumer_members) == 2501
    assert ("cg-0", "member-new") in snap.consumer_members
    assert not any(g == "cg-0" and m != "member-new" for g, m in snap.consumer_members)


async def test_consumer_upserts_overwrite(store: Store) -> None:
    await store.write(
        [
            consumer_group(group_epoch=1),
            consumer_member(
                member_epoch=1,
                instance_id="i",
                rack_id="r",
                subscribed_topic_regex="x.*",
                assigned=(("t", (0, 1, 2)),),
                pending_revocation=(("u", (0,)),),
            ),
        ]
    )
    g = consumer_group(group_epoch=2, assignment_epoch=2, state_ms=5)
    m = consumer_member(member_epoch=2, state=1, assigned=(), target=(("t", (0,)),), server_assignor=None)
    await store.write([g, m])
    snap = snapshot(await store.load())
    assert list(snap.consumer_groups.values()) == [g]
    assert list(snap.consumer_members.values()) == [m]


async def test_consumer_member_tombstone_deletes_only_its_key(store: Store) -> None:
    await store.write(
        [
            consumer_group("a"),
            consumer_group("b"),
            consumer_member("a", "m1"),
            consumer_member("a", "m2"),
            consumer_member("b", "m1"),
        ]
    )
    await store.write([ConsumerMemberTombstone("a", "m1"), ConsumerMemberTombstone("nope", "m1")])
    snap = snapshot(await store.load())
    assert set(snap.consumer_members) == {("a", "m2"), ("b", "m1")}
    assert set(snap.consumer_groups) == {"a", "b"}  # no cascade upwards


async def test_consumer_group_tombstone_removes_the_group_and_all_its_members(store: Store) -> None:
    await store.write(
        [
            consumer_group("g"),
            *(consumer_member("g", f"m{i}") for i in range(5)),
            consumer_group("g2"),
            consumer_member("g2", "m0"),
            consumer_member("orphans", "m0"),  # members without a group row
            group("g"),  # a classic group of the same id is another table
            offset("g", "t", 0),
        ]
    )
    await store.write([ConsumerGroupTombstone("g"), ConsumerGroupTombstone("orphans")])
    snap = snapshot(await store.load())
    assert set(snap.consumer_groups) == {"g2"}
    assert set(snap.consumer_members) == {("g2", "m0")}
    assert set(snap.groups) == {"g"}
    assert set(snap.offsets) == {("g", "t", 0)}  # no cascade to offsets, like classic groups
    await store.write([ConsumerGroupTombstone("never-existed")])


async def test_consumer_group_tombstone_ordering_within_a_batch(store: Store) -> None:
    existing: list[Record] = [consumer_group(g) for g in "abcdefgh"]
    existing += [consumer_member(g, m, member_epoch=1) for g in "abcdefgh" for m in ("old", "kept")]
    await store.write(existing)
    batch: list[Record] = [
        # a: wipe, then a member -> only that member; no group row
        ConsumerGroupTombstone("a"),
        consumer_member("a", "kept", member_epoch=2),
        # b: member, then wipe -> nothing of b
        consumer_member("b", "new", member_epoch=2),
        ConsumerGroupTombstone("b"),
        # c: member, wipe, member again -> only the last one
        consumer_member("c", "new", member_epoch=2),
        ConsumerGroupTombstone("c"),
        consumer_member("c", "new", member_epoch=3),
        # d: wipe, then the group again -> group row, no members
        ConsumerGroupTombstone("d"),
        consumer_group("d", group_epoch=9),
        # e: group upserted, then wiped -> nothing
        consumer_group("e", group_epoch=9),
        ConsumerGroupTombstone("e"),
        # f: wipe, member tombstone, member -> the member
        ConsumerGroupTombstone("f"),
        ConsumerMemberTombstone("f", "x"),
        consumer_member("f", "x", member_epoch=2),
        # g: wipe twice with members between and after
        ConsumerGroupTombstone("g"),
        consumer_member("g", "one", member_epoch=2),
        ConsumerGroupTombstone("g"),
        consumer_member("g", "two", member_epoch=2),
        consumer_group("g", group_epoch=4),
        # h: untouched by the others' wipes; member upsert then member tombstone, and vice versa
        consumer_member("h", "gone", member_epoch=2),
        ConsumerMemberTombstone("h", "gone"),
        ConsumerMemberTombstone("h", "old"),
        consumer_member("h", "old", member_epoch=2),
    ]
    await store.write(batch)
    snap = snapshot(await store.load())
    assert {g: r.group_epoch for g, r in snap.consumer_groups.items()} == {"d": 9, "g": 4, "h": 1}
    assert {k: m.member_epoch for k, m in snap.consumer_members.items()} == {
        ("a", "kept"): 2,
        ("c", "new"): 3,
        ("f", "x"): 2,
        ("g", "two"): 2,
        ("h", "kept"): 1,
        ("h", "old"): 2,
    }


async def test_classic_and_consumer_groups_of_one_id_are_independent(store: Store) -> None:
    await store.write(
        [
            group("to-consumer", members=(member(),)),
            consumer_group("to-classic"),
            consumer_member("to-classic", "m"),
            group("both"),
            consumer_group("both"),
        ]
    )
    await store.write(
        [
            # classic -> consumer
            GroupTombstone("to-consumer"),
            consumer_group("to-consumer", group_epoch=2),
            consumer_member("to-consumer", "m", member_epoch=2),
            # consumer -> classic
            ConsumerGroupTombstone("to-classic"),
            group("to-classic", generation_id=2),
            # a tombstone of one kind after a record of the other kind
            consumer_group("both", group_epoch=3),
            GroupTombstone("both"),
        ]
    )
    snap = snapshot(await store.load())
    assert {g: r.generation_id for g, r in snap.groups.items()} == {"to-classic": 2}
    assert {g: r.group_epoch for g, r in snap.consumer_groups.items()} == {"to-consumer": 2, "both": 3}
    assert set(snap.consumer_members) == {("to-consumer", "m")}


@pytest.mark.parametrize(
    "poison",
    [
        pytest.param(consumer_member("p", "m", member_epoch=2**31), id="member-epoch-beyond-int32"),
        pytest.param(
            consumer_member("p", "m", previous_member_epoch=-(2**31) - 1), id="prev-epoch-below-int32"
        ),
        pytest.param(consumer_member("p", "m", rebalance_timeout_ms=2**31), id="timeout-beyond-int32"),
        pytest.param(consumer_member("p", "m", state=2**31), id="state-beyond-int32"),
        pytest.param(consumer_member("p", "m", assigned=(("t", (0, -1)),)), id="negative-partition"),
        pytest.param(consumer_member("p", "m", target=(("t", (2**31,)),)), id="partition-beyond-int32"),
        pytest.param(consumer_member("p", "m", subscribed_topic_names=(1,)), id="topic-name-not-a-str"),
        pytest.param(consumer_group("p", group_epoch=2**31), id="group-epoch-beyond-int32"),
        pytest.param(consumer_group("p", assignment_epoch=-(2**31) - 1), id="assignment-epoch-below-int32"),
        pytest.param(consumer_group("p", state_ms=2**63), id="state-ms-beyond-int64"),
        pytest.param(offset("g", "t", -1, 5), id="classic-offset"),
    ],
)
async def test_a_failing_batch_leaves_no_consumer_change(store: Store, poison: Record) -> None:
    before: list[Record] = [
        consumer_group("a"),
        consumer_group("b"),
        *(consumer_member("a", f"m{i}") for i in range(3)),
        consumer_member("b", "m0"),
        offset("g", "t", 0),
    ]
    await store.write(before)
    expected = snapshot(await store.load())
    batch: list[Record] = [
        ConsumerGroupTombstone("a"),
        ConsumerMemberTombstone("b", "m0"),
        consumer_member("a", "m9", member_epoch=5),
        *(consumer_member("new", f"m{i}") for i in range(50)),
        consumer_group("b", group_epoch=5),
        consumer_group("new"),
        OffsetTombstone("g", "t", 0),
        poison,
        *(consumer_member("new2", f"m{i}") for i in range(50)),
    ]
    with pytest.raises(StoreError):
        await store.write(batch)
    assert snapshot(await store.load()) == expected
    await store.write([ConsumerGroupTombstone("a")])  # still usable afterwards
    assert set(snapshot(await store.load()).consumer_groups) == {"b"}


async def test_consumer_groups_survive_close_and_reopen(store_factory: StoreFactory) -> None:
    first = await store_factory.opened()
    g = consumer_group("cg", group_epoch=3, assignment_epoch=3)
    members = [consumer_member("cg", f"m{i}", instance_id=f"i{i}", member_epoch=3) for i in range(3)]
    await first.write([g, *members, offset("cg", "t", 0), group("classic")])
    await first.write([ConsumerMemberTombstone("cg", "m1")])
    await first.close()
    second = await store_factory.opened()
    snap = snapshot(await second.load())
    assert snap.consumer_groups == {"cg": g}
    assert snap.consumer_members == {("cg", "m0"): members[0], ("cg", "m2"): members[2]}
    assert set(snap.groups) == {"classic"}
    assert set(snap.offsets) == {("cg", "t", 0)}


async def test_random_consumer_batches_match_the_reference_model(store: Store) -> None:
    rng = random.Random(20250101)
    model = Snapshot({}, {}, {})
    for _ in range(40):
        batch: list[Record] = []
        for _ in range(rng.randint(1, 30)):
            g, m = rng.choice("abc"), rng.choice("xyz")
            kind = rng.randrange(7)
            if kind == 0:
                batch.append(consumer_group(g, group_epoch=rng.randrange(100)))
            elif kind == 1:
                batch.append(ConsumerGroupTombstone(g))
            elif kind in (2, 3):
                parts = tuple(sorted(rng.sample(range(8), rng.randrange(4))))
                batch.append(consumer_member(g, m, member_epoch=rng.randrange(100), assigned=(("t", parts),)))
            elif kind == 4:
                batch.append(ConsumerMemberTombstone(g, m))
            elif kind == 5:
                batch.append(group(g, generation_id=rng.randrange(10)))
            else:
                batch.append(GroupTombstone(g))
        apply_model(model, batch)
        await store.write(batch)
    assert snapshot(await store.load()) == model


async def _schema_versions(factory: StoreFactory) -> list[int]:
    if factory.backend == "sqlite":
        conn = sqlite3.connect(factory.location)
        try:
            return [v for (v,) in conn.execute("SELECT version FROM schema_version ORDER BY version")]
        finally:
            conn.close()
    pg = await asyncpg.connect(factory.location)
    try:
        return [r[0] for r in await pg.fetch("SELECT version FROM schema_version ORDER BY version")]
    finally:
        await pg.close()


@pytest.mark.parametrize(
    "store_factory", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_upgrade_from_schema_version_4(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "storage.sqlite" if store_factory.backend == "sqlite" else "storage.postgres"
    current = load_migrations("sqlite" if store_factory.backend == "sqlite" else "postgres")
    assert [m.version for m in current][:5] == [1, 2, 3, 4, 5]
    classic: list[Record] = [
        topic("t"),
        group("g", members=(member(),)),
        offset("g", "t", 0, 42),
        UserCredentialRecord("alice", "SCRAM-SHA-256", b"salt", b"k" * 32, b"s" * 32, 4096),
        AclRecord(3, "g", 3, "User:alice", "*", 3, 3),
    ]
    with monkeypatch.context() as patch:
        patch.setattr(f"{module}.load_migrations", lambda dialect: current[:4])
        old = await store_factory.opened()
        await old.write(classic)  # the version 4 code path never touches consumer tables
        await old.close()
    assert await _schema_versions(store_factory) == [1, 2, 3, 4]

    upgraded = await store_factory.opened()
    assert await _schema_versions(store_factory) == [m.version for m in current]
    state = await upgraded.load()
    assert (state.consumer_groups, state.consumer_members) == ([], [])
    assert snapshot(state) == Snapshot(
        topics={"t": classic[0]},  # type: ignore[dict-item]
        groups={"g": classic[1]},  # type: ignore[dict-item]
        offsets={("g", "t", 0): classic[2]},  # type: ignore[dict-item]
    )
    assert state.credentials == [classic[3]]
    assert state.acls == [classic[4]]
    records: list[Record] = [consumer_group("g"), consumer_member("g", "m")]
    await upgraded.write(records)
    snap = snapshot(await upgraded.load())
    assert list(snap.consumer_groups.values()) == [records[0]]
    assert list(snap.consumer_members.values()) == [records[1]]
