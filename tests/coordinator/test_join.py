"""JoinGroup v0-9 (docs/groups.md#initial-delayed-join, docs/groups.md#request-checks;
transitions T1, T2 in docs/groups.md#classic-transitions)."""

from __future__ import annotations

import pytest

from coordinator.core.group_coordinator import default_member_id
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from tests.coordinator.harness import Harness, classic_group_of, subscription

EMPTY, PR, CR, STABLE = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
)


# -- KIP-394 two-step join and the initial delayed join ---------------------------


@pytest.mark.parametrize("version", [4, 5, 6, 7, 8, 9])
def test_v4_plus_dynamic_join_needs_a_member_id_then_waits_for_the_initial_delay(
    h: Harness, version: int
) -> None:
    first = h.join("g", version=version)
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    assert first.wire.member_id == "client-1"
    assert (first.wire.generation_id, first.wire.leader, first.wire.members) == (-1, "", [])
    assert first.wire.protocol_name == (None if version >= 7 else "")
    group = h.group()
    assert group.state is EMPTY  # T1: created Empty; the pending member is not a member yet
    assert group.pending_members == {"client-1"} and not group.members

    second = h.join("g", "client-1", version=version)
    assert not second.answered
    assert group.state is PR and group.previous_state is EMPTY  # T2
    h.advance(2_999)
    assert not second.answered
    h.advance(1)
    wire = second.wire
    assert wire.error_code == 0
    assert (wire.generation_id, wire.leader, wire.member_id) == (1, "client-1", "client-1")
    assert wire.protocol_name == "range"
    assert wire.protocol_type == ("consumer" if version >= 7 else None)
    assert [(m.member_id, m.metadata) for m in wire.members] == [("client-1", subscription(["t"]))]
    assert wire.skip_assignment is False
    assert group.state is CR


def test_v4_leader_and_follower_sync_generation_1(h: Harness) -> None:
    a = h.join("g", version=4, client_id="a")
    a2 = h.join("g", a.wire.member_id, version=4, client_id="a")
    h.advance(1_000)
    b = h.join("g", version=4, client_id="b")
    b2 = h.join("g", b.wire.member_id, version=4, client_id="b")
    h.advance(2_000)  # the delay is extended once because b arrived during it
    assert not a2.answered and not b2.answered
    h.advance(3_000)
    assert a2.wire.generation_id == b2.wire.generation_id == 1
    assert a2.wire.leader == b2.wire.leader == "a-1"
    assert len(a2.wire.members) == 2 and b2.wire.members == []

    follower_sync = h.sync("g", "b-2", 1)
    assert not follower_sync.answered
    leader_sync = h.sync("g", "a-1", 1, assignments={"a-1": b"A", "b-2": b"B"})
    assert (leader_sync.wire.error_code, leader_sync.wire.assignment) == (0, b"A")
    assert (follower_sync.wire.error_code, follower_sync.wire.assignment) == (0, b"B")
    assert h.group().state is STABLE


# -- JoinGroup v0-3 has no MEMBER_ID_REQUIRED round trip ----------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_v0_to_v3_join_directly(h: Harness, version: int) -> None:
    reply = h.join("g", version=version, session_timeout_ms=10_000, rebalance_timeout_ms=45_000)
    assert not reply.answered
    member = h.group().members["client-1"]
    # v0 has no rebalance timeout: the session timeout is used (KAFKA-8653).
    assert member.rebalance_timeout_ms == (10_000 if version == 0 else 45_000)
    h.advance(3_000)
    assert reply.error == 0
    assert (reply.wire.generation_id, reply.wire.member_id, reply.wire.leader) == (1, "client-1", "client-1")


def test_negative_rebalance_timeout_falls_back_to_session_timeout(h: Harness) -> None:
    h.join("g", version=3, rebalance_timeout_ms=-1)
    assert h.group().rebalance_timeout_ms() == 10_000


