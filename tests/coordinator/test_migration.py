"""Online migration between classic and consumer groups on the pure core (docs/migration.md)."""

from __future__ import annotations

import pytest

from coordinator.core.consumer.group import MemberState
from coordinator.core.group_settings import BrokerGroupSettings
from protocol.errors import ErrorCode
from storage.records import ConsumerGroupRecord, ConsumerMemberRecord, GroupMetadataRecord, GroupTombstone
from tests.coordinator.consumer_harness import Client, cg_describe, cg_heartbeat, cgroup
from tests.coordinator.harness import Harness, classic_group_of, consumer_group_of
from tests.coordinator.migration_harness import ClassicClient, subscription_v1

SESSION_MS = 10_000  # the classic clients' session timeout
REBALANCE_MS = 60_000  # the classic clients' rebalance timeout (the harness default)


def harness(policy: str = "bidirectional") -> Harness:
    h = Harness(
        BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy=policy)
    )
    h.catalog.set_topic("t", 6)
    return h


def classic_group(h: Harness, *names: str, cooperative: bool = False) -> list[ClassicClient]:
    """A Stable classic group whose leader assigned the six partitions round-robin."""
    clients = [ClassicClient(h, name, cooperative=cooperative) for name in names]
    for client in clients:
        client.send_join()
    h.advance(10)
    for client in clients:
        if client.last_join is not None and not client.last_join.answered:
            h.advance(REBALANCE_MS)
    leader_first = sorted(
        clients, key=lambda c: c.last_join is None or c.last_join.wire.leader != c.last_join.wire.member_id
    )
    for client in leader_first:
        assert client.after_join().error == 0
    assert h.group().state.value == "Stable"
    return clients


