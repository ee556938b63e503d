"""Share groups (KIP-932) on the pure core: ShareGroupHeartbeat, ShareGroupDescribe, ListGroups,
DeleteGroups, the group id space shared with the other kinds, persistence (docs/share-groups.md)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.lag_status import LagTracker
from coordinator.core.share.group import ShareGroup
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    ShareLimits,
    SharePartition,
)
from coordinator.core.share.records import partition_state_record
from coordinator.server.group_views import GroupViews
from protocol.errors import ErrorCode
from protocol.messages.share_group_describe import ShareGroupDescribeRequest
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from storage.records import GroupConfigRecord, ShareGroupRecord, ShareMemberTombstone
from tests.coordinator.consumer_harness import cg_heartbeat
from tests.coordinator.harness import Harness, Reply

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77
UNSET: object = object()


@pytest.fixture
def h() -> Harness:
    # The target at every change (the assignment interval has its own test below).
    harness = Harness(
        BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_share_assignment_interval_ms=0)
    )
    harness.catalog.set_topic("t", 1)
    harness.catalog.set_topic("u", 2)
    return harness


def beat(
    h: Harness,
    member_id: str,
    epoch: int = 0,
    topics: Sequence[str] | object | None = UNSET,
    group: str = "g",
    rack_id: str | None = None,
) -> Reply:
    names = (["t"] if epoch == 0 else None) if topics is UNSET else topics
    request = ShareGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        rack_id=rack_id,
        subscribed_topic_names=None if names is None else list(names),  # type: ignore[call-overload]
    )
    ctx = h.ctx(SHARE_GROUP_HEARTBEAT, 1)
    h.apply(h.coordinator.handle(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


def describe(h: Harness, *groups: str) -> Reply:
    ctx = h.ctx(SHARE_GROUP_DESCRIBE, 1)
    h.apply(h.coordinator.handle(ctx, ShareGroupDescribeRequest(list(groups))))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


def share_group(h: Harness, group_id: str = "g") -> ShareGroup:
    return h.coordinator.kind(ShareGroupManager).groups[group_id]


def assigned(h: Harness, reply: Reply) -> set[tuple[str, int]] | None:
    wire = reply.wire
    assert wire.error_code == 0, (wire.error_code, wire.error_message)
    if wire.assignment is None:
        return None
    out: set[tuple[str, int]] = set()
    for tp in wire.assignment.topic_partitions:
        topic = h.catalog.topic_by_id(tp.topic_id)
        assert topic is not None
        out |= {(topic.name, p) for p in tp.partitions}
    return out


# -- membership and epochs ------------------------------------------------------------------------


def test_first_member_joins_with_its_own_id_and_gets_the_partition(h: Harness) -> None:
    reply = beat(h, "client-uuid-1")
    assert reply.wire.member_id == "client-uuid-1"
    assert reply.wire.member_epoch == 1
    assert reply.wire.heartbeat_interval_ms == 5000
    assert assigned(h, reply) == {("t", 0)}
    group = share_group(h)
    assert (group.group_epoch, group.assignment_epoch, group.state_name) == (1, 1, "Stable")


def test_three_members_share_one_partition(h: Harness) -> None:
    replies = [beat(h, f"m{i}") for i in range(3)]
    assert [r.wire.member_epoch for r in replies] == [1, 2, 3]
    # Each member gets the target of the epoch it joined at; the earlier ones learn the new
    # epoch with their next heartbeat, the partition unchanged (no assignment sent).
    for i, reply in enumerate(replies):
        assert assigned(h, reply) == {("t", 0)}
        again = beat(h, f"m{i}", reply.wire.member_epoch)
        assert again.wire.member_epoch == 3
        assert again.wire.assignment is None


def test_steady_heartbeat_writes_nothing(h: Harness) -> None:
    beat(h, "m1")
    batches = len(h.store.batches)
    reply = beat(h, "m1", 1)
    assert reply.wire.error_code == 0 and reply.wire.assignment is None
    assert len(h.store.batches) == batches


def test_partitions_are_balanced_and_a_leaving_member_gives_its_partitions_back(h: Harness) -> None:
    a = beat(h, "a", topics=["u"])
    b = beat(h, "b", topics=["u"])
    assert assigned(h, a) == {("u", 0), ("u", 1)}
    assert assigned(h, b) is not None and len(assigned(h, b) or ()) == 1
    a2 = beat(h, "a", a.wire.member_epoch)
    assert a2.wire.member_epoch == 2 and len(assigned(h, a2) or ()) == 1
    leave = ShareGroupHeartbeatRequest(group_id="g", member_id="b", member_epoch=-1)
    ctx = h.ctx(SHARE_GROUP_HEARTBEAT, 1)
    h.apply(h.coordinator.handle(ctx, leave))
    assert isinstance(ctx.reply_to, Reply)
    assert (ctx.reply_to.wire.error_code, ctx.reply_to.wire.member_epoch) == (0, -1)
    a3 = beat(h, "a", 2)
    assert a3.wire.member_epoch == 3
    assert assigned(h, a3) == {("u", 0), ("u", 1)}


def test_subscription_change_bumps_the_group_epoch(h: Harness) -> None:
    beat(h, "m1")
    reply = beat(h, "m1", 1, topics=["t", "u"])
    assert reply.wire.member_epoch == 2
    assert assigned(h, reply) == {("t", 0), ("u", 0), ("u", 1)}


def test_new_partitions_bump_the_epoch(h: Harness) -> None:
    beat(h, "m1", topics=["u"])
    h.catalog.set_topic("u", 3)
    reply = beat(h, "m1", 1)
    assert reply.wire.member_epoch == 2
    assert assigned(h, reply) == {("u", 0), ("u", 1), ("u", 2)}


def test_topic_created_after_subscribing_is_assigned(h: Harness) -> None:
    first = beat(h, "m1", topics=["later"])
    assert assigned(h, first) == set()
    h.catalog.set_topic("later", 1)
    reply = beat(h, "m1", 1)
    assert assigned(h, reply) == {("later", 0)}


def test_session_timeout_removes_the_member(h: Harness) -> None:
    beat(h, "a")
    beat(h, "b")
    h.advance(44_000)
    assert beat(h, "a", 1).wire.member_epoch == 2
    h.advance(2_000)  # b's session (45 s) ran out; a's did not
    group = share_group(h)
    assert set(group.members) == {"a"}
    assert group.group_epoch == 3
    assert ShareMemberTombstone("g", "b") in h.store.records()


def test_rejoin_with_epoch_zero_keeps_the_member(h: Harness) -> None:
    beat(h, "m1")
    reply = beat(h, "m1", 0)
    assert reply.wire.error_code == 0
    assert reply.wire.member_epoch == 1
    assert assigned(h, reply) == {("t", 0)}  # a join always carries the assignment


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member_id", "group", "epoch", "topics", "rack", "message"),
    [
        ("", "g", 0, ["t"], None, None),  # Kafka 4.4 gives no message for this one
        ("m", "", 0, ["t"], None, "GroupId can't be empty."),
        ("m", "g", 0, ["t"], " ", "RackId can't be empty."),
        ("m", "g", 0, None, None, "SubscribedTopicNames must be set in first request."),
        ("m", "g", 0, [], None, "SubscribedTopicNames must be set in first request."),
        ("m", "g", -2, None, None, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(
    h: Harness,
    member_id: str,
    group: str,
    epoch: int,
    topics: list[str] | None,
    rack: str | None,
    message: str,
) -> None:
    reply = beat(h, member_id, epoch, topics=topics, group=group, rack_id=rack)
    assert (reply.wire.error_code, reply.wire.error_message) == (ErrorCode.INVALID_REQUEST, message)


def test_unknown_group_and_member(h: Harness) -> None:
    reply = beat(h, "m1", 3)
    assert (reply.wire.error_code, reply.wire.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Share group g not found.",
    )
    beat(h, "m1")
    reply = beat(h, "m2", 1)
    assert reply.wire.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    reply = beat(h, "m2", -1)
    assert reply.wire.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_fenced_epochs(h: Harness) -> None:
    beat(h, "a")  # epoch 1
    beat(h, "b")  # group epoch 2
    assert beat(h, "a", 2).wire.error_code == ErrorCode.FENCED_MEMBER_EPOCH  # ahead of what a knows
    assert beat(h, "a", 1).wire.member_epoch == 2  # a at 2, previous 1
    # The previous epoch is still accepted (its response was lost), an older one is not.
    assert beat(h, "a", 1).wire.error_code == 0
    beat(h, "c")  # group epoch 3
    assert beat(h, "a", 2).wire.member_epoch == 3  # a at 3, previous 2
    assert beat(h, "a", 1).wire.error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_a_consumer_group_id_is_not_a_share_group(h: Harness) -> None:
    cg_heartbeat(h, group="cg", member_id="x")
    reply = beat(h, "m1", group="cg")
    assert (reply.wire.error_code, reply.wire.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group cg is not a share group.",
    )
    described = describe(h, "cg").wire.groups[0]
    assert (described.error_code, described.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group cg is not a share group.",
    )


def test_a_share_group_id_refuses_the_other_kinds(h: Harness) -> None:
    beat(h, "m1", group="sg")
    assert cg_heartbeat(h, group="sg", member_id="x").wire.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.join("sg").wire.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    commit = h.commit("sg", {("t", 0): 5})
    assert {p.error_code for t in commit.wire.topics for p in t.partitions} == {ErrorCode.GROUP_ID_NOT_FOUND}


def test_group_size_limit(h: Harness) -> None:
    small = Harness(BrokerGroupSettings(group_share_max_size=2))
    small.catalog.set_topic("t", 1)
    beat(small, "a")
    beat(small, "b")
    reply = beat(small, "c")
    assert reply.wire.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


# -- describe, list, delete -----------------------------------------------------------------------


def test_describe(h: Harness) -> None:
    beat(h, "a", topics=["u"])
    described = describe(h, "g", "nope").wire.groups
    g, nope = described
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        0,
        "Stable",
        1,
        1,
        "simple",
    )
    [member] = g.members
    assert (member.member_id, member.member_epoch, member.client_host) == ("a", 1, "/10.0.0.1")
    assert member.subscribed_topic_names == ["u"]
    [tps] = member.assignment.topic_partitions
    assert (tps.topic_name, tps.partitions) == ("u", [0, 1])
    assert (nope.error_code, nope.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")


def test_list_groups_shows_share_groups(h: Harness) -> None:
    beat(h, "a", group="s1")
    beat(h, "a", group="s2")
    leave = ShareGroupHeartbeatRequest(group_id="s2", member_id="a", member_epoch=-1)
    h.apply(h.coordinator.handle(h.ctx(SHARE_GROUP_HEARTBEAT, 1), leave))
    listed = {g.group_id: (g.group_type, g.group_state, g.protocol_type) for g in h.list_groups().wire.groups}
    assert listed == {"s1": ("share", "Stable", "share"), "s2": ("share", "Empty", "share")}
    only = h.list_groups(types=["share"], states=["Empty"]).wire.groups
    assert [g.group_id for g in only] == ["s2"]


def test_delete_groups(h: Harness) -> None:
    beat(h, "a", group="busy")
    beat(h, "a", group="idle")
    h.apply(
        h.coordinator.handle(
            h.ctx(SHARE_GROUP_HEARTBEAT, 1),
            ShareGroupHeartbeatRequest(group_id="idle", member_id="a", member_epoch=-1),
        )
    )
    results = {r.group_id: r.error_code for r in h.delete_groups("busy", "idle").wire.results}
    assert results == {"busy": ErrorCode.NON_EMPTY_GROUP, "idle": 0}
    assert "idle" not in h.store.share_groups
    assert describe(h, "idle").wire.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


# -- persistence -----------------------------------------------------------------------------------


def test_reply_waits_for_the_write(h: Harness) -> None:
    h.hold = True
    reply = beat(h, "a")
    assert not reply.answered
    h.flush()
    assert reply.wire.member_epoch == 1
    assert h.store.share_groups["g"] == ShareGroupRecord("g", 1, 1)


def test_failed_write_answers_an_error_and_is_rewritten(h: Harness) -> None:
    h.fail_code = ErrorCode.KAFKA_STORAGE_ERROR
    reply = beat(h, "a")
    assert reply.wire.error_code != 0
    h.fail_code = None
    beat(h, "a", 1)
    assert ("g", "a") in h.store.share_members
    assert h.store.share_groups["g"].group_epoch == 1


def test_restart_restores_members_and_epochs(h: Harness) -> None:
    beat(h, "a", topics=["u"])
    beat(h, "b", topics=["u"])
    beat(h, "a", 1)
    after = h.restart()
    group = share_group(after)
    assert (group.group_epoch, group.assignment_epoch) == (2, 2)
    assert set(group.members) == {"a", "b"}
    reply = beat(after, "a", 2)
    assert reply.wire.error_code == 0 and reply.wire.member_epoch == 2
    assert reply.wire.assignment is None  # nothing changed across the restart
    # Sessions restart: a member that never comes back is removed after the session timeout.
    after.advance(46_000)
    assert set(share_group(after).members) == set()


def test_share_partition_state_is_loaded_and_restores_the_partition(h: Harness) -> None:
    beat(h, "a")
    partition = SharePartition(0, ShareLimits())
    acquired = partition.acquire("a", [(0, 4), (5, 9)], 10, h.now_ms)
    assert [(r.first_offset, r.last_offset) for r in acquired] == [(0, 9)]
    partition.acknowledge("a", [AcknowledgementBatch(0, 2, (int(AcknowledgeType.ACCEPT),))], h.now_ms)
    h.store.write([partition_state_record("g", "t", 0, partition.persisted())])
    after = h.restart()
    loaded = after.coordinator.kind(ShareGroupManager).partition_states[("g", "t", 0)]
    assert loaded == partition.persisted()
    restored = SharePartition.restore(loaded, ShareLimits())
    # Accepted records are done (the start moved past them); the rest come back, counted once.
    again = restored.acquire("a", [(0, 4), (5, 9)], 10, after.now_ms)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in again] == [(3, 9, 2)]
    # Deleting the group deletes its share-partition states.
    leave = ShareGroupHeartbeatRequest(group_id="g", member_id="a", member_epoch=-1)
    after.apply(after.coordinator.handle(after.ctx(SHARE_GROUP_HEARTBEAT, 1), leave))
    after.delete_groups("g")
    assert after.store.share_partitions == {}
    assert after.coordinator.kind(ShareGroupManager).partition_states == {}


class _HarnessClock:
    """The harness's time, as the views read it (monotonic and wall-clock ms)."""

    def __init__(self, h: Harness) -> None:
        self.h = h

    def now_ms(self) -> int:
        return self.h.now_ms

    def wall_ms(self) -> int:
        return self.h.now_ms


