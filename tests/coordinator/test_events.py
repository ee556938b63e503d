"""Group events: every reason a group changes is recorded with the injected clock's time."""

from __future__ import annotations

import struct

import pytest

from coordinator.core import events as ev
from coordinator.core.clock import ShardClock
from coordinator.core.group_settings import BrokerGroupSettings
from protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    TopicPartition,
    encode_consumer_protocol_assignment_v0,
)
from protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from tests.coordinator.consumer_harness import Client, cg_heartbeat, cgroup
from tests.coordinator.harness import LEAVE_GROUP, WALL_START_MS, Harness, subscription


def kinds(h: Harness, group: str = "g") -> list[str]:
    return [e.kind for e in h.coordinator.events.history(group)]


def last(h: Harness, kind: str, group: str = "g") -> ev.GroupEvent:
    return [e for e in h.coordinator.events.history(group) if e.kind == kind][-1]


def assignment(partitions: dict[str, list[int]]) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    message = ConsumerProtocolAssignment(
        assigned_partitions=[TopicPartition(topic, ps) for topic, ps in partitions.items()], user_data=None
    )
    encode_consumer_protocol_assignment_v0(message, out)
    return bytes(out)


@pytest.fixture
def h0() -> Harness:
    return Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))


@pytest.fixture
def hc() -> Harness:
    harness = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    harness.catalog.set_topic("t", 6)
    return harness


# -- classic groups -------------------------------------------------------------------------------


def test_a_forming_group_records_join_rebalance_generation_and_stable(h0: Harness) -> None:
    (a, b), generation = h0.stable_group("g", 2)
    assert kinds(h0) == [
        "member_joined",
        "rebalance_started",
        "member_joined",
        "generation_formed",
        "group_stable",
    ]
    joined = last(h0, "member_joined")
    assert joined.member_id == b
    assert joined.details["client_id"] == "client"
    assert joined.details["client_host"] == "/10.0.0.1"
    assert joined.message == f"member {b} joined (client client) from /10.0.0.1"
    started = last(h0, "rebalance_started")
    assert started.details["reason"] == "member_joined"
    assert f"member {a} joined" in started.message
    assert started.message.startswith("preparing to rebalance in state Empty with old generation 0")
    formed = last(h0, "generation_formed")
    assert formed.generation == generation and formed.details["members"] == 2
    assert formed.time_ms == WALL_START_MS


def test_session_timeout_names_the_member_and_starts_a_rebalance(h0: Harness) -> None:
    (a, b), _ = h0.stable_group("g", 2, session_timeout_ms=10_000)
    for _ in range(5):
        h0.advance(2_000)
        h0.heartbeat("g", a, 1)
    timeout = last(h0, "session_timeout")
    assert timeout.member_id == b
    assert timeout.message == f"session timeout of member {b}"
    assert WALL_START_MS + 10_000 <= timeout.time_ms < WALL_START_MS + 10_100
    started = last(h0, "rebalance_started")
    assert started.details["reason"] == "session_timeout"
    assert started.seq > timeout.seq
    assert h0.coordinator.events.stats.rebalances_by_reason[("classic", "session_timeout")] == 1


def test_leave_group_carries_its_reason_string(h0: Harness) -> None:
    (_a, b), _ = h0.stable_group("g", 2)
    request = LeaveGroupRequest(group_id="g", members=[MemberIdentity(b, None, "the consumer is closing")])
    h0._call(h0.coordinator.leave_group, LEAVE_GROUP, 5, request)
    left = last(h0, "member_left")
    assert left.member_id == b
    assert left.details["reason"] == "the consumer is closing"
    assert last(h0, "rebalance_started").details["reason"] == "member_left"


def test_members_that_do_not_rejoin_in_time_are_named(h0: Harness) -> None:
    (a, b), _generation = h0.stable_group("g", 2, rebalance_timeout_ms=30_000, session_timeout_ms=60_000)
    h0.join("g", a, rebalance_timeout_ms=30_000, session_timeout_ms=60_000, topics=("t", "u"))
    assert last(h0, "subscription_changed").member_id == a
    assert last(h0, "rebalance_started").details["reason"] == "subscription_changed"
    h0.advance(30_000)
    timed_out = last(h0, "rebalance_timeout")
    assert timed_out.member_id == b
    formed = last(h0, "generation_formed")
    assert formed.details["join_phase_ms"] == 30_000
    assert formed.details["last_member_to_join"] == a
    assert formed.details["last_join_after_ms"] == 0
    preparing = h0.coordinator.events.stats.preparing_ms
    assert preparing.total == 30_000  # the earlier join phases took 0 ms
    assert preparing.counts[preparing.bounds.index(30_000)] == 1


