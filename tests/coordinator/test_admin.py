"""DescribeGroups, ListGroups, DeleteGroups (docs/groups.md#request-checks; transition T8)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from storage.records import GroupTombstone, OffsetTombstone
from tests.coordinator.harness import DESCRIBE_GROUPS, JOIN_GROUP, Harness, classic_group_of, subscription

INT32_MIN = -(2**31)


# -- DescribeGroups ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_describe_an_unknown_group(h: Harness, version: int) -> None:
    """DescribeGroups of an unknown group: state "Dead" with no error up to v5."""
    reply = h.describe("nope", version=version)
    (group,) = reply.wire.groups
    assert (group.error_code, group.group_id, group.group_state) == (0, "nope", "Dead")
    assert (group.protocol_type, group.protocol_data, group.members) == ("", "", [])


def test_describe_v6_unknown_group_is_group_id_not_found(h: Harness) -> None:
    ctx = h.ctx(DESCRIBE_GROUPS, 6)
    response = h.coordinator.handle(ctx, DescribeGroupsRequest(["nope"])).replies[0][1]
    (group,) = response.groups
    assert (group.error_code, group.group_state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
    assert group.error_message


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_describe_a_stable_group(h0: Harness, version: int) -> None:
    (leader, follower), _ = h0.stable_group("g", 2, instance_ids=["i-l", None])
    (group,) = h0.describe("g", version=version).wire.groups
    assert (group.error_code, group.group_state, group.protocol_type, group.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    members = {m.member_id: m for m in group.members}
    assert set(members) == {leader, follower}
    assert members[leader].member_metadata == subscription(["t"])
    assert members[leader].member_assignment == f"assignment-{leader}".encode()
    assert (members[leader].client_id, members[leader].client_host) == ("client", "/10.0.0.1")
    assert members[leader].group_instance_id == ("i-l" if version >= 4 else None)
    assert group.authorized_operations == INT32_MIN


def test_describe_a_rebalancing_group_hides_metadata_and_assignments(h0: Harness) -> None:
    (leader, _follower), _ = h0.stable_group("g", 2)
    h0.join("g", leader, version=5)
    (group,) = h0.describe("g").wire.groups
    assert (group.group_state, group.protocol_data) == ("PreparingRebalance", "")
    assert all((m.member_metadata, m.member_assignment) == (b"", b"") for m in group.members)
    assert len(group.members) == 2


def test_describe_an_empty_simple_group(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    (group,) = h.describe("g").wire.groups
    assert (group.group_state, group.protocol_type, group.members) == ("Empty", "", [])


def test_describe_authorized_operations_when_asked(h: Harness) -> None:
    (group,) = h.describe("nope", version=3, include_authorized_operations=True).wire.groups
    assert group.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
    (group,) = h.describe("nope", version=2, include_authorized_operations=True).wire.groups
    assert group.authorized_operations == INT32_MIN  # not in v2


def test_describe_several_groups_in_request_order(h0: Harness) -> None:
    h0.stable_group("b", 1)
    h0.commit("a", {("t", 0): 1})
    reply = h0.describe("b", "x", "a")
    assert [(g.group_id, g.group_state) for g in reply.wire.groups] == [
        ("b", "Stable"),
        ("x", "Dead"),
        ("a", "Empty"),
    ]


# -- ListGroups --------------------------------------------------------------------------------------


def listed(reply: Any) -> dict[str, tuple[str, str, str]]:
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in reply.wire.groups}


def groups_in_every_state(h0: Harness) -> None:
    h0.stable_group("stable", 1)
    h0.join("preparing", version=3)  # waits for its (zero) initial delay
    h0.commit("simple", {("t", 0): 1})


def test_list_groups_of_every_kind(h0: Harness) -> None:
    groups_in_every_state(h0)
    reply = h0.list_groups(version=5)
    assert reply.wire.error_code == 0
    assert listed(reply) == {
        "stable": ("consumer", "Stable", "classic"),
        "preparing": ("consumer", "PreparingRebalance", "classic"),
        "simple": ("", "Empty", "classic"),
    }


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        (["stable"], {"stable"}),
        (["STABLE", "empty"], {"stable", "simple"}),
        (["PreparingRebalance"], {"preparing"}),
        (["dead"], set()),
        (["bogus"], set()),
        ([], {"stable", "preparing", "simple"}),
    ],
)
def test_list_groups_states_filter_is_case_insensitive(
    h0: Harness, states: list[str], expected: set[str]
) -> None:
    """ListGroups' states filter matches state names whatever their case."""
    groups_in_every_state(h0)
    assert set(listed(h0.list_groups(version=4, states=states))) == expected


