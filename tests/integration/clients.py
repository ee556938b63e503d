"""Shared helpers for the real-client group tests (kafka-python, aiokafka, confluent-kafka).

Group members run as *worker subprocesses* (``Worker``): each one builds a consumer of one library,
subscribes to a topic and reports its rebalance callbacks as JSON lines on stdout; the test sends
``close`` on stdin for a clean close, or SIGKILLs it by PID. A worker whose stdin reaches EOF closes
itself, so a test that dies never leaves consumers behind. The server's own view of a group comes
from a raw DescribeGroups (``describe_group``). Offsets are committed and read with each library
(``commit_offsets`` / ``fetch_offsets``): in-process, except confluent-kafka's reads (see
``_confluent_fetch``). Set GROUP_TESTS_CLIENT_LOG=DEBUG to get the workers' client logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.apis import ApiKey
from protocol.messages.consumer_protocol import (
    decode_consumer_protocol_assignment_v0,
    decode_consumer_protocol_subscription_v0,
)
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from tests.support.wire_client import WireClient

REPO = Path(__file__).resolve().parents[2]

KAFKA_PYTHON = "kafka-python"
AIOKAFKA = "aiokafka"
CONFLUENT = "confluent"
_LIBRARY_MODULES = {KAFKA_PYTHON: "kafka", AIOKAFKA: "aiokafka", CONFLUENT: "confluent_kafka"}
LIBRARIES = (KAFKA_PYTHON, AIOKAFKA, CONFLUENT)

PARTITIONS = 6
ALL_PARTITIONS = frozenset(range(PARTITIONS))
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
# max.poll.interval.ms, which the Java-style clients send as the JoinGroup rebalance timeout.
REBALANCE_TIMEOUT_MS = 15000
# Upper bound for any convergence wait in these tests.
CONVERGE_S = 20.0


# --------------------------------------------------------------------------------------------
# Waiting


def wait_until(
    condition: Callable[[], Any], timeout: float = CONVERGE_S, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll ``condition`` until it returns something truthy; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what or condition}")
        time.sleep(interval)


# --------------------------------------------------------------------------------------------
# Topics


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


# --------------------------------------------------------------------------------------------
# The server's view of a group (raw DescribeGroups v5)


@dataclass
class MemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    assignment: dict[str, frozenset[int]]


@dataclass
class GroupView:
    error_code: int
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberView]

    def partitions_of(self, member_id: str, topic: str) -> frozenset[int]:
        for member in self.members:
            if member.member_id == member_id:
                return member.assignment.get(topic, frozenset())
        raise KeyError(member_id)


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    if not data:
        return {}
    # Every ConsumerProtocolAssignment version starts with the v0 layout after the int16 version.
    assignment, _ = decode_consumer_protocol_assignment_v0(data, 2)
    return {tp.topic: frozenset(tp.partitions) for tp in assignment.assigned_partitions}


def decode_subscription_topics(data: bytes) -> list[str]:
    subscription, _ = decode_consumer_protocol_subscription_v0(data, 2)
    return list(subscription.topics)


def describe_group(bootstrap: str, group: str) -> GroupView:
    with WireClient(bootstrap, client_id="describe") as client:
        response = client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[group]))
    described = response.groups[0]
    members = [
        MemberView(
            member.member_id,
            member.group_instance_id,
            member.client_id,
            member.client_host,
            decode_assignment(member.member_assignment),
        )
        for member in described.members
    ]
    return GroupView(
        described.error_code,
        described.group_state,
        described.protocol_type,
        described.protocol_data,
        members,
    )


def offset_delete(bootstrap: str, group: str, topic: str, partitions: Iterable[int]) -> Any:
    """Raw OffsetDelete v0 (none of the three libraries' admin clients has it except kafka-python)."""
    request = OffsetDeleteRequest(
        group_id=group,
        topics=[
            OffsetDeleteRequestTopic(
                name=topic, partitions=[OffsetDeleteRequestPartition(p) for p in partitions]
            )
        ],
    )
    with WireClient(bootstrap, client_id="offset-delete") as client:
        return client.request(ApiKey.OFFSET_DELETE, 0, request)


def offset_delete_errors(bootstrap: str, group: str, topic: str, partitions: Iterable[int]) -> Any:
    """(top-level error, {partition: error}) of a raw OffsetDelete."""
    response = offset_delete(bootstrap, group, topic, partitions)
    errors = {p.partition_index: p.error_code for t in response.topics for p in t.partitions}
    return response.error_code, errors


def delete_groups(bootstrap: str, *groups: str) -> dict[str, int]:
    """Raw DeleteGroups v2: {group: error code}."""
    with WireClient(bootstrap, client_id="delete-groups") as client:
        response = client.request(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=list(groups)))
    return {r.group_id: r.error_code for r in response.results}


