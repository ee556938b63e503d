"""KIP-848 consumer groups with real librdkafka consumers (confluent-kafka, group.protocol=consumer).

The server runs with a short consumer-group heartbeat interval and session timeout. In-process
members are all polled from the test's thread, one after the other, so their rebalance callbacks
(which librdkafka runs inside poll()) land in one shared event log in the order they really
happened; members that must be SIGKILLed or restarted as a new process are worker subprocesses
of clients.py (``Worker`` with protocol "consumer") and report their callbacks with
CLOCK_MONOTONIC stamps, which the log merges by time. Replaying the log gives every member's
owned partitions over time, and no partition may ever be owned by two members.

What librdkafka 2.16 does with group.protocol=consumer (asserted below): the callbacks are
incremental (on_assign gets only the added partitions, on_revoke only the removed ones); a member
that gives partitions away gets on_revoke(moved) followed by an empty on_assign([]); close() runs
on_revoke(everything) and leaves with epoch -1, or -2 with a group.instance.id; a revocation is
acknowledged to the coordinator only after on_revoke ran in poll(); a classic member of a consumer
group is served through it (the online migration bridge, test_migration_clients.py); a
synchronous commit that crosses the heartbeat acknowledging a revocation (which bumps the member
epoch) fails with STALE_MEMBER_EPOCH, as in Kafka, and librdkafka does not retry it.

Section 9 SIGKILLs the coordinator (by PID) and restarts it on the same SQLite storage
(synchronous=FULL) and port: under Stable members, and at several points of a hand-over.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from protocol.apis import ApiKey
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from storage.sql import sqlite_sql
from storage.tables import CONSUMER_MEMBERS
from tests.durability.support import LOADED, wait_for_log
from tests.integration.clients import CONFLUENT, Worker, create_topic
from tests.support.server import START_TIMEOUT_S, ServerProcess, start_server
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TOPIC = "kip848"
GROUP = "kip848-group"
PARTITIONS = 6
ALL = frozenset(range(PARTITIONS))
HEARTBEAT_MS = 400
SESSION_MS = 4000
SETTINGS = {
    "group-consumer-heartbeat-interval-ms": str(HEARTBEAT_MS),
    "group-consumer-session-timeout-ms": str(SESSION_MS),
}
WAIT_S = 15.0  # upper bound of every convergence wait
CLIENT_LOG = logging.getLogger("librdkafka")


# --------------------------------------------------------------------------------------------
# The shared event log and its replay


@dataclass(frozen=True)
class Event:
    t: float
    member: str
    kind: str  # assign / revoke / lost, or killed (the test SIGKILLed the member's process)
    partitions: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.t:14.3f} {self.member:>8} {self.kind:<7} {list(self.partitions)}"


WORKER_CALLBACKS = {"assigned": "assign", "revoked": "revoke", "lost": "lost"}  # Worker event names


class EventLog:
    """The in-process members' callbacks and the kills, recorded as they happen, merged by time
    with the callbacks that the member processes report."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._workers: list[Worker] = []

    def record(self, member: str, kind: str, partitions: Iterable[int], t: float | None = None) -> None:
        with self._lock:
            stamp = time.monotonic() if t is None else t
            self._events.append(Event(stamp, member, kind, tuple(sorted(partitions))))

    def follow(self, worker: Worker) -> None:
        self._workers.append(worker)

    def events(self, member: str | None = None) -> list[Event]:
        with self._lock:
            events = list(self._events)
        for worker in self._workers:
            events += [
                Event(e["t"], worker.name, WORKER_CALLBACKS[e["event"]], tuple(e["partitions"]))
                for e in worker.snapshot()
                if e["event"] in WORKER_CALLBACKS
            ]
        ordered = sorted(events, key=lambda e: e.t)  # stable: each source's events keep their order
        return [e for e in ordered if member is None or e.member == member]

    def owned(self, member: str) -> frozenset[int]:
        return replay(self.events(member)).get(member, frozenset())

    def dump(self) -> str:
        return "\n".join(str(e) for e in self.events())


def replay(events: list[Event]) -> dict[str, frozenset[int]]:
    """Each member's owned set after ``events``; AssertionError if a partition is ever owned by
    two members at once, or a callback is not incremental (assigning an owned partition, or
    revoking one that is not owned)."""
    owned: dict[str, set[int]] = {}
    for i, event in enumerate(events):
        mine = owned.setdefault(event.member, set())
        parts = set(event.partitions)
        history = "\n".join(str(e) for e in events[: i + 1])
        if event.kind == "assign":
            assert not parts & mine, f"on_assign of already owned partitions:\n{history}"
            mine |= parts
        elif event.kind in ("revoke", "lost"):
            assert parts <= mine, f"on_{event.kind} of partitions not owned:\n{history}"
            mine -= parts
        elif event.kind == "killed":
            mine.clear()
        for other, theirs in owned.items():
            if other != event.member and mine & theirs:
                raise AssertionError(
                    f"partitions {sorted(mine & theirs)} owned by {event.member} and {other}:\n{history}"
                )
    return {name: frozenset(parts) for name, parts in owned.items()}