def test_console_views_show_share_groups(h: Harness) -> None:
    beat(h, "a", topics=["u"])
    views = GroupViews(h.coordinator, LagTracker(), _HarnessClock(h))
    [row] = views.list_groups()
    assert (row["group_id"], row["type"], row["state"], row["members"], row["generation"]) == (
        "g",
        "share",
        "Stable",
        1,
        1,
    )
    view = views.describe("g")
    assert view is not None
    assert (view["type"], view["state"], view["assignment_epoch"]) == ("share", "Stable", 1)
    members = view["members"]
    assert isinstance(members, list) and len(members) == 1
    assert members[0]["assignment"] == [["u", 0], ["u", 1]]
    assert view["offsets"] == []  # a share group has no committed offsets


def test_describe_groups_v6_says_a_share_or_consumer_group_is_not_a_classic_group(h: Harness) -> None:
    beat(h, "a", group="sg")
    cg_heartbeat(h, group="cg", member_id="x")
    for group_id in ("sg", "cg"):
        [described] = h.describe(group_id, version=6).wire.groups
        assert (described.error_code, described.error_message, described.group_state) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Group {group_id} is not a classic group.",
            "Dead",
        )
    [unknown] = h.describe("nope", version=6).wire.groups
    assert unknown.error_message == "Group nope not found."