# --------------------------------------------------------------------------------------------
# Worker subprocesses: one group member each

_WORKER_SCRIPT = "import sys; from tests.integration.clients import run_worker; run_worker(sys.argv[1])"


class Worker:
    """A consumer of one library in a subprocess, subscribed to ``topic`` in ``group``.

    ``protocol="consumer"`` (confluent-kafka only) makes it a KIP-848 member: its callbacks are
    then incremental, and it also reports the client's errors as ``client_error`` events."""

    def __init__(
        self,
        lib: str,
        bootstrap: str,
        group: str,
        topic: str,
        name: str,
        instance_id: str | None = None,
        heartbeat_ms: int = HEARTBEAT_INTERVAL_MS,
        protocol: str = "classic",
        held: bool = False,
    ) -> None:
        """``held``: the process imports its library, reports ``ready`` and builds its consumer
        only on ``start()`` (a test that must join within a deadline starts it ahead)."""
        assert protocol == "classic" or lib == CONFLUENT, (lib, protocol)
        self.lib = lib
        self.name = name
        config = {
            "lib": lib,
            "bootstrap": bootstrap,
            "group": group,
            "topic": topic,
            "client_id": name,
            "instance_id": instance_id,
            "heartbeat_ms": heartbeat_ms,
            "protocol": protocol,
            "held": held,
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
        env["PYTHONPATH"] = str(REPO)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER_SCRIPT, json.dumps(config)],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self.stderr_lines: list[str] = []
        self._changed = threading.Condition()
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                self.stderr_lines.append(f"[stdout] {line}")
                continue
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line)

    # -- what it reported

    def snapshot(self) -> list[dict[str, Any]]:
        with self._changed:
            return list(self.events)

    def count(self, kind: str) -> int:
        return sum(1 for event in self.snapshot() if event["event"] == kind)

    @property
    def current(self) -> frozenset[int] | None:
        """Partitions of the last 'assigned' callback, None if revoked since (or never assigned)."""
        for event in reversed(self.snapshot()):
            if event["event"] == "assigned":
                return frozenset(event["partitions"])
            if event["event"] in ("revoked", "lost"):
                return None
        return None

    def last_assigned(self) -> dict[str, Any] | None:
        for event in reversed(self.snapshot()):
            if event["event"] == "assigned":
                return event
        return None

    @property
    def member_id(self) -> str | None:
        event = self.last_assigned()
        return event["member_id"] if event else None

    def wait_event(self, kind: str, timeout: float = CONVERGE_S, after: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for event in self.events[after:]:
                    if event["event"] == kind:
                        return event
                if event_error := next((e for e in self.events if e["event"] == "error"), None):
                    raise AssertionError(f"{self.name} failed: {event_error}\n{self.describe_log()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.process.poll() is not None and not self._threads[0].is_alive()):
                    raise AssertionError(
                        f"{self.name}: no {kind!r} event within {timeout}s\n{self.describe_log()}"
                    )
                self._changed.wait(min(remaining, 0.2))

    def describe_log(self) -> str:
        tail = "".join(self.stderr_lines[-40:])
        return f"events={self.snapshot()}\nstderr tail:\n{tail}"

    def start(self) -> None:
        """Let a ``held`` worker build its consumer and subscribe."""
        assert self.process.stdin is not None
        self.process.stdin.write("start\n")
        self.process.stdin.flush()

    # -- stopping it

    def close(self, timeout: float = 15) -> int:
        """Ask the consumer to close itself (it leaves the group if the library does)."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.write("close\n")
                self.process.stdin.flush()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reap()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL by PID: no LeaveGroup, no clean socket shutdown."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self._reap()

    def _reap(self) -> None:
        for thread in self._threads:
            thread.join(5)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class Pool:
    """Workers of one test; every worker still running at exit is SIGKILLed by PID."""

    def __init__(
        self, lib: str, bootstrap: str, group: str, topic: str, heartbeat_ms: int = HEARTBEAT_INTERVAL_MS
    ) -> None:
        self.heartbeat_ms = heartbeat_ms
        self.lib = lib
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.workers: list[Worker] = []

    def spawn(self, name: str, instance_id: str | None = None, lib: str | None = None) -> Worker:
        worker = Worker(
            lib or self.lib, self.bootstrap, self.group, self.topic, name, instance_id, self.heartbeat_ms
        )
        self.workers.append(worker)
        return worker

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        for worker in self.workers:
            worker.kill()

    def describe(self) -> GroupView:
        return describe_group(self.bootstrap, self.group)

    def wait_split(self, members: list[Worker], timeout: float = CONVERGE_S) -> dict[str, frozenset[int]]:
        """Wait until ``members`` (and nobody else) own all partitions, without overlap or gap,
        as both the members' callbacks and the server's Stable DescribeGroups say."""
        last: list[Any] = []

        def converged() -> dict[str, frozenset[int]] | None:
            owned = {w.name: w.current for w in members}
            view = self.describe()
            last[:] = [owned, view]
            sets = list(owned.values())
            if any(s is None for s in sets):
                return None
            if sum(len(s) for s in sets if s is not None) != PARTITIONS:
                return None
            if frozenset().union(*(s for s in sets if s is not None)) != ALL_PARTITIONS:
                return None
            if view.state != "Stable" or len(view.members) != len(members):
                return None
            for worker in members:
                member_id = worker.member_id
                if member_id is None or member_id not in {m.member_id for m in view.members}:
                    return None
                if view.partitions_of(member_id, self.topic) != owned[worker.name]:
                    return None
            return {name: s for name, s in owned.items() if s is not None}

        try:
            return wait_until(converged, timeout, 0.1, "the group to converge")  # type: ignore[no-any-return]
        except AssertionError as exc:
            logs = "\n".join(f"--- {w.name} (pid {w.pid})\n{w.describe_log()}" for w in members)
            raise AssertionError(f"{exc}\nlast seen: {last}\n{logs}") from None


@contextlib.contextmanager
def pool(
    lib: str, bootstrap: str, group: str, topic: str, heartbeat_ms: int = HEARTBEAT_INTERVAL_MS
) -> Iterator[Pool]:
    with Pool(lib, bootstrap, group, topic, heartbeat_ms) as workers:
        yield workers


# -- inside the worker subprocess


def run_worker(config_json: str) -> None:
    config = json.loads(config_json)
    if level := os.environ.get("GROUP_TESTS_CLIENT_LOG"):  # e.g. DEBUG, to debug a client's view
        logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    go = threading.Event()
    lock = threading.Lock()

    def emit(event: str, **fields: Any) -> None:
        with lock:
            print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "start":
                go.set()
            elif line.strip() == "close":
                break
        stop.set()  # "close", or EOF because the test process went away
        go.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    if config.get("held"):
        importlib.import_module(_LIBRARY_MODULES[config["lib"]])  # the slow part of a start
        emit("ready")
        go.wait()
        if stop.is_set():
            emit("closed")
            return
    try:
        {KAFKA_PYTHON: _kafka_python_worker, AIOKAFKA: _aiokafka_worker, CONFLUENT: _confluent_worker}[
            config["lib"]
        ](config, emit, stop)
    except Exception as exc:
        emit("error", error=repr(exc))
        raise
    emit("closed")


def _kafka_python_worker(config: dict[str, Any], emit: Callable[..., None], stop: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=config["bootstrap"],
        group_id=config["group"],
        group_instance_id=config["instance_id"],
        client_id=config["client_id"],
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=config["heartbeat_ms"],
        max_poll_interval_ms=REBALANCE_TIMEOUT_MS,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            meta = consumer._coordinator.group_metadata()
            emit(
                "assigned",
                partitions=sorted(tp.partition for tp in assigned),
                generation=meta.generation_id,
                member_id=meta.member_id,
            )

    consumer.subscribe([config["topic"]], listener=Listener())
    # Fetch the subscribed topic's metadata before the first JoinGroup. Otherwise the first leader
    # assigns from an empty metadata snapshot and rejoins when the metadata arrives, and kafka-python
    # 3.0.12 can drop the result of that rejoin: when a short poll() times out while the leader's
    # SyncGroup is in flight, need_rejoin() is already False (the leader updated its snapshot), the
    # next poll() never awaits the join task, and the member never heartbeats again.
    consumer.partitions_for_topic(config["topic"])
    emit("started")
    while not stop.is_set():
        consumer.poll(timeout_ms=100)
    consumer.close()


def _confluent_worker(config: dict[str, Any], emit: Callable[..., None], stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    kip848 = config["protocol"] == "consumer"
    settings: dict[str, Any] = {
        "bootstrap.servers": config["bootstrap"],
        "broker.address.family": "v4",
        "group.id": config["group"],
        "group.protocol": config["protocol"],
        "client.id": config["client_id"],
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
    }
    if kip848:  # the session timeout and heartbeat interval are the coordinator's
        settings["error_cb"] = lambda error: emit("client_error", code=error.name(), text=error.str())
    else:
        settings["session.timeout.ms"] = SESSION_TIMEOUT_MS
        settings["heartbeat.interval.ms"] = config["heartbeat_ms"]
        settings["max.poll.interval.ms"] = REBALANCE_TIMEOUT_MS
    if config["instance_id"]:
        settings["group.instance.id"] = config["instance_id"]
    consumer = Consumer(settings)

    def on_assign(c: Any, partitions: list[Any]) -> None:
        emit(
            "assigned",
            partitions=sorted(tp.partition for tp in partitions),
            generation=None,
            member_id=c.memberid(),
        )

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        emit("revoked", partitions=sorted(tp.partition for tp in partitions))

    def on_lost(c: Any, partitions: list[Any]) -> None:
        emit("lost", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([config["topic"]], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    emit("started")
    while not stop.is_set():
        message = consumer.poll(0.1)
        if kip848 and message is not None and message.error():
            emit("client_error", code=message.error().name(), text=message.error().str())
    consumer.close()


def _aiokafka_worker(config: dict[str, Any], emit: Callable[..., None], stop: threading.Event) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    async def main() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=config["bootstrap"],
            group_id=config["group"],
            group_instance_id=config["instance_id"],
            client_id=config["client_id"],
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=config["heartbeat_ms"],
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            max_poll_interval_ms=REBALANCE_TIMEOUT_MS,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
        )

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                emit("revoked", partitions=sorted(tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned: Any) -> None:
                emit(
                    "assigned",
                    partitions=sorted(tp.partition for tp in assigned),
                    generation=consumer._coordinator.generation,
                    member_id=consumer._coordinator.member_id,
                )

        await consumer.start()
        consumer.subscribe([config["topic"]], listener=Listener())
        emit("started")
        try:
            while not stop.is_set():
                await consumer.getmany(timeout_ms=100)
        finally:
            await consumer.stop()

    asyncio.run(main())


# --------------------------------------------------------------------------------------------
# Offsets, committed and read by each library


@dataclass(frozen=True)
class Committed:
    offset: int
    metadata: str


@dataclass
class OffsetOps:
    commit: Callable[[str, str, str, dict[int, Committed]], None]
    fetch: Callable[[str, str, str, Iterable[int]], dict[int, Committed]]


def _kafka_python_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, Committed]) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, p) for p in offsets])
        consumer.commit(
            {
                TopicPartition(topic, p): OffsetAndMetadata(c.offset, c.metadata, -1)
                for p, c in offsets.items()
            }
        )
    finally:
        consumer.close()


def _kafka_python_fetch(
    bootstrap: str, group: str, topic: str, partitions: Iterable[int]
) -> dict[int, Committed]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        result = {}
        for p in partitions:
            committed = consumer.committed(TopicPartition(topic, p), metadata=True)
            if committed is not None:
                result[p] = Committed(committed.offset, committed.metadata)
        return result
    finally:
        consumer.close()


def _confluent_consumer(bootstrap: str, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "broker.address.family": "v4",
            "group.id": group,
            "group.protocol": "classic",
            "enable.auto.commit": False,
        }
    )


def _confluent_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, Committed]) -> None:
    from confluent_kafka import TopicPartition

    consumer = _confluent_consumer(bootstrap, group)
    try:
        result = consumer.commit(
            offsets=[TopicPartition(topic, p, c.offset, metadata=c.metadata) for p, c in offsets.items()],
            asynchronous=False,
        )
        errors = [tp for tp in result if tp.error is not None]
        assert not errors, errors
    finally:
        consumer.close()


def _confluent_fetch(
    bootstrap: str, group: str, topic: str, partitions: Iterable[int]
) -> dict[int, Committed]:
    # In a subprocess: confluent-kafka reads offset metadata as a NUL-terminated C string, so metadata
    # that another client committed (without a trailing NUL) is read past its end (heap over-read).
    raw = run_isolated("confluent_fetch_raw", bootstrap, group, topic, list(partitions))
    return {
        int(p): Committed(offset, bytes.fromhex(metadata).decode("utf-8", "replace"))
        for p, (offset, metadata) in raw.items()
    }


def confluent_fetch_raw(bootstrap: str, group: str, topic: str, partitions: list[int]) -> dict[str, Any]:
    """{partition: [offset, metadata bytes as hex]} as confluent-kafka's committed() gives them."""
    from confluent_kafka import TopicPartition

    consumer = _confluent_consumer(bootstrap, group)
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        result = {}
        for tp in committed:
            if tp.offset < 0:
                continue
            try:
                metadata = (tp.metadata or "").encode()
            except UnicodeDecodeError as exc:
                metadata = exc.object
            result[str(tp.partition)] = [tp.offset, metadata.hex()]
        return result
    finally:
        consumer.close()


def run_isolated(function: str, *args: Any, timeout: float = 60) -> Any:
    """Run ``function(*args)`` of this module in a fresh interpreter; return its JSON result."""
    script = (
        "import json, sys; from tests.integration import clients; "
        f"print(json.dumps(clients.{function}(*json.loads(sys.argv[1]))))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{function} failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _aiokafka_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, Committed]) -> None:
    from aiokafka import AIOKafkaConsumer, OffsetAndMetadata, TopicPartition

    async def main() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in offsets])
            await consumer.commit(
                {
                    TopicPartition(topic, p): OffsetAndMetadata(c.offset, c.metadata)
                    for p, c in offsets.items()
                }
            )
        finally:
            await consumer.stop()

    asyncio.run(main())


def _aiokafka_fetch(
    bootstrap: str, group: str, topic: str, partitions: Iterable[int]
) -> dict[int, Committed]:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    wanted = list(partitions)

    async def main() -> dict[int, Committed]:
        # The consumer's committed() gives the offset only; the admin client gives the metadata too.
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in wanted])
            offsets = {p: await consumer.committed(TopicPartition(topic, p)) for p in wanted}
        finally:
            await consumer.stop()
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            listed = await admin.list_consumer_group_offsets(
                group, partitions=[TopicPartition(topic, p) for p in wanted]
            )
        finally:
            await admin.close()
        result = {}
        for p in wanted:
            meta = listed.get(TopicPartition(topic, p))
            assert (meta.offset if meta is not None and meta.offset >= 0 else None) == offsets[p], (
                f"aiokafka committed() and admin disagree on partition {p}: {offsets[p]} vs {meta}"
            )
            if meta is not None and meta.offset >= 0:
                result[p] = Committed(meta.offset, meta.metadata)
        return result

    return asyncio.run(main())


