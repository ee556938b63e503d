"""Back-pressure (docs/gateway.md#back-pressure): the process-wide byte budget and the bound on a
connection's unsent responses, against fake transports (no sockets, no timing)."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from coordinator.gateway.upstream import PauseReason, UpstreamConnection
from coordinator.server.byte_budget import ByteBudget
from coordinator.server.connection import Connection, PendingReply
from coordinator.server.connection_states import ConnectionState, MuteReason
from protocol.apis import ApiKey

MB = 1 << 20


class Transport:
    """A socket the test drives: records pause/resume of reading, buffers writes like asyncio
    (calling pause_writing past the high-water mark) until ``drain``."""

    def __init__(self) -> None:
        self.reading = True
        self.buffered = 0
        self.high = 64 * 1024
        self.protocol: Any = None
        self.writing_paused = False
        self.closed = False

    def write(self, data: bytes | memoryview) -> None:
        self.buffered += len(data)
        if self.buffered > self.high and not self.writing_paused and self.protocol is not None:
            self.writing_paused = True
            self.protocol.pause_writing()

    def writelines(self, items: list[bytes]) -> None:
        for item in items:
            self.write(item)

    def drain(self) -> None:
        """The peer read everything."""
        self.buffered = 0
        if self.writing_paused:
            self.writing_paused = False
            self.protocol.resume_writing()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if high is not None:
            self.high = high

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class Holding:
    """A dispatcher that keeps every request in the server until the test answers it."""

    metrics = None

    def __init__(self) -> None:
        self.replies: list[PendingReply] = []

    def connection_opened(self, connection: Connection) -> None:
        pass

    def connection_closed(self, connection: Connection) -> None:
        pass

    def pipeline_of(self, connection: Connection, frame: bytes) -> str | None:
        return None

    def dispatch(self, connection: Connection, frame: bytes) -> None:
        self.replies.append(connection.start(ApiKey.PRODUCE, 9, 1))


def _client(budget: ByteBudget, dispatcher: Holding | None = None) -> tuple[Connection, Transport]:
    connection = Connection(dispatcher or Holding(), 200 * MB, 512 * MB, budget=budget)
    transport = Transport()
    transport.protocol = connection
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, transport


def _state(connection: Connection) -> ConnectionState:
    return connection.state


def _produce_frame(size: int) -> bytes:
    """A request frame of ``size`` bytes after its length prefix (only its header is read)."""
    body = struct.pack(">hhih", ApiKey.PRODUCE, 9, 1, 0) + b"\x00" * (size - 10)
    return struct.pack(">i", len(body)) + body


def test_the_budget_refuses_what_does_not_fit_and_wakes_waiters_in_order() -> None:
    budget = ByteBudget(10)
    woken: list[str] = []
    assert budget.reserve(6)
    assert not budget.reserve(6)
    budget.wait(lambda: woken.append("first"))
    budget.wait(lambda: woken.append("second"))
    budget.give_back(6)
    assert woken == ["first", "second"]
    assert budget.used == 0
    assert budget.reserve(25)  # larger than the budget: granted while nothing else is reserved
    assert not budget.reserve(1)


@pytest.mark.asyncio
async def test_large_requests_wait_for_the_budget_instead_of_growing_memory() -> None:
    budget = ByteBudget(10 * MB)
    dispatcher = Holding()
    clients = [_client(budget, dispatcher) for _ in range(4)]
    frame = _produce_frame(6 * MB)
    chunk = 64 * 1024
    # Each client begins its 6 MB request: only the first one's fits in the budget.
    for connection, _ in clients:
        connection.data_received(frame[:chunk])
    assert [t.reading for _, t in clients] == [True, False, False, False]
    assert [MuteReason.BUDGET_SPENT in c.mute_reasons for c, _ in clients] == [False, True, True, True]
    assert budget.used <= budget.limit
    first = clients[0][0]
    for pos in range(chunk, len(frame), chunk):
        first.data_received(frame[pos : pos + chunk])
        assert budget.used <= budget.limit
    assert len(dispatcher.replies) == 1  # handed on: its bytes are given back
    # The second client (the first one refused) now has its request's room; the others wait.
    assert [t.reading for _, t in clients] == [True, True, False, False]
    assert budget.used <= budget.limit
    for connection, _ in clients:
        connection.abort("test over")
    assert budget.used == 0  # every byte comes back when connections close


@pytest.mark.asyncio
async def test_a_client_that_does_not_read_is_not_served_and_its_upstream_is_not_read() -> None:
    budget = ByteBudget(64 * MB)
    dispatcher = Holding()
    connection, transport = _client(budget, dispatcher)
    paused: list[bool] = []
    connection.watch_output(paused.append)
    connection.data_received(_produce_frame(100) * 3)
    replies = dispatcher.replies
    assert len(replies) == 1
    replies[0].send_frame(b"\x00\x00\x00\x04" + b"x" * (2 * MB), budgeted=0)  # over the 1 MB bound
    await asyncio.sleep(0)  # the pump writes it, having served the next request
    assert paused == [True]
    assert _state(connection) is ConnectionState.MUTED and not transport.reading
    assert len(replies) == 2
    replies[1].send_frame(b"\x00\x00\x00\x00")
    await asyncio.sleep(0)
    assert len(replies) == 2  # the third request waits while the client does not read
    transport.drain()
    assert paused == [True, False]
    assert _state(connection) is ConnectionState.OPEN and transport.reading
    await asyncio.sleep(0)
    assert len(replies) == 3


def test_an_upstream_response_received_whole_waits_for_the_budget() -> None:
    budget = ByteBudget(4 * MB)
    assert budget.reserve(3 * MB)  # held by others
    received: list[tuple[int, int]] = []

    class Whole:
        def stream(self, size: int) -> None:
            return None

        def whole(self, frame: bytes, budgeted: int) -> None:
            received.append((len(frame), budgeted))

    upstream = UpstreamConnection("upstream", budget=budget)
    transport = Transport()
    upstream.connection_made(transport)  # type: ignore[arg-type]
    upstream._waiting.append(Whole())
    upstream._ids.append(None)
    response = struct.pack(">i", 2 * MB) + b"r" * (2 * MB)
    upstream.data_received(response[:1000])
    assert PauseReason.BUDGET_SPENT in upstream.paused and not transport.reading
    assert budget.used == 3 * MB + 1000  # what was read is counted; nothing more is read
    budget.give_back(3 * MB)
    assert not upstream.paused and transport.reading
    upstream.data_received(response[1000:])
    assert received == [(2 * MB + 4, 2 * MB + 4)]  # the frame carries its reservation on
