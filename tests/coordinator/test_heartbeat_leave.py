"""Heartbeat v0-4 and LeaveGroup v0-5 (docs/groups.md#request-checks)."""

from __future__ import annotations

import pytest

from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from tests.coordinator.harness import Harness

EMPTY, PR, CR, STABLE = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
)

# -- Heartbeat ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_heartbeat_in_stable(h0: Harness, version: int) -> None:
    (_a, b), generation = h0.stable_group("g", 2)
    reply = h0.heartbeat("g", b, generation, version=version)
    assert reply.error == 0


@pytest.mark.parametrize(
    ("group", "member", "instance", "generation", "expected"),
    [
        ("", "m", None, 1, ErrorCode.INVALID_GROUP_ID),
        ("nope", "m", None, 1, ErrorCode.UNKNOWN_MEMBER_ID),
        ("g", "ghost", None, 1, ErrorCode.UNKNOWN_MEMBER_ID),
        ("g", "ghost", "i-s", 1, ErrorCode.FENCED_INSTANCE_ID),
        ("g", "STATIC", "i-unknown", 1, ErrorCode.UNKNOWN_MEMBER_ID),
        ("g", "STATIC", "i-s", 2, ErrorCode.ILLEGAL_GENERATION),
        ("g", "STATIC", "i-s", 0, ErrorCode.ILLEGAL_GENERATION),
        ("g", "STATIC", "i-s", 1, 0),
    ],
)
def test_heartbeat_validation(
    h0: Harness, group: str, member: str, instance: str | None, generation: int, expected: int
) -> None:
    (_, static), _ = h0.stable_group("g", 2, instance_ids=[None, "i-s"])
    reply = h0.heartbeat(group, static if member == "STATIC" else member, generation, instance_id=instance)
    assert reply.error == expected


def test_heartbeat_by_state(h0: Harness) -> None:
    joins = [
        h0.join("g", version=3, rebalance_timeout_ms=60_000, session_timeout_ms=30_000) for _ in range(2)
    ]
    h0.advance(0)
    a, b = (j.wire.member_id for j in joins)
    assert h0.group().state is CR
    assert h0.heartbeat("g", b, 1).error == 0  # Redpanda answers 27 here; Kafka does not
    h0.sync("g", a, 1)
    assert h0.group().state is STABLE
    assert h0.heartbeat("g", b, 1).error == 0
    h0.join("g", a, version=3, rebalance_timeout_ms=60_000, session_timeout_ms=30_000)
    assert h0.group().state is PR
    timers = h0.coordinator._timers
    h0.advance(1_000)
    assert h0.heartbeat("g", b, 1).error == ErrorCode.REBALANCE_IN_PROGRESS
    assert timers.deadline(h0.group().members[b].session_key) == h0.now_ms + 30_000  # and resets the session
    h0.leave("g", b)  # a alone: the join completes
    h0.leave("g", a)
    assert h0.group().state is EMPTY
    assert h0.heartbeat("g", a, 2).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_missing_heartbeats_expire_the_member_exactly_at_the_session_timeout(h0: Harness) -> None:
    (a, b), generation = h0.stable_group("g", 2, session_timeout_ms=10_000)
    h0.advance(4_000)
    h0.heartbeat("g", a, generation)
    h0.heartbeat("g", b, generation)
    h0.advance(9_999)
    assert set(h0.group().members) == {a, b}
    h0.advance(1)
    assert not h0.group().members


def test_heartbeat_does_not_allocate_timer_garbage(h0: Harness) -> None:
    (a, _b), generation = h0.stable_group("g", 2)
    timers = h0.coordinator._timers
    size = len(timers._heap)
    for _ in range(10_000):
        h0.heartbeat("g", a, generation)
    assert len(timers._heap) == size


# -- LeaveGroup ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_v0_to_v2_leave_of_one_member(h0: Harness, version: int) -> None:
    (a, b), _generation = h0.stable_group("g", 2)
    reply = h0.leave("g", b, version=version)
    assert reply.error == 0
    assert list(h0.group().members) == [a] and h0.group().state is PR
    assert h0.leave("g", "ghost", version=version).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h0.leave("nope", a, version=version).error == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [3, 4, 5])
