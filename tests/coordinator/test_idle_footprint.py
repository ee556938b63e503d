"""An idle classic group keeps no empty pending-member sets, and groups subscribed to the same
topics share one frozenset of them (see docs/performance.md)."""

from __future__ import annotations

from tests.coordinator.harness import Harness


def test_a_stable_group_holds_no_pending_sets_and_reads_them_as_empty() -> None:
    h = Harness()
    h.stable_group("g", 2)
    group = h.group("g")
    assert group._pending is None and group._pending_sync is None
    assert group.pending_members == set() and group.pending_sync_members == set()
    group.add_pending_member("m-x")
    assert group.pending_members == {"m-x"}
    group.discard_pending_member("m-x")
    assert group._pending is None  # the set goes once it is empty


def test_groups_with_the_same_subscription_share_its_topic_set() -> None:
    h = Harness()
    h.stable_group("a", 2)
    h.stable_group("b", 2)
    first, second = h.group("a").subscribed_topics, h.group("b").subscribed_topics
    assert first is not None and first == second
    assert first is second
