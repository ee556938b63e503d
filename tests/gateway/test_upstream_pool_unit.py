"""UpstreamPool without sockets: assignment, correlation ids of a shared connection, retirement
of a broker's connections (coordinator/gateway/upstream_pool.py)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

from coordinator.gateway.upstream import UpstreamConnection
from coordinator.gateway.upstream_pool import UpstreamPool
from tests.gateway.test_backpressure import Transport

ANY = -1


def _pool(size: int, lost: list[UpstreamConnection]) -> tuple[UpstreamPool, list[int]]:
    opened: list[int] = []

    async def open_connection(
        target: int, on_lost: Callable[[UpstreamConnection], None]
    ) -> UpstreamConnection:
        opened.append(target)
        connection = UpstreamConnection(f"node {target}", on_lost)
        connection.connection_made(Transport())  # type: ignore[arg-type]
        return connection

    return UpstreamPool(size, open_connection, lost.append), opened


def test_clients_spread_over_at_most_size_connections_and_keep_theirs() -> None:
    async def run() -> None:
        pool, opened = _pool(2, [])
        clients = [object() for _ in range(5)]
        first = [await pool.connection_for(c, 1) for c in clients]
        assert opened == [1, 1] and len(set(map(id, first))) == 2
        assert [await pool.connection_for(c, 1) for c in clients] == first  # sticky
        assert pool.open_connections == 2 and pool.clients == 5
        pool.detach(clients[0])
        assert pool.clients == 4

    asyncio.run(run())


def test_a_shared_connection_gives_each_answer_its_clients_correlation_id() -> None:
    answers: list[bytes] = []

    class Whole:
        def stream(self, size: int) -> None:
            return None

        def whole(self, frame: bytes, budgeted: int) -> None:
            answers.append(frame)

    connection = UpstreamConnection("shared")
    transport = Transport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    request = struct.pack(">hhi", 3, 12, 7) + b"rest"
    connection.send_shared(request, Whole(), 7)
    connection.send_shared(request, Whole(), 7)  # a second client with the same id
    for sent in (1, 2):  # the ids the connection chose, answered in order
        connection.data_received(struct.pack(">ii", 8, sent) + b"body")
    assert answers == [struct.pack(">ii", 8, 7) + b"body"] * 2
    connection.send_shared(request, Whole(), 7)
    connection.data_received(struct.pack(">ii", 8, 99) + b"body")  # out of step
    assert connection.closed and len(answers) == 2


def test_retiring_a_broker_closes_its_connections_only() -> None:
    async def run() -> None:
        lost: list[UpstreamConnection] = []
        pool, _opened = _pool(4, lost)
        client_a, client_b, client_c = object(), object(), object()
        on_one = await pool.connection_for(client_a, 1)
        on_two = await pool.connection_for(client_b, 2)
        anywhere = await pool.connection_for(client_c, ANY)
        pool.retire({1}, keep=ANY)
        assert lost == [on_two] and on_two.closed
        assert not on_one.closed and not anywhere.closed
        assert pool.clients == 2 and pool.open_connections == 2

    asyncio.run(run())
