"""Offset retention, KIP-211, and the removal of empty groups (docs/groups.md#offsets-and-retention).

Weeks of simulated time: members heartbeat every 25 minutes against a 30-minute session.
"""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.classic.manager import ClassicGroupManager
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from storage.records import GroupMetadataRecord, GroupTombstone, OffsetCommitRecord, OffsetTombstone
from tests.coordinator.harness import WALL_START_MS, FakeStore, Harness, classic_group_of

MINUTE = 60_000
DAY = 24 * 60 * MINUTE
RETENTION = 7 * DAY
SWEEP = 10 * MINUTE
LONG_SESSION: dict[str, Any] = {"session_timeout_ms": 30 * MINUTE, "rebalance_timeout_ms": 60_000}


def keep_alive(h: Harness, group: str, members: list[str], generation: int, duration_ms: int) -> None:
    end = h.now_ms + duration_ms
    while h.now_ms + 25 * MINUTE <= end:
        h.advance(25 * MINUTE)
        for member in members:
            assert h.heartbeat(group, member, generation).error == 0
    h.advance(end - h.now_ms)
    for member in members:
        assert h.heartbeat(group, member, generation).error == 0


def offsets_of(h: Harness, group: str, topics: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    reply: Any = h.fetch(group, topics)
    return {(t.name, p.partition_index): p.committed_offset for t in reply.wire.topics for p in t.partitions}


@pytest.fixture
def h0() -> Harness:
    return Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))


def test_empty_group_offsets_expire_retention_after_the_group_became_empty(h0: Harness) -> None:
    members, generation = h0.stable_group("g", 1, **LONG_SESSION)
    h0.commit("g", {("t", 0): 10}, member_id=members[0], generation=generation)
    keep_alive(h0, "g", members, generation, 5 * DAY)
    h0.leave("g", members[0])
    emptied_at = h0.now_ms
    assert h0.group().state is GroupState.EMPTY
    h0.advance(3 * DAY)  # the offset is 8 days old, but the group has been Empty for 3 days only
    assert offsets_of(h0, "g", {"t": [0]}) == {("t", 0): 10}
    h0.advance(emptied_at + RETENTION - h0.now_ms - 1)
    assert offsets_of(h0, "g", {"t": [0]}) == {("t", 0): 10}
    h0.advance(SWEEP + 1)
    assert offsets_of(h0, "g", {"t": [0]}) == {("t", 0): -1}
    # No offsets left: the group is removed (T8) and its record tombstoned (it had generations).
    assert classic_group_of(h0.coordinator, "g") is None
    assert "g" not in h0.store.groups and ("g", "t", 0) not in h0.store.offsets
    assert GroupTombstone("g") in h0.store.records()


def test_stable_consumer_group_keeps_subscribed_topics_forever(h0: Harness) -> None:
    members, generation = h0.stable_group("g", 1, topics=("t",), **LONG_SESSION)
    h0.commit("g", {("t", 0): 1, ("old", 0): 2}, member_id=members[0], generation=generation)
    keep_alive(h0, "g", members, generation, RETENTION - MINUTE)
    assert offsets_of(h0, "g", {"t": [0], "old": [0]}) == {("t", 0): 1, ("old", 0): 2}
    keep_alive(h0, "g", members, generation, SWEEP + MINUTE)
    assert offsets_of(h0, "g", {"t": [0], "old": [0]}) == {("t", 0): 1, ("old", 0): -1}
    keep_alive(h0, "g", members, generation, 30 * DAY)
    assert offsets_of(h0, "g", {"t": [0]}) == {("t", 0): 1}
    assert h0.group().state is GroupState.STABLE


def test_simple_group_offsets_expire_after_their_commit_time(h: Harness) -> None:
    h.commit("simple", {("t", 0): 1})
    h.advance(DAY)
    h.commit("simple", {("t", 1): 2})
    h.advance(RETENTION - DAY + SWEEP)
    assert offsets_of(h, "simple", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): 2}
    h.advance(DAY)
    assert offsets_of(h, "simple", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): -1}
    assert classic_group_of(h.coordinator, "simple") is None
    assert GroupTombstone("simple") not in h.store.records()  # a simple group never wrote a record


def test_explicit_expire_timestamp_of_v2_to_v4_commits(h: Harness) -> None:
    h.commit("g", {("t", 0): 1}, version=2, retention_time_ms=3_600_000)
    h.commit("g", {("t", 1): 1}, version=2)
    h.advance(3_600_000 - 1)
    assert offsets_of(h, "g", {"t": [0]}) == {("t", 0): 1}
    h.advance(SWEEP + 1)
    assert offsets_of(h, "g", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): 1}


