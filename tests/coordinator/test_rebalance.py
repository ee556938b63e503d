"""Rebalances and their timers (docs/groups.md#rebalance-and-its-timers; transitions T3-T6 in
docs/groups.md#classic-transitions)."""

from __future__ import annotations

from typing import Any

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from storage.records import GroupMetadataRecord
from tests.coordinator.harness import Harness

EMPTY, PR, CR, STABLE = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
)


def test_member_joining_a_stable_group_makes_everyone_rejoin(h0: Harness) -> None:
    """A new member joining a stable group makes every member rejoin (a new generation)."""
    (a,), generation = h0.stable_group("g", 1)
    b = h0.join("g", version=5).wire.member_id  # MEMBER_ID_REQUIRED
    b_join = h0.join("g", b, version=5)
    assert b in h0.group().members
    assert h0.group().state is PR  # T3
    assert h0.heartbeat("g", a, generation).error == ErrorCode.REBALANCE_IN_PROGRESS
    a_join = h0.join("g", a, version=5)
    assert a_join.wire.generation_id == b_join.wire.generation_id == 2
    assert a_join.wire.leader == a and len(a_join.wire.members) == 2
    assert h0.group().state is CR  # T5
    stale_sync = h0.sync("g", b, generation)
    assert stale_sync.error == ErrorCode.ILLEGAL_GENERATION
    assert h0.heartbeat("g", b, generation).error == ErrorCode.ILLEGAL_GENERATION
    assert h0.sync("g", a, 2, assignments={a: b"1", b: b"2"}).error == 0
    assert h0.sync("g", b, 2).wire.assignment == b"2"


def test_dynamic_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout(h0: Harness) -> None:
    """A dynamic member that does not rejoin is removed when the rebalance timeout ends the join."""
    (a, b), generation = h0.stable_group("g", 2, rebalance_timeout_ms=30_000, session_timeout_ms=60_000)
    a_join = h0.join("g", a, version=5, rebalance_timeout_ms=30_000, session_timeout_ms=60_000)
    h0.advance(29_999)
    assert not a_join.answered
    h0.advance(1)
    assert a_join.wire.generation_id == generation + 1
    assert [m.member_id for m in a_join.wire.members] == [a]
    assert list(h0.group().members) == [a]
    assert h0.heartbeat("g", b, generation).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_that_does_not_rejoin_is_kept_then_removed_by_the_pending_sync_timer(
    h0: Harness,
) -> None:
    """A static member that does not rejoin is kept at join completion, but it still owes a SyncGroup: the pending-sync timer removes it."""
    args: dict[str, Any] = {"rebalance_timeout_ms": 30_000, "session_timeout_ms": 600_000}
    (a, s), generation = h0.stable_group("g", 2, instance_ids=[None, "static-1"], **args)
    a_join = h0.join("g", a, version=5, **args)
    h0.advance(30_000)
    assert a_join.wire.generation_id == generation + 1
    # The leader assigns to the static member with its last known metadata.
    assert {m.member_id: m.group_instance_id for m in a_join.wire.members} == {a: None, s: "static-1"}
    assert set(h0.group().members) == {a, s}
    assert h0.group().pending_sync_members == {a, s}
    h0.sync("g", a, generation + 1, assignments={a: b"x", s: b"y"})
    assert h0.group().state is STABLE
    h0.advance(29_999)
    assert s in h0.group().members
    h0.advance(1)  # pending-sync timeout: the static member never synced
    assert s not in h0.group().members
    assert h0.group().state is PR
    assert h0.heartbeat("g", a, generation + 1).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_leader_that_does_not_rejoin_is_replaced_by_a_member_that_did(h0: Harness) -> None:
    """A leader that does not rejoin is replaced by a member that did."""
    args: dict[str, Any] = {"rebalance_timeout_ms": 20_000, "session_timeout_ms": 60_000}
    (leader, b, c), generation = h0.stable_group("g", 3, **args)
    h0.join("g", b, version=5, topics=("new",), **args)  # b forces a rebalance
    c_join = h0.join("g", c, version=5, **args)
    h0.advance(19_999)
    assert not c_join.answered
    h0.advance(1)
    assert leader not in h0.group().members
    assert c_join.wire.leader in (b, c)
    assert h0.group().leader_id == c_join.wire.leader
    assert c_join.wire.generation_id == generation + 1