def owned_twice(owners: list[ClassicClient | Client]) -> set[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    twice: set[tuple[str, int]] = set()
    for owner in owners:
        for tp in owner.partitions():
            (twice if tp in seen else seen).add(tp)
    return twice


def settle(members: list[ClassicClient | Client], rounds: int = 8) -> None:
    """Every member heartbeats in turn (classic members rejoin when told to), checking after
    every step that no partition is owned by two members."""
    for _ in range(rounds):
        for member in members:
            member.beat()
            assert not owned_twice(members), "a partition was owned by two members at once"


def all_partitions(members: list[ClassicClient | Client]) -> set[tuple[str, int]]:
    return {tp for m in members for tp in m.partitions()}


# -- upgrade ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cooperative", [False, True], ids=["eager", "cooperative"])
def test_upgrade_keeps_the_classic_members_and_hands_partitions_over(cooperative: bool) -> None:
    h = harness()
    a, b = classic_group(h, "a", "b", cooperative=cooperative)
    generation = h.group().generation_id
    h.commit("g", {("t", 0): 7}, member_id=a.member_id, generation=generation)
    tombstone_batches = len(h.store.batches)

    c = Client(h, "c")
    reply = c.join()
    assert reply.error == 0
    # The group is a consumer group now; the classic members keep their generation as epoch and
    # their partitions; the newcomer's share is still theirs, so it waits for it.
    assert classic_group_of(h.coordinator, "g") is None
    group = cgroup(h)
    assert group.group_epoch == generation + 1
    assert {m.member_epoch for m in group.members.values() if m.classic is not None} == {generation}
    assert c.partitions() == set() and group.members["c"].state is MemberState.UNRELEASED_PARTITIONS
    written = [r for batch in h.store.batches[tombstone_batches:] for r in batch]
    assert GroupTombstone("g") in written and "g" not in h.store.groups
    assert {r.member_id for r in written if isinstance(r, ConsumerMemberRecord)} == {
        a.member_id,
        b.member_id,
        "c",
    }
    described = cg_describe(h, "g").wire.groups[0]
    types = {m.member_id: m.member_type for m in described.members}
    assert types == {a.member_id: 0, b.member_id: 0, "c": 1}

    # The classic members learn of the rebalance from their heartbeat and rejoin.
    assert h.heartbeat("g", a.member_id, a.generation).error == ErrorCode.REBALANCE_IN_PROGRESS
    settle([a, b, c])
    assert all_partitions([a, b, c]) == {("t", p) for p in range(6)}
    assert sorted(len(m.partitions()) for m in (a, b, c)) == [2, 2, 2]
    assert a.generation == b.generation == c.epoch == group.group_epoch
    assert cgroup(h).state == "Stable"
    # Offsets stay with the group id.
    assert h.fetch("g", {"t": [0]}).wire.topics[0].partitions[0].committed_offset == 7


def test_classic_member_commits_with_its_member_epoch_as_generation() -> None:
    h = harness()
    a, b = classic_group(h, "a", "b")
    c = Client(h, "c")
    c.join()
    settle([a, b, c])
    commit = h.commit("g", {("t", 1): 5}, member_id=a.member_id, generation=a.generation)
    assert commit.wire.topics[0].partitions[0].error_code == 0
    stale = h.commit("g", {("t", 1): 6}, member_id=a.member_id, generation=a.generation - 1)
    assert stale.wire.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_policies_without_upgrade_refuse_a_consumer_member_in_a_classic_group(policy: str) -> None:
    h = harness(policy)
    classic_group(h, "a", "b")
    reply = cg_heartbeat(h, member_id="c")
    assert reply.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert reply.wire.error_message == "Group g is not a consumer group."
    assert h.group().state.value == "Stable" and consumer_group_of(h.coordinator, "g") is None


def test_upgrade_refuses_a_group_of_another_protocol_type() -> None:
    h = harness()
    h.join("g", version=3, protocol_type="connect")
    reply = cg_heartbeat(h, member_id="c")
    assert reply.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert consumer_group_of(h.coordinator, "g") is None


def test_upgrade_refuses_malformed_consumer_protocol_metadata() -> None:
    h = harness()
    h.join("g", version=3, protocols=[("range", b"\x00")])
    reply = cg_heartbeat(h, member_id="c")
    assert reply.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert "embedded consumer protocol is malformed" in reply.wire.error_message
    assert consumer_group_of(h.coordinator, "g") is None and h.group().members


def test_upgrade_answers_a_parked_join_with_rebalance_in_progress() -> None:
    h = harness()
    a, _b = classic_group(h, "a", "b")
    parked = a.send_join()  # the leader rejoins: the group rebalances and the join is parked
    assert not parked.answered
    Client(h, "c").join()
    assert parked.error == ErrorCode.REBALANCE_IN_PROGRESS


def test_classic_member_joins_a_consumer_group_whatever_the_policy() -> None:
    h = harness("disabled")
    c = Client(h, "c")
    c.join()
    a = ClassicClient(h, "a")
    join = a.send_join()
    assert join.error == 0 and join.wire.leader == "" and join.wire.members == []
    assert join.wire.protocol_name == "range" and join.wire.generation_id == cgroup(h).group_epoch
    a.after_join()
    settle([c, a])
    assert sorted(len(m.partitions()) for m in (a, c)) == [3, 3]


def test_classic_join_needs_a_protocol_every_classic_member_supports() -> None:
    h = harness()
    Client(h, "c").join()
    ClassicClient(h, "a").rejoin()
    other = h.join("g", version=5, protocols=[("roundrobin", subscription_v1(["t"], {}))])
    assert other.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_sync_and_heartbeat_checks_of_classic_members() -> None:
    h = harness()
    c = Client(h, "c")
    c.join()
    a = ClassicClient(h, "a")
    a.rejoin()
    assert h.heartbeat("g", a.member_id, a.generation + 1).error == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("g", "nobody", a.generation).error == ErrorCode.UNKNOWN_MEMBER_ID
    # A consumer-protocol member is not a classic member.
    assert h.heartbeat("g", "c", c.epoch).error == ErrorCode.UNKNOWN_MEMBER_ID
    wrong_name = h.sync("g", a.member_id, a.generation, version=5, protocol_name="roundrobin")
    assert wrong_name.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # A new member bumps the group epoch: the classic member is told to rejoin.
    Client(h, "d").join()
    assert h.sync("g", a.member_id, a.generation, version=5, protocol_name="range").error == (
        ErrorCode.REBALANCE_IN_PROGRESS
    )


# -- downgrade -----------------------------------------------------------------------------------------------


def test_downgrade_when_the_last_consumer_member_leaves() -> None:
    h = harness()
    a, b = classic_group(h, "a", "b")
    c = Client(h, "c")
    c.join()
    settle([a, b, c])
    epoch = cgroup(h).group_epoch
    before = len(h.store.batches)
    assert cg_heartbeat(h, member_id="c", epoch=-1).error == 0
    # A classic group again, at the group epoch, rebalancing; the store holds only the classic group.
    group = h.group()
    assert group.generation_id == epoch and group.state.value == "PreparingRebalance"
    assert consumer_group_of(h.coordinator, "g") is None
    assert "g" not in h.store.consumer_groups and not any(k[0] == "g" for k in h.store.consumer_members)
    assert h.store.groups["g"].generation_id == epoch
    assert all(
        isinstance(r, GroupMetadataRecord) or r.table == "consumer_groups"
        for b_ in h.store.batches[before:]
        for r in b_
    )
    # The classic members rejoin and the classic protocol takes over.
    assert h.heartbeat("g", a.member_id, a.generation).error == ErrorCode.REBALANCE_IN_PROGRESS
    a.send_join()
    b.send_join()
    assert a.last_join is not None and b.last_join is not None
    assert a.last_join.answered and b.last_join.answered
    for client in sorted((a, b), key=lambda x: x.last_join.wire.leader != x.member_id):  # type: ignore[union-attr]
        assert client.after_join().error == 0
    assert h.group().generation_id == epoch + 1 and h.group().state.value == "Stable"
    assert all_partitions([a, b]) == {("t", p) for p in range(6)} and not owned_twice([a, b])


@pytest.mark.parametrize("policy", ["upgrade", "disabled"])
def test_no_downgrade_without_the_policy(policy: str) -> None:
    h = harness(policy)
    c = Client(h, "c")
    c.join()
    a = ClassicClient(h, "a")
    a.rejoin()
    settle([a, c])
    assert cg_heartbeat(h, member_id="c", epoch=-1).error == 0
    group = cgroup(h)
    assert list(group.members) == [a.member_id] and classic_group_of(h.coordinator, "g") is None
    settle([a])
    assert a.partitions() == {("t", p) for p in range(6)}


def test_session_timeout_of_the_last_consumer_member_downgrades_too() -> None:
    h = harness()
    a, b = classic_group(h, "a", "b")
    c = Client(h, "c")
    c.join()
    settle([a, b, c])
    for _ in range(12):  # the classic members keep heartbeating; the consumer member is silent
        h.advance(SESSION_MS // 2)
        a.beat()
        b.beat()
        if classic_group_of(h.coordinator, "g") is not None:
            break
    assert classic_group_of(h.coordinator, "g") is not None and consumer_group_of(h.coordinator, "g") is None


# -- timers and static members of classic members ------------------------------------------------


def test_session_timeout_of_a_classic_member_inside_a_consumer_group() -> None:
    h = harness()
    c = Client(h, "c")
    c.join()
    a = ClassicClient(h, "a")
    a.rejoin()
    settle([a, c])
    epoch = cgroup(h).group_epoch
    h.advance(SESSION_MS - 1)
    c.beat()
    assert a.member_id in cgroup(h).members
    h.advance(1)  # the classic member's own session timeout, not the group's 45 s
    assert a.member_id not in cgroup(h).members and cgroup(h).group_epoch == epoch + 1
    settle([c])
    assert c.partitions() == {("t", p) for p in range(6)}


def test_classic_member_that_does_not_rejoin_is_fenced_after_its_rebalance_timeout() -> None:
    h = harness()
    c = Client(h, "c")
    c.join()
    a = ClassicClient(h, "a")
    a.rejoin()
    settle([a, c])
    d = Client(h, "d")
    d.join()
    assert h.heartbeat("g", a.member_id, a.generation).error == ErrorCode.REBALANCE_IN_PROGRESS
    for _ in range(REBALANCE_MS // 5000):  # heartbeats alone do not keep it
        h.advance(5000)
        h.heartbeat("g", a.member_id, a.generation)
        c.beat()
        d.beat()
    assert a.member_id not in cgroup(h).members


def test_classic_member_that_does_not_sync_is_fenced_after_its_rebalance_timeout() -> None:
    h = harness()
    Client(h, "c").join()
    a = ClassicClient(h, "a")
    assert a.send_join().error == 0
    h.advance(REBALANCE_MS)
    assert a.last_join is not None and a.last_join.wire.member_id not in cgroup(h).members


@pytest.mark.parametrize("retries", [True, False], ids=["retried", "not-retried"])
def test_classic_join_whose_write_failed_is_answered_by_the_retried_join(retries: bool) -> None:
    """The join is applied in memory although its write failed (docs/commit-path.md): the member is
    Stable with its share while the client was told nothing. The retried JoinGroup (Kafka's clients
    retry a join after a retriable error) hands the share over and writes the rows; a client that
    never retries is fenced once its rebalance timeout passes without a SyncGroup."""
    h = harness()
    c = Client(h, "c")
    c.join()
    a = ClassicClient(h, "a")
    a.rejoin()
    assert a.partitions() == set()  # waits for c to release its half
    c.beat()
    c.beat()  # c reports it released the partitions
    assert h.heartbeat("g", a.member_id, a.generation).error == ErrorCode.REBALANCE_IN_PROGRESS
    h.fail_code = int(ErrorCode.REQUEST_TIMED_OUT)
    assert a.send_join().error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    h.fail_code = None
    member = cgroup(h).members[a.member_id]
    assert member.state is MemberState.STABLE and member.assigned == {"t": frozenset({3, 4, 5})}
    stored = h.store.consumer_members[("g", a.member_id)]
    assert stored.member_epoch == a.generation and stored.state != MemberState.STABLE
    if retries:
        assert a.send_join().error == 0
        assert a.after_join().error == 0
        assert a.partitions() == {("t", p) for p in (3, 4, 5)}
        assert h.store.consumer_members[("g", a.member_id)].state == MemberState.STABLE
    for _ in range(REBALANCE_MS // 5000):  # past the rebalance timeout of the failed join
        h.advance(5000)
        c.beat()
        code = h.heartbeat("g", a.member_id, a.generation).error
        if not retries and code:
            break
        assert code == 0  # nothing tells the client that did not retry
    if retries:
        assert a.member_id in cgroup(h).members
    else:
        assert code == ErrorCode.UNKNOWN_MEMBER_ID and a.member_id not in cgroup(h).members
        settle([c])
        assert c.partitions() == {("t", p) for p in range(6)}


def test_static_classic_member_is_replaced_by_its_next_process() -> None:
    h = harness()
    c = Client(h, "c")
    c.join()
    a = ClassicClient(h, "a", instance_id="i-a")
    a.rejoin()
    settle([a, c])
    kept = a.partitions()
    assert kept
    b = ClassicClient(h, "a2", instance_id="i-a")  # the same instance restarted
    b.rejoin()
    group = cgroup(h)
    assert group.static_members["i-a"] == b.member_id and a.member_id not in group.members
    assert b.partitions() == kept  # it takes over the assignment
    assert (
        h.heartbeat("g", a.member_id, a.generation, instance_id="i-a").error == ErrorCode.FENCED_INSTANCE_ID
    )
    settle([b, c])
    assert not owned_twice([b, c]) and all_partitions([b, c]) == {("t", p) for p in range(6)}


def test_leave_group_of_classic_members_inside_a_consumer_group() -> None:
    h = harness()
    c = Client(h, "c")
    c.join()
    a = ClassicClient(h, "a", instance_id="i-a")
    a.rejoin()
    epoch = cgroup(h).group_epoch
    reply = h.leave("g", members=[("", "i-a"), ("nobody", None), ("c", None)])
    assert [m.error_code for m in reply.wire.members] == [
        0,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    group = cgroup(h)
    assert list(group.members) == ["c"] and group.group_epoch == epoch + 1
    assert "i-a" not in group.static_members


# -- persistence -------------------------------------------------------------------------------------


def test_restart_in_the_middle_of_a_migration_comes_back_at_the_same_epochs() -> None:
    h = harness()
    a, b = classic_group(h, "a", "b", cooperative=True)
    c = Client(h, "c")
    c.join()
    a.beat()  # a rejoins and revokes; b has not heard of the rebalance yet
    group = cgroup(h)
    before = {m.member_id: (m.member_epoch, m.state, dict(m.assigned)) for m in group.members.values()}
    epochs = (group.group_epoch, group.assignment_epoch)

    h2 = h.restart()
    a.h = b.h = c.h = h2
    group = cgroup(h2)
    assert (group.group_epoch, group.assignment_epoch) == epochs
    assert {
        m.member_id: (m.member_epoch, m.state, dict(m.assigned)) for m in group.members.values()
    } == before
    classic = group.members[b.member_id].classic
    assert classic is not None and classic.session_timeout_ms == SESSION_MS
    assert classic.protocols[0][0] == "cooperative-sticky"
    owners = [m for m in group.members.values() for _ in m.owned_partitions()]
    assert len(owners) == len(group.owners)  # no partition owned twice
    settle([a, b, c])
    assert all_partitions([a, b, c]) == {("t", p) for p in range(6)}
    assert sorted(len(m.partitions()) for m in (a, b, c)) == [2, 2, 2]
    # The classic members' sessions are their own after the restart too.
    h2.advance(SESSION_MS)
    c.beat()
    assert list(cgroup(h2).members) == ["c"]


def test_stored_rows_of_an_upgraded_group() -> None:
    h = harness()
    a, _b = classic_group(h, "a", "b")
    Client(h, "c").join()
    assert "g" not in h.store.groups
    record = h.store.consumer_groups["g"]
    assert isinstance(record, ConsumerGroupRecord) and record.group_epoch == a.generation + 1
    row = h.store.consumer_members[("g", a.member_id)]
    assert row.classic_session_timeout_ms == SESSION_MS and row.classic_protocols is not None
    assert row.classic_protocols[0][0] == "range"
    assert h.store.consumer_members[("g", "c")].classic_protocols is None


def test_downgrade_when_a_classic_process_replaces_the_last_static_consumer_member() -> None:
    h = harness()
    c = Client(h, "c", instance_id="i-c")
    c.join()
    a = ClassicClient(h, "a")
    a.rejoin()
    settle([a, c])
    epoch = cgroup(h).group_epoch
    kept = {p for _, p in c.partitions()}
    c.owned = {}  # the process stops; the same instance comes back speaking the classic protocol
    b = ClassicClient(h, "b", instance_id="i-c")
    join = b.send_join()
    assert join.error == 0
    group = h.group()  # a classic group again, Stable at the epoch: no rebalance
    assert consumer_group_of(h.coordinator, "g") is None
    assert group.state.value == "Stable" and group.generation_id == epoch
    new_id = join.wire.member_id
    assert set(group.members) == {a.member_id, new_id} and group.static_members == {"i-c": new_id}
    assert b.after_join().error == 0
    assert {p for _, p in b.partitions()} == kept  # the replaced member's assignment
    assert h.heartbeat("g", a.member_id, a.generation).error == 0
    assert h.store.groups["g"].generation_id == epoch and "g" not in h.store.consumer_groups


def test_no_downgrade_on_replacement_without_the_policy() -> None:
    h = harness("upgrade")
    c = Client(h, "c", instance_id="i-c")
    c.join()
    a = ClassicClient(h, "a")
    a.rejoin()
    settle([a, c])
    b = ClassicClient(h, "b", instance_id="i-c")
    b.rejoin()
    group = cgroup(h)  # still a consumer group, now of classic members only
    assert all(m.classic is not None for m in group.members.values()) and len(group.members) == 2
    settle([a, b])
    assert all_partitions([a, b]) == {("t", p) for p in range(6)} and not owned_twice([a, b])


def test_restart_after_a_failed_downgrade_write_keeps_the_classic_group() -> None:
    h = harness()
    a, b = classic_group(h, "a", "b")
    c = Client(h, "c")
    c.join()
    settle([a, b, c])
    h.advance(1000)
    h.fail_code = int(ErrorCode.REQUEST_TIMED_OUT)
    assert cg_heartbeat(h, member_id="c", epoch=-1).error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    h.fail_code = None
    assert (
        classic_group_of(h.coordinator, "g") is not None
    )  # memory converted; storage still has the consumer group
    assert "g" in h.store.consumer_groups
    for client in (a, b):
        client.send_join()
    h.advance(REBALANCE_MS)  # the join phase completes; its group record is written
    assert "g" in h.store.groups
    h2 = h.restart()
    assert (
        classic_group_of(h2.coordinator, "g") is not None and consumer_group_of(h2.coordinator, "g") is None
    )


def test_restart_after_a_failed_upgrade_write_keeps_the_consumer_group() -> None:
    h = harness()
    classic_group(h, "a", "b")
    h.advance(1000)
    h.fail_code = int(ErrorCode.REQUEST_TIMED_OUT)
    assert cg_heartbeat(h, member_id="c").error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    h.fail_code = None
    assert cg_heartbeat(h, member_id="c").error == 0  # rejoins: the group's rows are written now
    assert "g" in h.store.groups and "g" in h.store.consumer_groups
    h2 = h.restart()
    assert (
        consumer_group_of(h2.coordinator, "g") is not None and classic_group_of(h2.coordinator, "g") is None
    )


def test_upgrade_counts_what_cooperative_members_still_own_after_their_assignments_were_cleared() -> None:
    h = harness()
    a, b = classic_group(h, "a", "b", cooperative=True)
    held = {a.member_id: a.partitions(), b.member_id: b.partitions()}
    x = ClassicClient(h, "x", cooperative=True)
    parked = x.send_join()  # the group rebalances; a and b rejoin reporting what they own
    a.send_join()
    b.send_join()
    assert parked.answered and h.group().state.value == "CompletingRebalance"
    ClassicClient(h, "y", cooperative=True).send_join()  # back to PreparingRebalance: assignments cleared
    assert h.group().state.value == "PreparingRebalance"
    assert all(m.assignment == b"" for m in h.group().members.values())
    c = Client(h, "c")
    c.join()
    # a and b still hold their partitions: the newcomer gets none of them yet.
    assert c.partitions() == set()
    owners = cgroup(h).owners
    assert {m: {tp for tp, o in owners.items() if o == m} for m in held} == held
