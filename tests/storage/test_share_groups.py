"""Share group rows in every backend (memory, sqlite, postgres): round trips, upserts, the group
tombstone removing its members and share-partition states, reopening."""

from __future__ import annotations

import pytest

from storage.base import Store
from storage.records import (
    Record,
    ShareGroupRecord,
    ShareGroupTombstone,
    ShareMemberRecord,
    ShareMemberTombstone,
    SharePartitionStateRecord,
    SharePartitionStateTombstone,
)
from tests.storage.conftest import StoreFactory

pytestmark = pytest.mark.asyncio


def share_member(group_id: str = "sg", member_id: str = "m", **fields: object) -> ShareMemberRecord:
    values: dict[str, object] = {
        "rack_id": None,
        "client_id": "client",
        "client_host": "/10.0.0.1",
        "subscribed_topic_names": ("t",),
        "member_epoch": 3,
        "previous_member_epoch": 2,
        "assigned": (("t", (0, 1)),),
    }
    values.update(fields)
    return ShareMemberRecord(group_id, member_id, **values)  # type: ignore[arg-type]


async def test_share_group_round_trip(store: Store) -> None:
    members = [
        share_member(member_id="a"),
        share_member(member_id="b", rack_id="rack-1", subscribed_topic_names=("t", "ünï"), assigned=()),
        share_member(
            member_id="c",
            member_epoch=2**31 - 1,
            previous_member_epoch=-1,
            assigned=(("u", (5,)),),
            target=(("u", (5, 6)), ("v", (0,))),
        ),
    ]
    await store.write([ShareGroupRecord("sg", 7, 6), *members])
    state = await store.load()
    assert state.share_groups == [ShareGroupRecord("sg", 7, 6)]
    assert sorted(state.share_members, key=lambda m: m.member_id) == members
    assert [r.group_id for r in state.group_rows() if isinstance(r, ShareGroupRecord)] == ["sg"]


async def test_share_upserts_and_member_tombstone(store: Store) -> None:
    await store.write(
        [ShareGroupRecord("sg", 1, 1), share_member(member_id="a"), share_member(member_id="b")]
    )
    await store.write([ShareGroupRecord("sg", 2, 2), share_member(member_id="a", member_epoch=9)])
    await store.write([ShareMemberTombstone("sg", "b")])
    state = await store.load()
    assert state.share_groups == [ShareGroupRecord("sg", 2, 2)]
    assert state.share_members == [share_member(member_id="a", member_epoch=9)]


async def test_share_group_tombstone_removes_its_members_only(store: Store) -> None:
    batch: list[Record] = [
        ShareGroupRecord("sg", 1, 1),
        share_member("sg", "a"),
        ShareGroupRecord("other", 1, 1),
        share_member("other", "a"),
    ]
    await store.write(batch)
    await store.write([ShareGroupTombstone("sg")])
    state = await store.load()
    assert state.share_groups == [ShareGroupRecord("other", 1, 1)]
    assert state.share_members == [share_member("other", "a")]


async def test_share_groups_survive_close_and_reopen(store_factory: StoreFactory) -> None:
    store = await store_factory.opened()
    await store.write([ShareGroupRecord("sg", 4, 4), share_member()])
    await store.close()
    reopened = await store_factory.opened()
    state = await reopened.load()
    assert state.share_groups == [ShareGroupRecord("sg", 4, 4)]
    assert state.share_members == [share_member()]


async def test_share_partition_state_round_trip(store: Store) -> None:
    states = [
        SharePartitionStateRecord("sg", "t", 0, 0, 0, ()),
        SharePartitionStateRecord(
            "sg", "t", 1, 2**63 - 1, 2**31 - 1, ((5, 9, 0, 2), (10, 10, 2, 1), (11, 20, 4, 5))
        ),
        SharePartitionStateRecord("sg", "ünï", 2, 7, 3, ((7, 7, 0, 65535),)),
    ]
    await store.write([ShareGroupRecord("sg", 1, 1), *states])
    loaded = await store.load()
    assert sorted(loaded.share_partitions, key=lambda s: s.key) == sorted(states, key=lambda s: s.key)
    # An upsert replaces the row; a tombstone deletes only its key.
    await store.write(
        [
            SharePartitionStateRecord("sg", "t", 0, 3, 1, ((3, 4, 0, 1),)),
            SharePartitionStateTombstone("sg", "ünï", 2),
        ]
    )
    loaded = await store.load()
    assert sorted(loaded.share_partitions, key=lambda s: s.key) == [
        SharePartitionStateRecord("sg", "t", 0, 3, 1, ((3, 4, 0, 1),)),
        states[1],
    ]


async def test_share_group_tombstone_removes_its_partition_states(store: Store) -> None:
    await store.write(
        [
            ShareGroupRecord("sg", 1, 1),
            SharePartitionStateRecord("sg", "t", 0, 1, 0, ()),
            ShareGroupRecord("other", 1, 1),
            SharePartitionStateRecord("other", "t", 0, 2, 0, ()),
        ]
    )
    await store.write([ShareGroupTombstone("sg")])
    loaded = await store.load()
    assert loaded.share_partitions == [SharePartitionStateRecord("other", "t", 0, 2, 0, ())]