def test_session_expiry_in_stable_starts_a_rebalance(h0: Harness) -> None:
    """A session expiry in a stable group starts a rebalance."""
    (a, b), generation = h0.stable_group("g", 2, session_timeout_ms=10_000)
    for _ in range(3):
        h0.advance(3_000)
        assert h0.heartbeat("g", a, generation).error == 0
    assert b in h0.group().members
    h0.advance(1_000)  # b stopped heartbeating when the group formed, 10 s ago
    assert b not in h0.group().members
    assert h0.group().state is PR
    assert h0.heartbeat("g", a, generation).error == ErrorCode.REBALANCE_IN_PROGRESS
    a_join = h0.join("g", a, version=5)
    assert a_join.wire.generation_id == generation + 1  # a was the only member left: completes at once


def test_session_expiry_during_preparing_rebalance_completes_the_join_without_the_member(h0: Harness) -> None:
    """A session expiry during PreparingRebalance completes the join without the member (no wait for the rebalance timeout)."""
    (a, _b), generation = h0.stable_group("g", 2, session_timeout_ms=10_000, rebalance_timeout_ms=300_000)
    h0.advance(5_000)
    a_join = h0.join("g", a, version=5, session_timeout_ms=10_000, rebalance_timeout_ms=300_000)
    h0.advance(4_999)  # b's session: 10 s after the join phase completed
    assert not a_join.answered
    h0.advance(1)
    assert a_join.wire.generation_id == generation + 1
    assert [m.member_id for m in a_join.wire.members] == [a]


def test_pending_member_delays_the_join_until_its_session_timeout(h0: Harness) -> None:
    """A pending member (JoinGroup v4+ without a member id) delays the join until its session timeout, when that comes first."""
    (a,), generation = h0.stable_group("g", 1, rebalance_timeout_ms=60_000)
    pending = h0.join("g", version=4, session_timeout_ms=8_000)
    assert pending.error == ErrorCode.MEMBER_ID_REQUIRED
    a_join = h0.join("g", a, version=5, rebalance_timeout_ms=60_000)
    h0.advance(7_999)
    assert not a_join.answered  # waiting for the pending member
    h0.advance(1)
    assert a_join.wire.generation_id == generation + 1
    assert not h0.group().pending_members


def test_pending_member_delays_the_join_until_the_rebalance_timeout(h0: Harness) -> None:
    """A pending member delays the join until the rebalance timeout, when that comes first."""
    (a,), generation = h0.stable_group("g", 1, rebalance_timeout_ms=20_000, session_timeout_ms=60_000)
    h0.join("g", version=4, session_timeout_ms=60_000)
    a_join = h0.join("g", a, version=5, rebalance_timeout_ms=20_000, session_timeout_ms=60_000)
    h0.advance(20_000)
    assert a_join.wire.generation_id == generation + 1
    assert len(h0.group().pending_members) == 1  # the join timer does not touch pending members
    h0.advance(40_000)
    assert not h0.group().pending_members