# -- initial delayed join ----------------------------------------------------------------------


def test_initial_delay_is_extended_while_members_arrive_but_bounded_by_rebalance_timeout() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=3_000))
    joins = [h.join("g", version=3, rebalance_timeout_ms=7_000)]
    h.advance(1_000)
    joins.append(h.join("g", version=3, rebalance_timeout_ms=7_000))
    h.advance(2_000)  # t=3000: extended to 6000 (remaining 1000)
    assert h.group().initial_join_delay == (3_000, 1_000)
    h.advance(1_000)
    joins.append(h.join("g", version=3, rebalance_timeout_ms=7_000))  # t=4000
    h.advance(2_000)  # t=6000: extended by min(3000, 1000)
    assert h.group().initial_join_delay == (1_000, 0)
    h.advance(500)
    joins.append(h.join("g", version=3, rebalance_timeout_ms=7_000))  # t=6500
    h.advance(499)
    assert not any(j.answered for j in joins)
    h.advance(1)  # t=7000 = the rebalance timeout: no time left, complete
    assert [j.error for j in joins] == [0, 0, 0, 0]
    assert {j.wire.generation_id for j in joins} == {1}


def test_initial_delay_never_completes_early(h: Harness) -> None:
    reply = h.join("g", version=3)
    assert h.group().has_all_members_joined()
    h.advance(2_999)
    assert not reply.answered


def test_zero_initial_delay_completes_on_the_next_poll(h0: Harness) -> None:
    reply = h0.join("g", version=3)
    assert not reply.answered
    h0.advance(0)
    assert reply.error == 0


def test_a_group_reforming_from_empty_gets_the_initial_delay_again(h0: Harness) -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=2_000))
    members, _ = h.stable_group("g", 1)
    h.leave("g", members[0])
    assert h.group().state is EMPTY and h.group().generation_id == 2
    reply = h.join("g", version=3)
    h.advance(1_999)
    assert not reply.answered
    h.advance(1)
    assert reply.wire.generation_id == 3


# -- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("session_timeout_ms", "expected"),
    [
        (5_999, ErrorCode.INVALID_SESSION_TIMEOUT),
        (6_000, 0),
        (1_800_000, 0),
        (1_800_001, ErrorCode.INVALID_SESSION_TIMEOUT),
    ],
)
def test_session_timeout_bounds(h0: Harness, session_timeout_ms: int, expected: int) -> None:
    reply = h0.join("g", version=3, session_timeout_ms=session_timeout_ms)
    h0.advance(0)
    assert reply.error == expected
    if expected:
        assert reply.wire.generation_id == -1
        assert classic_group_of(h0.coordinator, "g") is None  # validated before the group is created


@pytest.mark.parametrize("version", [3, 7])
def test_protocol_type_mismatch_and_no_common_protocol(h0: Harness, version: int) -> None:
    members, _ = h0.stable_group("g", 1, protocols=[("range", b"")])
    wrong_type = h0.join("g", version=version, protocol_type="connect", protocols=[("range", b"")])
    assert wrong_type.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert wrong_type.wire.member_id == ""
    assert wrong_type.wire.protocol_name == (None if version >= 7 else "")
    no_common = h0.join("g", version=version, protocols=[("roundrobin", b"")])
    assert no_common.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    known = h0.join("g", members[0], version=version, protocols=[("roundrobin", b"")])
    assert known.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert known.wire.member_id == members[0]
    assert h0.group().state is STABLE and list(h0.group().members) == members


@pytest.mark.parametrize(("protocol_type", "protocols"), [("", [("range", b"")]), ("consumer", [])])
def test_first_member_needs_a_protocol_type_and_protocols(
    h0: Harness, protocol_type: str, protocols: list[tuple[str, bytes]]
) -> None:
    reply = h0.join("g", version=3, protocol_type=protocol_type, protocols=protocols)
    assert reply.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert not h0.group().members


