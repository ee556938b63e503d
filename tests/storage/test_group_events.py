"""The group_events table on every backend: append, load each group's newest, prune by age and
row count, survive a reopen; client strings with U+0000 and non-ASCII text round-trip."""

from __future__ import annotations

from typing import Any

import pytest

from storage.records import GroupEventRecord
from tests.storage.conftest import StoreFactory


def event(
    group: str, seq: int, time_ms: int, member: str | None = "m-1", message: str = "joined"
) -> GroupEventRecord:
    return GroupEventRecord(
        group,
        seq,
        time_ms,
        "member_joined",
        "classic",
        "PreparingRebalance",
        3,
        member,
        message,
        '{"client_id": "c"}',
    )


@pytest.mark.asyncio
async def test_events_round_trip_and_survive_a_reopen(store_factory: StoreFactory) -> None:
    store: Any = await store_factory.opened()
    written = [
        event("g1", 1, 1000),
        event("g2", 2, 1001, member=None, message="rebalance \u00e9\u0000 started"),
        event("g1", 3, 1002),
    ]
    await store.append_events(written[:2])
    await store.append_events(written[2:])
    await store.append_events([])
    assert await store.load_events(per_group=10) == written
    await store.close()
    reopened: Any = await store_factory.opened()
    assert await reopened.load_events(per_group=10) == written


@pytest.mark.asyncio
async def test_load_keeps_each_groups_newest_in_order(store_factory: StoreFactory) -> None:
    store: Any = await store_factory.opened()
    await store.append_events([event(f"g{i % 2}", i, 1000 + i) for i in range(10)])
    loaded = await store.load_events(per_group=3)
    assert [(e.group_id, e.seq) for e in loaded] == [
        ("g0", 4), ("g1", 5), ("g0", 6), ("g1", 7), ("g0", 8), ("g1", 9),
    ]  # fmt: skip
    assert [e.seq for e in await store.load_events(per_group=10, since_ms=1007)] == [7, 8, 9]


@pytest.mark.asyncio
async def test_prune_by_age_then_by_row_count(store_factory: StoreFactory) -> None:
    store: Any = await store_factory.opened()
    await store.append_events([event("g", i, 1000 + i) for i in range(10)])
    await store.prune_events(before_ms=1003, keep_rows=100)
    assert [e.seq for e in await store.load_events(per_group=100)] == list(range(3, 10))
    await store.prune_events(before_ms=0, keep_rows=4)
    assert [e.seq for e in await store.load_events(per_group=100)] == [6, 7, 8, 9]
    await store.prune_events(before_ms=0, keep_rows=0)
    assert await store.load_events(per_group=100) == []