def test_non_consumer_protocol_groups_keep_offsets_while_active(h0: Harness) -> None:
    members, generation = h0.stable_group(
        "g", 1, protocol_type="connect", protocols=[("default", b"")], **LONG_SESSION
    )
    h0.commit("g", {("t", 0): 1}, member_id=members[0], generation=generation)
    keep_alive(h0, "g", members, generation, 3 * RETENTION)
    assert offsets_of(h0, "g", {"t": [0]}) == {("t", 0): 1}


def test_unknown_subscription_keeps_offsets(h0: Harness) -> None:
    members, generation = h0.stable_group("g", 1, protocols=[("range", b"garbage")], **LONG_SESSION)
    h0.commit("g", {("t", 0): 1}, member_id=members[0], generation=generation)
    keep_alive(h0, "g", members, generation, 2 * RETENTION)
    assert offsets_of(h0, "g", {"t": [0]}) == {("t", 0): 1}


def expired_offsets(h: Harness, group_id: str, wall_ms: int) -> list[OffsetTombstone]:
    """What the retention sweep would expire of a classic group's offsets at ``wall_ms``."""
    expiry = h.coordinator.kind(ClassicGroupManager).offset_expiry(group_id)
    return [] if expiry is None else h.coordinator._offsets.expired_offsets(group_id, expiry, wall_ms)


@pytest.mark.parametrize("state", [GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE])
def test_rebalancing_groups_expire_nothing(h0: Harness, state: GroupState) -> None:
    members, generation = h0.stable_group("g", 1, **LONG_SESSION)
    h0.commit("g", {("t", 0): 1}, member_id=members[0], generation=generation)
    group = h0.group()
    group.state = state  # observe the rule directly: a rebalance cannot last a week
    assert expired_offsets(h0, "g", h0.wall_ms + 10 * RETENTION) == []
    group.state = GroupState.STABLE
    group.subscribed_topics = frozenset()
    expired = expired_offsets(h0, "g", h0.wall_ms + 10 * RETENTION)
    assert [r.topic for r in expired] == ["t"]


def test_in_flight_commits_do_not_expire(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.advance(RETENTION - MINUTE)
    h.hold = True
    commit = h.commit("g", {("t", 0): 2})
    h.advance(2 * SWEEP)  # sweeps run while the commit is in flight
    h.flush()
    assert commit.wire.topics[0].partitions[0].error_code == 0
    assert offsets_of(h, "g", {"t": [0]}) == {("t", 0): 2}
    assert classic_group_of(h.coordinator, "g") is not None


def test_empty_group_without_offsets_is_removed_at_the_next_sweep(h0: Harness) -> None:
    members, _ = h0.stable_group("g", 1)
    h0.leave("g", members[0])
    assert h0.group().generation_id == 2
    h0.advance(SWEEP)
    assert classic_group_of(h0.coordinator, "g") is None
    assert "g" not in h0.store.groups


def test_group_created_by_a_failed_join_is_swept(h0: Harness) -> None:
    h0.join("g", version=3, protocol_type="")  # INCONSISTENT_GROUP_PROTOCOL, but the group exists
    assert h0.group().state is GroupState.EMPTY
    h0.advance(SWEEP)
    assert classic_group_of(h0.coordinator, "g") is None
    assert h0.store.batches == []  # generation 0: nothing to tombstone


def test_sweep_write_failure_restores_offsets_and_groups(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.advance(RETENTION - 1)
    h.fail_code = ErrorCode.NOT_COORDINATOR
    h.advance(SWEEP)
    h.fail_code = None
    assert h.failed_batches and offsets_of(h, "g", {"t": [0]}) == {("t", 0): 1}
    assert h.group().state is GroupState.EMPTY
    h.advance(SWEEP)  # the next sweep tries again
    assert classic_group_of(h.coordinator, "g") is None and ("g", "t", 0) not in h.store.offsets


def test_old_records_without_a_state_timestamp_use_the_commit_time() -> None:
    store = FakeStore()
    committed_ms = WALL_START_MS - RETENTION + MINUTE
    store.write(
        [
            GroupMetadataRecord("g", "consumer", 3, None, None, -1, ()),
            OffsetCommitRecord("g", "t", 0, 5, -1, "", committed_ms, None),
        ]
    )
    h = Harness(store=store)
    group: ClassicGroup = h.group()
    assert group.state_ms is None
    h.advance(SWEEP)
    assert offsets_of(h, "g", {"t": [0]}) == {("t", 0): -1}


def test_sweep_interval_is_configurable() -> None:
    h = Harness(BrokerGroupSettings(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1_000))
    h.commit("g", {("t", 0): 1})
    h.advance(MINUTE + 1_000)
    assert classic_group_of(h.coordinator, "g") is None