def test_first_member_fixes_the_protocol_type(h0: Harness) -> None:
    h0.join("g", version=3, protocol_type="connect", protocols=[("default", b"x")])
    assert h0.group().protocol_type == "connect"


def test_empty_group_id_is_invalid(h0: Harness) -> None:
    reply = h0.join("", "m", version=5)
    assert reply.error == ErrorCode.INVALID_GROUP_ID
    assert reply.wire.member_id == "m"


def test_unknown_group_with_a_member_id(h0: Harness) -> None:
    reply = h0.join("g", "ghost", version=5)
    assert reply.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert reply.wire.member_id == "ghost"
    assert classic_group_of(h0.coordinator, "g") is None


def test_unknown_member_id_in_a_live_group(h0: Harness) -> None:
    h0.stable_group("g", 1)
    reply = h0.join("g", "ghost", version=5)
    assert (reply.error, reply.wire.member_id) == (ErrorCode.UNKNOWN_MEMBER_ID, "ghost")


def test_known_member_id_after_the_group_went_empty(h0: Harness) -> None:
    members, _ = h0.stable_group("g", 1)
    h0.leave("g", members[0])
    assert h0.group().state is EMPTY
    assert h0.join("g", members[0], version=5).error == ErrorCode.UNKNOWN_MEMBER_ID


# -- group.max.size -----------------------------------------------------------------------------


def test_group_max_size_rejects_a_third_member() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_max_size=2))
    members, _ = h.stable_group("g", 2)
    third = h.join("g", version=5)
    assert third.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert third.wire.member_id == ""
    assert list(h.group().members) == members and h.group().state is STABLE
    # Capacity is checked before MEMBER_ID_REQUIRED is considered.
    assert h.join("g", version=4).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert not h.group().pending_members


def test_pending_member_refused_when_it_comes_back_to_a_full_group() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_max_size=2))
    (a, b), _ = h.stable_group("g", 2)
    h.join("g", a, version=5)  # PreparingRebalance, 1 of 2 rejoined
    pending = h.join("g", version=4)
    assert pending.error == ErrorCode.MEMBER_ID_REQUIRED  # 1 rejoined < 2
    h.join("g", b, version=5)  # join phase completes: 2 of 2
    refused = h.join("g", pending.wire.member_id, version=4)
    assert refused.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert pending.wire.member_id not in h.group().pending_members


def test_group_max_size_in_preparing_rebalance_counts_members_that_rejoined() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_max_size=2))
    (a, b), _ = h.stable_group("g", 2)
    a_join = h.join("g", a, version=5)  # the leader rejoins: PreparingRebalance
    assert h.group().state is PR and h.group().num_awaiting_join == 1
    c_join = h.join("g", version=3)  # 1 member rejoined < 2: accepted (the group now has 3)
    assert not c_join.answered and len(h.group().members) == 3
    b_join = h.join("g", b, version=5)  # 2 rejoined: b is refused and kicked out
    assert b_join.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert b_join.wire.member_id == ""
    assert b not in h.group().members
    # Like Kafka, the kick-out does not re-check the join phase: it completes on its timer.
    assert not a_join.answered
    h.advance(60_000)
    assert a_join.wire.generation_id == c_join.wire.generation_id == 2
    assert {m.member_id for m in a_join.wire.members} == {a, c_join.wire.member_id}


# -- known members ------------------------------------------------------------------------------------


def test_completing_rebalance_rejoin_with_same_metadata_returns_the_current_generation(h0: Harness) -> None:
    a = h0.join("g", version=3)
    b = h0.join("g", version=3)
    h0.advance(0)
    leader, follower = a.wire.member_id, b.wire.member_id
    assert h0.group().state is CR
    again_leader = h0.join("g", leader, version=5)
    again_follower = h0.join("g", follower, version=5)
    assert again_leader.wire.generation_id == again_follower.wire.generation_id == 1
    assert len(again_leader.wire.members) == 2 and again_follower.wire.members == []
    assert again_follower.wire.leader == leader
    assert h0.group().state is CR


