"""Loading by group (docs/performance.md#loading-in-the-background), on every backend: the
unsharded state alone, every group id, and the rows of exactly the groups asked for."""

from __future__ import annotations

import pytest

from storage.base import GroupLoadingStore
from storage.records import AclRecord, GroupConfigRecord
from tests.storage.conftest import StoreFactory
from tests.storage.helpers import consumer_group, consumer_member, group, member, offset, snapshot, topic

pytestmark = pytest.mark.asyncio


async def test_unsharded_state_group_ids_and_the_rows_of_some_groups(store_factory: StoreFactory) -> None:
    store = await store_factory.opened()
    assert isinstance(store, GroupLoadingStore)
    acl = AclRecord(2, "t", 3, "User:alice", "*", 3, 3)
    await store.write(
        [
            topic("t"),
            acl,
            offset("alpha", partition=0),
            offset("alpha", partition=1),
            offset("bravo"),
            group("cup", members=(member("m-1"),)),
            consumer_group("arc"),
            consumer_member("arc", "cm-1"),
            consumer_member("arc", "cm-2"),
            consumer_group("bee"),
            GroupConfigRecord("ace", "consumer.session.timeout.ms", "50000"),
        ]
    )
    unsharded = await store.load_unsharded()
    assert [t.name for t in unsharded.topics] == ["t"] and unsharded.acls == [acl]
    assert not (unsharded.groups or unsharded.offsets or unsharded.consumer_groups or unsharded.group_configs)
    assert sorted(await store.group_ids()) == ["ace", "alpha", "arc", "bee", "bravo", "cup"]

    some = await store.load_groups(["alpha", "arc", "ace", "cup", "nobody"])
    assert sorted((r.group_id, r.partition) for r in some.offsets) == [("alpha", 0), ("alpha", 1)]
    assert [r.group_id for r in some.groups] == ["cup"]
    assert [r.group_id for r in some.consumer_groups] == ["arc"]
    assert sorted(r.member_id for r in some.consumer_members) == ["cm-1", "cm-2"]
    assert [r.group_id for r in some.group_configs] == ["ace"]
    assert some.topics == [] and some.acls == []

    # Every group loaded group by group is the full load's group state.
    by_group = await store.load_groups(await store.group_ids())
    full = await store.load()
    got, want = snapshot(by_group), snapshot(full)
    assert (got.groups, got.offsets, got.consumer_groups, got.consumer_members, got.group_configs) == (
        want.groups,
        want.offsets,
        want.consumer_groups,
        want.consumer_members,
        want.group_configs,
    )
    assert await store.load_groups([]) == await store.load_groups(["nobody"])