# --------------------------------------------------------------------------------------------
# Members


class Member:
    """A consumer in the test process; poll it only from the test's thread."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        log: EventLog,
        *,
        protocol: str = "consumer",
        instance_id: str | None = None,
    ) -> None:
        self.name = name
        self.log = log
        self.errors: list[KafkaError] = []  # error_cb and poll() errors, in order
        settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "broker.address.family": "v4",
            "group.id": GROUP,
            "group.protocol": protocol,
            "client.id": name,
            "enable.auto.commit": False,
            "error_cb": self.errors.append,
            "logger": CLIENT_LOG,  # through Python logging (captured per test), not straight to fd 2
        }
        if instance_id is not None:
            settings["group.instance.id"] = instance_id
        self.consumer = Consumer(settings)
        self.closed = False
        self.consumer.subscribe(
            [TOPIC],
            on_assign=self._callback("assign"),
            on_revoke=self._callback("revoke"),
            on_lost=self._callback("lost"),
        )

    def _callback(self, kind: str) -> Callable[[Any, list[TopicPartition]], None]:
        def on_event(consumer: Any, partitions: list[TopicPartition]) -> None:
            assert all(tp.topic == TOPIC for tp in partitions), partitions
            self.log.record(self.name, kind, (tp.partition for tp in partitions))

        return on_event

    @property
    def owned(self) -> frozenset[int]:
        return self.log.owned(self.name)

    @property
    def member_id(self) -> str:
        return str(self.consumer.memberid())

    def poll(self, timeout: float = 0.02) -> None:
        message = self.consumer.poll(timeout)
        if message is not None and message.error():
            self.errors.append(message.error())

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


class Group:
    """Every member and server of one test; all of them are closed / stopped at the end."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.log = EventLog()
        self.members: list[Member] = []
        self.processes: list[Worker] = []
        self.servers: list[ServerProcess] = [server]
        self.restarted_at = 0  # number of logged events when the server was restarted

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap

    def member(self, name: str, **kwargs: Any) -> Member:
        member = Member(name, self.bootstrap, self.log, **kwargs)
        self.members.append(member)
        return member

    def process(self, name: str, instance_id: str | None = None, held: bool = False) -> Worker:
        """A member in its own process; its callbacks go to the log. ``held``: it joins only on
        ``start()``, once it reported ``ready``."""
        process = Worker(
            CONFLUENT, self.bootstrap, GROUP, TOPIC, name, instance_id, protocol="consumer", held=held
        )
        self.processes.append(process)
        self.log.follow(process)
        # Its start (a Python process importing its client library) is a process start, not part
        # of the group's convergence: on a loaded machine it takes many seconds alone.
        started = "ready" if held else "started"
        self.poll_until(lambda: process.count(started), f"{name}'s process to start", START_TIMEOUT_S)
        return process

    def kill(self, process: Worker) -> float:
        """SIGKILL by PID; returns the time of the kill and logs it (the member owns nothing after)."""
        killed_at = time.monotonic()
        process.kill()
        self.log.record(process.name, "killed", (), killed_at)
        return killed_at

    def close(self) -> None:
        for member in self.members:
            with contextlib.suppress(Exception):
                member.close()
        for process in self.processes:
            process.kill()
        for server in self.servers:  # the first one is the fixture's, stopped by the fixture
            if server is not self.servers[0]:
                server.stop()

    def poll_until(self, condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        """Poll every open in-process member, one after the other, until ``condition`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            for member in self.members:
                if not member.closed:
                    member.poll()
            result = condition()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{self.report()}")

    def poll_for(self, seconds: float) -> None:
        """Keep the members polled for ``seconds`` (for checks that nothing happens meanwhile)."""
        end = time.monotonic() + seconds
        self.poll_until(lambda: time.monotonic() >= end, "time to pass", seconds + 5)

    def report(self) -> str:
        processes = "\n".join(f"{p.name} (pid {p.pid}): {p.describe_log()}" for p in self.processes)
        errors = {m.name: [str(e) for e in m.errors] for m in self.members}
        servers = "\n".join(f"server log ({i}):\n{s.log_text()}" for i, s in enumerate(self.servers))
        return f"event log:\n{self.log.dump()}\nerrors: {errors}\n{processes}\n{servers}"

    def split(self, *members: Member | Worker) -> dict[str, frozenset[int]] | None:
        """The members' owned sets once they split all partitions without gap or overlap, and
        the server agrees: Stable, exactly these members, each at the assignment epoch and with
        the assignment (and target) its callbacks say. None until then."""
        owned = {m.name: self.log.owned(m.name) for m in members}
        if any(not parts for parts in owned.values()) or sum(map(len, owned.values())) != PARTITIONS:
            return None
        if frozenset().union(*owned.values()) != ALL:
            return None
        view = describe(self.bootstrap)
        if view.state != "Stable" or len(view.members) != len(members):
            return None
        for m in members:
            server_member = view.members.get(m.member_id or "")
            if server_member is None or server_member.epoch != view.assignment_epoch:
                return None
            if server_member.assigned != owned[m.name] or server_member.target != owned[m.name]:
                return None
        return owned


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_server(f"sqlite:///{tmp_path / 'coordinator.db'}", SETTINGS)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def group(server: ServerProcess) -> Iterator[Group]:
    create_topic(server.bootstrap, TOPIC, PARTITIONS)
    members = Group(server)
    try:
        yield members
    finally:
        members.close()


# --------------------------------------------------------------------------------------------
# The server's view


@dataclass(frozen=True)
class ServerMember:
    member_id: str
    instance_id: str | None
    client_id: str
    epoch: int
    assigned: frozenset[int]
    target: frozenset[int]


@dataclass
class GroupView:
    error_code: int
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: dict[str, ServerMember] = field(default_factory=dict)


def describe(bootstrap: str) -> GroupView:
    """A raw ConsumerGroupDescribe v0 (librdkafka's admin client does not show the epochs)."""
    with WireClient(bootstrap, client_id="describe") as client:
        response = client.request(
            ApiKey.CONSUMER_GROUP_DESCRIBE, 0, ConsumerGroupDescribeRequest(group_ids=[GROUP])
        )
    [described] = response.groups

    def partitions(assignment: Any) -> frozenset[int]:
        assert all(tp.topic_name == TOPIC for tp in assignment.topic_partitions)
        return frozenset(p for tp in assignment.topic_partitions for p in tp.partitions)

    members = {
        m.member_id: ServerMember(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.member_epoch,
            partitions(m.assignment),
            partitions(m.target_assignment),
        )
        for m in described.members
    }
    return GroupView(
        described.error_code,
        described.group_state,
        described.group_epoch,
        described.assignment_epoch,
        described.assignor_name,
        members,
    )


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "logger": CLIENT_LOG})