def test_v3_plus_leave_of_an_unknown_group_reports_per_member(h0: Harness, version: int) -> None:
    reply = h0.leave("nope", members=[("m1", None), ("", "i-1")], version=version)
    assert reply.wire.error_code == 0
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in reply.wire.members] == [
        ("m1", None, ErrorCode.UNKNOWN_MEMBER_ID),
        ("", "i-1", ErrorCode.UNKNOWN_MEMBER_ID),
    ]


def test_leave_with_an_empty_group_id(h0: Harness) -> None:
    assert h0.leave("", "m", version=4).error == ErrorCode.INVALID_GROUP_ID


def test_v3_batch_leave_with_unknown_fenced_and_admin_removals(h0: Harness) -> None:
    """LeaveGroup v3+ batch: unknown members, fenced instance ids and admin removals each get their own error."""
    (dyn, s1, _s2, keep), generation = h0.stable_group("g", 4, instance_ids=[None, "i-1", "i-2", None])
    reply = h0.leave(
        "g",
        members=[
            ("ghost", None),  # unknown
            ("stale-id", "i-1"),  # instance i-1 belongs to s1: fenced
            ("", "i-2"),  # admin removal by instance id alone
            (dyn, None),  # a dynamic member leaving
            ("", "i-unknown"),  # admin removal of an unknown instance
        ],
        version=5,
    )
    assert reply.wire.error_code == 0
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in reply.wire.members] == [
        ("ghost", None, ErrorCode.UNKNOWN_MEMBER_ID),
        ("stale-id", "i-1", ErrorCode.FENCED_INSTANCE_ID),
        ("", "i-2", 0),
        (dyn, None, 0),
        ("", "i-unknown", ErrorCode.UNKNOWN_MEMBER_ID),
    ]
    assert set(h0.group().members) == {s1, keep}
    assert h0.group().static_members == {"i-1": s1}
    assert h0.group().state is PR
    assert h0.heartbeat("g", s1, generation, instance_id="i-1").error == ErrorCode.REBALANCE_IN_PROGRESS


def test_static_member_leaving_with_its_ids(h0: Harness) -> None:
    (_a, s), _ = h0.stable_group("g", 2, instance_ids=[None, "i-s"])
    reply = h0.leave("g", members=[(s, "i-s")], version=3)
    assert reply.wire.members[0].error_code == 0
    assert not h0.group().static_members


def test_leave_during_preparing_rebalance_completes_the_join(h0: Harness) -> None:
    (a, b), generation = h0.stable_group("g", 2)
    a_join = h0.join("g", a, version=5)
    assert not a_join.answered
    h0.leave("g", b)
    assert a_join.wire.generation_id == generation + 1


def test_leave_of_a_member_with_a_parked_join(h0: Harness) -> None:
    (a, s, c), _generation = h0.stable_group("g", 3, instance_ids=[None, "i-s", None])
    h0.join("g", a, version=5)  # the leader rejoins: PreparingRebalance
    s_join = h0.join("g", s, version=5, instance_id="i-s")
    assert not s_join.answered  # c has not rejoined yet
    reply = h0.leave("g", members=[("", "i-s")], version=4)  # an admin removes s
    assert reply.wire.members[0].error_code == 0
    assert s_join.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert s_join.wire.member_id == ""
    assert h0.group().state is PR and set(h0.group().members) == {a, c}


def test_leave_of_a_pending_member(h0: Harness) -> None:
    (a,), generation = h0.stable_group("g", 1)
    pending = h0.join("g", version=4).wire.member_id
    a_join = h0.join("g", a, version=5)
    assert not a_join.answered  # waits for the pending member
    reply = h0.leave("g", members=[(pending, None)], version=3)
    assert reply.wire.members[0].error_code == 0
    assert a_join.wire.generation_id == generation + 1  # the join phase completes at once
    assert not h0.group().pending_members


def test_leave_of_the_last_member_goes_empty(h0: Harness) -> None:
    (a,), generation = h0.stable_group("g", 1)
    assert h0.leave("g", a, version=0).error == 0
    assert h0.group().state is EMPTY and h0.group().generation_id == generation + 1


def test_leave_in_completing_rebalance_rebalances(h0: Harness) -> None:
    joins = [h0.join("g", version=3) for _ in range(3)]
    h0.advance(0)
    _a, b, c = (j.wire.member_id for j in joins)
    parked = h0.sync("g", b, 1)
    h0.leave("g", c)
    assert h0.group().state is PR
    assert parked.error == ErrorCode.REBALANCE_IN_PROGRESS
