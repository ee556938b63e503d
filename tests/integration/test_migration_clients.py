"""Online migration with real clients (docs/migration.md): a rolling upgrade of a classic group to
group.protocol=consumer members one member at a time, and the rollback, under continuous commits.

Every member lives in the test process and is polled from the test's thread, one after the other,
so the rebalance callbacks land in one event log in the order they happened; replaying it checks
that no partition is ever owned by two members (test_consumer_protocol.py's log and replay). Each
member commits the partitions it owns every round with a globally increasing offset. Commits are
asynchronous: a synchronous one would block the test's thread while the member's JoinGroup is
parked ahead of it on the coordinator connection (brokers answer a connection's requests in
order), and the members not polled meanwhile would never rejoin. A commit counts once its
on_commit reported it without error; at the end every partition's committed offset is at least
the last one acknowledged for it (and one that was sent). At every step the group must settle within a bound, and the group's
type and epochs are read as Kafka reports them (ConsumerGroupDescribe, DescribeGroups). The last
test SIGKILLs the coordinator in the middle of an upgrade and restarts it on the same storage.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from protocol.apis import ApiKey
from protocol.messages.describe_groups import DescribeGroupsRequest
from tests.durability.support import LOADED, wait_for_log
from tests.integration.clients import create_topic
from tests.integration.test_consumer_protocol import (
    ALL,
    CLIENT_LOG,
    GROUP,
    PARTITIONS,
    TOPIC,
    EventLog,
    describe,
    replay,
)
from tests.support.server import ServerProcess, start_server
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SETTINGS = {"group-consumer-heartbeat-interval-ms": "400", "group-consumer-session-timeout-ms": "4000"}
CLASSIC_SESSION_MS = 6000
CLASSIC_HEARTBEAT_MS = 500
STEP_S = 20.0  # every step must settle within this (the group never stalls)


class MigratingMember:
    """A confluent-kafka consumer of either protocol, polled from the test's thread."""

    def __init__(self, name: str, bootstrap: str, log: EventLog, protocol: str, assignor: str) -> None:
        self.name = name
        self.protocol = protocol
        self.log = log
        self.errors: list[KafkaError] = []
        self.acked: list[tuple[int, int]] = []  # (partition, offset) of acknowledged commits
        settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "broker.address.family": "v4",
            "group.id": GROUP,
            "group.protocol": protocol,
            "client.id": name,
            "enable.auto.commit": False,
            "error_cb": self.errors.append,
            "on_commit": self._on_commit,
            "logger": CLIENT_LOG,
        }
        if protocol == "classic":
            settings |= {
                "partition.assignment.strategy": assignor,
                "session.timeout.ms": CLASSIC_SESSION_MS,
                "heartbeat.interval.ms": CLASSIC_HEARTBEAT_MS,
            }
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
            # Eager (range) callbacks carry the whole assignment; the log wants what changed.
            owned = self.log.owned(self.name)
            parts = {tp.partition for tp in partitions}
            if kind == "assign":
                parts -= owned
            self.log.record(self.name, kind, parts)

        return on_event

    @property
    def owned(self) -> frozenset[int]:
        return self.log.owned(self.name)

    def poll(self) -> None:
        message = self.consumer.poll(0.02)
        if message is not None and message.error():
            self.errors.append(message.error())

    def commit(self, offsets: dict[int, int]) -> None:
        """An asynchronous commit; on_commit reports it (a rebalance may refuse it: nothing stored)."""
        self.consumer.commit(
            offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=True
        )

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if error is not None:
            self.errors.append(error)
            return
        self.acked += [(tp.partition, tp.offset) for tp in partitions if tp.error is None]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


class KafkaPythonMember:
    """A kafka-python classic consumer (eager, range), polled from the test's thread."""

    protocol = "classic"

    def __init__(self, name: str, bootstrap: str, log: EventLog) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        self.name = name
        self.log = log
        self.errors: list[object] = []
        self.acked: list[tuple[int, int]] = []
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            client_id=name,
            partition_assignment_strategy=[RangePartitionAssignor],
            session_timeout_ms=CLASSIC_SESSION_MS,
            heartbeat_interval_ms=CLASSIC_HEARTBEAT_MS,
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
        )
        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                log.record(name, "revoke", {tp.partition for tp in revoked} & member.owned)

            def on_partitions_assigned(self, assigned: Any) -> None:
                log.record(name, "assign", {tp.partition for tp in assigned} - member.owned)

        self.consumer.subscribe([TOPIC], listener=Listener())
        self.consumer.partitions_for_topic(TOPIC)  # see clients.py: metadata before the first join
        self.closed = False

    @property
    def owned(self) -> frozenset[int]:
        return self.log.owned(self.name)

    def poll(self) -> None:
        self.consumer.poll(timeout_ms=20)

    def commit(self, offsets: dict[int, int]) -> None:
        from kafka import TopicPartition as KafkaTopicPartition
        from kafka.structs import OffsetAndMetadata

        def done(committed: Any, response: Any) -> None:
            if isinstance(response, Exception):
                self.errors.append(response)
            else:
                self.acked.extend((tp.partition, meta.offset) for tp, meta in committed.items())

        self.consumer.commit_async(
            {KafkaTopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}, done
        )

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