def membership_lines(server: ServerProcess) -> list[str]:
    return [line for line in server.log_lines if "consumer_group_manager" in line]


def logged(server: ServerProcess, text: str) -> bool:
    return any(text in line for line in membership_lines(server))


def process_errors(process: Worker) -> list[dict[str, object]]:
    """The client's errors (error_cb and poll()) that a member process reported, and its own."""
    return [e for e in process.snapshot() if e["event"] in ("client_error", "error")]


# --------------------------------------------------------------------------------------------
# 1-3: join, split, leave


def test_one_member_gets_all_partitions(group: Group) -> None:
    solo = group.member("solo")
    assert group.poll_until(lambda: group.split(solo), "one member to own everything") == {"solo": ALL}
    assert [(e.kind, e.partitions) for e in group.log.events()] == [("assign", tuple(ALL))]
    assert solo.assignment() == ALL

    admin = admin_client(group.bootstrap)  # a handle dropped before its futures are done never resolves them
    description = admin.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result(15)
    assert description.type == ConsumerGroupType.CONSUMER
    assert description.state == ConsumerGroupState.STABLE
    assert description.partition_assignor == "uniform"
    [member] = description.members
    assert (member.member_id, member.client_id) == (solo.member_id, "solo")
    assert {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions} == {
        (TOPIC, p) for p in ALL
    }
    assert solo.errors == []


def test_second_member_takes_half_without_any_partition_owned_twice(group: Group) -> None:
    first = group.member("first")
    group.poll_until(lambda: group.split(first), "the first member to own everything")
    joined_at = time.monotonic()
    second = group.member("second")
    # librdkafka tells the coordinator it gave partitions up only once on_revoke has run, inside
    # poll(): while the first member is not polled, the second must not get them.
    held_until = time.monotonic() + 4 * HEARTBEAT_MS / 1000
    while time.monotonic() < held_until:
        second.poll(0.05)
    held = describe(group.bootstrap)
    print(f"\nwhile the first member's on_revoke was held: {held}")
    assert group.log.events()[1:] == [], group.report()
    [held_second] = [m for m in held.members.values() if m.client_id == "second"]
    assert held.state == "Reconciling" and held_second.assigned == frozenset(), held
    assert len(held_second.target) == 3, held

    split = group.poll_until(lambda: group.split(first, second), "a split between two members")
    print(f"\nevent log (second member created at {joined_at:.3f}):\n{group.log.dump()}")

    assert {len(parts) for parts in split.values()} == {3}
    replay(group.log.events())  # no partition ever owned twice, every callback incremental
    moved = split["second"]
    # Incremental callbacks: the first member is told only of the partitions it gives away (then
    # an empty on_assign), and keeps the rest without being told again; the second is assigned
    # exactly those, only after the first revoked them.
    later = [(e.member, e.kind, frozenset(e.partitions)) for e in group.log.events() if e.t > joined_at]
    assert later == [
        ("first", "revoke", moved),
        ("first", "assign", frozenset()),
        ("second", "assign", moved),
    ], group.report()
    assert (first.assignment(), second.assignment()) == (split["first"], split["second"])
    assert first.errors == second.errors == []


