"""Static membership, KIP-345 (docs/groups.md#static-membership)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from tests.coordinator.harness import Harness, subscription

PR, CR, STABLE = GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE


def static_group(h: Harness) -> tuple[str, str, int]:
    (leader, follower), generation = h.stable_group(
        "g", 2, instance_ids=["i-l", "i-f"], session_timeout_ms=30_000
    )
    return leader, follower, generation


@pytest.mark.parametrize("version", [5, 6, 7, 8, 9])
def test_follower_restart_keeps_the_generation_and_fences_the_old_process(h0: Harness, version: int) -> None:
    """A static follower that restarts (new member id, same instance id) keeps the generation; its old member id is fenced."""
    leader, follower, generation = static_group(h0)
    h0.hold = True
    reply = h0.join("g", version=version, instance_id="i-f", session_timeout_ms=30_000)
    assert not reply.answered  # the new member id is persisted first
    assert {m.member_id for m in h0.store.groups["g"].members} == {leader, follower}
    h0.flush()
    h0.hold = False
    new_id = reply.wire.member_id
    assert new_id != follower and new_id.startswith("i-f-")
    assert {m.member_id for m in h0.store.groups["g"].members} == {leader, new_id}
    assert (reply.error, reply.wire.generation_id, reply.wire.leader) == (0, generation, leader)
    assert reply.wire.members == [] and reply.wire.skip_assignment is False
    assert reply.wire.protocol_name == "range"
    assert h0.group().state is STABLE and h0.group().generation_id == generation  # no rebalance
    assert h0.heartbeat("g", follower, generation, instance_id="i-f").error == ErrorCode.FENCED_INSTANCE_ID
    sync = h0.sync("g", new_id, generation, instance_id="i-f")
    assert (sync.error, sync.wire.assignment) == (0, f"assignment-{follower}".encode())
    assert h0.heartbeat("g", new_id, generation, instance_id="i-f").error == 0
    assert h0.heartbeat("g", leader, generation, instance_id="i-l").error == 0


@pytest.mark.parametrize("version", [5, 6, 7, 8, 9])
def test_leader_restart(h0: Harness, version: int) -> None:
    """A static leader that restarts: v9 gets SkipAssignment; older versions get the old leader id."""
    leader, follower, generation = static_group(h0)
    reply = h0.join("g", version=version, instance_id="i-l", session_timeout_ms=30_000)
    new_id = reply.wire.member_id
    assert reply.error == 0 and reply.wire.generation_id == generation
    assert h0.group().leader_id == new_id
    if version >= 9:
        assert reply.wire.leader == new_id
        assert reply.wire.skip_assignment is True
        assert {(m.member_id, m.group_instance_id) for m in reply.wire.members} == {
            (new_id, "i-l"),
            (follower, "i-f"),
        }
    else:
        assert reply.wire.leader == leader  # not its new id: it acts as a follower
        assert reply.wire.members == []
    assert h0.group().state is STABLE
    sync = h0.sync("g", new_id, generation)
    assert sync.wire.assignment == f"assignment-{leader}".encode()


@pytest.mark.parametrize(
    ("write_error", "expected"),
    [
        (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REBALANCE_IN_PROGRESS),
    ],
)
def test_failed_replacement_write_reverts_to_the_old_member(
    h0: Harness, write_error: int, expected: int
) -> None:
    leader, follower, generation = static_group(h0)
    h0.fail_code = write_error
    reply = h0.join("g", version=7, instance_id="i-f", session_timeout_ms=45_000, topics=("t", "u"))
    h0.fail_code = None
    assert reply.error == expected
    assert (reply.wire.member_id, reply.wire.generation_id, reply.wire.leader) == ("", generation, leader)
    group = h0.group()
    assert set(group.members) == {leader, follower}
    assert group.static_members == {"i-l": leader, "i-f": follower}
    restored = group.members[follower]
    assert restored.session_timeout_ms == 30_000
    assert restored.protocols == (("range", subscription(["t"])),)
    assert restored.assignment == f"assignment-{follower}".encode()
    assert group.num_awaiting_join == 0
    assert h0.heartbeat("g", follower, generation, instance_id="i-f").error == 0
    assert h0.heartbeat("g", "i-f-3", generation).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_replacement_write_completing_after_a_rebalance_started(h0: Harness) -> None:
    leader, _follower, generation = static_group(h0)
    h0.hold = True
    reply = h0.join("g", version=9, instance_id="i-f", session_timeout_ms=30_000)
    h0.hold = False
    leader_join = h0.join("g", leader, version=5, session_timeout_ms=30_000)  # forces a rebalance
    # The new member's parked JoinGroup takes part in it; both joined, so it completes at once.
    assert h0.group().state is CR
    assert reply.wire.generation_id == leader_join.wire.generation_id == generation + 1
    h0.flush()  # the replacement record becomes durable: its continuation sees a new generation
    assert h0.group().state is CR and h0.group().generation_id == generation + 1


def test_static_member_changing_the_selected_protocol_rebalances(h0: Harness) -> None:
    """A static member whose rejoin selects another protocol makes the group rebalance."""
    (_member,), generation = h0.stable_group("g", 1, instance_ids=["i-1"], protocols=[("range", b"")])
    reply = h0.join("g", version=5, instance_id="i-1", protocols=[("roundrobin", b""), ("range", b"")])
    assert reply.wire.generation_id == generation + 1  # the lone member rejoined: completes at once
    assert reply.wire.protocol_name == "roundrobin"
    assert h0.group().state is CR


def test_static_member_changing_metadata_but_not_the_protocol_does_not_rebalance(h0: Harness) -> None:
    _leader, _follower, generation = static_group(h0)
    reply = h0.join("g", version=5, instance_id="i-f", session_timeout_ms=30_000, topics=("t", "extra"))
    assert reply.wire.generation_id == generation
    assert h0.group().state is STABLE
    record = {m.group_instance_id: m for m in h0.store.groups["g"].members}
    assert record["i-f"].subscription == subscription(["t", "extra"])
    assert h0.group().subscribed_topics == frozenset({"t"})  # recomputed at the next generation only


def test_replacement_in_completing_rebalance_rebalances_and_fences_the_parked_sync(h0: Harness) -> None:
    joins = [h0.join("g", version=5, instance_id=i, session_timeout_ms=30_000) for i in ("i-a", "i-b")]
    h0.advance(0)
    a, b = (j.wire.member_id for j in joins)
    old_sync = h0.sync("g", b, 1, instance_id="i-b")
    new_join = h0.join("g", version=5, instance_id="i-b", session_timeout_ms=30_000)
    assert old_sync.error == ErrorCode.FENCED_INSTANCE_ID
    assert h0.group().state is PR
    assert not new_join.answered
    a_join = h0.join("g", a, version=5, instance_id="i-a", session_timeout_ms=30_000)
    assert a_join.wire.generation_id == new_join.wire.generation_id == 2


def test_replacement_in_preparing_rebalance_fences_the_parked_join(h0: Harness) -> None:
    (a, s, c), generation = h0.stable_group(
        "g", 3, instance_ids=[None, "i-s", None], session_timeout_ms=30_000
    )
    h0.join("g", a, version=5, session_timeout_ms=30_000)
    old_join = h0.join("g", s, version=5, instance_id="i-s", session_timeout_ms=30_000)
    new_join = h0.join("g", version=5, instance_id="i-s", session_timeout_ms=30_000)
    assert old_join.error == ErrorCode.FENCED_INSTANCE_ID
    assert old_join.wire.member_id == s
    assert not new_join.answered
    c_join = h0.join("g", c, version=5, session_timeout_ms=30_000)
    assert c_join.wire.generation_id == new_join.wire.generation_id == generation + 1
    assert h0.group().num_awaiting_join == 0


def test_replacing_a_member_that_had_not_synced_yet_transfers_the_obligation(h0: Harness) -> None:
    args: dict[str, Any] = {"session_timeout_ms": 60_000, "rebalance_timeout_ms": 20_000}
    joins = [h0.join("g", version=5, instance_id=i, **args) for i in ("i-a", "i-b")]
    h0.advance(0)
    a, b = (j.wire.member_id for j in joins)
    h0.sync("g", a, 1, assignments={a: b"A", b: b"B"})
    assert h0.group().state is STABLE and h0.group().pending_sync_members == {b}
    new_id = h0.join("g", version=5, instance_id="i-b", **args).wire.member_id
    assert h0.group().pending_sync_members == {new_id}
    assert h0.sync("g", new_id, 1).wire.assignment == b"B"
    h0.advance(20_000)
    assert h0.group().state is STABLE  # nobody owes a SyncGroup: no rebalance


def test_static_member_is_fenced_on_every_api(h0: Harness) -> None:
    leader, follower, generation = static_group(h0)
    stale = "stale-id"
    assert h0.join("g", stale, version=5, instance_id="i-f").error == ErrorCode.FENCED_INSTANCE_ID
    assert h0.sync("g", stale, generation, instance_id="i-f").error == ErrorCode.FENCED_INSTANCE_ID
    assert h0.heartbeat("g", stale, generation, instance_id="i-f").error == ErrorCode.FENCED_INSTANCE_ID
    commit = h0.commit("g", {("t", 0): 1}, member_id=stale, generation=generation, instance_id="i-f")
    assert commit.wire.topics[0].partitions[0].error_code == ErrorCode.FENCED_INSTANCE_ID
    leave = h0.leave("g", members=[(stale, "i-f")], version=3)
    assert leave.wire.members[0].error_code == ErrorCode.FENCED_INSTANCE_ID
    assert set(h0.group().members) == {leader, follower}


def test_static_member_session_expiry_removes_it(h0: Harness) -> None:
    leader, follower, generation = static_group(h0)
    for _ in range(10):
        h0.advance(10_000)
        h0.heartbeat("g", leader, generation)
    assert follower not in h0.group().members and "i-f" not in h0.group().static_members
