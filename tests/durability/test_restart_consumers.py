"""Three kafka-python consumers keep polling while the coordinator restarts (issue 4).

Three KafkaConsumers (session.timeout.ms 10 s, heartbeat.interval.ms 1 s, each in its own
process, each polling) form a Stable group and commit offsets. The coordinator is stopped
(SIGTERM, then also SIGKILL) and started again on the same storage and the same port while they
keep polling. For longer than a session timeout afterwards: no rebalance (no listener call after
the restart), every consumer keeps its generation, member id and partitions, DescribeGroups
shows the same Stable group, a Heartbeat with the old generation is accepted, committed offsets
are intact and the consumers can commit again with their generation.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.apis import ApiKey
from protocol.messages.heartbeat import HeartbeatRequest
from tests.durability.support import NONE, Servers, create_topics, describe, fetch, wait_for
from tests.integration.clients import decode_assignment
from tests.support.server import REPO
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GROUP, TOPIC, PARTITIONS = "restart-group", "restart-t", 6
SESSION_TIMEOUT_S = 10
KEEP_POLLING_S = SESSION_TIMEOUT_S + 2  # after the restart: longer than a session
QUIET_S = 2.0  # a group counts as settled after this long without a rebalance


class ConsumerProcess:
    """tests/durability/consumer_worker.py in a subprocess; stopped by PID."""

    def __init__(self, bootstrap: str, name: str, log_dir: Path) -> None:
        self.name = name
        self.log_file = log_dir / f"{name}.log"
        config = {
            "bootstrap": bootstrap,
            "group": GROUP,
            "topic": TOPIC,
            "client_id": name,
            "max_seconds": 150,
            "log_file": str(self.log_file),
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.durability.consumer_worker", json.dumps(config)],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                self.stderr.append(f"[stdout] {line}")
                continue
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._changed:
            return list(self.events)

    def of(self, *kinds: str, after: int = 0) -> list[dict[str, Any]]:
        return [e for e in self.snapshot()[after:] if e["event"] in kinds]

    def status(self) -> dict[str, Any] | None:
        statuses = self.of("status")
        return statuses[-1] if statuses else None

    def wait_event(
        self, condition: Callable[[dict[str, Any]], bool], after: int, timeout: float, what: str
    ) -> Any:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for event in self.events[after:]:
                    if condition(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise AssertionError(f"{self.name}: no {what} within {timeout}s\n{self.log()}")
                self._changed.wait(min(remaining, 0.2))

    def commit(self, offsets: dict[int, int]) -> dict[str, Any]:
        mark = len(self.snapshot())
        assert self.process.stdin is not None
        self.process.stdin.write(f"commit {json.dumps(offsets)}\n")
        self.process.stdin.flush()
        event = self.wait_event(
            lambda e: e["event"] in ("committed", "commit_failed"), mark, 30, "commit answer"
        )
        assert event["event"] == "committed", f"{self.name}: {event}\n{self.log()}"
        return dict(event)

    def log(self) -> str:
        listener = [e for e in self.snapshot() if e["event"] != "status"]
        return f"events (without status): {listener}\nstderr tail:\n{''.join(self.stderr[-30:])}"

    def group_protocol_log(self, lines: int = 40) -> str:
        """The last of kafka-python's group-protocol log lines (routine heartbeats left out)."""
        try:
            text = self.log_file.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        noise = ("need_rejoin: False", "error_code=0)", "Sending heartbeat", "Waiting ", "Fetch", "fetch")
        kept = [
            line[:300] for line in text if "kafka.coordinator" in line and not any(n in line for n in noise)
        ]
        return "\n".join(kept[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                assert self.process.stdin is not None
                self.process.stdin.write("close\n")
                self.process.stdin.flush()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        for reader in self._readers:
            reader.join(5)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@contextlib.contextmanager
def consumers(bootstrap: str, count: int, log_dir: Path) -> Iterator[list[ConsumerProcess]]:
    started: list[ConsumerProcess] = []
    try:
        started.extend(ConsumerProcess(bootstrap, f"consumer-{i}", log_dir) for i in range(count))
        yield started
    finally:
        for worker in started:
            worker.stop()


def converged(bootstrap: str, workers: list[ConsumerProcess]) -> dict[str, Any] | None:
    """The group is Stable with exactly these consumers, one generation, partitions split, and
    no listener call for QUIET_S (kafka-python's leader may rejoin once more on its own)."""
    last_call = max((e["t"] for w in workers for e in w.of("assigned", "revoked")), default=None)
    if last_call is None or time.time() - last_call < QUIET_S:
        return None
    statuses = [w.status() for w in workers]
    if any(s is None or s["generation"] <= 0 or not s["partitions"] for s in statuses):
        return None
    generations = {s["generation"] for s in statuses if s}
    owned = [frozenset(s["partitions"]) for s in statuses if s]
    if (
        len(generations) != 1
        or sum(map(len, owned)) != PARTITIONS
        or frozenset().union(*owned) != set(range(PARTITIONS))
    ):
        return None
    with WireClient(bootstrap, "describe") as client:
        group = describe(client, GROUP)
    members = {
        m.member_id: decode_assignment(m.member_assignment).get(TOPIC, frozenset()) for m in group.members
    }
    expected = {s["member_id"]: frozenset(s["partitions"]) for s in statuses if s}
    if group.group_state != "Stable" or members != expected:
        return None
    return {"generation": generations.pop(), "members": expected}


def diagnose(bootstrap: str, workers: list[ConsumerProcess]) -> str:
    with WireClient(bootstrap, "describe") as client:
        group = describe(client, GROUP)
    view = {m.member_id: sorted(decode_assignment(m.member_assignment).get(TOPIC, ())) for m in group.members}
    parts = [f"server: {group.group_state} {view}"]
    parts += [f"--- {w.name}: last status {w.status()}\n{w.log()}\n{w.group_protocol_log()}" for w in workers]
    return "\n".join(parts)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_consumers_are_not_rebalanced_by_a_coordinator_restart(
    coordinators: Servers, tmp_path: Path, sig: signal.Signals
) -> None:
    server = coordinators.start(f"sqlite:///{tmp_path / 'restart.db'}", {"log-level": "DEBUG"})
    create_topics(server.bootstrap, {TOPIC: PARTITIONS})
    with consumers(server.bootstrap, 3, tmp_path) as workers:
        try:
            before = wait_for(
                lambda: converged(server.bootstrap, workers), 45, "a Stable group of three consumers"
            )
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}\n{diagnose(server.bootstrap, workers)}\n{server.log_text()}"
            ) from None
        generation, members = before["generation"], before["members"]
        committed: dict[int, int] = {}
        for i, worker in enumerate(workers):
            status = worker.status()
            assert status is not None
            offsets = {p: 100 * (i + 1) + p for p in status["partitions"]}
            assert worker.commit(offsets)["generation"] == generation
            committed.update(offsets)
        time.sleep(1.5)  # heartbeats flowing
        marks = [len(w.snapshot()) for w in workers]

        restarted_at = time.time()
        first = server
        server = coordinators.restart(server, sig, {"log-level": "DEBUG"})  # same storage, same port
        time.sleep(KEEP_POLLING_S)

        for worker, mark in zip(workers, marks, strict=True):
            assert not worker.of("crashed", "closed"), f"{worker.name} stopped:\n{worker.log()}"
            rebalanced = worker.of("assigned", "revoked", after=mark)
            assert not rebalanced, (
                f"{worker.name} was rebalanced by the restart: {rebalanced}\n"
                f"{diagnose(server.bootstrap, workers)}\n--- server before the restart:\n"
                f"{first.log_text()}\n--- server after:\n{server.log_text()}"
            )
            status = worker.status()
            assert status is not None and status["t"] > restarted_at + KEEP_POLLING_S - 2, (
                "it stopped polling"
            )
            assert status["generation"] == generation
            assert frozenset(status["partitions"]) == members[status["member_id"]]
        assert {w.status()["member_id"] for w in workers} == set(members)  # type: ignore[index]

        with WireClient(server.bootstrap, "check") as client:
            group = describe(client, GROUP)
            assert group.group_state == "Stable"
            assert {
                m.member_id: decode_assignment(m.member_assignment).get(TOPIC, frozenset())
                for m in group.members
            } == members
            for member_id in members:
                request = HeartbeatRequest(GROUP, generation, member_id)
                assert client.request(ApiKey.HEARTBEAT, 4, request).error_code == NONE, member_id
            stored = fetch(client, GROUP, [(TOPIC, p) for p in range(PARTITIONS)])
            assert stored.offsets == {(TOPIC, p): o for p, o in committed.items()}

        # The consumers commit again, with the generation they had before the restart.
        for worker in workers:
            status = worker.status()
            assert status is not None
            event = worker.commit({p: 1000 + p for p in status["partitions"]})
            assert (event["generation"], event["member_id"]) == (generation, status["member_id"])
        with WireClient(server.bootstrap, "check") as client:
            stored = fetch(client, GROUP, [(TOPIC, p) for p in range(PARTITIONS)])
        assert stored.offsets == {(TOPIC, p): 1000 + p for p in range(PARTITIONS)}
        poll_errors = sum(len(w.of("poll_error")) for w in workers)
        print(
            f"\n{signal.Signals(sig).name}: generation {generation} and members {sorted(members)} kept; "
            f"{poll_errors} retriable errors raised by poll() during the restart"
        )
    server.stop()