def test_leader_rejoining_a_stable_group_is_a_reason(h0: Harness) -> None:
    (a, _b), _ = h0.stable_group("g", 2)
    h0.join("g", a)
    assert last(h0, "leader_rejoined").member_id == a
    assert last(h0, "rebalance_started").details["reason"] == "leader_rejoined"


def test_members_that_do_not_sync_are_named(h0: Harness) -> None:
    (a, b), _generation = h0.stable_group("g", 2, rebalance_timeout_ms=5_000)
    h0.join("g", a, rebalance_timeout_ms=5_000)
    h0.join("g", b, rebalance_timeout_ms=5_000)
    h0.advance(5_000)
    missing = last(h0, "sync_timeout")
    assert isinstance(missing.details["members"], list)
    assert set(missing.details["members"]) == {a, b}
    assert last(h0, "rebalance_started").details["reason"] == "sync_timeout"


def test_static_member_replacement_is_recorded(h0: Harness) -> None:
    (_a, s), _ = h0.stable_group("g", 2, instance_ids=[None, "static-1"])
    reply = h0.join("g", instance_id="static-1")
    replaced = last(h0, "static_member_replaced")
    assert replaced.details["instance_id"] == "static-1"
    assert replaced.details["replaced_member_id"] == s
    assert replaced.member_id == reply.wire.member_id


def test_stable_records_phase_durations_and_partitions_moved(h0: Harness) -> None:
    a_join = h0.join("g", version=3)
    h0.advance(1)
    a = a_join.wire.member_id
    h0.sync("g", a, 1, assignments={a: assignment({"t": [0, 1, 2, 3]})})
    first = last(h0, "group_stable")
    assert first.details["partitions_moved"] == 0
    assert first.details["partitions_assigned_first_time"] == 4
    assert "0 partitions moved, 4 assigned for the first time" in first.message
    b_join = h0.join("g", version=3)
    h0.advance(1_500)
    h0.join("g", a, version=3)
    b = b_join.wire.member_id
    generation = b_join.wire.generation_id
    h0.advance(500)
    h0.sync("g", b, generation)
    h0.sync("g", a, generation, assignments={a: assignment({"t": [0, 1]}), b: assignment({"t": [2, 3]})})
    stable = last(h0, "group_stable")
    assert stable.details["partitions_moved"] == 2
    assert stable.details["sync_phase_ms"] == 500
    assert stable.details["rebalance_ms"] == 2_000
    stats = h0.coordinator.events.stats
    assert stats.completing_ms.count == 2 and stats.completing_ms.total == 1 + 500
    assert stats.preparing_ms.count == 2 and stats.preparing_ms.total == 0 + 1_500
    assert stats.partitions_moved.count == 2 and stats.partitions_moved.total == 4 + 2
    assert stats.slowest_rejoin["g"] == (a, 1_500)


def test_the_last_stable_assignment_is_kept_as_the_members_own_bytes(h0: Harness) -> None:
    """No decoded copy per idle group (docs/performance.md#group-events-cost): what the events
    keep for the next "partitions moved" is the bytes object the member holds."""
    a_join = h0.join("g", version=3)
    h0.advance(1)
    a = a_join.wire.member_id
    h0.sync("g", a, 1, assignments={a: assignment({"t": [0, 1, 2]})})
    kept = h0.coordinator.events._assignments["g"]
    member = h0.group("g").members[a]
    # One flat (member id, bytes) tuple, no pair per member; the member's own id and bytes.
    assert len(kept) == 2
    assert kept[0] is member.member_id and kept[1] is member.assignment


def test_deleted_group_records_its_removal(h0: Harness) -> None:
    (a,), _ = h0.stable_group("g", 1)
    h0.leave("g", a)
    assert last(h0, "group_empty").state == "Empty"
    h0.delete_groups("g")
    assert kinds(h0)[-1] == "group_removed"


def test_failed_assignment_write_is_the_reason_of_the_next_rebalance(h0: Harness) -> None:
    a_join = h0.join("g", version=3)
    h0.advance(1)
    a = a_join.wire.member_id
    h0.fail_code = 7  # REQUEST_TIMED_OUT
    h0.sync("g", a, 1, assignments={a: b""})
    h0.fail_code = None
    assert last(h0, "assignment_write_failed").kind == "assignment_write_failed"
    assert last(h0, "rebalance_started").details["reason"] == "assignment_write_failed"


# -- KIP-848 consumer groups ----------------------------------------------------------------------