def test_pending_member_joining_in_time_is_part_of_the_generation(h0: Harness) -> None:
    (a,), generation = h0.stable_group("g", 1)
    pending = h0.join("g", version=4)
    a_join = h0.join("g", a, version=5)
    b_join = h0.join("g", pending.wire.member_id, version=4)
    assert a_join.wire.generation_id == b_join.wire.generation_id == generation + 1


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout(h0: Harness) -> None:
    a = h0.join("g", version=3, rebalance_timeout_ms=15_000, session_timeout_ms=60_000)
    b = h0.join("g", version=3, rebalance_timeout_ms=15_000, session_timeout_ms=60_000)
    h0.advance(0)
    leader, follower = a.wire.member_id, b.wire.member_id
    h0.sync("g", leader, 1, assignments={leader: b"1", follower: b"2"})
    assert h0.group().pending_sync_members == {follower}
    h0.advance(14_999)
    assert follower in h0.group().members
    h0.advance(1)
    assert follower not in h0.group().members and h0.group().state is PR  # T3 via pending sync
    assert h0.heartbeat("g", leader, 1).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_pending_sync_timer_is_cancelled_once_everyone_synced(h0: Harness) -> None:
    (_a, _b), generation = h0.stable_group("g", 2, rebalance_timeout_ms=15_000, session_timeout_ms=60_000)
    assert not h0.group().pending_sync_members
    assert ("sync", "g", generation) not in h0.coordinator._timers
    h0.advance(16_000)
    assert h0.group().state is STABLE


def test_pending_sync_timeout_in_completing_rebalance(h0: Harness) -> None:
    """T4 via pending sync: nobody (not even the leader) synced."""
    a = h0.join("g", version=3, rebalance_timeout_ms=15_000, session_timeout_ms=60_000)
    b = h0.join("g", version=3, rebalance_timeout_ms=15_000, session_timeout_ms=60_000)
    h0.advance(0)
    parked = h0.sync("g", b.wire.member_id, 1)
    h0.advance(15_000)
    assert parked.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert list(h0.group().members) == [b.wire.member_id]
    assert h0.group().state is PR
    assert a.wire.member_id not in h0.group().members


def test_new_member_in_completing_rebalance_resets_assignments(h0: Harness) -> None:
    """T4: parked SyncGroups are answered REBALANCE_IN_PROGRESS."""
    a = h0.join("g", version=3)
    b = h0.join("g", version=3)
    h0.advance(0)
    parked = h0.sync("g", b.wire.member_id, 1)
    h0.join("g", version=3)
    assert h0.group().state is PR
    assert parked.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert parked.wire.assignment == b""
    assert all(m.assignment == b"" for m in h0.group().members.values())
    assert h0.sync("g", a.wire.member_id, 1).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_heartbeat_in_completing_rebalance_keeps_the_session(h0: Harness) -> None:
    a = h0.join("g", version=3, session_timeout_ms=10_000, rebalance_timeout_ms=60_000)
    h0.advance(0)
    member_id = a.wire.member_id
    for _ in range(10):
        h0.advance(5_000)
        assert h0.heartbeat("g", member_id, 1).error == 0
    assert h0.group().state is CR and member_id in h0.group().members


def test_all_members_leaving_a_stable_group_ends_in_empty(h0: Harness) -> None:
    """T3 then T6: Stable -> PreparingRebalance -> Empty, generation bumped, empty record."""
    (a, b), generation = h0.stable_group("g", 2)
    h0.leave("g", members=[(a, None), (b, None)])
    group = h0.group()
    assert group.state is EMPTY and group.previous_state is PR
    assert group.generation_id == generation + 1
    assert (group.protocol_name, group.leader_id) == (None, None)
    record = h0.store.groups["g"]
    assert isinstance(record, GroupMetadataRecord)
    assert (record.generation_id, record.members, record.protocol_name, record.protocol_type) == (
        generation + 1,
        (),
        None,
        "consumer",
    )
    assert record.state_ms == group.state_ms == h0.wall_ms


def test_join_phase_with_no_member_left_ends_in_empty(h0: Harness) -> None:
    """T6 via the join timer: the remaining member never rejoined."""
    args: dict[str, Any] = {"rebalance_timeout_ms": 20_000, "session_timeout_ms": 600_000}
    (a, b), generation = h0.stable_group("g", 2, **args)
    h0.leave("g", b)
    assert h0.group().state is PR
    h0.advance(19_999)
    assert h0.group().state is PR and a in h0.group().members
    h0.advance(1)
    assert h0.group().state is EMPTY and not h0.group().members
    assert h0.group().generation_id == generation + 1
    assert h0.store.groups["g"].generation_id == generation + 1


