"""Records, reload and unload (docs/groups.md#loading; transitions T1 on load, T9 in docs/groups.md#classic-transitions)."""

from __future__ import annotations

import pytest

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from storage.records import GroupMetadataRecord, MemberRecord, OffsetCommitRecord
from tests.coordinator.harness import FakeStore, Harness, classic_snapshots, subscription

EMPTY, PR, CR, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)
NO_DELAY = BrokerGroupSettings(group_initial_rebalance_delay_ms=0)


def test_stable_group_survives_a_failover(h0: Harness) -> None:
    """A stable group is reloaded after a fail-over: its members keep heartbeating with the same generation."""
    (a, b), generation = h0.stable_group("g", 2, instance_ids=[None, "i-b"], session_timeout_ms=10_000)
    h0.commit("g", {("t", 0): 5}, member_id=a, generation=generation)
    h0.advance(8_000)
    other = h0.restart()
    group = other.group()
    assert (group.state, group.generation_id, group.leader_id, group.protocol_name) == (
        STABLE,
        generation,
        a,
        "range",
    )
    assert group.static_members == {"i-b": b}
    assert group.subscribed_topics == frozenset({"t"})
    assert {m: x.assignment for m, x in group.members.items()} == {
        a: f"assignment-{a}".encode(),
        b: f"assignment-{b}".encode(),
    }
    # Sessions restart with a full timeout at load time, not from the old heartbeats.
    other.advance(9_000)
    assert other.heartbeat("g", a, generation).error == 0
    assert other.heartbeat("g", b, generation, instance_id="i-b").error == 0
    assert other.sync("g", b, generation).wire.assignment == f"assignment-{b}".encode()
    assert other.fetch("g", {"t": [0]}).wire.topics[0].partitions[0].committed_offset == 5
    other.advance(9_999)
    assert other.heartbeat("g", a, generation).error == 0
    other.advance(1)  # b stopped: it expires one session after its last heartbeat
    assert b not in other.group().members and other.group().state is PR


def test_group_mid_rebalance_comes_back_at_its_last_persisted_generation(h0: Harness) -> None:
    """PreparingRebalance / CompletingRebalance are not persisted: the group comes back at its last stored generation."""
    (a, b), generation = h0.stable_group("g", 2)
    c = h0.join("g", version=3)  # PreparingRebalance
    h0.join("g", a, version=5)
    h0.join("g", b, version=5)  # generation + 1, CompletingRebalance
    assert h0.group().state is CR and h0.group().generation_id == generation + 1
    other = h0.restart()
    group = other.group()
    assert (group.state, group.generation_id, set(group.members)) == (STABLE, generation, {a, b})
    assert other.heartbeat("g", a, generation + 1).error == ErrorCode.ILLEGAL_GENERATION
    assert other.sync("g", a, generation + 1).error == ErrorCode.ILLEGAL_GENERATION
    assert other.heartbeat("g", "client-3", generation + 1).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.answered
    rejoin = other.join("g", a, version=5)  # the leader rejoins: a normal rebalance follows
    assert not rejoin.answered and other.group().state is PR


def test_empty_group_reloads_empty_with_its_state_time(h0: Harness) -> None:
    (a,), _ = h0.stable_group("g", 1)
    h0.commit("g", {("t", 0): 1}, member_id=a, generation=1)
    h0.leave("g", a)
    emptied_at = h0.group().state_ms
    h0.advance(60_000)
    other = h0.restart()
    group = other.group()
    assert (group.state, group.generation_id, group.state_ms, group.protocol_type) == (
        EMPTY,
        2,
        emptied_at,
        "consumer",
    )
    assert group.subscribed_topics == frozenset()
    assert other.heartbeat("g", a, 1).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_offsets_without_a_group_record_make_simple_groups() -> None:
    store = FakeStore()
    store.write([OffsetCommitRecord("simple", "t", 0, 9, 3, "meta", 1, None)])
    h = Harness(store=store)
    group = h.group("simple")
    assert (group.state, group.protocol_type, group.generation_id) == (EMPTY, None, 0)  # T1 by load
    partition = h.fetch("simple", {"t": [0]}, version=6).wire.topics[0].partitions[0]
    assert (partition.committed_offset, partition.committed_leader_epoch, partition.metadata) == (
        9,
        3,
        "meta",
    )


def test_group_over_capacity_rebalances_on_load(h0: Harness) -> None:
    members, generation = h0.stable_group("g", 3)
    other = h0.restart(BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_max_size=2))
    assert other.group().state is PR
    assert other.heartbeat("g", members[0], generation).error == ErrorCode.REBALANCE_IN_PROGRESS
    joins = [other.join("g", m, version=5) for m in members]
    assert joins[2].error == ErrorCode.GROUP_MAX_SIZE_REACHED  # the last rejoiner is evicted
    other.advance(60_000)
    assert [j.wire.generation_id for j in joins[:2]] == [generation + 1] * 2
    assert set(other.group().members) == set(members[:2])