@pytest.mark.parametrize(
    ("types", "expected"),
    [(["classic"], 3), (["Classic", "consumer"], 3), (["consumer"], 0), (["share"], 0), ([], 3)],
)
def test_list_groups_types_filter(h0: Harness, types: list[str], expected: int) -> None:
    groups_in_every_state(h0)
    assert len(h0.list_groups(version=5, types=types).wire.groups) == expected


def test_list_groups_before_v4_has_no_filters_nor_states(h0: Harness) -> None:
    groups_in_every_state(h0)
    reply = h0.list_groups(version=3)
    assert listed(reply) == {
        "stable": ("consumer", "", ""),
        "preparing": ("consumer", "", ""),
        "simple": ("", "", ""),
    }


# -- DeleteGroups --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_groups(h0: Harness, version: int) -> None:
    """DeleteGroups deletes empty and offset-only groups; NON_EMPTY_GROUP for groups with members or rebalancing, GROUP_ID_NOT_FOUND for unknown ones."""
    (member,), generation = h0.stable_group("live", 1)
    h0.commit("live", {("t", 0): 1}, member_id=member, generation=generation)
    h0.commit("simple", {("t", 0): 1, ("u", 3): 2})
    (leaver,), _ = h0.stable_group("empty", 1)
    h0.leave("empty", leaver)
    h0.join("rebalancing", version=3)
    reply = h0.delete_groups("live", "simple", "empty", "rebalancing", "nope", version=version)
    assert {r.group_id: r.error_code for r in reply.wire.results} == {
        "live": ErrorCode.NON_EMPTY_GROUP,
        "simple": 0,
        "empty": 0,
        "rebalancing": ErrorCode.NON_EMPTY_GROUP,
        "nope": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert (
        classic_group_of(h0.coordinator, "simple") is None
        and classic_group_of(h0.coordinator, "empty") is None
    )
    assert sorted(map(repr, h0.store.batches[-1])) == sorted(
        map(
            repr,
            [
                OffsetTombstone("simple", "t", 0),
                OffsetTombstone("simple", "u", 3),
                GroupTombstone("simple"),
                GroupTombstone("empty"),
            ],
        )
    )
    assert "empty" not in h0.store.groups
    assert not [k for k in h0.store.offsets if k[0] == "simple"]
    fetch = h0.fetch("simple", {"t": [0]})
    assert fetch.wire.topics[0].partitions[0].committed_offset == -1
    assert h0.describe("simple").wire.groups[0].group_state == "Dead"


def test_deleted_group_goes_dead(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    group = h.group()
    h.delete_groups("g")
    assert group.state is GroupState.DEAD and group.previous_state is GroupState.EMPTY  # T8


def test_delete_groups_reply_waits_for_the_tombstones(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.hold = True
    reply = h.delete_groups("g")
    assert not reply.answered
    h.flush()
    assert reply.wire.results[0].error_code == 0


def test_a_failed_delete_groups_write_leaves_the_group(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.fail_code = ErrorCode.KAFKA_STORAGE_ERROR
    reply = h.delete_groups("g", "nope")
    h.fail_code = None
    assert {r.group_id: r.error_code for r in reply.wire.results} == {
        "g": ErrorCode.NOT_COORDINATOR,
        "nope": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert h.group().state is GroupState.EMPTY
    assert h.fetch("g", {"t": [0]}).wire.topics[0].partitions[0].committed_offset == 1
    assert h.delete_groups("g").wire.results[0].error_code == 0


def test_a_group_being_deleted_is_served_until_its_tombstone_is_durable(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.hold = True
    reply = h.delete_groups("g")
    assert h.describe("g").wire.groups[0].group_state == "Empty"
    assert h.fetch("g", {"t": [0]}).wire.topics[0].partitions[0].committed_offset == 1
    h.flush()
    assert reply.wire.results[0].error_code == 0
    assert classic_group_of(h.coordinator, "g") is None
    assert h.fetch("g", {"t": [0]}).wire.topics[0].partitions[0].committed_offset == -1


def test_a_group_that_gains_a_member_while_being_deleted_stays(h0: Harness) -> None:
    h0.commit("g", {("t", 0): 1})
    h0.hold = True
    delete = h0.delete_groups("g")
    h0.hold = False
    join = h0.join("g", version=3)
    h0.advance(0)  # the join completes while the tombstones are in flight
    h0.flush()
    assert delete.wire.results[0].error_code == 0
    assert join.wire.error_code == 0
    assert h0.group().members and h0.group().state is GroupState.COMPLETING_REBALANCE
    assert ("g", "t", 0) not in h0.store.offsets
    assert h0.fetch("g", {"t": [0]}).wire.topics[0].partitions[0].committed_offset == -1


def test_delete_then_reuse_the_group_id(h0: Harness) -> None:
    h0.commit("g", {("t", 0): 1})
    h0.delete_groups("g")
    reply = h0.join("g", version=3)
    h0.advance(0)
    assert reply.wire.generation_id == 1


def test_pending_commit_of_a_deleted_group_is_dropped(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.hold = True
    h.commit("g", {("t", 0): 2})
    h.delete_groups("g")
    h.flush()
    assert classic_group_of(h.coordinator, "g") is None
    assert ("g", "t", 0) not in h.store.offsets  # the tombstone followed the commit


def test_a_failed_delete_keeps_a_commit_that_became_durable_meanwhile(h: Harness) -> None:
    """Storage order: commit, then tombstones. The commit is durable, the tombstones fail."""
    h.commit("g", {("t", 0): 1})
    h.hold = True
    commit = h.commit("g", {("t", 0): 2})
    delete = h.delete_groups("g")
    h.held[0], tombstones = h.held[0], h.held.pop(1)
    h.flush()  # the commit is durable
    h.held.append(tombstones)
    h.flush(ErrorCode.NOT_COORDINATOR)  # the tombstones are not
    h.hold = False
    assert commit.wire.topics[0].partitions[0].error_code == 0
    assert delete.wire.results[0].error_code == ErrorCode.NOT_COORDINATOR
    assert h.store.offsets[("g", "t", 0)].offset == 2
    assert h.fetch("g", {"t": [0]}).wire.topics[0].partitions[0].committed_offset == 2


@pytest.mark.parametrize(
    ("host", "expected"), [("10.1.2.3", "/10.1.2.3"), ("/10.1.2.3", "/10.1.2.3"), ("", "")]
)
def test_client_host_is_reported_like_kafka(h0: Harness, host: str, expected: str) -> None:
    ctx = h0.ctx(JOIN_GROUP, 3, client_id="app", host=host)
    request = JoinGroupRequest(
        "g", 10_000, 10_000, "", None, "consumer", [JoinGroupRequestProtocol("range", b"")]
    )
    h0.apply(h0.coordinator.join_group(ctx, request))
    h0.advance(0)
    (member,) = h0.describe("g").wire.groups[0].members
    assert (member.client_id, member.client_host) == ("app", expected)