OFFSETS: dict[str, OffsetOps] = {
    KAFKA_PYTHON: OffsetOps(_kafka_python_commit, _kafka_python_fetch),
    CONFLUENT: OffsetOps(_confluent_commit, _confluent_fetch),
    AIOKAFKA: OffsetOps(_aiokafka_commit, _aiokafka_fetch),
}


def commit_offsets(lib: str, bootstrap: str, group: str, topic: str, offsets: dict[int, Committed]) -> None:
    OFFSETS[lib].commit(bootstrap, group, topic, offsets)


def fetch_offsets(
    lib: str, bootstrap: str, group: str, topic: str, partitions: Iterable[int]
) -> dict[int, Committed]:
    return OFFSETS[lib].fetch(bootstrap, group, topic, partitions)


def expected_metadata(writer: str, reader: str, metadata: str) -> str:
    """confluent-kafka commits metadata with its C string's NUL terminator; others read it back."""
    if writer == CONFLUENT and reader != CONFLUENT:
        return metadata + "\x00"
    return metadata


def same_metadata(reader: str, got: str, expected: str) -> bool:
    if reader == CONFLUENT:
        # confluent-kafka reads past the end of metadata that lacks a NUL: only the prefix is reliable.
        return got.startswith(expected)
    return got == expected