def test_group_epoch_bumps_are_counted(h: Harness) -> None:
    beat(h, "a")
    beat(h, "b")
    beat(h, "a", 1, topics=["t", "u"])
    assert h.coordinator.stats.share_group_rebalances == share_group(h).group_epoch == 3


def test_partitions_added_while_down_are_assigned_after_a_restart(h: Harness) -> None:
    beat(h, "a", topics=["u"])
    h.catalog.set_topic("u", 3)  # before the member's next heartbeat, then the coordinator restarts
    after = h.restart()
    reply = beat(after, "a", 1)
    assert reply.wire.member_epoch == 2
    assert assigned(after, reply) == {("u", 0), ("u", 1), ("u", 2)}


def test_a_restart_keeps_targets_not_yet_handed_out(h: Harness) -> None:
    beat(h, "a", topics=["u"])  # epoch 1: a holds u-0 and u-1
    b = beat(h, "b", topics=["u"])  # epoch 2: one each in the target; a has not heartbeated yet
    after = h.restart()
    group = share_group(after)
    assert group.members["a"].assigned == {("u", 0), ("u", 1)}  # still behind, as before
    assert group.target["a"] | group.target["b"] == {("u", 0), ("u", 1)}
    assert len(group.target["a"]) == len(group.target["b"]) == 1
    assert assigned(after, beat(after, "a", 1)) == set(group.target["a"])
    assert assigned(h, b) == set(group.target["b"])