def test_members_started_together_split_long_before_a_regular_heartbeat(tmp_path: Path) -> None:
    """With a 40 s heartbeat interval, a member that joins right after another one got every
    partition splits them with it within a few short intervals (2 s each): the first one, Stable
    alone, was asked back soon after its own join (the settle window, 4 s) and learns of the
    second one then, not at its next regular heartbeat 40 s later."""
    interval_ms = 40_000
    settings = {
        "group-consumer-heartbeat-interval-ms": str(interval_ms),
        "group-consumer-session-timeout-ms": "45000",
    }
    server = start_server(f"sqlite:///{tmp_path / 'slow.db'}", settings)
    group = Group(server)
    try:
        create_topic(server.bootstrap, TOPIC, PARTITIONS)
        a = group.member("a")
        group.poll_until(lambda: group.split(a), "the first member to own everything")
        started = time.monotonic()
        b = group.member("b")
        split = group.poll_until(lambda: group.split(a, b), "a split between two members", timeout=15)
        elapsed = time.monotonic() - started
        print(f"\nsplit after {elapsed:.2f} s (regular interval {interval_ms / 1000:.0f} s)")
        assert {len(parts) for parts in split.values()} == {3}
        replay(group.log.events())
        assert a.errors == b.errors == []
    finally:
        group.close()
        server.stop()


def test_closed_member_hands_everything_to_the_other(group: Group) -> None:
    stays, leaves = group.member("stays"), group.member("leaves")
    split = group.poll_until(lambda: group.split(stays, leaves), "a split between two members")
    leaver_id = leaves.member_id
    closed_at = time.monotonic()
    leaves.close()  # runs on_revoke(everything) inside close(), then leaves with epoch -1
    group.poll_until(lambda: group.split(stays), "the remaining member to own everything")
    took = time.monotonic() - closed_at
    print(f"\nhand-over after close() took {took:.2f}s\n{group.log.dump()}")

    replay(group.log.events())
    later = [(e.member, e.kind, frozenset(e.partitions)) for e in group.log.events() if e.t >= closed_at]
    assert later == [("leaves", "revoke", split["leaves"]), ("stays", "assign", split["leaves"])]
    assert took < SESSION_MS / 1000, "the hand-over waited for a session timeout: no leave?"
    assert any(f"member {leaver_id} left the group" in line for line in membership_lines(group.server))
    assert stays.errors == leaves.errors == []


# --------------------------------------------------------------------------------------------
# 4: a SIGKILLed member expires after the session timeout


def test_killed_member_expires_after_the_session_timeout(group: Group) -> None:
    survivor = group.member("survivor")
    group.poll_until(lambda: group.split(survivor), "the first member to own everything")
    victim = group.process("victim")
    split = group.poll_until(lambda: group.split(survivor, victim), "a split with the member process")
    victim_id = victim.member_id
    killed_at = group.kill(victim)
    group.poll_until(lambda: survivor.owned == ALL, "the survivor to own everything", SESSION_MS / 1000 + 8)

    replay(group.log.events())
    gains = [e for e in group.log.events("survivor") if e.t > killed_at]
    assert [(e.kind, frozenset(e.partitions)) for e in gains] == [("assign", split["victim"])]
    took = gains[0].t - killed_at
    print(f"\nsurvivor got the victim's partitions {took:.2f}s after SIGKILL\n{group.log.dump()}")
    # The victim's last heartbeat was at most one interval before the kill.
    assert (SESSION_MS - HEARTBEAT_MS) / 1000 - 0.2 <= took <= SESSION_MS / 1000 + 2.5, group.report()
    expired = [line for line in membership_lines(group.server) if victim_id in line and "fenced" in line]
    assert len(expired) == 1 and "session timeout expired" in expired[0], group.report()
    assert group.split(survivor) == {"survivor": ALL}


# --------------------------------------------------------------------------------------------
# 5: offsets


