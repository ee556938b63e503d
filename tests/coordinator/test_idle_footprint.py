"""An idle classic group keeps no empty pending-member sets, groups subscribed to the same
topics share one frozenset of them, and committed offsets are columns of an array per topic,
not an object per offset (see docs/performance.md)."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from array import array
from typing import Any

from coordinator.core.classic.group import ClassicGroup, session_key
from coordinator.core.shared_values import MAX_SHARED_VALUE_SIZE, shared_value
from coordinator.core.timers import Timers
from storage.records import OffsetCommitRecord
from tests.coordinator.harness import Harness, subscription


def copy(text: str) -> str:
    """An equal string that is a distinct object, as every decoded request carries."""
    return (text + ".")[:-1]


def test_a_stable_group_holds_no_pending_sets_and_reads_them_as_empty() -> None:
    h = Harness()
    h.stable_group("g", 2)
    group = h.group("g")
    assert group._pending is None and group._pending_sync is None
    assert group.pending_members == set() and group.pending_sync_members == set()
    group.add_pending_member(session_key("g", "m-x"))
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


def test_a_member_keeps_the_id_and_timer_key_it_was_handed_not_its_requests_copies() -> None:
    h = Harness()
    first = h.join("g", version=5)
    assert first.error == 79  # MEMBER_ID_REQUIRED
    member_id = first.wire.member_id
    group = h.group("g")
    handed = group.pending_session_key(member_id)
    assert handed is not None and handed[2] == member_id
    h.join("g", copy(member_id), version=5)  # parked for the initial delayed join, but a member
    member = group.members[member_id]
    assert member.member_id is handed[2]
    assert member.session_key is handed
    assert group.pending_session_key(member_id) is None and group._pending is None


def test_members_of_different_groups_share_equal_client_values_and_assignments() -> None:
    h = Harness()
    members = []
    for group_id in ("a", "b"):
        join_args: dict[str, Any] = {
            "protocol_type": copy("consumer"),
            "protocols": [(copy("range"), bytes(bytearray(subscription(["t"]))))],
            "client_id": copy("client-1"),
        }
        member_id = h.join(group_id, **join_args).wire.member_id  # MEMBER_ID_REQUIRED
        join = h.join(group_id, copy(member_id), **join_args)
        h.advance(h.config.group_initial_rebalance_delay_ms)
        assert join.error == 0
        assignments = {copy(member_id): bytes(bytearray(b"same"))}
        assert h.sync(group_id, copy(member_id), join.wire.generation_id, assignments=assignments).error == 0
        members.append(h.group(group_id).members[member_id])
    a, b = members
    assert a.client_id == "client-1" and a.client_id is b.client_id
    assert a.client_host is b.client_host
    assert a.protocol_type is b.protocol_type
    assert a.protocols == b.protocols and a.protocols is b.protocols
    assert a.session_timeout_ms is b.session_timeout_ms
    assert a.rebalance_timeout_ms is b.rebalance_timeout_ms
    assert a.assignment == b"same" and a.assignment is b.assignment


def test_committed_offsets_hold_the_groups_id_and_one_topic_name_and_no_in_flight_table() -> None:
    h = Harness()
    h.catalog.set_topic("orders", 3)
    for group_id in ("a", "b"):
        (member_id,), generation = h.stable_group(group_id, 1)
        offsets = {(copy("orders"), 0): 5, (copy("orders"), 1): 6}
        reply = h.commit(copy(group_id), offsets, member_id=copy(member_id), generation=generation)
        assert [p.error_code for t in reply.wire.topics for p in t.partitions] == [0, 0]
    stored = h.coordinator._offsets.offsets
    assert stored["a"].group_id is h.group("a").group_id
    assert stored["b"].group_id is h.group("b").group_id
    (a_topic,), (b_topic,) = stored["a"].topic_offsets, stored["b"].topic_offsets
    assert a_topic.topic == "orders" and a_topic.topic is b_topic.topic
    assert stored["a"].in_flight is None and stored["b"].in_flight is None


def test_a_groups_offsets_hold_no_object_per_offset_or_dict_per_topic() -> None:
    h = Harness()
    h.catalog.set_topic("orders", 3)
    (member_id,), generation = h.stable_group("g", 1)
    offsets = {("orders", p): 100 + p for p in (2, 0, 1)}
    reply = h.commit("g", offsets, member_id=member_id, generation=generation)
    assert [p.error_code for t in reply.wire.topics for p in t.partitions] == [0, 0, 0]
    group_offsets = h.coordinator._offsets.offsets["g"]
    (entry,) = group_offsets.topic_offsets
    # One array of four parallel columns, partitions ascending; no metadata or expiry lists.
    assert type(entry.columns) is array and entry.columns.typecode == "q"
    now = h.wall_ms
    assert entry.columns.tolist() == [0, 1, 2, 100, 101, 102, -1, -1, -1, now, now, now]
    assert entry.metadata is None and entry.expire_ms is None
    assert group_offsets._index is None
    held = gc.get_referents(group_offsets) + gc.get_referents(entry)
    assert not any(isinstance(o, (OffsetCommitRecord, dict)) for o in held)
    # The array is built at its exact size, not over-allocated by inserts.
    assert sys.getsizeof(entry.columns) == sys.getsizeof(array("q", entry.columns.tolist()))


def test_cancelled_timers_leave_at_most_a_quarter_of_the_live_keys_behind() -> None:
    timers: Timers[tuple[str, int]] = Timers()
    live = 20_000
    for i in range(live):
        timers.schedule(("session", i), 1_000_000 + i)
        timers.schedule(("sync", i), 2_000_000 + i)
        timers.cancel(("sync", i))  # a group's sync timer, cancelled once every member synced
    assert len(timers) == live
    assert len(timers._heap) <= live + live // 4 + 1024
    assert timers.poll(3_000_000, 10 * live) == [("session", i) for i in range(live)]


def test_shared_values_are_one_object_per_value_and_bounded_in_size() -> None:
    text = copy("client-7")
    assert shared_value(text) is shared_value(copy("client-7"))
    assert shared_value(45_000 + int("0")) is shared_value(int("45000"))
    assert shared_value(True) is True and shared_value(1) == 1 and type(shared_value(1)) is int
    long = "x" * (MAX_SHARED_VALUE_SIZE + 1)
    assert shared_value(copy(long)) is not shared_value(copy(long))


def test_groups_with_the_same_protocol_counts_share_them_and_keep_no_join_key() -> None:
    h = Harness()
    h.stable_group("a", 2)
    h.stable_group("b", 2)
    a, b = h.group("a"), h.group("b")
    assert a.protocol_support == {"range": 2}
    assert a._support is b._support
    assert "join_key" not in ClassicGroup.__slots__  # the join timer's key is built when needed
    assert a.join_key == ("join", "a")


def test_a_group_without_static_members_holds_no_static_member_table() -> None:
    h = Harness()
    h.stable_group("g", 2)
    assert h.group("g")._static is None and h.group("g").static_members == {}
    (member_id,), _ = h.stable_group("s", 1, instance_ids=["i-1"])
    static = h.group("s")
    assert static.static_members == {"i-1": member_id}
    static.remove_member(member_id)
    assert static._static is None and static.static_members == {}


def test_an_armed_session_timer_costs_no_heap_item_or_entry_object() -> None:
    """What one member's session timer costs the timers beyond its key and deadline: a dict entry
    and a bucket slot, no (deadline, seq, key) heap item and no per-key entry object."""
    members = 20_000
    keys = [session_key(f"g{i}", f"m{i}") for i in range(members)]
    deadlines = [1_000_000 + (i * 37) % 45_000 for i in range(members)]  # spread over 45 s
    timers: Timers[tuple[str, str, str]] = Timers()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for key, deadline in zip(keys, deadlines, strict=True):
            timers.schedule(key, deadline)
        for key, deadline in zip(keys, deadlines, strict=True):
            timers.schedule(key, deadline + 3_000)  # a heartbeat each: no new allocation per key
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # The dict entry (≈ 40 B) and a bucket slot (8 B) per key, the new deadline ints (32 B) aside;
    # a heap item (64 B) and an entry object (56 B) each were ≈ 230 B per key.
    assert (held - 32 * members) / members < 80, f"{held / members:.0f} B per armed key"
    assert len(timers._heap) <= 50  # one item per bucket of about a second, not per key
