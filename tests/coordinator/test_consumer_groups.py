"""KIP-848 consumer groups on the pure core with an injected clock (docs/groups.md#consumer-groups-kip-848)."""

from __future__ import annotations

import pytest

from coordinator.core.consumer.group import MemberState
from coordinator.core.group_settings import BrokerGroupSettings
from protocol.errors import ErrorCode
from storage.records import ConsumerGroupRecord, ConsumerMemberRecord, ConsumerMemberTombstone
from tests.coordinator.consumer_harness import Client, assignment_of, cg_describe, cg_heartbeat, cgroup
from tests.coordinator.harness import Harness, classic_group_of, consumer_group_of

SESSION_MS = 45_000


@pytest.fixture
def h() -> Harness:
    harness = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    harness.catalog.set_topic("t", 6)
    return harness


def owned_twice(clients: list[Client]) -> set[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    twice: set[tuple[str, int]] = set()
    for client in clients:
        for tp in client.partitions():
            (twice if tp in seen else seen).add(tp)
    return twice


def settle(clients: list[Client], rounds: int = 6) -> None:
    """Heartbeat every client in turn until nothing changes, checking exclusivity after each beat."""
    for _ in range(rounds):
        for client in clients:
            client.beat()
            assert not owned_twice(clients), "a partition was owned by two members at once"


# -- joining and the revocation handshake -------------------------------------------------------


def test_first_member_gets_epoch_one_and_every_partition(h: Harness) -> None:
    reply = cg_heartbeat(h, member_id="m1")
    assert reply.wire.member_id == "m1"
    assert reply.wire.member_epoch == 1  # the group epoch, not 0
    # The group epoch was just bumped: come back soon in case more members are joining.
    assert reply.wire.heartbeat_interval_ms == 250
    assert assignment_of(h, reply) == {"t": {0, 1, 2, 3, 4, 5}}
    group = cgroup(h)
    assert (group.group_epoch, group.assignment_epoch, group.state) == (1, 1, "Stable")
    h.advance(1000)  # past the settle window (a tenth of the interval)
    assert cg_heartbeat(h, member_id="m1", epoch=1).wire.heartbeat_interval_ms == 5000


def test_steady_heartbeat_has_no_assignment_and_writes_nothing(h: Harness) -> None:
    cg_heartbeat(h, member_id="m1")
    batches = len(h.store.batches)
    reply = cg_heartbeat(h, member_id="m1", epoch=1)
    assert reply.wire.member_epoch == 1 and reply.wire.assignment is None
    assert len(h.store.batches) == batches


def test_second_member_gets_partitions_only_after_the_first_revokes(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    assert a.epoch == 1 and len(a.partitions()) == 6
    b.join()
    # Group epoch 2; b's target is 3 partitions, all still owned by a: b gets none yet, and is
    # told to come back sooner than usual.
    assert b.epoch == 2 and b.partitions() == set()
    assert b.last is not None and b.last.wire.heartbeat_interval_ms == 250
    assert cgroup(h).members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert cgroup(h).state == "Reconciling"
    # b heartbeats again before a revoked: still nothing.
    b.beat()
    assert b.partitions() == set()
    # a learns it must give up three partitions; it stays at epoch 1 meanwhile.
    a.beat()
    assert a.epoch == 1 and len(a.partitions()) == 3
    assert cgroup(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # a reports the revocation: it moves to epoch 2.
    a.beat()
    assert a.epoch == 2 and cgroup(h).members["a"].state is MemberState.STABLE
    b.beat()
    assert len(b.partitions()) == 3 and not (a.partitions() & b.partitions())
    h.advance(1000)
    b.beat()
    assert b.last is not None and b.last.wire.heartbeat_interval_ms == 5000
    assert a.partitions() | b.partitions() == {("t", p) for p in range(6)}
    assert cgroup(h).state == "Stable"


def test_revocation_is_not_complete_while_the_member_still_reports_the_partitions(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    reply = cg_heartbeat(h, member_id="a", epoch=1, owned={"t": range(6)})
    kept = assignment_of(h, reply)
    assert kept is not None and len(kept["t"]) == 3
    # Still reporting all six: still unrevoked, still epoch 1.
    reply = cg_heartbeat(h, member_id="a", epoch=1, owned={"t": range(6)})
    assert reply.wire.member_epoch == 1
    assert cgroup(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    b.beat()
    assert b.partitions() == set()


def test_ten_members_converge_without_double_ownership(h: Harness) -> None:
    h.catalog.set_topic("t", 40)
    clients = [Client(h, f"m{i}") for i in range(10)]
    for client in clients:
        client.join()
        settle(clients[: clients.index(client) + 1], rounds=2)
    settle(clients)
    sizes = sorted(len(c.partitions()) for c in clients)
    assert sizes == [4] * 10
    assert set().union(*(c.partitions() for c in clients)) == {("t", p) for p in range(40)}
    assert cgroup(h).state == "Stable"


# -- epochs and fencing -----------------------------------------------------------------------------


def test_epoch_ahead_is_fenced(h: Harness) -> None:
    cg_heartbeat(h, member_id="m1")
    reply = cg_heartbeat(h, member_id="m1", epoch=2)
    assert reply.error == ErrorCode.FENCED_MEMBER_EPOCH
    assert "greater member epoch (2)" in reply.wire.error_message


def test_previous_epoch_with_owned_subset_is_accepted(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    a.beat()
    a.beat()  # a is now at epoch 2, previous epoch 1
    assert a.epoch == 2
    # The response carrying epoch 2 was lost: a retries with epoch 1 and a subset of its partitions.
    reply = cg_heartbeat(h, member_id="a", epoch=1, owned={"t": sorted(p for _, p in a.partitions())})
    assert reply.error == 0 and reply.wire.member_epoch == 2


def test_previous_epoch_without_owned_partitions_or_with_more_is_fenced(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    a.beat()
    a.beat()
    assert (
        cg_heartbeat(h, member_id="a", epoch=1).error == ErrorCode.FENCED_MEMBER_EPOCH
    )  # not a full request
    assert (
        cg_heartbeat(h, member_id="a", epoch=1, owned={"t": range(6)}).error == ErrorCode.FENCED_MEMBER_EPOCH
    )


def test_older_than_previous_epoch_is_fenced(h: Harness) -> None:
    clients = [Client(h, "a"), Client(h, "b"), Client(h, "c")]
    for c in clients:
        c.join()
        settle(clients[: clients.index(c) + 1])
    a = cgroup(h).members["a"]
    assert a.member_epoch == 3 and a.previous_member_epoch == 2
    reply = cg_heartbeat(h, member_id="a", epoch=1, owned={})
    assert reply.error == ErrorCode.FENCED_MEMBER_EPOCH
    assert "smaller member epoch (1)" in reply.wire.error_message


def test_fenced_member_rejoins_with_epoch_zero_and_gets_its_target(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    settle([a, b])
    mine = a.partitions()
    reply = cg_heartbeat(h, member_id="a", epoch=0, topics=["t"])
    assert reply.wire.member_epoch == cgroup(h).group_epoch
    assert {("t", p) for p in assignment_of(h, reply)["t"]} == mine  # type: ignore[index]


def test_unknown_member_and_unknown_group(h: Harness) -> None:
    cg_heartbeat(h, member_id="m1")
    assert cg_heartbeat(h, member_id="ghost", epoch=1).error == ErrorCode.UNKNOWN_MEMBER_ID
    reply = cg_heartbeat(h, group="nope", member_id="x", epoch=3)
    assert reply.error == ErrorCode.GROUP_ID_NOT_FOUND


# -- request validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"member_id": ""}, "MemberId can't be empty."),
        ({"group": " "}, "GroupId can't be empty."),
        ({"instance_id": ""}, "InstanceId can't be empty."),
        ({"rack_id": " "}, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"owned": None}, "TopicPartitions must be empty when (re-)joining."),
        ({"owned": {"t": [0]}}, "TopicPartitions must be empty when (re-)joining."),
        (
            {"topics": None},
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ),
        ({"epoch": -2}, "InstanceId can't be null."),
        ({"epoch": -3}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(h: Harness, kwargs: dict[str, object], message: str) -> None:
    reply = cg_heartbeat(h, **kwargs)  # type: ignore[arg-type]
    assert reply.error == ErrorCode.INVALID_REQUEST
    assert reply.wire.error_message == message
    assert consumer_group_of(h.coordinator, "g") is None


def test_v0_member_id_is_generated_by_the_coordinator(h: Harness) -> None:
    reply = cg_heartbeat(h, member_id="", version=0)
    member_id = reply.wire.member_id
    assert member_id and member_id in cgroup(h).members
    assert cg_heartbeat(h, member_id="", epoch=1, version=0).error == ErrorCode.INVALID_REQUEST
    assert cg_heartbeat(h, member_id=member_id, epoch=1, version=0).error == 0


def test_unsupported_assignor(h: Harness) -> None:
    reply = cg_heartbeat(h, assignor="sticky")
    assert reply.error == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert (
        reply.wire.error_message
        == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    )


@pytest.mark.parametrize("regex", ["(", "a(?=b)", r"(a)\1", "a*+"])
def test_invalid_regex(h: Harness, regex: str) -> None:
    reply = cg_heartbeat(h, regex=regex, topics=None)
    assert reply.error == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert regex in reply.wire.error_message


def test_group_max_size(h: Harness) -> None:
    h = Harness(BrokerGroupSettings(group_consumer_max_size=2))
    h.catalog.set_topic("t", 2)
    assert cg_heartbeat(h, member_id="a").error == 0
    assert cg_heartbeat(h, member_id="b").error == 0
    reply = cg_heartbeat(h, member_id="c")
    assert reply.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "maximum capacity of 2 members" in reply.wire.error_message
    assert cg_heartbeat(h, member_id="a", epoch=0).error == 0  # members may rejoin


# -- leaving and timers ----------------------------------------------------------------------------------


def test_leave_hands_everything_to_the_other_member(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    settle([a, b])
    epoch = cgroup(h).group_epoch
    reply = cg_heartbeat(h, member_id="a", epoch=-1)
    assert reply.error == 0 and reply.wire.member_id == "a" and reply.wire.member_epoch == -1
    assert "a" not in cgroup(h).members and cgroup(h).group_epoch == epoch + 1
    assert ConsumerMemberTombstone("g", "a") in h.store.records()
    b.beat()
    assert b.partitions() == {("t", p) for p in range(6)}


def test_leave_of_unknown_member(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    assert cg_heartbeat(h, member_id="zzz", epoch=-1).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_last_member_leaving_leaves_equal_epochs(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    cg_heartbeat(h, member_id="a", epoch=-1)
    group = cgroup(h)
    assert group.state == "Empty" and group.group_epoch == group.assignment_epoch == 2


def test_session_timeout_fences_the_member(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    settle([a, b])
    for _ in range(10):
        h.advance(SESSION_MS // 5)
        b.beat()  # only b stays alive
    assert "a" not in cgroup(h).members
    assert b.partitions() == {("t", p) for p in range(6)}


def test_heartbeats_keep_the_session_alive(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    for _ in range(20):
        h.advance(SESSION_MS - 1000)
        assert cg_heartbeat(h, member_id="a", epoch=1).error == 0
    assert "a" in cgroup(h).members


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(h: Harness) -> None:
    cg_heartbeat(h, member_id="a", rebalance_timeout_ms=10_000)
    cg_heartbeat(h, member_id="b")
    cg_heartbeat(h, member_id="a", epoch=1, owned={"t": range(6)})  # told to revoke
    assert cgroup(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(4):
        h.advance(3000)
        cg_heartbeat(h, member_id="a", epoch=1, owned={"t": range(6)})  # alive, never revokes
        cg_heartbeat(h, member_id="b", epoch=2, owned={})
    assert "a" not in cgroup(h).members
    assert cg_heartbeat(h, member_id="a", epoch=1).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert cgroup(h).members["b"].assigned == {"t": frozenset(range(6))}


def test_rebalance_timer_is_cancelled_once_revoked(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    settle([a, b])
    h.advance(35_000)  # past the 30 s rebalance timeout; heartbeats keep sessions alive
    a.beat()
    b.beat()
    assert set(cgroup(h).members) == {"a", "b"}


# -- static membership -------------------------------------------------------------------------------


def test_static_duplicate_is_unreleased_instance_id(h: Harness) -> None:
    cg_heartbeat(h, member_id="a", instance_id="i1")
    reply = cg_heartbeat(h, member_id="a2", instance_id="i1")
    assert reply.error == ErrorCode.UNRELEASED_INSTANCE_ID
    assert "i1" in reply.wire.error_message


def test_static_leave_then_a_new_process_takes_over_the_assignment(h: Harness) -> None:
    a = Client(h, "a", instance_id="i1")
    b = Client(h, "b", instance_id="i2")
    a.join()
    b.join()
    settle([a, b])
    epoch = cgroup(h).group_epoch
    mine = a.partitions()
    reply = cg_heartbeat(h, member_id="a", epoch=-2, instance_id="i1")
    assert reply.error == 0 and reply.wire.member_epoch == -2
    assert cgroup(h).members["a"].member_epoch == -2 and cgroup(h).group_epoch == epoch  # no rebalance
    b.beat()
    assert len(b.partitions()) == 3  # b does not get a's partitions meanwhile
    a2 = Client(h, "a-restarted", instance_id="i1")
    a2.join()
    assert a2.partitions() == mine
    assert cgroup(h).group_epoch == epoch
    assert "a" not in cgroup(h).members and cgroup(h).static_members["i1"] == "a-restarted"
    assert ConsumerMemberTombstone("g", "a") in h.store.records()


def test_static_member_fenced_by_instance_id(h: Harness) -> None:
    cg_heartbeat(h, member_id="a", instance_id="i1")
    cg_heartbeat(h, member_id="b", instance_id="i2")
    assert cg_heartbeat(h, member_id="a", epoch=1, instance_id="i2").error == ErrorCode.FENCED_INSTANCE_ID
    assert cg_heartbeat(h, member_id="a", epoch=1, instance_id="i9").error == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_left_member_expires_after_the_session_timeout(h: Harness) -> None:
    a = Client(h, "a", instance_id="i1")
    b = Client(h, "b")
    a.join()
    b.join()
    settle([a, b])
    cg_heartbeat(h, member_id="a", epoch=-2, instance_id="i1")
    for _ in range(10):
        h.advance(SESSION_MS // 5)
        b.beat()
    assert "a" not in cgroup(h).members and "i1" not in cgroup(h).static_members
    assert b.partitions() == {("t", p) for p in range(6)}


# -- subscriptions, regex, metadata ---------------------------------------------------------------------


def test_regex_subscription_follows_new_topics(h: Harness) -> None:
    h.catalog.set_topic("orders-eu", 2)
    h.catalog.set_topic("payments", 2)
    reply = cg_heartbeat(h, member_id="a", topics=None, regex="orders-.*")
    assert assignment_of(h, reply) == {"orders-eu": {0, 1}}
    h.catalog.set_topic("orders-us", 1)
    reply = cg_heartbeat(h, member_id="a", epoch=1, owned={"orders-eu": [0, 1]})
    assert reply.wire.member_epoch == 2
    assert assignment_of(h, reply) == {"orders-eu": {0, 1}, "orders-us": {0}}
    assert cg_describe(h, "g").wire.groups[0].members[0].subscribed_topic_regex == "orders-.*"


def test_partition_increase_bumps_the_epoch(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    h.catalog.set_topic("t", 8)
    reply = cg_heartbeat(h, member_id="a", epoch=1, owned={"t": range(6)})
    assert reply.wire.member_epoch == 2 and assignment_of(h, reply) == {"t": set(range(8))}


def test_deleted_topic_is_taken_away(h: Harness) -> None:
    h.catalog.set_topic("u", 2)
    cg_heartbeat(h, member_id="a", topics=["t", "u"])
    h.catalog.delete_topic("u")
    reply = cg_heartbeat(h, member_id="a", epoch=1, owned={"t": range(6)})
    assert assignment_of(h, reply) == {"t": set(range(6))}
    assert cgroup(h).members["a"].assigned == {"t": frozenset(range(6))}


def test_subscription_change_rebalances(h: Harness) -> None:
    h.catalog.set_topic("u", 2)
    cg_heartbeat(h, member_id="a")
    reply = cg_heartbeat(h, member_id="a", epoch=1, topics=["u"], owned={"t": range(6)})
    # t must be revoked first.
    assert assignment_of(h, reply) == {}
    reply = cg_heartbeat(h, member_id="a", epoch=1, owned={})
    assert reply.wire.member_epoch == 2 and assignment_of(h, reply) == {"u": {0, 1}}


def test_server_assignor_range_is_used_and_described(h: Harness) -> None:
    h.catalog.set_topic("u", 6)
    for m in ("a", "b"):
        cg_heartbeat(h, member_id=m, topics=["t", "u"], assignor="range")
    group = cgroup(h)
    # Co-partitioned: each member gets the same partition numbers of both topics.
    for target in group.target.values():
        assert target["t"] == target["u"]
    assert cg_describe(h, "g").wire.groups[0].assignor_name == "range"


# -- group types, describe, list -----------------------------------------------------------------------------


def test_consumer_group_describe(h: Harness) -> None:
    a, b = Client(h, "a", instance_id="i1"), Client(h, "b")
    a.join()
    b.join()
    settle([a, b])
    described = cg_describe(h, "g", "missing", "", include_operations=True).wire.groups
    g = described[0]
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch) == (0, "Stable", 2, 2)
    assert g.assignor_name == "uniform" and g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    members = {m.member_id: m for m in g.members}
    assert members["a"].instance_id == "i1" and members["a"].member_epoch == 2
    assert members["a"].client_host == "/10.0.0.1" and members["a"].subscribed_topic_names == ["t"]
    assert members["a"].member_type == 1
    # Kafka's ConsumerGroupMember describes "no regex" as "" (docs/kafka-differences.md).
    assert members["a"].subscribed_topic_regex == ""
    parts = [set(m.assignment.topic_partitions[0].partitions) for m in g.members]
    assert parts[0] | parts[1] == set(range(6)) and not parts[0] & parts[1]
    assert g.members[0].assignment.topic_partitions[0].topic_name == "t"
    assert (described[1].error_code, described[1].error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group missing not found.",
    )
    assert described[2].error_code == ErrorCode.INVALID_GROUP_ID


def test_describe_classic_group_through_consumer_group_describe(h: Harness) -> None:
    h.join("classic", version=4)
    wire = cg_describe(h, "classic").wire.groups[0]
    assert wire.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert wire.error_message == "Group classic is not a consumer group."


def test_describe_groups_reports_a_consumer_group_dead_like_kafka(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    group = h.describe("g").wire.groups[0]
    assert group.group_state == "Dead" and group.members == []


def test_list_groups_types_and_states(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    h.commit("simple", {("t", 0): 1})
    listed = {g.group_id: g for g in h.list_groups().wire.groups}
    assert listed["g"].group_type == "consumer" and listed["g"].protocol_type == "consumer"
    assert listed["g"].group_state == "Stable"
    assert listed["simple"].group_type == "classic"
    assert [g.group_id for g in h.list_groups(types=["Consumer"]).wire.groups] == ["g"]
    assert [g.group_id for g in h.list_groups(types=["classic"]).wire.groups] == ["simple"]
    assert [g.group_id for g in h.list_groups(states=["STABLE"]).wire.groups] == ["g"]
    assert h.list_groups(states=["reconciling"]).wire.groups == []


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_heartbeat_to_a_live_classic_group_without_online_upgrade_is_group_id_not_found(policy: str) -> None:
    h = Harness(
        BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy=policy)
    )
    h.catalog.set_topic("t", 6)
    h.join("g", version=3)
    reply = cg_heartbeat(h, member_id="a")
    assert reply.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert reply.wire.error_message == "Group g is not a consumer group."


def test_empty_classic_group_is_converted_and_keeps_its_offsets(h: Harness) -> None:
    h.commit("g", {("t", 0): 42})
    assert cg_heartbeat(h, member_id="a").error == 0
    assert classic_group_of(h.coordinator, "g") is None and cgroup(h).members
    fetched = h.fetch("g", {"t": [0]}).wire
    assert fetched.topics[0].partitions[0].committed_offset == 42


def test_classic_join_of_another_protocol_type_to_a_live_consumer_group_is_inconsistent_protocol(
    h: Harness,
) -> None:
    cg_heartbeat(h, member_id="a")
    assert h.join("g", version=5, protocol_type="connect").error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_classic_join_to_an_empty_consumer_group_converts_it(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    cg_heartbeat(h, member_id="a", epoch=-1)
    reply = h.join("g", version=3)
    h.advance(10)  # the (zero) initial rebalance delay
    assert reply.error == 0 and h.group("g").generation_id == 1
    assert consumer_group_of(h.coordinator, "g") is None and "g" not in h.store.consumer_groups


def test_delete_groups(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    assert h.delete_groups("g").wire.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    cg_heartbeat(h, member_id="a", epoch=-1)
    h.commit("g", {("t", 0): 5})
    assert h.delete_groups("g").wire.results[0].error_code == 0
    assert consumer_group_of(h.coordinator, "g") is None
    assert "g" not in h.store.consumer_groups and not h.store.offsets


# -- offsets ---------------------------------------------------------------------------------------------


def test_offset_commit_with_member_epoch(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    ok = h.commit("g", {("t", 0): 10}, member_id="a", generation=1, version=9)
    assert ok.wire.topics[0].partitions[0].error_code == 0
    stale = h.commit("g", {("t", 0): 11}, member_id="a", generation=0, version=9)
    assert stale.wire.topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    unknown = h.commit("g", {("t", 0): 11}, member_id="zz", generation=1, version=9)
    assert unknown.wire.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    old = h.commit("g", {("t", 0): 11}, member_id="a", generation=1, version=8)
    assert old.wire.topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    admin = h.commit("g", {("t", 0): 11}, version=9)  # epoch -1 on a live group
    assert admin.wire.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.store.offsets[("g", "t", 0)].offset == 10


def test_offset_commit_epoch_minus_one_on_an_empty_consumer_group(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    cg_heartbeat(h, member_id="a", epoch=-1)
    reply = h.commit("g", {("t", 0): 7}, version=9)
    assert reply.wire.topics[0].partitions[0].error_code == 0


def test_offset_fetch_v9_validates_the_member(h: Harness) -> None:
    from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
    from tests.coordinator.harness import OFFSET_FETCH

    cg_heartbeat(h, member_id="a")
    h.commit("g", {("t", 0): 3}, member_id="a", generation=1, version=9)

    def fetch(member_id: str | None, epoch: int) -> int:
        request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup("g", member_id, epoch, None)])
        wire = h._call(h.coordinator.fetch_offsets, OFFSET_FETCH, 9, request).wire
        return int(wire.groups[0].error_code)

    assert fetch("a", 1) == 0
    assert fetch("a", 0) == ErrorCode.STALE_MEMBER_EPOCH
    assert fetch("zz", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert fetch(None, -1) == 0  # admin


def test_offset_delete_refuses_subscribed_topics(h: Harness) -> None:
    h.catalog.set_topic("old", 1)
    cg_heartbeat(h, member_id="a")
    h.commit("g", {("t", 0): 1, ("old", 0): 1}, member_id="a", generation=1, version=9)
    wire = h.delete_offsets("g", {"t": [0], "old": [0]}).wire
    codes = {t.name: t.partitions[0].error_code for t in wire.topics}
    assert codes == {"t": ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, "old": 0}


def test_retention_keeps_subscribed_topics_and_drops_empty_groups() -> None:
    h = Harness(BrokerGroupSettings(offsets_retention_minutes=10, offsets_retention_check_interval_ms=60_000))
    h.catalog.set_topic("t", 1)
    h.catalog.set_topic("old", 1)
    cg_heartbeat(h, member_id="a")
    h.commit("g", {("t", 0): 1, ("old", 0): 1}, member_id="a", generation=1, version=9)
    for _ in range(30):  # 15 minutes, past the 10 minute retention
        h.advance(30_000)
        cg_heartbeat(h, member_id="a", epoch=1)
    assert ("g", "t", 0) in h.store.offsets and ("g", "old", 0) not in h.store.offsets
    cg_heartbeat(h, member_id="a", epoch=-1)
    h.advance(11 * 60_000)
    assert consumer_group_of(h.coordinator, "g") is None and "g" not in h.store.consumer_groups


# -- persistence ------------------------------------------------------------------------------------------------


def test_restart_restores_epochs_assignments_and_sessions(h: Harness) -> None:
    a, b = Client(h, "a", instance_id="i1"), Client(h, "b")
    a.join()
    b.join()
    settle([a, b])
    before = cgroup(h)
    snapshot = {m.member_id: (m.member_epoch, m.assigned) for m in before.members.values()}
    other = h.restart()
    after = cgroup(other)
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert {m.member_id: (m.member_epoch, m.assigned) for m in after.members.values()} == snapshot
    assert after.static_members == {"i1": "a"}
    a.h = b.h = other
    a.beat()
    b.beat()
    assert a.last is not None and a.last.error == 0 and b.last is not None and b.last.error == 0
    # Sessions restart at load: a member that never comes back is fenced after the timeout.
    other.advance(SESSION_MS + 1)
    assert not cgroup(other).members


def test_restart_mid_revocation_keeps_the_handshake(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    a.beat()  # told to revoke
    other = h.restart()
    assert cgroup(other).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    a.h = b.h = other
    settle([a, b])
    assert len(a.partitions()) == len(b.partitions()) == 3


def test_stored_rows_are_complete(h: Harness) -> None:
    cg_heartbeat(h, member_id="a", rack_id="r1", instance_id="i1")
    assert h.store.consumer_groups["g"] == ConsumerGroupRecord(
        "g", 1, 1, h.store.consumer_groups["g"].state_ms
    )
    row = h.store.consumer_members[("g", "a")]
    assert isinstance(row, ConsumerMemberRecord)
    assert (row.instance_id, row.rack_id, row.member_epoch, row.state) == ("i1", "r1", 1, 0)
    assert row.assigned == row.target == (("t", (0, 1, 2, 3, 4, 5)),)


def test_failed_write_answers_coordinator_not_available_and_is_repaired(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    h.fail_code = int(ErrorCode.KAFKA_STORAGE_ERROR)
    reply = cg_heartbeat(h, member_id="b")
    assert reply.error == ErrorCode.NOT_COORDINATOR
    h.fail_code = int(ErrorCode.REQUEST_TIMED_OUT)
    assert cg_heartbeat(h, member_id="c").error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    h.fail_code = None
    # The next write of the group rewrites what was lost: storage matches memory again.
    cg_heartbeat(h, member_id="a", epoch=1, owned={"t": range(6)})
    group = cgroup(h)
    assert set(h.store.consumer_members) == {("g", m) for m in group.members}
    assert h.store.consumer_groups["g"].group_epoch == group.group_epoch
    for member in group.members.values():
        assert h.store.consumer_members[("g", member.member_id)].member_epoch == member.member_epoch


def test_a_member_whose_response_was_lost_to_a_failed_write_is_told_its_assignment_again(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    h.fail_code = int(ErrorCode.REQUEST_TIMED_OUT)
    assert a.beat().error == ErrorCode.COORDINATOR_NOT_AVAILABLE  # told to revoke, never heard of it
    h.fail_code = None
    assert cgroup(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    reply = a.beat()  # reports everything it still owns
    assert assignment_of(h, reply) == {"t": {0, 1, 2}}
    settle([a, b])
    assert a.partitions() | b.partitions() == {("t", p) for p in range(6)}


def test_reply_waits_for_the_write(h: Harness) -> None:
    h.hold = True
    reply = cg_heartbeat(h, member_id="a")
    assert not reply.answered
    h.flush()
    assert reply.wire.member_epoch == 1


def test_restart_does_not_bump_the_group_epoch(h: Harness) -> None:
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    settle([a, b])
    epoch = cgroup(h).group_epoch
    other = h.restart()
    a.h = b.h = other
    a.beat()
    b.beat()
    assert cgroup(other).group_epoch == epoch and a.epoch == b.epoch == epoch


def test_restart_after_a_missed_catalog_change_rebalances(h: Harness) -> None:
    a = Client(h, "a")
    a.join()
    h.catalog.set_topic("t", 8)  # changed while nobody heartbeated, then the coordinator restarts
    other = h.restart()
    a.h = other
    a.beat()
    assert cgroup(other).group_epoch == 2 and a.partitions() == {("t", p) for p in range(8)}


def test_steady_heartbeat_still_notices_a_new_client_id_and_changed_topics(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    cg_heartbeat(h, member_id="a", epoch=1, client_id="renamed")
    assert cgroup(h).members["a"].client_id == "renamed"
    assert h.store.consumer_members[("g", "a")].client_id == "renamed"
    h.catalog.set_topic("t", 7)
    reply = cg_heartbeat(h, member_id="a", epoch=1)
    assert reply.wire.member_epoch == 2 and assignment_of(h, reply) == {"t": set(range(7))}


def test_restart_with_offsets_does_not_invent_a_classic_group(h: Harness) -> None:
    cg_heartbeat(h, member_id="a")
    h.commit("g", {("t", 0): 5}, member_id="a", generation=1, version=9)
    other = h.restart()
    assert (
        classic_group_of(other.coordinator, "g") is None
        and consumer_group_of(other.coordinator, "g") is not None
    )
    assert [g.group_id for g in other.list_groups().wire.groups] == ["g"]
    assert other.fetch("g", {"t": [0]}).wire.topics[0].partitions[0].committed_offset == 5


def test_a_failed_offset_delete_on_a_consumer_group_leaves_its_offsets(h: Harness) -> None:
    h.catalog.set_topic("old", 1)
    cg_heartbeat(h, member_id="a")
    h.commit("g", {("old", 0): 5}, member_id="a", generation=1, version=9)
    h.fail_code = int(ErrorCode.KAFKA_STORAGE_ERROR)
    h.delete_offsets("g", {"old": [0]})
    h.fail_code = None
    assert classic_group_of(h.coordinator, "g") is None
    assert h.fetch("g", {"old": [0]}).wire.topics[0].partitions[0].committed_offset == 5