def test_consumer_group_epoch_bumps_name_their_reason(hc: Harness) -> None:
    first = Client(hc, "m1")
    first.join()
    bump = last(hc, "epoch_bumped")
    assert bump.generation == 1 and bump.details["reason"] == "member_joined"
    assert last(hc, "target_computed").details["partitions_moved"] == 0
    second = Client(hc, "m2")
    second.join()
    bump = last(hc, "epoch_bumped")
    assert bump.generation == 2 and "member m2 joined" in bump.message
    assert last(hc, "target_computed").details["partitions_moved"] == 3  # half of m1's six
    hc.advance(700)
    for _ in range(4):
        first.beat()
        second.beat()
    reconciled = last(hc, "assignment_reconciled")
    assert reconciled.generation == 2 and reconciled.details["reconcile_ms"] == 700
    assert hc.coordinator.events.stats.rebalances_by_reason[("consumer", "member_joined")] == 2


def test_consumer_group_subscription_change_and_partition_growth(hc: Harness) -> None:
    hc.catalog.set_topic("u", 2)
    client = Client(hc, "m1")
    client.join()
    cg_heartbeat(hc, "g", "m1", client.epoch, topics=["t", "u"])
    assert last(hc, "epoch_bumped").details["reason"] == "subscription_changed"
    hc.catalog.set_topic("u", 4)
    cg_heartbeat(hc, "g", "m1", last(hc, "epoch_bumped").generation)
    changed = last(hc, "metadata_changed")
    assert changed.message == "subscribed topics changed: topic u grew from 2 to 4 partitions"
    assert last(hc, "epoch_bumped").details["reason"] == "metadata_changed"


def test_consumer_group_session_timeout_and_leave(hc: Harness) -> None:
    Client(hc, "m1").join()
    Client(hc, "m2").join()
    cg_heartbeat(hc, "g", "m2", -1)
    assert last(hc, "member_left").member_id == "m2"
    assert last(hc, "epoch_bumped").details["reason"] == "member_left"
    hc.advance(45_000)
    assert last(hc, "session_timeout").member_id == "m1"
    bump = last(hc, "epoch_bumped")
    assert bump.details["reason"] == "session_timeout"
    assert bump.message == f"group epoch bumped to {bump.generation} (reason: session timeout of member m1)"


def test_a_new_consumer_groups_first_join_reports_the_state_after_it(hc: Harness) -> None:
    Client(hc, "m1").join()
    joined = last(hc, "member_joined")
    assert (joined.state, joined.generation) == ("Assigning", 1)
    assert joined.generation == last(hc, "epoch_bumped").generation


def test_first_target_counts_every_partition_as_assigned_first_time(hc: Harness) -> None:
    Client(hc, "m1").join()
    target = last(hc, "target_computed")
    assert target.details["partitions_moved"] == 0
    assert target.details["partitions_assigned_first_time"] == 6
    assert target.message.endswith("0 partitions move, 6 assigned for the first time")
    moved = hc.coordinator.events.stats.partitions_moved
    assert (moved.count, moved.total) == (1, 6)


def test_partitions_of_a_timed_out_member_count_as_moved(hc: Harness) -> None:
    clients = [Client(hc, f"m{i}") for i in (1, 2, 3)]
    for client in clients:
        client.join()
    for _ in range(4):
        for client in clients:
            client.beat()
    assert cgroup(hc).state == "Stable"
    m1_owned = sum(len(ps) for ps in clients[0].owned.values())
    assert m1_owned == 2
    moved = hc.coordinator.events.stats.partitions_moved
    seen_count, seen_total = moved.count, moved.total
    for _ in range(3):  # m1 was SIGKILLed: only m2 and m3 heartbeat
        hc.advance(15_000)
        clients[1].beat()
        clients[2].beat()
    assert last(hc, "session_timeout").member_id == "m1"
    clients[1].beat()
    target = last(hc, "target_computed")
    assert target.details["partitions_moved"] == 2  # m1's two went to m2 and m3
    assert target.details["partitions_assigned_first_time"] == 0
    assert "2 partitions move, 0 assigned for the first time" in target.message
    assert (moved.count - seen_count, moved.total - seen_total) == (1, 2)


# -- the ring itself ------------------------------------------------------------------------------


def test_ring_is_bounded_per_group_and_in_groups() -> None:
    clock = ShardClock()
    events = ev.GroupEvents(clock, ring_size=3, max_groups=2)
    for i in range(5):
        clock.set(i, 1000 + i)
        events.record("a", ev.MEMBER_JOINED, "classic", "Empty", 0, f"event {i}")
    assert [e.message for e in events.history("a")] == ["event 2", "event 3", "event 4"]
    assert [e.message for e in events.history("a", since_seq=4)] == ["event 4"]
    assert [e.message for e in events.history("a", since_ms=1003)] == ["event 3", "event 4"]
    events.record("b", ev.MEMBER_JOINED, "classic", "Empty", 0, "b")
    events.record("c", ev.MEMBER_JOINED, "classic", "Empty", 0, "c")
    assert list(events.groups()) == ["b", "c"]
    with pytest.raises(ValueError, match="at least 1"):
        ev.GroupEvents(clock, ring_size=0)


