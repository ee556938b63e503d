"""The share groups' simple assignor: partitions shared when members outnumber them, balance
first, then stickiness."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given

from coordinator.core.share.assignor import ShareMemberSpec, TopicPartition, assign_share_partitions

TOPICS = frozenset({"orders"})


def members(n: int, current: dict[str, frozenset[TopicPartition]] | None = None) -> list[ShareMemberSpec]:
    current = current or {}
    return [ShareMemberSpec(f"m{i}", TOPICS, current.get(f"m{i}", frozenset())) for i in range(n)]


def test_three_members_share_one_partition() -> None:
    result = assign_share_partitions(members(3), {"orders": 1})
    assert all(tps == frozenset({("orders", 0)}) for tps in result.values())


def test_five_members_on_two_partitions_each_partition_shared_by_three() -> None:
    result = assign_share_partitions(members(5), {"orders": 2})
    holders = {p: sum(("orders", p) in tps for tps in result.values()) for p in (0, 1)}
    assert holders == {0: 3, 1: 3}
    assert sorted(len(tps) for tps in result.values()) == [1, 1, 1, 1, 2]


def test_fewer_members_than_partitions_split_them() -> None:
    result = assign_share_partitions(members(2), {"orders": 6})
    assert [len(tps) for tps in result.values()] == [3, 3]
    assert result["m0"].isdisjoint(result["m1"])


def test_a_joining_member_takes_only_what_balance_needs() -> None:
    first = assign_share_partitions(members(2), {"orders": 6})
    second = assign_share_partitions(members(3, first), {"orders": 6})
    moved = sum(len(first[m] - second[m]) for m in first)
    assert moved == 2
    assert sorted(len(tps) for tps in second.values()) == [2, 2, 2]


def test_a_topic_no_longer_subscribed_is_taken_away() -> None:
    spec = ShareMemberSpec("m0", frozenset({"b"}), frozenset({("a", 0), ("b", 0)}))
    assert assign_share_partitions([spec], {"a": 1, "b": 1}) == {"m0": frozenset({("b", 0)})}


def test_members_with_different_subscriptions_are_assigned_per_subscription() -> None:
    specs = [
        ShareMemberSpec("m0", frozenset({"a"}), frozenset()),
        ShareMemberSpec("m1", frozenset({"b"}), frozenset()),
        ShareMemberSpec("m2", frozenset({"b"}), frozenset()),
    ]
    result = assign_share_partitions(specs, {"a": 2, "b": 1})
    assert result == {
        "m0": frozenset({("a", 0), ("a", 1)}),
        "m1": frozenset({("b", 0)}),
        "m2": frozenset({("b", 0)}),
    }


@given(
    n_members=st.integers(1, 12),
    n_partitions=st.integers(0, 12),
    seed_holdings=st.lists(st.sets(st.integers(0, 14), max_size=6), max_size=12),
)
def test_balanced_fully_shared_and_stable(
    n_members: int, n_partitions: int, seed_holdings: list[set[int]]
) -> None:
    current = {
        f"m{i}": frozenset(("orders", p) for p in held) for i, held in enumerate(seed_holdings[:n_members])
    }
    result = assign_share_partitions(members(n_members, current), {"orders": n_partitions})
    counts = [len(tps) for tps in result.values()]
    assert max(counts) - min(counts) <= 1
    if n_partitions:
        sharing = -(-n_members // n_partitions)
        for p in range(n_partitions):
            assert sum(("orders", p) in tps for tps in result.values()) == sharing
        assert min(counts) >= 1
    assert all(tp[1] < n_partitions for tps in result.values() for tp in tps)
    # An assignment already balanced is kept as it is.
    assert assign_share_partitions(members(n_members, result), {"orders": n_partitions}) == result


def test_a_partition_every_free_member_already_holds_is_filled_by_a_swap() -> None:
    # Nine members, four partitions (three holders each): m7 keeps partition 3 and is the last
    # member with a free slot when partition 3 still lacks a holder.
    result = assign_share_partitions(members(9, {"m7": frozenset({("orders", 3)})}), {"orders": 4})
    assert all(sum(("orders", p) in tps for tps in result.values()) == 3 for p in range(4))
    assert ("orders", 3) in result["m7"]


def test_the_layout_from_nothing_is_balanced_and_never_doubles_a_partition() -> None:
    from coordinator.core.share.assignor import _layout

    specs = members(7)
    partitions = [("orders", p) for p in range(3)]
    quota = {"m0": 2, "m1": 2, "m2": 1, "m3": 1, "m4": 1, "m5": 1, "m6": 1}
    result = _layout(specs, partitions, 3, quota)
    assert {m: len(tps) for m, tps in result.items()} == quota
    assert all(sum(tp in tps for tps in result.values()) == 3 for tp in partitions)