def _commit(member: Member, offsets: dict[int, int]) -> None:
    result = member.consumer.commit(
        offsets=[TopicPartition(TOPIC, p, o, f"{member.name}-{o}") for p, o in offsets.items()],
        asynchronous=False,
    )
    assert {tp.partition: tp.error for tp in result} == dict.fromkeys(offsets), result


def _committed(member: Member, partitions: Iterable[int]) -> dict[int, tuple[int, str]]:
    result = member.consumer.committed([TopicPartition(TOPIC, p) for p in partitions], timeout=10)
    assert all(tp.error is None for tp in result), result
    return {tp.partition: (tp.offset, tp.metadata) for tp in result}


def test_commits_are_read_back_by_the_member_the_next_owner_and_the_admin_client(group: Group) -> None:
    first = group.member("first")
    group.poll_until(lambda: group.split(first), "the first member to own everything")
    _commit(first, {p: 100 + p for p in ALL})
    expected = {p: (100 + p, f"first-{100 + p}") for p in ALL}
    assert _committed(first, ALL) == expected

    second = group.member("second")
    split = group.poll_until(lambda: group.split(first, second), "a split between two members")
    # The new owner reads what the previous one committed for its partitions.
    assert _committed(second, split["second"]) == {p: expected[p] for p in split["second"]}
    # Both commit for their own partitions at their new member epochs.
    _commit(second, {p: 200 + p for p in split["second"]})
    _commit(first, {p: 300 + p for p in split["first"]})
    expected = {p: (200 + p, f"second-{200 + p}") for p in split["second"]} | {
        p: (300 + p, f"first-{300 + p}") for p in split["first"]
    }
    assert _committed(first, ALL) == _committed(second, ALL) == expected

    admin = admin_client(group.bootstrap)
    [future] = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(GROUP)], request_timeout=10
    ).values()
    listed = future.result(15).topic_partitions
    assert {tp.partition: (tp.offset, tp.metadata) for tp in listed if tp.topic == TOPIC} == expected
    replay(group.log.events())
    assert first.errors == second.errors == []


# --------------------------------------------------------------------------------------------
# 6: static membership


@pytest.mark.timeout(2 * START_TIMEOUT_S + 7 * WAIT_S)  # two process starts, six waits, a close
def test_static_member_restarted_as_a_new_process_keeps_its_partitions(group: Group) -> None:
    other = group.member("other")
    group.poll_until(lambda: group.split(other), "the first member to own everything")
    static = group.process("static", instance_id="instance-1")
    split = group.poll_until(lambda: group.split(other, static), "a split with the static member")
    before = describe(group.bootstrap)
    other_events = len(group.log.events("other"))
    old_id = static.member_id
    # The new process must rejoin within the session timeout of the one that left: started (its
    # library imported) before the close, it joins only once told, so a slow start on a loaded
    # machine does not expire the departed member.
    restarted = group.process("restarted", instance_id="instance-1", held=True)

    # librdkafka's close() of a static member: on_revoke(everything), then a leave with epoch -2.
    assert static.close() == 0
    assert [e["event"] for e in static.snapshot()][-2:] == ["revoked", "closed"]
    # The server logs before it replies, but the test reads its log from a pipe, maybe behind.
    group.poll_until(
        lambda: logged(group.server, f"static member {old_id} left temporarily"), "the temporary leave logged"
    )
    # The coordinator keeps its partitions (Kafka: epoch -2, assignment kept for the session).
    away = describe(group.bootstrap).members[old_id or ""]
    assert (away.epoch, away.assigned) == (-2, split["static"]), away

    restarted.start()
    group.poll_until(lambda: group.split(other, restarted), "the restarted static member to rejoin")
    after = describe(group.bootstrap)
    print(f"\n{group.log.dump()}\nbefore: {before}\nafter: {after}")

    assert restarted.member_id not in (None, old_id)
    assert [(e.kind, frozenset(e.partitions)) for e in group.log.events("restarted")] == [
        ("assign", split["static"])
    ]
    assert len(group.log.events("other")) == other_events, "the other member's partitions moved"
    assert other.owned == split["other"]
    group.poll_until(
        lambda: logged(group.server, f"static member {old_id} replaced by {restarted.member_id}"),
        "the replacement logged",
    )
    # Kafka: a static member rejoining with the same subscription does not bump the group epoch.
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert after.members[restarted.member_id or ""].instance_id == "instance-1"
    replay(group.log.events())
    assert other.errors == [] and process_errors(static) == process_errors(restarted) == []


# --------------------------------------------------------------------------------------------
# 7: a classic member joins a live consumer group (docs/migration.md)