Member = MigratingMember | KafkaPythonMember


class RollingGroup:
    def __init__(self, server: ServerProcess, assignor: str) -> None:
        self.server = server
        self.assignor = assignor
        self.log = EventLog()
        self.members: list[Member] = []
        self.offsets = itertools.count(1)
        self.sent: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
        self.steps: list[str] = []

    def start(self, name: str, protocol: str) -> Member:
        member: Member
        if protocol == "kafka-python":
            member = KafkaPythonMember(name, self.server.bootstrap, self.log)
        else:
            member = MigratingMember(name, self.server.bootstrap, self.log, protocol, self.assignor)
        self.members.append(member)
        return member

    def live(self) -> list[Member]:
        return [m for m in self.members if not m.closed]

    def round(self) -> None:
        """Poll every live member once, then let each commit what it owns."""
        for member in self.live():
            member.poll()
        for member in self.live():
            owned = member.owned
            if owned:
                offsets = {p: next(self.offsets) for p in sorted(owned)}
                member.commit(offsets)
                for p, o in offsets.items():
                    self.sent[p].add(o)
        replay(self.log.events())  # raises if a partition was ever owned twice

    def settle(self, what: str) -> float:
        """Run rounds until the live members split every partition; returns the time it took."""
        started = time.monotonic()
        while True:
            self.round()
            owned = [m.owned for m in self.live()]
            if all(owned) and sum(map(len, owned)) == PARTITIONS and frozenset().union(*owned) == ALL:
                took = time.monotonic() - started
                self.steps.append(f"{what}: {took:.2f}s")
                return took
            if time.monotonic() - started > STEP_S:
                raise AssertionError(
                    f"{what}: not settled after {STEP_S}s\n{self.log.dump()}\n{self.server.log_text()}"
                )

    def wait_for(self, condition: Callable[[], Any], what: str) -> Any:
        started = time.monotonic()
        while not (result := condition()):
            if time.monotonic() - started > STEP_S:
                raise AssertionError(f"timed out waiting for {what}\n{self.log.dump()}")
            self.round()
        return result

    def replace(self, old: Member, name: str, protocol: str) -> Member:
        """A rolling restart of one member: it stops (leaves), the new one starts."""
        old.close()
        new = self.start(name, protocol)
        self.settle(f"{old.name} ({old.protocol}) -> {name} ({protocol})")
        return new

    def close(self) -> None:
        for member in self.members:
            with contextlib.suppress(Exception):
                member.close()


def group_type(bootstrap: str) -> tuple[str, int]:
    """("consumer", group epoch) from ConsumerGroupDescribe (which answers GROUP_ID_NOT_FOUND for a
    classic group), else ("classic/<state>", member count) from DescribeGroups."""
    view = describe(bootstrap)
    if view.error_code == 0:
        return "consumer", view.group_epoch
    with WireClient(bootstrap, client_id="describe") as client:
        response = client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[GROUP]))
    [described] = response.groups
    assert described.error_code == 0 and described.protocol_type == "consumer", described
    return f"classic/{described.group_state}", len(described.members)


def unowned_gaps(events: list[Any]) -> dict[int, float]:
    """The longest time each partition was owned by nobody, after it was first assigned."""
    owner: dict[int, str] = {}
    free_since: dict[int, float] = {}
    longest: dict[int, float] = dict.fromkeys(range(PARTITIONS), 0.0)
    for event in events:
        for p in event.partitions:
            if event.kind == "assign":
                owner[p] = event.member
                if p in free_since:
                    longest[p] = max(longest[p], event.t - free_since.pop(p))
            elif owner.get(p) == event.member:
                del owner[p]
                free_since[p] = event.t
    return longest


