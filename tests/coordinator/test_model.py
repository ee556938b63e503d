"""Stateful property test: random client behaviour against one coordinator, checking invariants.

Clients behave like (possibly confused) consumers: they remember what the coordinator told them,
but send requests in any order, late, with stale generations, and storage writes sometimes fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.state import VALID_PREVIOUS, GroupState
from protocol.errors import ErrorCode
from tests.coordinator.harness import OFFSET_COMMIT, SYNC_GROUP, Harness, Reply, classic_group_of

GROUP = "g"
SLOTS = 5
INSTANCE_IDS = [None, None, None, "static-a", "static-b"]
SESSION: dict[str, Any] = {"session_timeout_ms": 10_000, "rebalance_timeout_ms": 20_000}
RESET_CODES = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID, ErrorCode.ILLEGAL_GENERATION}
WRITE_ERRORS = [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE]

slots = st.integers(0, SLOTS - 1)


@dataclass
class Client:
    instance_id: str | None
    member_id: str = ""
    generation: int = -1
    leader_members: list[str] | None = None
    topics: tuple[str, ...] = ("t",)
    outstanding: list[tuple[str, Reply]] = field(default_factory=list)


class CoordinatorModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=3_000, group_max_size=4))
        self.clients = [Client(instance_id) for instance_id in INSTANCE_IDS]
        self.replies: list[Reply] = []
        self.incarnation = 0  # bumped when the group is deleted/expired and created again
        self.tracked: ClassicGroup | None = None
        self.seen: tuple[ClassicGroup, int] | None = None  # (group object, highest generation seen)
        self.leaders: dict[tuple[int, int], str] = {}
        self.committing: int | None = None  # the offset of the commit being sent
        self.h.on_reply = self.read_your_writes

    def read_your_writes(self, reply: Reply) -> None:
        """Checked as each reply leaves: a request pipelined behind it sees what it reports."""
        if reply.api_key == OFFSET_COMMIT and self.committing is not None:
            if all(p.error_code == 0 for t in reply.wire.topics for p in t.partitions):
                fetch = self.h.fetch(GROUP, {"t": [0]})
                assert fetch.wire.topics[0].partitions[0].committed_offset == self.committing
        elif reply.api_key == SYNC_GROUP and reply.error == 0:
            (described,) = self.h.describe(GROUP).wire.groups
            assert described.group_state == "Stable"
            assignments = {m.member_assignment for m in described.members}
            assert reply.wire.assignment in assignments

    # -- plumbing --------------------------------------------------------------------------------

    def track(self, client: Client, kind: str, reply: Reply) -> None:
        self.replies.append(reply)
        client.outstanding.append((kind, reply))
        self.collect()

    def collect(self) -> None:
        group = classic_group_of(self.h.coordinator, GROUP)
        if group is not None and group is not self.tracked:
            self.incarnation += 1
            self.tracked = group
        for client in self.clients:
            still_waiting = []
            for kind, reply in client.outstanding:
                if not reply.answered:
                    still_waiting.append((kind, reply))
                elif kind == "join":
                    self.on_join_response(client, reply.wire)
                elif kind == "leave":
                    if reply.wire.members and reply.wire.members[0].error_code == 0:
                        client.member_id, client.generation, client.leader_members = "", -1, None
                elif kind in ("sync", "heartbeat") and reply.error in RESET_CODES:
                    client.member_id, client.generation, client.leader_members = "", -1, None
            client.outstanding = still_waiting

    def on_join_response(self, client: Client, wire: Any) -> None:
        if wire.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            client.member_id = wire.member_id
        elif wire.error_code == 0:
            client.member_id, client.generation = wire.member_id, wire.generation_id
            client.leader_members = [m.member_id for m in wire.members] if wire.members else None
            if wire.members and not wire.skip_assignment:
                key = (self.incarnation, wire.generation_id)
                assert self.leaders.setdefault(key, wire.member_id) == wire.member_id, "two leaders"
        elif wire.error_code in RESET_CODES:
            client.member_id, client.generation, client.leader_members = "", -1, None

    # -- rules ---------------------------------------------------------------------------------

    @rule(slot=slots)
    def behave(self, slot: int) -> None:
        """What a well-behaved consumer does next: (re)join, sync as leader, or heartbeat."""
        client = self.clients[slot]
        if any(kind in ("join", "sync") for kind, _ in client.outstanding):
            return  # blocked on its parked request
        if client.generation < 0:
            self.join(slot, 5, new_topics=False)
        elif client.leader_members is not None:
            self.sync(slot)
            client.leader_members = None
        else:
            reply = self.h.heartbeat(
                GROUP, client.member_id, client.generation, instance_id=client.instance_id
            )
            self.track(client, "heartbeat", reply)
            if reply.error == ErrorCode.REBALANCE_IN_PROGRESS:
                self.join(slot, 5, new_topics=False)
            elif reply.error == 0 and not self.h.group().members[client.member_id].assignment:
                self.sync(slot)

    @rule(rounds=st.integers(1, 4))
    def everybody_behaves(self, rounds: int) -> None:
        for _ in range(rounds):
            for slot in range(SLOTS):
                self.behave(slot)
            self.advance(3_000)

    @rule(slot=slots, version=st.sampled_from([0, 3, 4, 5, 7, 9]), new_topics=st.booleans())
    def join(self, slot: int, version: int, new_topics: bool) -> None:
        client = self.clients[slot]
        if client.instance_id is not None:
            version = max(version, 5)
        if new_topics:
            client.topics = ("t",) if client.topics != ("t",) else ("t", "u")
        reply = self.h.join(
            GROUP,
            client.member_id,
            version=version,
            instance_id=client.instance_id,
            topics=client.topics,
            **SESSION,
        )
        self.track(client, "join", reply)

    @rule(slot=slots, version=st.sampled_from([5, 9]))
    def restart_client(self, slot: int, version: int) -> None:
        """The process restarts: it forgets its member id (a static member is replaced, KIP-345)."""
        client = self.clients[slot]
        client.member_id, client.generation, client.leader_members = "", -1, None
        self.join(slot, version, new_topics=False)

    @rule(slot=slots)
    def sync(self, slot: int) -> None:
        client = self.clients[slot]
        assignments = {m: f"to-{m}".encode() for m in client.leader_members or []}
        reply = self.h.sync(
            GROUP,
            client.member_id,
            client.generation,
            instance_id=client.instance_id,
            assignments=assignments,
        )
        self.track(client, "sync", reply)

    @rule(slot=slots, code=st.sampled_from(WRITE_ERRORS))
    def sync_with_failing_write(self, slot: int, code: int) -> None:
        self.h.fail_code = code
        try:
            self.sync(slot)
        finally:
            self.h.fail_code = None

    @rule(slot=slots)
    def heartbeat(self, slot: int) -> None:
        client = self.clients[slot]
        reply = self.h.heartbeat(GROUP, client.member_id, client.generation, instance_id=client.instance_id)
        self.track(client, "heartbeat", reply)

    @rule(slot=slots, by_instance=st.booleans())
    def leave(self, slot: int, by_instance: bool) -> None:
        client = self.clients[slot]
        member_id = "" if by_instance and client.instance_id else client.member_id
        reply = self.h.leave(GROUP, members=[(member_id, client.instance_id)], version=3)
        self.track(client, "leave", reply)

    @rule(slot=slots, offset=st.integers(0, 100), failing=st.booleans())
    def commit(self, slot: int, offset: int, failing: bool) -> None:
        client = self.clients[slot]
        self.h.fail_code = ErrorCode.NOT_COORDINATOR if failing else None
        self.committing = offset
        try:
            reply = self.h.commit(
                GROUP,
                {("t", 0): offset},
                member_id=client.member_id,
                generation=client.generation,
                instance_id=client.instance_id,
            )
        finally:
            self.h.fail_code = None
            self.committing = None
        self.track(client, "commit", reply)

    @rule(slot=slots, offset=st.integers(0, 100))
    def commit_that_times_out_then_lands(self, slot: int, offset: int) -> None:
        client = self.clients[slot]
        self.h.hold = True
        try:
            reply = self.h.commit(
                GROUP,
                {("t", 0): offset},
                member_id=client.member_id,
                generation=client.generation,
                instance_id=client.instance_id,
            )
        finally:
            self.h.hold = False
        accepted = bool(self.h.held)
        self.h.flush_late()
        self.track(client, "commit", reply)
        if accepted:  # storage has it, so memory has it: the next fetch answers it
            fetch = self.h.fetch(GROUP, {"t": [0]})
            assert fetch.wire.topics[0].partitions[0].committed_offset == offset

    @rule(ms=st.sampled_from([0, 500, 3_000, 10_000, 25_000, 310_000, 600_000]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)
        self.collect()

    @rule()
    def delete_group(self) -> None:
        self.replies.append(self.h.delete_groups(GROUP))
        self.collect()

    @rule()
    def failover(self) -> None:
        self.h.apply(self.h.coordinator.unload(self.h.now_ms))
        self.collect()
        self.h = self.h.restart()
        self.h.on_reply = self.read_your_writes
        self.tracked = classic_group_of(self.h.coordinator, GROUP)  # the same group, reloaded
        # A reloaded group may be back at its last persisted generation, and the generations of the
        # lost rebalance are handed out again (as in Kafka): per-generation facts start over.
        self.seen = None
        self.leaders.clear()

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def group_is_consistent(self) -> None:
        group = classic_group_of(self.h.coordinator, GROUP)
        if group is None:
            return
        state = group.state
        assert state in VALID_PREVIOUS and state is not GroupState.DEAD
        if group.previous_state is not GroupState.DEAD:
            assert group.previous_state in VALID_PREVIOUS[state]
        members = group.members
        if state is GroupState.EMPTY:
            assert not members and not group.pending_sync_members
        if state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert members and group.leader_id in members and group.protocol_name is not None
        if state is GroupState.PREPARING_REBALANCE and not members:
            assert group.join_key in self.h.coordinator._timers  # it will complete, and go Empty
        if state is GroupState.STABLE:
            assert all(m.assignment for m in members.values()), "a Stable member without assignment"
        if members:
            assert group.leader_id in members
        assert group.num_awaiting_join == sum(1 for m in members.values() if m.join_reply is not None)
        assert group.pending_sync_members <= set(members)
        assert group.static_members == {
            m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id
        }
        assert not group.pending_members & set(members)
        if self.seen is not None and self.seen[0] is group:
            assert group.generation_id >= self.seen[1], "generation went backwards"
        self.seen = (group, group.generation_id)

    def teardown(self) -> None:
        self.h.apply(self.h.coordinator.unload(self.h.now_ms))
        assert all(reply.answered for reply in self.replies), "a parked request was never answered"


TestCoordinatorModel = CoordinatorModel.TestCase
TestCoordinatorModel.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
