"""One shard's groups leave a node and join another (docs/multinode.md): load_more brings
Stable groups back at their generation, unload_groups answers parked requests of those groups
only and forgets their offsets and timers."""

from __future__ import annotations

import pytest

from coordinator.core.consumer.manager import ConsumerGroupManager
from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from storage.records import ConsumerGroupRecord, GroupConfigRecord, GroupMetadataRecord
from tests.coordinator.harness import Harness, classic_group_of


def _load_groups(target: Harness, source: Harness, group_ids: set[str]) -> None:
    store = source.store
    target.coordinator.load_more(
        [
            r
            for rows in (store.groups, store.consumer_groups, store.consumer_members)
            for r in rows.values()
            if r.group_id in group_ids
        ],
        [r for r in store.offsets.values() if r.group_id in group_ids],
        target.now_ms,
        target.wall_ms,
        [r for r in store.group_configs.values() if r.group_id in group_ids],
    )


def test_a_stable_group_moves_between_nodes_without_a_rebalance(h0: Harness) -> None:
    (a, b), generation = h0.stable_group("moving", 2, session_timeout_ms=10_000)
    h0.commit("moving", {("t", 0): 5}, member_id=a, generation=generation)
    h0.stable_group("staying", 1)
    # The old node lets go of the shard holding "moving" ...
    h0.apply(h0.coordinator.unload_groups({"moving"}, h0.now_ms))
    assert (
        classic_group_of(h0.coordinator, "moving") is None and h0.group("staying").state is GroupState.STABLE
    )
    assert h0.coordinator.held_group_ids() == {"staying"}
    h0.advance(20_000)  # the moved group's session timers are gone with it: nothing fires
    assert classic_group_of(h0.coordinator, "moving") is None
    # ... and another node, already serving other shards, loads it.
    other = h0.restart()  # loads everything; give "moving" back to the new node alone
    other.apply(other.coordinator.unload_groups({"moving"}, other.now_ms))
    _load_groups(other, h0, {"moving"})
    group = other.group("moving")
    assert (group.state, group.generation_id, set(group.members)) == (GroupState.STABLE, generation, {a, b})
    assert other.heartbeat("moving", a, generation).error == ErrorCode.NONE
    assert other.fetch("moving", {"t": [0]}).wire.topics[0].partitions[0].committed_offset == 5
    other.advance(9_999)
    assert other.heartbeat("moving", a, generation).error == ErrorCode.NONE
    other.advance(1)  # b's session restarted at the load: it expires one session later
    assert b not in other.group("moving").members


def test_unloading_a_shard_answers_its_parked_requests_only(h0: Harness) -> None:
    moving = h0.join("moving", version=3)  # parked in the initial delayed join
    staying = h0.join("staying", version=3)
    result = h0.coordinator.unload_groups({"moving"}, h0.now_ms)
    h0.apply(result)
    assert moving.error == ErrorCode.NOT_COORDINATOR
    assert not staying.answered
    h0.advance(10_000)
    assert staying.answered and staying.error == ErrorCode.NONE


def test_loading_a_group_already_held_is_refused(h0: Harness) -> None:
    h0.commit("g", {("t", 0): 1})
    with pytest.raises(RuntimeError, match="already held"):
        _load_groups(h0, h0, {"g"})


def test_a_shard_taken_over_is_loaded_as_a_restart_loads_it(h0: Harness) -> None:
    """Group configs come with the shard, and a group stored as both types (a conversion whose
    write failed) keeps the type with the later state time, as on restart."""
    store = h0.store
    store.write([
        GroupConfigRecord("tuned", "consumer.session.timeout.ms", "50000"),
        GroupMetadataRecord("mixed", "consumer", 3, "range", None, 2_000, ()),  # converted back last
        ConsumerGroupRecord("mixed", 4, 4, 1_000),
        GroupMetadataRecord("older", "consumer", 3, "range", None, 1_000, ()),
        ConsumerGroupRecord("older", 4, 4, 2_000),  # converted to a consumer group last
    ])  # fmt: skip
    moved = {"tuned", "mixed", "older"}
    restarted = h0.restart()
    taker = h0.restart()
    taker.apply(taker.coordinator.unload_groups(moved, taker.now_ms))
    assert taker.coordinator.held_group_ids() == set()
    assert taker.coordinator.group_configs.session_timeout_ms("tuned") == 45_000  # dropped with its shard
    _load_groups(taker, h0, moved)
    for node in (restarted, taker):
        assert node.coordinator.group_configs.session_timeout_ms("tuned") == 50_000
        assert classic_group_of(node.coordinator, "mixed") is not None and "mixed" not in list(
            node.coordinator.kind(ConsumerGroupManager).groups
        )
        assert classic_group_of(node.coordinator, "older") is None and "older" in list(
            node.coordinator.kind(ConsumerGroupManager).groups
        )
        assert node.coordinator.held_group_ids() == moved
