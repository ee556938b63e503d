"""SyncGroup v0-5 (docs/groups.md#sync-and-the-assignment; transition T7 in
docs/groups.md#classic-transitions and its failure path)."""

from __future__ import annotations

import pytest

from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from tests.coordinator.harness import Harness

PR, CR, STABLE = GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE


def completing_group(h: Harness, size: int = 2) -> list[str]:
    joins = [h.join("g", version=3, session_timeout_ms=60_000) for _ in range(size)]
    h.advance(0)
    assert h.group().state is CR
    return [j.wire.member_id for j in joins]


@pytest.mark.parametrize(
    ("protocol_type", "protocol_name"),
    [("consumer", "roundrobin"), (None, "range"), ("consumer", None), ("connect", "range")],
)
def test_v5_protocol_type_and_name_must_be_present_and_match(
    h0: Harness, protocol_type: str | None, protocol_name: str | None
) -> None:
    """SyncGroup v5: protocol type and name must be present and match the group's, else INCONSISTENT_GROUP_PROTOCOL."""
    (leader, _), generation = h0.stable_group("g", 2)
    reply = h0.sync(
        "g", leader, generation, version=5, protocol_type=protocol_type, protocol_name=protocol_name
    )
    assert reply.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (reply.wire.protocol_type, reply.wire.protocol_name, reply.wire.assignment) == (None, None, b"")


def test_v5_null_protocol_is_refused_before_anything_else(h0: Harness) -> None:
    reply = h0.sync("unknown", "m", 1, version=5, protocol_type=None)
    assert reply.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_stable_sync_returns_the_assignment_and_v5_echoes_the_protocol(h0: Harness, version: int) -> None:
    (_leader, follower), generation = h0.stable_group("g", 2)
    reply = h0.sync("g", follower, generation, version=version)
    assert (reply.error, reply.wire.assignment) == (0, f"assignment-{follower}".encode())
    expected = ("consumer", "range") if version >= 5 else (None, None)
    assert (reply.wire.protocol_type, reply.wire.protocol_name) == expected


def test_v3_to_v4_protocol_fields_are_not_checked(h0: Harness) -> None:
    (leader, _), generation = h0.stable_group("g", 2)
    assert h0.sync("g", leader, generation, version=4, protocol_type="x", protocol_name="y").error == 0


@pytest.mark.parametrize(
    ("group", "member", "instance", "generation", "expected"),
    [
        ("", "m", None, 1, ErrorCode.INVALID_GROUP_ID),
        ("nope", "m", None, 1, ErrorCode.UNKNOWN_MEMBER_ID),
        ("g", "ghost", None, 1, ErrorCode.UNKNOWN_MEMBER_ID),
        ("g", "LEADER", None, 7, ErrorCode.ILLEGAL_GENERATION),
        ("g", "LEADER", "someone", 1, ErrorCode.UNKNOWN_MEMBER_ID),
        ("g", "ghost", "i-s", 1, ErrorCode.FENCED_INSTANCE_ID),
    ],
)
def test_sync_validation(
    h0: Harness, group: str, member: str, instance: str | None, generation: int, expected: int
) -> None:
    (leader, _), _ = h0.stable_group("g", 2, instance_ids=[None, "i-s"])
    reply = h0.sync(group, leader if member == "LEADER" else member, generation, instance_id=instance)
    assert reply.error == expected
    assert reply.wire.assignment == b""


def test_sync_in_preparing_rebalance(h0: Harness) -> None:
    (leader, follower), generation = h0.stable_group("g", 2)
    h0.join("g", leader, version=5)
    assert h0.sync("g", follower, generation).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_sync_on_an_empty_group(h0: Harness) -> None:
    h0.commit("g", {("t", 0): 1})  # an Empty simple group
    assert h0.sync("g", "m", 0).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_assignment_is_persisted_before_members_get_it(h0: Harness) -> None:
    """T7: CompletingRebalance -> Stable only once the leader's assignment is durable."""
    leader, follower = completing_group(h0)
    follower_sync = h0.sync("g", follower, 1)
    h0.hold = True
    leader_sync = h0.sync("g", leader, 1, assignments={leader: b"L", "not-a-member": b"?"})
    assert not follower_sync.answered and not leader_sync.answered
    assert h0.group().state is CR and "g" not in h0.store.groups
    assert h0.heartbeat("g", follower, 1).error == 0  # heartbeats are answered meanwhile
    h0.flush()
    assert (leader_sync.wire.error_code, leader_sync.wire.assignment) == (0, b"L")
    assert (follower_sync.wire.error_code, follower_sync.wire.assignment) == (0, b"")  # missing: empty
    assert h0.group().state is STABLE
    record = h0.store.groups["g"]
    assert {m.member_id: m.assignment for m in record.members} == {leader: b"L", follower: b""}
    assert record.generation_id == 1 and record.leader_id == leader and record.protocol_name == "range"
    # A follower that syncs after the group became Stable gets its stored assignment at once.
    assert h0.sync("g", follower, 1).wire.assignment == b""