def assert_no_commit_lost(rolling: RollingGroup, bootstrap: str) -> None:
    """Every partition's committed offset is at least the last one acknowledged, and was sent."""
    committed = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "broker.address.family": "v4",
            "logger": CLIENT_LOG,
        }
    )
    try:
        result = committed.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        committed.close()
    stored = {tp.partition: tp.offset for tp in result}
    acked: dict[int, int] = {}
    for member in rolling.members:
        for p, o in member.acked:
            acked[p] = max(acked.get(p, 0), o)
    assert set(acked) == set(range(PARTITIONS))
    for p in range(PARTITIONS):  # no acknowledged commit lost, nothing stored that was not sent
        assert stored[p] >= acked[p] and stored[p] in rolling.sent[p], (p, stored[p], acked[p])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_server(f"sqlite:///{tmp_path / 'coordinator.db'}", SETTINGS)
    try:
        create_topic(proc.bootstrap, TOPIC, PARTITIONS)
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize(
    ("assignor", "classic"),
    [
        ("cooperative-sticky", ("classic", "classic", "classic")),
        ("range", ("classic", "kafka-python", "kafka-python")),
    ],
    ids=["confluent-cooperative", "kafka-python-and-confluent-eager"],
)
def test_rolling_upgrade_to_the_consumer_protocol_and_back(
    server: ServerProcess, assignor: str, classic: tuple[str, str, str]
) -> None:
    rolling = RollingGroup(server, assignor)
    try:
        members = [rolling.start(f"classic-{i}", kind) for i, kind in enumerate(classic)]
        rolling.settle("3 classic members")
        assert group_type(server.bootstrap)[0] == "classic/Stable"

        types: list[tuple[str, int]] = []
        for i in range(3):  # upgrade, one member at a time
            members[i] = rolling.replace(members[i], f"consumer-{i}", "consumer")
            types.append(group_type(server.bootstrap))
        assert [t for t, _ in types] == ["consumer"] * 3
        epochs = [e for _, e in types]
        assert epochs == sorted(epochs) and len(set(epochs)) == 3  # the group epoch only grows
        view = rolling.wait_for(lambda: (v := describe(server.bootstrap)).state == "Stable" and v, "Stable")
        assert len(view.members) == 3

        for i in range(3):  # and back to classic
            members[i] = rolling.replace(members[i], f"classic-again-{i}", classic[i])
            types.append(group_type(server.bootstrap))
        assert [t for t, _ in types[3:5]] == ["consumer", "consumer"]  # classic members inside it
        assert types[5][0].startswith("classic/")  # the last consumer member left: classic again

        for _ in range(10):  # a few more rounds of commits in the final group
            rolling.round()
    finally:
        rolling.close()
    history = rolling.log.events()
    final = replay(history)
    assert frozenset().union(*(final[m.name] for m in rolling.members[-3:])) <= ALL
    assert_no_commit_lost(rolling, server.bootstrap)
    gaps = unowned_gaps(history)
    print(f"\n{assignor}: " + "; ".join(rolling.steps))
    print(f"longest time a partition was owned by nobody: {max(gaps.values()):.2f}s; types {types}")
    assert max(gaps.values()) < STEP_S


def test_coordinator_sigkill_in_the_middle_of_an_upgrade(server: ServerProcess) -> None:
    """Two classic members; a consumer-protocol member converts the group, and the coordinator is
    SIGKILLed before the classic members have rejoined. The restarted coordinator (same storage and
    port) comes back at the same epochs and the hand-over completes without a partition owned twice."""
    rolling = RollingGroup(server, "cooperative-sticky")
    restarted: ServerProcess | None = None
    try:
        rolling.start("classic-0", "classic")
        rolling.start("classic-1", "classic")
        rolling.settle("2 classic members")
        rolling.start("consumer-0", "consumer")
        before = rolling.wait_for(
            lambda: (v := describe(server.bootstrap)).error_code == 0 and v, "the upgrade"
        )
        # The classic members are still at the generation they had: they have not rejoined yet.
        assert sorted(s.epoch for s in before.members.values()) == [
            before.group_epoch - 1,
            before.group_epoch - 1,
            before.group_epoch,
        ], before
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
        restarted = start_server(server.storage, SETTINGS, port=server.port)
        wait_for_log(restarted, LOADED, timeout=15)
        after = describe(restarted.bootstrap)
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert {m: s.epoch for m, s in after.members.items()} == {
            m: s.epoch for m, s in before.members.items()
        }
        rolling.server = restarted
        took = rolling.settle("the hand-over after the restart")
        print(f"\nafter the restart the hand-over completed in {took:.2f}s")
        final = rolling.wait_for(
            lambda: (v := describe(restarted.bootstrap)).state == "Stable" and v, "Stable"
        )
        assert len(final.members) == 3
        assert_no_commit_lost(rolling, restarted.bootstrap)
    finally:
        rolling.close()
        if restarted is not None:
            restarted.stop()
    replay(rolling.log.events())