def test_load_of_old_member_records_without_rebalance_timeout() -> None:
    store = FakeStore()
    member = MemberRecord("m", None, "c", "h", -1, 12_000, subscription(["t"]), b"A")
    store.write([GroupMetadataRecord("g", "consumer", 4, "range", "m", 5, (member,))])
    h = Harness(store=store)
    assert h.group().members["m"].rebalance_timeout_ms == 12_000
    assert h.group().members["m"].metadata("range") == subscription(["t"])


def test_load_needs_a_fresh_coordinator(h: Harness) -> None:
    with pytest.raises(RuntimeError):
        h.coordinator.load([], [], h.now_ms, h.wall_ms)


def test_replaying_the_records_rebuilds_the_persisted_state(h0: Harness) -> None:
    """Replay determinism: what the records describe is what a new coordinator loads."""
    (a, _b, _c), generation = h0.stable_group("g", 3, instance_ids=[None, "i-b", None])
    h0.commit("g", {("t", 0): 1, ("t", 1): 2}, member_id=a, generation=generation)
    h0.join("g", version=9, instance_id="i-b")  # static replacement: a new record
    h0.commit("simple", {("x", 0): 3}, leader_epoch=4)
    h0.stable_group("gone", 1)
    h0.leave("gone", h0.group("gone").leader_id or "")
    h0.delete_groups("gone")
    other = h0.restart()
    assert sorted(classic_snapshots(other.coordinator), key=lambda s: s.group_id) == sorted(
        classic_snapshots(h0.coordinator), key=lambda s: s.group_id
    )
    for group_id in ("g", "simple"):
        mine, theirs = h0.group(group_id), other.group(group_id)
        assert {m: x.assignment for m, x in mine.members.items()} == {
            m: x.assignment for m, x in theirs.members.items()
        }
        assert mine.static_members == theirs.static_members
        assert mine.subscribed_topics == theirs.subscribed_topics
    assert other.coordinator.offset_count() == h0.coordinator.offset_count() == 3


def test_unload_answers_every_parked_request_and_forgets_everything(h0: Harness) -> None:
    """T9: no parked reply survives an unload."""
    joins = [h0.join("g", version=3, rebalance_timeout_ms=60_000) for _ in range(2)]
    h0.advance(0)
    _a, b = (j.wire.member_id for j in joins)
    parked_sync = h0.sync("g", b, 1)
    h0.join("other", version=3)  # parked in the initial delayed join
    parked_join = h0.join("other", version=3)
    group = h0.group("g")
    result = h0.coordinator.unload(h0.now_ms)
    assert not result.records
    h0.apply(result)
    assert parked_sync.error == ErrorCode.NOT_COORDINATOR
    assert parked_join.error == ErrorCode.NOT_COORDINATOR
    assert parked_join.wire.member_id == "client-4"
    assert group.state is DEAD
    assert h0.coordinator.group_count() == 0 and h0.coordinator.next_deadline() is None


def test_accessors(h0: Harness) -> None:
    h0.stable_group("a", 2)
    h0.commit("b", {("t", 0): 1, ("t", 1): 1})
    assert h0.coordinator.group_count_by_state() == {"Stable": 1, "Empty": 1}
    assert h0.coordinator.member_count() == 2
    assert h0.coordinator.offset_count() == 2
    snapshot = {s.group_id: s for s in classic_snapshots(h0.coordinator)}
    assert snapshot["a"].state == "Stable" and len(snapshot["a"].member_ids) == 2
    assert snapshot["b"].protocol_type is None


def test_coordinator_without_load_arms_the_retention_timer_on_first_use() -> None:
    coordinator = GroupCoordinator(BrokerGroupSettings())
    assert coordinator.next_deadline() is None
    h = Harness(load=False)
    h.commit("g", {("t", 0): 1})
    assert h.coordinator.next_deadline() == h.now_ms + 600_000


def test_offset_rows_of_groups_interleaved_load_like_rows_in_key_order() -> None:
    """Loading takes a group's rows as a run; rows out of order only make more runs."""
    rows = [
        OffsetCommitRecord("a", "t", 0, 1, -1, "", 1, None),
        OffsetCommitRecord("b", "t", 0, 2, -1, "", 1, None),
        OffsetCommitRecord("a", "u", 1, 3, -1, "", 1, None),
        OffsetCommitRecord("a", "t", 0, 4, -1, "", 2, None),  # the same key again: the last one wins
        OffsetCommitRecord("b", "t", 1, 5, -1, "", 1, None),
    ]
    loaded = GroupCoordinator(BrokerGroupSettings())
    loaded.load([], rows, 0, 0)
    assert {
        g: sorted((r.topic, r.partition, r.offset) for r in loaded.committed_offsets(g)) for g in "ab"
    } == {
        "a": [("t", 0, 4), ("u", 1, 3)],
        "b": [("t", 0, 2), ("t", 1, 5)],
    }
    assert loaded.group("a") is not None and loaded.group("b") is not None