def test_followers_sync_ignores_their_assignments(h0: Harness) -> None:
    leader, follower = completing_group(h0)
    h0.sync("g", follower, 1, assignments={follower: b"mine!"})
    h0.sync("g", leader, 1, assignments={follower: b"F"})
    assert h0.group().members[follower].assignment == b"F"


@pytest.mark.parametrize(
    ("write_error", "expected"),
    [
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REBALANCE_IN_PROGRESS),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_failed_assignment_write_answers_parked_syncs_and_rebalances(
    h0: Harness, write_error: int, expected: int
) -> None:
    """T4 on a storage error."""
    leader, follower = completing_group(h0)
    follower_sync = h0.sync("g", follower, 1)
    h0.fail_code = write_error
    leader_sync = h0.sync("g", leader, 1, assignments={leader: b"L", follower: b"F"})
    assert leader_sync.error == follower_sync.error == expected
    assert (leader_sync.wire.assignment, follower_sync.wire.protocol_name) == (b"", None)
    assert h0.group().state is PR
    assert all(m.assignment == b"" for m in h0.group().members.values())
    assert "g" not in h0.store.groups
    h0.fail_code = None
    a = h0.join("g", leader, version=5)
    b = h0.join("g", follower, version=5)
    assert a.wire.generation_id == b.wire.generation_id == 2


def test_write_completing_after_a_new_rebalance_is_ignored(h0: Harness) -> None:
    """The append callback re-validates state and generation (another member joined meanwhile)."""
    leader, follower = completing_group(h0)
    follower_sync = h0.sync("g", follower, 1)
    h0.hold = True
    leader_sync = h0.sync("g", leader, 1, assignments={leader: b"L", follower: b"F"})
    h0.hold = False
    newcomer = h0.join("g", version=3)
    assert h0.group().state is PR
    assert leader_sync.error == follower_sync.error == ErrorCode.REBALANCE_IN_PROGRESS
    h0.flush()  # the stale write becomes durable: nothing happens
    assert h0.group().state is PR
    assert not newcomer.answered


def test_failure_after_a_new_rebalance_is_ignored(h0: Harness) -> None:
    leader, _follower = completing_group(h0)
    h0.hold = True
    h0.sync("g", leader, 1, assignments={leader: b"L"})
    h0.hold = False
    h0.join("g", version=3)
    h0.flush(ErrorCode.NOT_COORDINATOR)
    assert h0.group().state is PR


def test_a_second_sync_from_the_same_member_supersedes_the_parked_one(h0: Harness) -> None:
    leader, follower = completing_group(h0)
    first = h0.sync("g", follower, 1)
    second = h0.sync("g", follower, 1)
    assert first.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert not second.answered
    h0.sync("g", leader, 1, assignments={follower: b"F"})
    assert second.wire.assignment == b"F"


def test_delivering_the_assignment_restarts_the_session(h0: Harness) -> None:
    joins = [
        h0.join("g", version=3, session_timeout_ms=10_000, rebalance_timeout_ms=60_000) for _ in range(2)
    ]
    h0.advance(0)
    leader, follower = (j.wire.member_id for j in joins)
    h0.sync("g", follower, 1)
    for _ in range(3):  # the follower waits for the leader without heartbeating; the leader does
        h0.advance(4_000)
        assert h0.heartbeat("g", leader, 1).error == 0
    # The follower's session expired at 10 s, but its parked SyncGroup kept it in the group.
    assert follower in h0.group().members
    assert h0.coordinator._timers.deadline(h0.group().members[follower].session_key) is None
    h0.sync("g", leader, 1)
    timers = h0.coordinator._timers
    assert timers.deadline(h0.group().members[follower].session_key) == h0.now_ms + 10_000