# -- group.share.assignment.interval.ms --------------------------------------------------------------


def test_the_target_is_recomputed_at_most_once_per_assignment_interval() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))  # the 1 s default
    h.catalog.set_topic("u", 2)
    first = beat(h, "a", topics=["u"])
    assert assigned(h, first) == {("u", 0), ("u", 1)}  # the first target at once
    h.advance(200)
    second = beat(h, "b", topics=["u"])
    group = share_group(h)
    # b joined (epoch 2), but the target waits for the interval: b holds nothing yet.
    assert (group.group_epoch, group.assignment_epoch) == (2, 1)
    assert assigned(h, second) == set() and second.wire.member_epoch == 1
    h.advance(799)
    assert share_group(h).assignment_epoch == 1
    h.advance(1)  # 1 s after the first target: the timer recomputes it, and writes it
    assert share_group(h).assignment_epoch == 2
    assert h.store.share_groups["g"].assignment_epoch == 2
    b = beat(h, "b", 1)
    a = beat(h, "a", 1)
    assert assigned(h, b) == {("u", 1)} or assigned(h, b) == {("u", 0)}
    assert (assigned(h, a) or set()) | (assigned(h, b) or set()) == {("u", 0), ("u", 1)}
    assert a.wire.member_epoch == b.wire.member_epoch == 2


def test_the_group_config_sets_the_assignment_interval() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_share_assignment_interval_ms=0))
    h.catalog.set_topic("u", 2)
    h.coordinator.group_configs.apply(GroupConfigRecord("g", "share.assignment.interval.ms", "5000"))
    beat(h, "a", topics=["u"])
    beat(h, "b", topics=["u"])
    assert share_group(h).assignment_epoch == 1
    h.advance(4999)
    assert share_group(h).assignment_epoch == 1
    h.advance(1)
    assert share_group(h).assignment_epoch == 2


def test_a_target_left_waiting_by_a_restart_is_computed_after_it() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    h.catalog.set_topic("u", 2)
    beat(h, "a", topics=["u"])
    h.advance(100)
    beat(h, "b", topics=["u"])
    assert h.store.share_groups["g"] == ShareGroupRecord("g", 2, 1)  # stored while waiting
    after = h.restart()
    after.advance(1)
    assert share_group(after).assignment_epoch == 2
    assert after.store.share_groups["g"].assignment_epoch == 2