def test_an_earlier_operation_cause_does_not_explain_a_later_rebalance() -> None:
    clock = ShardClock()
    events = ev.GroupEvents(clock)
    events.record("g", ev.MEMBER_JOINED, "classic", "PreparingRebalance", 1, "member x joined")
    events.begin_operation()
    events.rebalance_started("g", "Stable", 1)
    assert events.history("g")[-1].details["reason"] == "unknown"


def test_metadata_change_descriptions() -> None:
    before = {"a": (b"1", 2), "b": (b"2", 3), "c": (b"3", 1)}
    after = {"a": (b"1", 4), "b": (b"9", 3), "d": (b"4", 1)}
    assert ev.describe_metadata_change(before, after) == (
        "topic d appeared with 1 partitions; topic c is gone; topic a grew from 2 to 4 partitions; "
        "topic b was recreated"
    )


def test_classic_owners_reads_consumer_assignments() -> None:
    owners = ev.classic_owners({"m1": assignment({"t": [0, 1]}), "m2": b""})
    assert owners == {("t", 0): "m1", ("t", 1): "m1"}
    assert ev.classic_owners({"m1": b"\x00\x00\xff"}) is None
    assert ev.classic_owners({"m1": subscription(["t"])[:1]}) is None


def test_owner_changes_tell_moved_from_first_assigned() -> None:
    before = {("t", 0): "a", ("t", 1): "a", ("t", 2): "b"}
    after = {("t", 0): "b", ("t", 1): "a", ("t", 2): "b", ("t", 3): "a", ("u", 0): "b"}
    assert ev.owner_changes(before, after) == (1, 2)  # t-0 moved; t-3, u-0 got a first owner
    assert ev.owner_changes({}, {("t", p): "a" for p in range(6)}) == (0, 6)


def test_consumer_member_that_does_not_revoke_in_time_is_named(hc: Harness) -> None:
    first = Client(hc, "m1")
    first.join()
    first.beat()
    Client(hc, "m2").join()
    # m1 keeps reporting every partition: it never revokes what m2 is due.
    cg_heartbeat(hc, "g", "m1", first.epoch, owned={"t": range(6)}, rebalance_timeout_ms=30_000)
    hc.advance(30_000)
    timed_out = last(hc, "rebalance_timeout")
    assert timed_out.member_id == "m1"
    assert "did not revoke within the rebalance timeout" in timed_out.message
    assert last(hc, "epoch_bumped").details["reason"] == "rebalance_timeout"


def test_consumer_static_member_replacement_is_recorded(hc: Harness) -> None:
    old = Client(hc, "old", instance_id="i-1")
    old.join()
    cg_heartbeat(hc, "g", "old", -2, instance_id="i-1")
    assert last(hc, "member_left").message == "static member old left temporarily"
    Client(hc, "new", instance_id="i-1").join()
    replaced = last(hc, "static_member_replaced")
    assert replaced.message == "static member old replaced by new (instance i-1)"
    assert replaced.details["replaced_member_id"] == "old"


def test_group_loaded_over_its_max_size_rebalances_with_that_reason(h0: Harness) -> None:
    h0.stable_group("g", 3)
    restarted = h0.restart(BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_max_size=2))
    assert kinds(restarted) == ["loaded", "rebalance_started"]
    assert last(restarted, "loaded").message == "loaded with 3 members, over group.max.size"
    assert last(restarted, "rebalance_started").details["reason"] == "loaded"


def test_share_group_membership_is_in_the_history() -> None:
    """A share member joining and leaving, the epochs and the targets they cause: what
    ``coordinator groups history`` shows for a share group."""
    from tests.coordinator.test_share_groups import beat

    h = Harness()
    h.catalog.set_topic("t", 1)
    beat(h, "m1")
    beat(h, "m1", epoch=-1)
    history = h.coordinator.events.history("g")
    assert [(e.kind, e.member_id) for e in history if e.kind in (ev.MEMBER_JOINED, ev.MEMBER_LEFT)] == [
        (ev.MEMBER_JOINED, "m1"),
        (ev.MEMBER_LEFT, "m1"),
    ]
    assert [e.generation for e in history if e.kind == ev.EPOCH_BUMPED] == [1, 2]
    assert ev.TARGET_COMPUTED in [e.kind for e in history]
    assert {e.protocol for e in history} == {"share"}  # epoch bumps included, not "consumer"
    assert h.coordinator.events.stats.rebalances_by_reason.get(("consumer", ev.MEMBER_JOINED)) is None
    beat(h, "m2")
    assert "g" not in h.coordinator.events.rebalances_in_progress()  # nothing to reconcile
