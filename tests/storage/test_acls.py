"""ACL records (issue 9) against every backend: insert (idempotent), delete, reopen, atomicity."""

from __future__ import annotations

import pytest

from storage.base import Store, StoreError
from storage.records import AclRecord, AclTombstone
from tests.storage.conftest import StoreFactory
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio


def acl(name: str = "g", principal: str = "User:alice", operation: int = 3, permission: int = 3) -> AclRecord:
    return AclRecord(3, name, 3, principal, "*", operation, permission)


def _sorted(acls: list[AclRecord]) -> list[AclRecord]:
    return sorted(acls, key=repr)


async def test_acls_round_trip_and_delete(store: Store) -> None:
    a, b, c = acl(), acl(operation=8), AclRecord(2, "t-", 4, "User:*", "127.0.0.1", 2, 2)
    await store.write([a, b, c, a])  # the same binding twice is stored once
    assert _sorted((await store.load()).acls) == _sorted([a, b, c])
    await store.write([AclTombstone(b), AclTombstone(acl("missing"))])
    assert _sorted((await store.load()).acls) == _sorted([a, c])
    await store.write([AclTombstone(a), a])  # order within a batch: last one wins
    assert a in (await store.load()).acls


async def test_acls_survive_reopen(store_factory: StoreFactory) -> None:
    first = await store_factory.opened()
    await first.write([acl()])
    await first.close()
    second = await store_factory.opened()
    assert (await second.load()).acls == [acl()]


async def test_a_failing_batch_stores_no_acl(store: Store) -> None:
    with pytest.raises(StoreError):
        await store.write([acl(), offset(partition=-1)])
    assert (await store.load()).acls == []