def test_classic_member_of_a_consumer_group_is_served_through_the_consumer_group(group: Group) -> None:
    modern = group.member("modern")
    group.poll_until(lambda: group.split(modern), "the consumer member to own everything")
    classic = group.member("classic", protocol="classic")

    def shared() -> bool:
        owned = [group.log.owned(m.name) for m in (modern, classic)]
        return all(owned) and frozenset().union(*owned) == ALL and sum(map(len, owned)) == PARTITIONS

    started = time.monotonic()
    group.poll_until(shared, "the classic member to get its share")
    print(f"\nclassic member got its share after {time.monotonic() - started:.2f}s")
    replay(group.log.events())  # no partition owned twice
    view = describe(group.bootstrap)
    assert view.error_code == 0 and len(view.members) == 2  # still a consumer group
    assert modern.errors == [] and classic.errors == []


# --------------------------------------------------------------------------------------------
# 8: the coordinator restarts under stable members


def _restart_under_two_members(group: Group) -> tuple[GroupView, GroupView, dict[str, frozenset[int]]]:
    one, two = group.member("one"), group.member("two")
    split = group.poll_until(lambda: group.split(one, two), "a split between two members")
    before = describe(group.bootstrap)
    group.restarted_at = len(group.log.events())
    old = group.server
    assert old.stop(signal.SIGTERM) == 0
    stopped_at = time.monotonic()
    new = start_server(old.storage, SETTINGS, port=old.port)
    group.servers.append(new)
    group.server = new
    print(f"\nrestarted in {time.monotonic() - stopped_at:.2f}s")
    # Past a full session timeout on the new server, the members are still there: they heartbeat it.
    group.poll_for(SESSION_MS / 1000 + 1)
    after = group.poll_until(lambda: group.split(one, two) and describe(new.bootstrap), "a stable group")
    print(f"{group.log.dump()}\nbefore: {before}\nafter: {after}")
    return before, after, split


def test_members_keep_their_assignments_across_a_coordinator_restart(group: Group) -> None:
    before, after, split = _restart_under_two_members(group)
    assert group.log.events()[group.restarted_at :] == [], "callbacks after the restart"
    assert {m.member_id: m.assigned for m in after.members.values()} == {
        m.member_id: m.assigned for m in before.members.values()
    }
    assert membership_lines(group.server) == [], "membership changed on the restarted server"
    for member in group.members:
        assert member.assignment() == split[member.name]
        assert {e.code() for e in member.errors} <= {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}


def test_group_epoch_is_unchanged_across_a_coordinator_restart(group: Group) -> None:
    before, after, _ = _restart_under_two_members(group)
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert {m.member_id: m.epoch for m in after.members.values()} == {
        m.member_id: m.epoch for m in before.members.values()
    }


# --------------------------------------------------------------------------------------------
# 9: the coordinator is SIGKILLed (storage: SQLite with the default synchronous=FULL)

CRASH_ERRORS = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}  # what a member may see of it


@dataclass(frozen=True)
class StoredMember:
    client_id: str
    epoch: int
    state: int  # 0 stable, 1 unrevoked partitions, 2 unreleased partitions
    assigned: frozenset[int]
    pending_revocation: frozenset[int]
    target: frozenset[int]

    def __str__(self) -> str:
        return (
            f"{self.client_id}: epoch {self.epoch} state {self.state} assigned {sorted(self.assigned)}"
            f" pending {sorted(self.pending_revocation)} target {sorted(self.target)}"
        )


@dataclass(frozen=True)
class Stored:
    epochs: tuple[int, int] | None  # group epoch, assignment epoch
    members: dict[str, StoredMember]

    def __str__(self) -> str:
        members = sorted(self.members.values(), key=lambda m: m.client_id)
        return f"group/assignment epoch {self.epochs}; " + "; ".join(map(str, members))


def stored(storage: str) -> Stored:
    """The group's rows in the SQLite file (opened read-only; call it while no server runs)."""
    path = storage.removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        epochs = db.execute(
            "SELECT group_epoch, assignment_epoch FROM consumer_groups WHERE group_id = ?", (GROUP,)
        ).fetchone()
        rows = db.execute(sqlite_sql(CONSUMER_MEMBERS).select + " WHERE group_id = ?", (GROUP,)).fetchall()

    def parts(tps: Any) -> frozenset[int]:
        assert all(topic == TOPIC for topic, _ in tps), tps
        return frozenset(p for _, partitions in tps for p in partitions)

    members = {}
    for row in rows:
        m = CONSUMER_MEMBERS.from_row(*row)
        members[m.member_id] = StoredMember(
            m.client_id,
            m.member_epoch,
            m.state,
            parts(m.assigned),
            parts(m.pending_revocation),
            parts(m.target),
        )
    return Stored(None if epochs is None else tuple(epochs), members)


