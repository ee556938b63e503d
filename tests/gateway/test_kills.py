"""SIGKILL of a consumer and of the gateway: nothing skipped, duplicates bounded and counted."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tests.gateway.clients import Member, committed, kafka_python_member, produce_kafka_python
from tests.gateway.conftest import gateway_settings
from tests.support.ports import free_port
from tests.support.server import REPO, ServerProcess, start_server

pytestmark = [
    pytest.mark.integration,
    # kafka-python leaks the socket of a refused connection attempt while the gateway is down.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


# Generous bounds derived from the members' timeouts (sessions of 3 s and 6 s, a rebalance within
# a few heartbeats): a loaded 2-core machine may take many times as long, a broken take-over never
# happens.
TAKE_OVER_S = 60.0
STALL_S = 30.0


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def _wait(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _wait_while_progressing(
    done: Callable[[], bool], progress: Callable[[], int], stall: float, what: Callable[[], str]
) -> None:
    """Until ``done()``, failing only when ``progress()`` stood still for ``stall`` seconds: how
    long reading a backlog takes depends on the machine's load, a consumer that stopped does not."""
    seen, moved_at = progress(), time.monotonic()
    while not done():
        now = progress()
        if now != seen:
            seen, moved_at = now, time.monotonic()
        assert time.monotonic() - moved_at < stall, f"{what()} (stuck at {seen} for {stall:.0f} s)"
        time.sleep(0.1)


def _progress(victim_lines: list[str], survivor: Member) -> str:
    """Per partition, the next offset each member read up to; the survivor's assignment, errors and
    where its thread is."""
    victim: dict[int, int] = {}
    for line in victim_lines:
        p, o, _ = line.split()
        victim[int(p)] = max(victim.get(int(p), 0), int(o) + 1)
    survivor_read: dict[int, int] = {}
    for partition, offset, _value in list(survivor.records):
        survivor_read[partition] = max(survivor_read.get(partition, 0), offset + 1)
    thread = survivor.thread
    frame = None if thread is None or thread.ident is None else sys._current_frames().get(thread.ident)
    where = "".join(traceback.format_stack(frame)[-10:]) if frame is not None else "(not running)\n"
    return (
        f"victim read up to {dict(sorted(victim.items()))}, survivor up to "
        f"{dict(sorted(survivor_read.items()))}, survivor owns {sorted(survivor.assignment)}, "
        f"its retriable errors {survivor.retriable_errors[-5:]}; the survivor's thread is at\n{where}"
    )


def test_sigkill_of_a_consumer_mid_stream(gateway: ServerProcess) -> None:
    _create(gateway.bootstrap, "kill-consumer", 4)
    values = [f"k-{i}".encode() for i in range(600)]
    produce_kafka_python(gateway.bootstrap, "kill-consumer", values)
    victim = subprocess.Popen(
        [sys.executable, "-m", "tests.gateway.consumer_process", gateway.bootstrap, "kill-consumer", "victims"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    victim_lines: list[str] = []
    reader = threading.Thread(
        target=lambda: victim_lines.extend(iter(victim.stdout.readline, "")),  # type: ignore[union-attr]
        daemon=True,
    )
    reader.start()
    stop = threading.Event()
    survivor = kafka_python_member(gateway.bootstrap, "kill-consumer", "victims", stop, pause_s=0.05)
    try:
        _wait(
            lambda: len(victim_lines) >= 40 and survivor.records, 60, "both members did not start consuming"
        )
        victim.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        victim.wait(10)
        reader.join(10)
        survivor_seen = lambda: {v for _, _, v in survivor.records}  # noqa: E731
        victim_seen = {line.split()[2].encode() for line in victim_lines}
        # The take-over: the victim's session (3 s) runs out, the survivor rejoins and gets every
        # partition. Then it reads the rest, ten records, a commit and a pause at a time.
        _wait(
            lambda: survivor.assignment == {0, 1, 2, 3} or survivor.error is not None,
            TAKE_OVER_S,
            "the survivor did not take over",
        )
        took_over = time.monotonic() - killed_at
        _wait_while_progressing(
            lambda: victim_seen | survivor_seen() >= set(values) or survivor.error is not None,
            lambda: len(survivor.records),
            STALL_S,
            lambda: f"the survivor stopped reading: {_progress(victim_lines, survivor)}",
        )
        read = time.monotonic() - killed_at
        print(f"survivor owned every partition after {took_over:.1f} s, read the rest after {read:.1f} s")
    finally:
        stop.set()
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        assert survivor.thread is not None
        survivor.thread.join(30)
        if victim.stdout is not None:
            victim.stdout.close()
    assert survivor.error is None
    assert victim_seen | survivor_seen() == set(values)  # nothing skipped
    duplicates = len(victim_seen & survivor_seen())
    # At least once: the victim's last uncommitted batch (max_poll_records=10 per partition fetch).
    assert duplicates <= 40, duplicates
    assert sum(o or 0 for o in committed(gateway.bootstrap, "victims", "kill-consumer", 4).values()) == 600


def test_sigkill_and_restart_of_the_gateway(tansu_port: int, tmp_path: Path) -> None:
    port, base = free_port(), free_port()
    storage = f"sqlite:///{tmp_path / 'gateway.db'}"
    settings = gateway_settings(f"127.0.0.1:{tansu_port}", **{"gateway-broker-port-base": str(base)})
    gateway = start_server(storage, settings, port=port)
    stop = threading.Event()
    member = None
    try:
        _create(gateway.bootstrap, "kill-gateway", 2)
        values = [f"g-{i}".encode() for i in range(600)]
        produce_kafka_python(gateway.bootstrap, "kill-gateway", values)
        member = kafka_python_member(gateway.bootstrap, "kill-gateway", "restarts", stop, pause_s=0.05)
        _wait(lambda: len(member.records) >= 100, 60, "the consumer did not start")
        gateway.kill()
        before = len(member.records)
        gateway = start_server(storage, settings, port=port)
        seen = lambda: {v for _, _, v in member.records}  # noqa: E731
        _wait(
            lambda: seen() >= set(values) or member.error is not None,
            60,
            f"the consumer did not resume after the restart:\n{gateway.log_text()[-2000:]}",
        )
        assert before < len(values)  # the kill landed mid-stream
    finally:
        stop.set()
        if member is not None and member.thread is not None:
            member.thread.join(30)
        log = gateway.log_text()
        gateway.stop()
    assert member.error is None
    assert all("Connection" in e or "Coordinator" in e for e in member.retriable_errors), (
        member.retriable_errors
    )
    assert seen() == set(values)
    duplicates = len(member.records) - len(values)
    assert 0 <= duplicates <= 20, duplicates  # at most the batch read but not committed at the kill
    # The Stable group came back at its generation: no rebalance until the member left at the end.
    rebalances = [line for line in log.splitlines() if "group restarts: preparing to rebalance" in line]
    assert all("left" in line for line in rebalances), log  # only the member leaving at the end


@pytest.fixture(autouse=True)
def _collect_leaked_sockets() -> Iterator[None]:
    """Collect kafka-python's leaked sockets here, not in whichever test runs next."""
    yield
    gc.collect()