def test_group_rebalance_timeout_is_the_largest_member_timeout(h0: Harness) -> None:
    (_a, b), _generation = h0.stable_group("g", 2, rebalance_timeout_ms=10_000, session_timeout_ms=600_000)
    h0.join("g", b, version=5, rebalance_timeout_ms=50_000, session_timeout_ms=600_000, topics=("z",))
    h0.advance(49_999)
    assert h0.group().state is PR
    h0.advance(1)
    assert h0.group().state is CR and list(h0.group().members) == [b]


def test_static_members_that_did_not_rejoin_hold_the_join_phase_until_their_session_expires() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    args: dict[str, Any] = {"rebalance_timeout_ms": 10_000, "session_timeout_ms": 25_000}
    (s1, _s2), generation = h.stable_group("g", 2, instance_ids=["i1", "i2"], **args)
    h.leave("g", members=[("", "i2")])  # admin removal of i2: rebalance, s1 never rejoins
    assert h.group().state is PR
    h.advance(10_000)  # join timer: no member rejoined, so no new generation
    assert h.group().state is PR and h.group().generation_id == generation
    h.advance(10_000)
    assert h.group().state is PR
    h.advance(5_000)  # s1's session (25 s) expires: removed, the group is empty
    assert s1 not in h.group().members
    h.advance(10_000)
    assert h.group().state is EMPTY


def test_hours_of_heartbeats_keep_a_group_stable(h0: Harness) -> None:
    (a, b), generation = h0.stable_group("g", 2, session_timeout_ms=10_000)
    for _ in range(2 * 3600 // 3):  # two hours, one heartbeat per member every 3 s
        h0.advance(3_000)
        assert h0.heartbeat("g", a, generation).error == 0
        assert h0.heartbeat("g", b, generation).error == 0
    assert h0.group().state is STABLE and h0.group().generation_id == generation
    assert len(h0.coordinator._timers) <= 4  # 2 sessions + retention (+ nothing left behind)
    h0.advance(10_000)
    assert not h0.group().members and h0.group().state is EMPTY


def test_session_expiry_in_completing_rebalance_rebalances(h0: Harness) -> None:
    """T4 via session expiry: a member that neither syncs nor heartbeats."""
    joins = [
        h0.join("g", version=3, session_timeout_ms=10_000, rebalance_timeout_ms=60_000) for _ in range(2)
    ]
    h0.advance(0)
    a, b = (j.wire.member_id for j in joins)
    parked = h0.sync("g", b, 1)  # b waits for the assignment; the leader a never sends it
    h0.advance(10_000)
    assert a not in h0.group().members and b in h0.group().members
    assert h0.group().state is PR
    assert parked.error == ErrorCode.REBALANCE_IN_PROGRESS


def test_reply_of_a_leave_that_empties_the_group_waits_for_the_group_record(h0: Harness) -> None:
    (a,), generation = h0.stable_group("g", 1)
    h0.hold = True
    reply = h0.leave("g", a)
    assert not reply.answered and h0.group().state is EMPTY
    h0.flush()
    assert reply.wire.members[0].error_code == 0
    assert h0.store.groups["g"].generation_id == generation + 1


def test_failed_empty_group_record_does_not_fail_the_leave(h0: Harness) -> None:
    """Kafka only logs a failure to persist an empty generation: no member depends on it."""
    (a,), generation = h0.stable_group("g", 1)
    h0.fail_code = ErrorCode.NOT_COORDINATOR
    reply = h0.leave("g", a)
    h0.fail_code = None
    assert reply.wire.members[0].error_code == 0
    assert h0.group().state is EMPTY and h0.group().generation_id == generation + 1
    assert h0.store.groups["g"].generation_id == generation  # storage still has the old generation