def _crash(group: Group) -> tuple[float, Stored]:
    """SIGKILL the coordinator (its own PID) and start a new one on the same storage and port,
    once it has loaded its state; the kill and the restart go to the event log as ``server``
    events. Returns the time of the kill and what the storage held while no server ran."""
    old = group.server
    killed_at = time.monotonic()
    assert old.stop(signal.SIGKILL) == -signal.SIGKILL
    group.log.record("server", "sigkill", (), killed_at)
    on_disk = stored(old.storage)
    # On disk, as in memory: a partition is owned (assigned or pending revocation) by one member at most.
    owners = [m.assigned | m.pending_revocation for m in on_disk.members.values()]
    assert sum(map(len, owners)) == len(frozenset().union(*owners)), f"owned twice on disk: {on_disk}"
    new = start_server(old.storage, SETTINGS, port=old.port)
    group.servers.append(new)
    group.server = new
    wait_for_log(new, LOADED, timeout=15)
    group.log.record("server", "loaded", ())
    took = time.monotonic() - killed_at
    print(
        f"\nSIGKILLed pid {old.process.pid}; stored: {on_disk}\npid {new.process.pid} loaded {took:.2f}s later"
    )
    return killed_at, on_disk


def _callbacks(group: Group, since: float) -> list[Event]:
    return [e for e in group.log.events() if e.t >= since and e.member != "server"]


def test_stable_members_keep_partitions_and_epochs_across_a_coordinator_sigkill(group: Group) -> None:
    """Two Stable members; the server is SIGKILLed and restarted on the same storage and port.
    The storage held exactly what the server showed; the members keep their partitions without
    any callback (no on_lost, no revoke) past a session timeout, the group epoch and the member
    epochs are unchanged; then a third member gets 2 partitions that the others gave up first."""
    one, two = group.member("one"), group.member("two")
    split = group.poll_until(lambda: group.split(one, two), "a split between two members")
    before = describe(group.bootstrap)
    killed_at, on_disk = _crash(group)
    # What the server had told the members was on disk when it died (synchronous=FULL).
    assert on_disk.epochs == (before.group_epoch, before.assignment_epoch), on_disk
    assert {i: (m.epoch, m.state, m.assigned, m.pending_revocation) for i, m in on_disk.members.items()} == {
        i: (m.epoch, 0, m.assigned, frozenset()) for i, m in before.members.items()
    }, on_disk
    # Past a full session timeout on the new server, the members are still there: they heartbeat it.
    group.poll_for(SESSION_MS / 1000 + 1)
    after = group.poll_until(lambda: group.split(one, two) and describe(group.bootstrap), "a stable group")
    print(f"{group.log.dump()}\nbefore: {before}\nafter: {after}")

    assert _callbacks(group, killed_at) == [], f"callbacks after the crash (lost? revoked?)\n{group.report()}"
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert {m.member_id: (m.epoch, m.assigned) for m in after.members.values()} == {
        m.member_id: (m.epoch, m.assigned) for m in before.members.values()
    }
    assert membership_lines(group.server) == [], "membership changed on the restarted server"
    for member in (one, two):
        assert member.assignment() == split[member.name]
        assert {e.code() for e in member.errors} <= CRASH_ERRORS, member.errors

    # A third member gets a share of its own: the others give up only what moves, nothing twice.
    joined_at = time.monotonic()
    three = group.member("three")
    final = group.poll_until(lambda: group.split(one, two, three), "a split between three members")
    print(f"after the third member joined:\n{group.log.dump()}")
    replay(group.log.events())
    assert {len(parts) for parts in final.values()} == {2}
    assert final["one"] < split["one"] and final["two"] < split["two"], "the uniform assignor is sticky"
    later = _callbacks(group, joined_at)
    assert not [e for e in later if e.kind == "lost"], group.report()
    for member in (one, two):
        assert [(e.kind, frozenset(e.partitions)) for e in later if e.member == member.name] == [
            ("revoke", split[member.name] - final[member.name]),
            ("assign", frozenset()),
        ], group.report()
    assert describe(group.bootstrap).group_epoch == after.group_epoch + 1
    assert three.errors == []


# Where an iteration of the hand-over test SIGKILLs the coordinator (each one twice):
# joined     the server logged the new member's join (its write may still be in flight); nothing moved
# unrevoked  the server told first to revoke (describe shows it), first's on_revoke has not run
# revoking   first's on_revoke just returned: its acknowledging heartbeat is about to go out
# revoked    first's on_revoke returned and first committed what it keeps (synchronously)
# assigned   the new member's on_assign returned and both committed what they own
KILL_POINTS = ("joined", "unrevoked", "revoking", "revoked", "assigned") * 2