# --------------------------------------------------------------------------------------------
# Scenarios shared by the three per-library test files

TOPIC = "orders"


def check_one_consumer_gets_all(lib: str, bootstrap: str) -> None:
    create_topic(bootstrap, TOPIC)
    with pool(lib, bootstrap, "solo", TOPIC) as workers:
        only = workers.spawn("only")
        assert workers.wait_split([only]) == {"only": ALL_PARTITIONS}
        view = workers.describe()
        assert view.protocol_type == "consumer"
        [member] = view.members
        assert member.client_id == "only"
        assert member.instance_id is None
        assert member.assignment == {TOPIC: ALL_PARTITIONS}


def _three(workers: Pool, instance_ids: bool = False) -> tuple[list[Worker], dict[str, frozenset[int]]]:
    members = [
        workers.spawn(f"c{i}", instance_id=f"instance-{i}" if instance_ids else None) for i in range(3)
    ]
    split = workers.wait_split(members)
    return members, split


def check_three_consumers_split(lib: str, bootstrap: str) -> None:
    create_topic(bootstrap, TOPIC)
    with pool(lib, bootstrap, "trio", TOPIC) as workers:
        members, split = _three(workers)
        assert sorted(len(s) for s in split.values()) == [2, 2, 2]
        assert frozenset().union(*split.values()) == ALL_PARTITIONS
        view = workers.describe()
        assert sorted(m.client_id for m in view.members) == ["c0", "c1", "c2"]
        assert len({m.member_id for m in view.members}) == 3
        generations = {w.last_assigned()["generation"] for w in members}  # type: ignore[index]
        assert len(generations) == 1, generations


