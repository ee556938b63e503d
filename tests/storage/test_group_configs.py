"""Group config records against every backend: upsert, tombstone, order in a batch, reopen,
atomicity, and a value with characters SQL must not interpret."""

from __future__ import annotations

import pytest

from storage.base import Store, StoreError
from storage.records import GroupConfigRecord, GroupConfigTombstone
from tests.storage.conftest import StoreFactory
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio

SESSION, INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def _sorted(records: list[GroupConfigRecord]) -> list[GroupConfigRecord]:
    return sorted(records, key=lambda r: r.key)


async def test_group_configs_round_trip_replace_and_delete(store: Store) -> None:
    a, b = GroupConfigRecord("g", SESSION, "50000"), GroupConfigRecord("g", INTERVAL, "6000")
    other = GroupConfigRecord("it's; DROP TABLE group_configs; --", SESSION, "46000")
    await store.write([a, b, other])
    assert _sorted((await store.load()).group_configs) == _sorted([a, b, other])
    replaced = GroupConfigRecord("g", SESSION, "55000")
    await store.write([replaced, GroupConfigTombstone("g", INTERVAL), GroupConfigTombstone("g", "missing")])
    assert _sorted((await store.load()).group_configs) == _sorted([replaced, other])
    await store.write([GroupConfigTombstone("g", SESSION), a])  # in a batch the last one wins
    assert _sorted((await store.load()).group_configs) == _sorted([a, other])


async def test_group_configs_survive_reopen(store_factory: StoreFactory) -> None:
    first = await store_factory.opened()
    await first.write([GroupConfigRecord("g", SESSION, "50000")])
    await first.close()
    second = await store_factory.opened()
    assert (await second.load()).group_configs == [GroupConfigRecord("g", SESSION, "50000")]


async def test_a_failing_batch_stores_no_group_config(store: Store) -> None:
    with pytest.raises(StoreError):
        await store.write([GroupConfigRecord("g", SESSION, "50000"), offset(partition=-1)])
    assert (await store.load()).group_configs == []