def _commit_acked(member: Member, offsets: dict[int, int], acked: dict[int, int]) -> None:
    """A synchronous commit; once it returned without error, the offsets count as acknowledged.

    A commit sent right after on_revoke can cross the heartbeat that acknowledges the revocation
    and bumps the member epoch: the coordinator then rejects it with STALE_MEMBER_EPOCH (as Kafka's
    validateOffsetCommit does), nothing is stored, and librdkafka raises it from commit(). Like the
    Java client's commitSync, retry with the member's new epoch."""
    for attempt in range(5):
        try:
            _commit(member, offsets)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or attempt == 4:
                raise
            print(f"{member.name}: commit {offsets} rejected with STALE_MEMBER_EPOCH, retried")
            time.sleep(0.05)
        else:
            acked.update(offsets)
            return


def _poll_until_revoked(group: Group, member: Member, since: float) -> None:
    """Poll only ``member`` (no other member's callback can run meanwhile) until its on_revoke ran."""
    deadline = time.monotonic() + WAIT_S
    while not any(e.kind == "revoke" for e in group.log.events(member.name) if e.t > since):
        assert time.monotonic() < deadline, f"no on_revoke for {member.name}\n{group.report()}"
        member.poll(0)  # returns right after the callbacks: no wait between on_revoke and the kill
        time.sleep(0.001)


def _wait_until_told_to_revoke(group: Group, member: Member) -> None:
    """Without polling anyone: until the server took partitions from ``member``'s assignment (it
    sent the revocation in a heartbeat response; the member's on_revoke cannot run unpolled)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        view = describe(group.bootstrap).members.get(member.member_id)
        if view is not None and view.assigned != ALL:
            return
        assert time.monotonic() < deadline, f"{member.name} never told to revoke\n{group.report()}"
        time.sleep(0.01)


def test_coordinator_sigkill_in_the_middle_of_a_hand_over(group: Group) -> None:
    """Per iteration: ``first`` owns everything and commits all partitions; ``second<i>`` joins and
    the server is SIGKILLed at one of KILL_POINTS, then restarted on the same storage and port.
    After the restart: a disjoint complete 3/3 split that the server agrees with, no partition
    ever owned by two members over the whole timeline (across the crashes too), and committed()
    returns at least every offset whose synchronous commit returned before the crash. Then the
    new member closes and first owns everything again for the next iteration."""
    first = group.member("first")
    group.poll_until(lambda: group.split(first), "the first member to own everything")
    acked: dict[int, int] = {}
    timings: list[str] = []
    for i, kill_at in enumerate(KILL_POINTS):
        base = 1000 * (i + 1)
        _commit_acked(first, {p: base + p for p in ALL}, acked)
        name = f"second{i}"
        started = time.monotonic()
        second = group.member(name)
        if kill_at == "joined":
            # Not polled meanwhile: the join heartbeat is the background thread's; first gets nothing yet.
            joined = f"joined (client {name})"
            while joined not in group.server.log_text():
                assert time.monotonic() - started < WAIT_S, group.report()
                time.sleep(0.001)
        elif kill_at == "unrevoked":
            _wait_until_told_to_revoke(group, first)
            assert not any(e.t > started for e in group.log.events("first")), group.report()
        elif kill_at in ("revoking", "revoked"):
            _poll_until_revoked(group, first, started)
            if kill_at == "revoked":
                _commit_acked(first, {p: base + 100 + p for p in first.owned}, acked)
        else:
            group.poll_until(lambda n=name: group.log.owned(n), f"{name}'s on_assign")
            _commit_acked(second, {p: base + 200 + p for p in second.owned}, acked)
            _commit_acked(first, {p: base + 300 + p for p in first.owned}, acked)
        killed_at, _ = _crash(group)
        split = group.poll_until(
            lambda s=second: group.split(first, s), f"a 3/3 split after the crash ({kill_at})"
        )
        converged = time.monotonic() - killed_at
        timings.append(f"{kill_at} {converged:.2f}s")
        iteration = "\n".join(str(e) for e in group.log.events() if e.t >= started)
        print(f"iteration {i} ({kill_at}): 3/3 split {converged:.2f}s after the SIGKILL\n{iteration}")
        replay(group.log.events())  # across the crash too
        assert {len(parts) for parts in split.values()} == {3}, split
        committed = _committed(first, ALL)
        lost = {p: (committed[p][0], offset) for p, offset in acked.items() if committed[p][0] < offset}
        assert not lost, f"acknowledged commits lost (stored, acked): {lost}\n{group.report()}"
        assert _committed(second, ALL) == committed
        for member in (first, second):
            assert {e.code() for e in member.errors} <= CRASH_ERRORS, (member.name, member.errors)

        second.close()
        group.poll_until(lambda: group.split(first), "first to own everything again")
    print(f"convergence after each SIGKILL: {', '.join(timings)}")
    replay(group.log.events())