def check_close_hands_over(lib: str, bootstrap: str) -> None:
    create_topic(bootstrap, TOPIC)
    with pool(lib, bootstrap, "handover", TOPIC) as workers:
        (first, leaving, last), split = _three(workers)
        closed_at = time.monotonic()
        assert leaving.close() == 0, leaving.describe_log()
        after = workers.wait_split([first, last])
        elapsed = time.monotonic() - closed_at
        assert split[leaving.name] <= after[first.name] | after[last.name]
        # Handed over by LeaveGroup: well before the closed member's session could have expired.
        assert elapsed < SESSION_TIMEOUT_MS / 1000, f"handover took {elapsed:.1f}s"


def check_sigkill_expires(lib: str, bootstrap: str) -> None:
    create_topic(bootstrap, TOPIC)
    with pool(lib, bootstrap, "crash", TOPIC) as workers:
        (first, victim, last), split = _three(workers)
        victim_id = victim.member_id
        killed_at = time.monotonic()
        victim.kill()
        # A dead TCP connection is not a LeaveGroup: the member stays until its session expires.
        time.sleep(2.0)
        view = workers.describe()
        assert victim_id in {m.member_id for m in view.members}, view
        after = workers.wait_split([first, last], timeout=SESSION_TIMEOUT_MS / 1000 + CONVERGE_S)
        elapsed = time.monotonic() - killed_at
        assert split[victim.name] <= after[first.name] | after[last.name]
        assert victim_id not in {m.member_id for m in workers.describe().members}
        # Expired by the session timer: not before session timeout minus one heartbeat interval.
        earliest = (SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS) / 1000 - 0.5
        assert earliest <= elapsed < SESSION_TIMEOUT_MS / 1000 + 10, f"reassigned after {elapsed:.1f}s"


