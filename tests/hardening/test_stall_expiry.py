"""After the loop stalls, heartbeats already waiting in socket buffers are read before expiry."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest
import uvloop

from coordinator.core.result import Result
from coordinator.server.runtime import STALL_GRACE_MS, Clock, Runtime
from storage.memory import MemoryStore
from storage.writer import BatchWriter


class _Timers:
    """The part of GroupCoordinator the runtime's timer pass uses, with one deadline."""

    def __init__(self, deadline_ms: int, events: list[str]) -> None:
        self.deadline: int | None = deadline_ms
        self.events = events

    def earliest_scheduled_since_last_call(self) -> int | None:
        return self.deadline

    def next_deadline(self) -> int | None:
        return self.deadline

    def poll_timers(self, now_ms: int, wall_ms: int, limit: int) -> list[Result]:
        self.events.append("expiry")
        self.deadline = None
        return []


async def _scenario(stall_s: float) -> list[str]:
    loop = asyncio.get_running_loop()
    events: list[str] = []
    clock = Clock(loop)
    store = MemoryStore()
    await store.open()
    coordinator: Any = _Timers(clock.now_ms() + 30, events)
    runtime = Runtime(coordinator, BatchWriter(store), clock)
    runtime.rearm_timer()
    member, server = socket.socketpair()
    attacker, victim_side = socket.socketpair()
    server.setblocking(False)
    victim_side.setblocking(False)
    loop.add_reader(server.fileno(), lambda: events.append("heartbeat read") or server.recv(100))

    def huge_request() -> None:
        # Handling one request takes the loop stall_s; meanwhile a member's heartbeat arrives.
        victim_side.recv(100)
        member.send(b"heartbeat")
        time.sleep(stall_s)

    loop.add_reader(victim_side.fileno(), huge_request)
    loop.call_later(0.01, lambda: attacker.send(b"huge"))
    await asyncio.sleep(stall_s + 0.2 + STALL_GRACE_MS / 1000)
    for sock in (server, victim_side):
        loop.remove_reader(sock.fileno())
    for sock in (member, server, attacker, victim_side):
        sock.close()
    return events


@pytest.mark.timeout(30)
def test_heartbeat_waiting_in_a_socket_is_read_before_expiry_after_a_stall() -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        events = runner.run(_scenario(stall_s=0.3))
    assert events[:2] == ["heartbeat read", "expiry"]


@pytest.mark.timeout(30)
def test_expiry_is_not_put_off_without_a_stall() -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        events = runner.run(_scenario(stall_s=0.0))
    assert "expiry" in events
