"""The connection's request flow with pipelined OffsetCommits, against a scripted dispatcher.

What the connection promises (docs/performance.md#pipelined-offsetcommits): replies leave in
request order whatever order they are answered in; an OffsetCommit is let in while earlier
requests are unanswered only behind OffsetCommits the core has handled, within the bound; every
other request waits until all earlier ones are answered; answers released in one loop turn go
out in one write.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coordinator.server.connection import COMMITS, Connection, PendingReply, is_pipelined_commit
from protocol.apis import ApiKey
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.wire import encode_request, peek_header

pytestmark = pytest.mark.asyncio


class Transport:
    """Records what the connection writes, one entry per write call."""

    def __init__(self) -> None:
        self.writes: list[list[bytes]] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append([data])

    def writelines(self, data: list[bytes]) -> None:
        self.writes.append(list(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def correlation_ids(self) -> list[list[int]]:
        """Per write call, the correlation ids of the responses it carried."""
        return [[int.from_bytes(frame[4:8], "big") for frame in call] for call in self.writes]


class Metrics:
    def __init__(self) -> None:
        self.observed: list[tuple[int, float]] = []

    def observe_response(
        self, api_key: int, api_version: int, response: Any, seconds: float, parked_seconds: float = 0.0
    ) -> None:
        self.observed.append((api_key, seconds))


class Dispatcher:
    """Starts a reply per frame. Heartbeats are answered at once; OffsetCommits are kept for the
    test to answer, marked joinable unless ``handled`` is False (not yet handed to the core)."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self.commits: list[PendingReply] = []
        self.dispatched: list[int] = []  # correlation ids, in dispatch order
        self.handled = True

    def connection_opened(self, connection: Connection) -> None:
        pass

    def connection_closed(self, connection: Connection) -> None:
        pass

    def pipeline_of(self, connection: Connection, frame: bytes) -> str | None:
        return COMMITS if is_pipelined_commit(frame) else None

    def dispatch(self, connection: Connection, frame: bytes) -> None:
        api_key, version, correlation_id = peek_header(frame)
        self.dispatched.append(correlation_id)
        reply = connection.start(api_key, version, correlation_id)
        if api_key == ApiKey.HEARTBEAT:
            reply.send(HeartbeatResponse())
        else:
            if self.handled:
                reply.handled(connection.commit_pipeline)
            self.commits.append(reply)


def _frames(*api_keys: ApiKey, first_id: int = 1) -> bytes:
    out = b""
    for i, api_key in enumerate(api_keys):
        body: Any = (
            OffsetCommitRequest(group_id="g") if api_key == ApiKey.OFFSET_COMMIT else HeartbeatRequest("g")
        )
        out += encode_request(api_key, 8 if api_key == ApiKey.OFFSET_COMMIT else 4, first_id + i, "t", body)
    return out


def _connection(bound: int = 16) -> tuple[Connection, Dispatcher, Transport]:
    dispatcher = Dispatcher()
    connection = Connection(dispatcher, 1 << 20, 1 << 24, max_pipelined_commits=bound)
    transport = Transport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, dispatcher, transport


C, H = ApiKey.OFFSET_COMMIT, ApiKey.HEARTBEAT


def _answer(reply: PendingReply) -> None:
    reply.send(OffsetCommitResponse())


async def test_answers_leave_in_request_order_one_write_per_loop_turn() -> None:
    connection, dispatcher, transport = _connection()
    connection.data_received(_frames(C, C, C, C))
    assert dispatcher.dispatched == [1, 2, 3, 4]  # all in the server together
    first, second, third, fourth = dispatcher.commits
    _answer(third)
    _answer(first)
    _answer(second)
    assert transport.writes == []  # released, written once this loop turn ends
    await asyncio.sleep(0)
    assert transport.correlation_ids() == [[1, 2, 3]]
    _answer(fourth)  # the last unanswered one: nothing to wait for, written at once
    assert transport.correlation_ids() == [[1, 2, 3], [4]]
    assert connection.in_flight is None