def check_static_restart(lib: str, bootstrap: str) -> None:
    """Rolling restart of three static members (the leader among them) within the session timeout:
    each new process gets its predecessor's partitions and generation, nobody else rebalances, and
    the replaced member ids' old session timers do not fire later."""
    create_topic(bootstrap, TOPIC)
    with pool(lib, bootstrap, "static", TOPIC) as workers:
        members, split = _three(workers, instance_ids=True)
        before = workers.describe()
        by_instance = {m.instance_id: m for m in before.members}
        assert set(by_instance) == {"instance-0", "instance-1", "instance-2"}
        generation = members[0].last_assigned()["generation"]  # type: ignore[index]
        started = time.monotonic()
        current = list(members)
        for i, old in enumerate(members):
            marks = {w.name: len(w.snapshot()) for w in current}
            old.close()  # a static member sends no LeaveGroup
            new = workers.spawn(f"c{i}-restarted", instance_id=f"instance-{i}")
            event = new.wait_event("assigned")
            assert frozenset(event["partitions"]) == split[old.name], (event, split)
            assert event["generation"] == generation
            assert event["member_id"] != by_instance[f"instance-{i}"].member_id
            current[i] = new
            for worker in current:
                if worker is not new and worker.name in marks:
                    later = worker.snapshot()[marks[worker.name] :]
                    assert not [e for e in later if e["event"] == "assigned"], (worker.name, later)
        # Past the session timeout of the first replaced member id: still no rebalance.
        time.sleep(max(0.0, started + SESSION_TIMEOUT_MS / 1000 + 1.5 - time.monotonic()))
        for worker in current:
            assert worker.count("assigned") == 1, (worker.name, worker.snapshot())
            assert worker.current == split[worker.name.removesuffix("-restarted")]
        after = workers.describe()
        assert after.state == "Stable"
        assert {m.instance_id: m.assignment for m in after.members} == {
            m.instance_id: m.assignment for m in before.members
        }
        assert {m.member_id for m in after.members} == {w.member_id for w in current}


def check_offsets_read_by_all(lib: str, bootstrap: str) -> None:
    create_topic(bootstrap, TOPIC)
    group = f"offsets-by-{lib}"
    committed = {p: Committed(100 * p + 7, f"{lib} méta {p}") for p in (0, 2, 5)}
    commit_offsets(lib, bootstrap, group, TOPIC, committed)
    for reader in LIBRARIES:
        got = fetch_offsets(reader, bootstrap, group, TOPIC, range(PARTITIONS))
        assert set(got) == set(committed), (reader, got)
        for p, expected in committed.items():
            assert got[p].offset == expected.offset, (reader, p, got[p])
            want = expected_metadata(lib, reader, expected.metadata)
            assert same_metadata(reader, got[p].metadata, want), (reader, p, got[p], want)
    # A second commit by the same library overwrites, and the others see the new value.
    commit_offsets(lib, bootstrap, group, TOPIC, {2: Committed(9, "second")})
    for reader in LIBRARIES:
        got = fetch_offsets(reader, bootstrap, group, TOPIC, [2])
        assert got[2].offset == 9
        assert same_metadata(reader, got[2].metadata, expected_metadata(lib, reader, "second"))