def test_completing_rebalance_rejoin_with_new_metadata_rebalances(h0: Harness) -> None:
    a = h0.join("g", version=3)
    b = h0.join("g", version=3)
    h0.advance(0)
    leader, follower = a.wire.member_id, b.wire.member_id
    parked_sync = h0.sync("g", follower, 1)
    assert not parked_sync.answered
    rejoin = h0.join("g", follower, version=5, topics=("t", "u"))
    assert h0.group().state is PR  # T4
    assert parked_sync.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert not rejoin.answered
    h0.join("g", leader, version=5)
    assert rejoin.wire.generation_id == 2


def test_stable_follower_with_same_metadata_gets_the_current_generation(h0: Harness) -> None:
    (leader, follower), generation = h0.stable_group("g", 2)
    reply = h0.join("g", follower, version=5)
    assert (reply.error, reply.wire.generation_id, reply.wire.leader) == (0, generation, leader)
    assert reply.wire.members == []
    assert h0.group().state is STABLE
    sync = h0.sync("g", follower, generation)
    assert sync.wire.assignment == f"assignment-{follower}".encode()


def test_stable_leader_rejoin_always_rebalances(h0: Harness) -> None:
    (leader, follower), _ = h0.stable_group("g", 2)
    reply = h0.join("g", leader, version=5)
    assert not reply.answered
    assert h0.group().state is PR  # T3
    assert h0.heartbeat("g", follower, 1).error == ErrorCode.REBALANCE_IN_PROGRESS


def test_stable_follower_with_new_metadata_rebalances(h0: Harness) -> None:
    (_leader, follower), _ = h0.stable_group("g", 2)
    h0.join("g", follower, version=5, topics=("other",))
    assert h0.group().state is PR


def test_new_member_join_timeout_frees_a_parked_join_of_a_new_member(h0: Harness) -> None:
    (a,), generation = h0.stable_group("g", 1, rebalance_timeout_ms=600_000)
    b = h0.join("g", version=3, rebalance_timeout_ms=600_000)
    assert h0.group().state is PR
    for _ in range(99):  # a keeps heartbeating (and learns it should rejoin, but does not)
        h0.advance(3_000)
        assert h0.heartbeat("g", a, generation).error == ErrorCode.REBALANCE_IN_PROGRESS
    h0.advance(2_999)
    assert not b.answered
    h0.advance(1)  # 300 s after its JoinGroup
    assert b.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert b.wire.member_id == ""
    assert list(h0.group().members) == [a]


def test_completed_join_turns_new_members_into_regular_ones(h0: Harness) -> None:
    reply = h0.join("g", version=3, session_timeout_ms=7_000)
    member = h0.group().members[reply_member := "client-1"]
    assert member.is_new
    assert h0.coordinator._timers.deadline(member.session_key) == h0.now_ms + 300_000
    h0.advance(0)
    assert reply.wire.member_id == reply_member
    assert not member.is_new
    assert h0.coordinator._timers.deadline(member.session_key) == h0.now_ms + 7_000


def test_member_ids_use_the_client_id_or_the_instance_id(h0: Harness) -> None:
    dynamic = h0.join("g", version=3, client_id="consumer-7")
    static = h0.join("g", version=5, instance_id="host-a", client_id="consumer-8")
    h0.advance(0)
    assert dynamic.wire.member_id == "consumer-7-1"
    assert static.wire.member_id == "host-a-2"


def test_default_member_ids_are_prefix_dash_uuid() -> None:
    member_id = default_member_id("rdkafka")
    prefix, _, suffix = member_id.partition("-")
    assert prefix == "rdkafka" and len(suffix) == 36
    assert default_member_id("rdkafka") != member_id
