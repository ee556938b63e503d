"""Share group rows in every backend (memory, sqlite, postgres): round trips, upserts, the group
tombstone removing its members, reopening."""

from __future__ import annotations

import pytest

from storage.base import Store
from storage.records import (
    Record,
    ShareGroupRecord,
    ShareGroupTombstone,
    ShareMemberRecord,
    ShareMemberTombstone,
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
            member_id="c", member_epoch=2**31 - 1, previous_member_epoch=-1, assigned=(("u", (5,)),)
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