async def test_another_request_waits_for_every_earlier_commit() -> None:
    connection, dispatcher, transport = _connection()
    connection.data_received(_frames(C, C, H, C))
    assert dispatcher.dispatched == [1, 2]
    first, second = dispatcher.commits
    _answer(second)
    assert dispatcher.dispatched == [1, 2]
    _answer(first)
    assert dispatcher.dispatched == [1, 2]  # answering never serves: the pump does, next loop turn
    await asyncio.sleep(0)
    # The heartbeat went in (answered at once), then the commit behind it.
    assert dispatcher.dispatched == [1, 2, 3, 4]
    assert transport.correlation_ids() == [[1, 2, 3]]
    _answer(dispatcher.commits[2])
    assert transport.correlation_ids() == [[1, 2, 3], [4]]


async def test_bound_one_is_one_request_at_a_time() -> None:
    connection, dispatcher, transport = _connection(bound=1)
    connection.data_received(_frames(C, C, C))
    assert dispatcher.dispatched == [1]
    _answer(dispatcher.commits[0])
    assert dispatcher.dispatched == [1]  # answering never serves: the pump does, next loop turn
    await asyncio.sleep(0)
    assert dispatcher.dispatched == [1, 2]
    assert transport.correlation_ids() == [[1]]


async def test_the_bound_caps_commits_in_the_server() -> None:
    connection, dispatcher, _ = _connection(bound=4)
    connection.data_received(_frames(*[C] * 10))
    assert dispatcher.dispatched == [1, 2, 3, 4]
    _answer(dispatcher.commits[1])  # not the oldest: the connection still has four in the server
    assert dispatcher.dispatched == [1, 2, 3, 4]
    _answer(dispatcher.commits[0])
    await asyncio.sleep(0)
    assert dispatcher.dispatched == [1, 2, 3, 4, 5, 6]


async def test_a_commit_not_yet_handled_keeps_later_ones_out() -> None:
    connection, dispatcher, _ = _connection()
    dispatcher.handled = False  # e.g. waiting for a topic lookup before the core sees it
    connection.data_received(_frames(C, C, C))
    assert dispatcher.dispatched == [1]
    dispatcher.handled = True
    _answer(dispatcher.commits[0])
    await asyncio.sleep(0)
    assert dispatcher.dispatched == [1, 2, 3]


async def test_a_hold_keeps_every_request_out_until_released() -> None:
    connection, dispatcher, transport = _connection()
    held = connection.hold()  # the gateway's forwarder: forwarded responses still owed
    connection.data_received(_frames(C, C))
    assert dispatcher.dispatched == []
    connection.release(held)
    await asyncio.sleep(0)
    assert dispatcher.dispatched == [1, 2]
    assert transport.writes == []


async def test_latency_counts_until_the_answer_leaves() -> None:
    connection, dispatcher, _ = _connection()
    connection.data_received(_frames(C, C))
    first, second = dispatcher.commits
    _answer(second)
    await asyncio.sleep(0.02)
    _answer(first)
    observed = dispatcher.metrics.observed
    assert [key for key, _ in observed] == [C, C]
    # The second answer waited for the first: its latency includes that wait.
    assert observed[1][1] >= 0.02


async def test_close_writes_the_released_answers_first() -> None:
    connection, dispatcher, transport = _connection()
    connection.data_received(_frames(C, C))
    _answer(dispatcher.commits[0])
    connection.close()
    assert transport.correlation_ids() == [[1]]
    assert transport.closed
    _answer(dispatcher.commits[1])  # answered after the close: dropped, not written
    await asyncio.sleep(0)
    assert transport.correlation_ids() == [[1]]


async def test_pipelined_heartbeats_read_together_leave_in_one_write() -> None:
    """Heartbeats are answered while the pump serves them: the answers to every heartbeat of one
    read go out in one write, as a pipeline's do (docs/performance.md#heartbeats-and-session-timers-2026-11-28)."""
    connection, dispatcher, transport = _connection()
    connection.data_received(_frames(*[H] * 8))
    assert dispatcher.dispatched == list(range(1, 9))
    assert transport.correlation_ids() == [list(range(1, 9))]
    connection.data_received(_frames(H, H, first_id=9))
    assert transport.correlation_ids() == [list(range(1, 9)), [9, 10]]
