"""Client connections share a few upstream connections (docs/gateway.md#shared-upstream-connections):
an in-process gateway in front of a scripted upstream broker that counts its connections, holds
the answers a test asks it to hold, and drops connections when told."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordinator.gateway.upstream import PauseReason
from coordinator.server.connection import Connection
from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.wire import decode_request, encode_request, encode_response
from tests.gateway.inprocess import recorded_gateway
from tests.support.ports import free_port

pytestmark = pytest.mark.integration
NODE = 1
HOLD = "hold"  # a Metadata request naming this topic is answered only when the test says so
BIG = "big"  # ... naming this one gets BIG_TOPICS topics back


class CountingBroker:
    """One upstream broker: answers ApiVersions and Metadata, counts the connections it accepted
    and the ones open, correlation ids as they arrive."""

    def __init__(self, big_topics: int = 4000) -> None:
        self.port = free_port()
        self.accepted = 0
        self.writers: list[asyncio.StreamWriter] = []
        # Answers held: the connection is not read meanwhile (Kafka serves one request of a
        # connection at a time), so its later answers keep their order.
        self.held: list[tuple[asyncio.StreamWriter, int, int, asyncio.Event]] = []
        self.client_requests = 0  # Metadata requests from clients (not the gateway's own)
        self.big_topics = big_topics
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", self.port), self._loop
        ).result(10)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def open_connections(self) -> int:
        return sum(1 for w in list(self.writers) if not w.is_closing())

    def release_held(self) -> None:
        def release() -> None:
            for writer, version, correlation_id, go_on in self.held:
                if not writer.is_closing():
                    writer.write(self._metadata(version, correlation_id, []))
                go_on.set()
            self.held.clear()

        self._loop.call_soon_threadsafe(release)

    def drop_held_connections(self) -> None:
        """Close (from the broker's side) every connection that has an answer held."""

        def drop() -> None:
            for writer, _version, _cid, go_on in self.held:
                writer.transport.abort()
                go_on.set()
            self.held.clear()

        self._loop.call_soon_threadsafe(drop)

    def _metadata(self, version: int, correlation_id: int, names: list[str]) -> bytes:
        topics = [
            MetadataResponseTopic(
                name=name, partitions=[MetadataResponsePartition(partition_index=0, leader_id=NODE)]
            )
            for name in names
        ]
        body = MetadataResponse(
            brokers=[MetadataResponseBroker(NODE, "127.0.0.1", self.port, None)],
            cluster_id="pooled",
            controller_id=NODE,
            topics=topics,
        )
        return encode_response(ApiKey.METADATA, version, correlation_id, body)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.writers.append(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = decode_request(await reader.readexactly(size))
                version, correlation_id = request.api_version, request.correlation_id
                if request.api_key == ApiKey.API_VERSIONS:
                    body = ApiVersionsResponse(
                        api_keys=[
                            ApiVersion(ApiKey.METADATA, 0, 12),
                            ApiVersion(ApiKey.API_VERSIONS, 0, 3),
                            ApiVersion(ApiKey.FETCH, 4, 16),
                        ]
                    )
                    writer.write(encode_response(ApiKey.API_VERSIONS, min(version, 3), correlation_id, body))
                    continue
                assert request.api_key == ApiKey.METADATA, request.api_key
                names = [t.name for t in request.body.topics or [] if t.name]
                if request.client_id != "kafka-group-coordinator-gateway":
                    self.client_requests += 1
                if HOLD in names:
                    go_on = asyncio.Event()
                    self.held.append((writer, version, correlation_id, go_on))
                    await go_on.wait()
                    continue
                if BIG in names:
                    names = [f"topic-{i:05d}-{'x' * 40}" for i in range(self.big_topics)]
                writer.write(self._metadata(version, correlation_id, names))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.fixture
def broker() -> Iterator[CountingBroker]:
    started = CountingBroker()
    started.start()
    try:
        yield started
    finally:
        started.stop()


def _poll(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _metadata_request(correlation_id: int, topic: str = "t", version: int = 4) -> bytes:
    return encode_request(
        ApiKey.METADATA,
        version,
        correlation_id,
        "pool-test",
        MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
    )


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The next answer's correlation id and body."""
    (size,) = struct.unpack(">i", _read(sock, 4))
    body = _read(sock, size)
    return struct.unpack_from(">i", body, 0)[0], body


def _read(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the gateway closed the connection"
        data += chunk
    return bytes(data)


def _settings(broker: CountingBroker, pool: int, **extra: Any) -> dict[str, Any]:
    return {
        "upstream_bootstrap_servers": f"127.0.0.1:{broker.port}",
        "upstream_metadata_refresh_ms": 60000,
        "upstream_connections_per_broker": pool,
        **extra,
    }


def _capture_connections(monkeypatch: pytest.MonkeyPatch) -> list[Connection]:
    clients: list[Connection] = []
    original = Connection.connection_made

    def connection_made(self: Connection, transport: asyncio.BaseTransport) -> None:
        original(self, transport)
        clients.append(self)

    monkeypatch.setattr(Connection, "connection_made", connection_made)
    return clients


def _connection_of(captured: list[Connection], sock: socket.socket) -> Connection:
    """The gateway's side of the test's socket."""
    peer = f":{sock.getsockname()[1]}"
    _poll(lambda: any(c.peer.endswith(peer) for c in captured), "the gateway to accept the client")
    return next(c for c in captured if c.peer.endswith(peer))


async def _pipelining_client(host: str, port: int, index: int, requests: int) -> list[int]:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        ids = [index * 1000 + n for n in range(requests)]
        writer.write(b"".join(_metadata_request(cid, f"t{index}") for cid in ids))
        await writer.drain()
        received = []
        for _ in ids:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            body = await reader.readexactly(size)
            received.append(struct.unpack_from(">i", body, 0)[0])
            assert f"t{index}".encode() in body  # its own answer, not a neighbour's
        return received
    finally:
        writer.close()


def test_many_pipelining_clients_share_the_pool_and_get_their_answers_in_order(
    monkeypatch: pytest.MonkeyPatch, broker: CountingBroker
) -> None:
    clients, pool_size = 300, 3
    with recorded_gateway(monkeypatch, _settings(broker, pool_size)) as (bootstrap, sent):
        sent.clear()
        host, port = bootstrap.rsplit(":", 1)
        _poll(lambda: broker.accepted >= 1, "the gateway's own upstream connection")
        own = broker.accepted

        async def run() -> list[list[int]]:
            return await asyncio.gather(*(_pipelining_client(host, int(port), i, 5) for i in range(clients)))

        results = asyncio.run(run())
        for index, received in enumerate(results):
            assert received == [index * 1000 + n for n in range(5)]
        assert broker.client_requests == clients * 5
        assert broker.accepted - own <= pool_size  # 300 clients, at most 3 more upstream connections


def test_a_client_that_does_not_read_does_not_stall_the_clients_sharing_its_connection(
    monkeypatch: pytest.MonkeyPatch, broker: CountingBroker
) -> None:
    captured = _capture_connections(monkeypatch)
    # 1 MiB of process budget: half of it for clients that do not read, so the slow client's
    # answers (about 100 KB each) soon do not fit and it is cut off.
    settings = _settings(broker, 1, buffer_memory_bytes=1 << 20, connection_unsent_max_bytes=64 << 10)
    with recorded_gateway(monkeypatch, settings) as (bootstrap, _sent):
        host, port = bootstrap.rsplit(":", 1)
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 14)
        slow.settimeout(30)
        other = socket.create_connection((host, int(port)), timeout=30)
        with slow, other:
            slow.connect((host, int(port)))
            # both on the one pooled connection
            other.sendall(_metadata_request(1))
            assert _answer(other)[0] == 1
            slow.sendall(b"".join(_metadata_request(cid, BIG) for cid in range(1, 41)))
            slow_connection = _connection_of(captured, slow)
            _poll(lambda: slow_connection.client_not_reading, "the slow client to stop reading")
            gateway: Any = slow_connection.dispatcher.gateway  # type: ignore[attr-defined]
            shared = gateway.links.pool.connections()
            assert len(shared) == 1
            started = time.monotonic()
            for cid in range(2, 22):
                other.sendall(_metadata_request(cid))
                assert _answer(other)[0] == cid
                assert PauseReason.CLIENT_NOT_READING not in shared[0].paused
            assert time.monotonic() - started < 10
            _poll(lambda: slow_connection.closed, "the slow client to be cut off")
            assert gateway.slow.cut_off == 1
            assert gateway.slow.total == 0  # given back when it was cut off
            other.sendall(_metadata_request(99))
            assert _answer(other)[0] == 99
            assert gateway.links.pool.connections() == shared  # the shared connection lives on


def test_a_client_that_reads_slowly_gets_every_answer_within_the_budget(
    monkeypatch: pytest.MonkeyPatch, broker: CountingBroker
) -> None:
    captured = _capture_connections(monkeypatch)
    settings = _settings(broker, 1, connection_unsent_max_bytes=64 << 10)
    with recorded_gateway(monkeypatch, settings) as (bootstrap, _sent):
        host, port = bootstrap.rsplit(":", 1)
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 14)
        slow.settimeout(30)
        with slow:
            slow.connect((host, int(port)))
            slow.sendall(b"".join(_metadata_request(cid, BIG) for cid in range(1, 21)))
            connection = _connection_of(captured, slow)
            _poll(lambda: connection.client_not_reading, "the client to stop reading")
            gateway: Any = connection.dispatcher.gateway  # type: ignore[attr-defined]
            _poll(lambda: gateway.slow.total > 0, "answers taken in for it")
            assert gateway.slow.total <= gateway.slow.limit
            for cid in range(1, 21):
                received, body = _answer(slow)
                assert received == cid and len(body) > 100_000
            _poll(lambda: gateway.slow.total == 0, "its bytes given back once it reads")
            assert not connection.closed and gateway.slow.cut_off == 0


def test_a_lost_shared_connection_closes_the_clients_it_owed_answers_only(
    monkeypatch: pytest.MonkeyPatch, broker: CountingBroker
) -> None:
    with recorded_gateway(monkeypatch, _settings(broker, 1)) as (bootstrap, _sent):
        host, port = bootstrap.rsplit(":", 1)
        waiting = socket.create_connection((host, int(port)), timeout=30)
        idle = socket.create_connection((host, int(port)), timeout=30)
        with waiting, idle:
            idle.sendall(_metadata_request(1))
            assert _answer(idle)[0] == 1
            waiting.sendall(_metadata_request(7, HOLD))
            _poll(lambda: len(broker.held) == 1, "the held request upstream")
            accepted = broker.accepted
            broker.drop_held_connections()
            assert waiting.recv(1) == b""  # closed, as a lost connection of its own would close it
            idle.sendall(_metadata_request(2))  # nothing was owed to it: it goes on, reconnected
            assert _answer(idle)[0] == 2
            assert broker.accepted == accepted + 1


def test_answers_held_upstream_do_not_reorder_a_clients_pipeline(
    monkeypatch: pytest.MonkeyPatch, broker: CountingBroker
) -> None:
    with recorded_gateway(monkeypatch, _settings(broker, 2)) as (bootstrap, _sent):
        host, port = bootstrap.rsplit(":", 1)
        first = socket.create_connection((host, int(port)), timeout=30)
        second = socket.create_connection((host, int(port)), timeout=30)
        with first, second:
            # the same correlation ids on both: the pooled connection tells them apart
            first.sendall(_metadata_request(5, HOLD) + _metadata_request(6, "a"))
            second.sendall(_metadata_request(5, "b") + _metadata_request(6, "c"))
            assert [_answer(second)[0] for _ in range(2)] == [5, 6]
            _poll(lambda: len(broker.held) == 1, "the held request upstream")
            broker.release_held()
            answers = [_answer(first) for _ in range(2)]
            assert [cid for cid, _ in answers] == [5, 6]
            assert b"\x00\x01a" in answers[1][1]


def test_without_a_pool_every_client_has_its_own_upstream_connection(
    monkeypatch: pytest.MonkeyPatch, broker: CountingBroker
) -> None:
    with recorded_gateway(monkeypatch, _settings(broker, 0)) as (bootstrap, _sent):
        host, port = bootstrap.rsplit(":", 1)
        _poll(lambda: broker.accepted >= 1, "the gateway's own upstream connection")
        own = broker.accepted

        async def run() -> list[list[int]]:
            return await asyncio.gather(*(_pipelining_client(host, int(port), i, 2) for i in range(20)))

        asyncio.run(run())
        assert broker.accepted - own == 20


def _established_to(port: int) -> int:
    """TCP connections established to ``port`` on this host, counted at the listening end."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                lines = rows.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def _metric(http_port: int, name: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric {name}")


def test_two_thousand_clients_reach_tansu_over_the_pool_only(tansu_port: int) -> None:
    from tests.gateway.conftest import running_gateway

    clients, pool_size, http_port = 2000, 4, free_port()
    settings = {"metrics-port": str(http_port), "upstream-connections-per-broker": str(pool_size)}
    with running_gateway(f"127.0.0.1:{tansu_port}", **settings) as gateway:
        _poll(lambda: _established_to(tansu_port) >= 1, "the gateway's own connection to Tansu")
        before = _established_to(tansu_port)

        async def run() -> int:
            opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
            try:
                for start in range(0, clients, 200):
                    opened += await asyncio.gather(
                        *(
                            asyncio.open_connection("127.0.0.1", gateway.port)
                            for _ in range(start, start + 200)
                        )
                    )

                async def pipeline(index: int) -> list[int]:
                    reader, writer = opened[index]
                    ids = [index * 10 + n for n in range(3)]
                    writer.write(b"".join(_metadata_request(cid, f"pool-{index}") for cid in ids))
                    received = []
                    for _ in ids:
                        (size,) = struct.unpack(">i", await reader.readexactly(4))
                        received.append(struct.unpack_from(">i", await reader.readexactly(size), 0)[0])
                    assert received == ids
                    return received

                await asyncio.gather(*(pipeline(i) for i in range(clients)))
                # every client connection still open: what does the upstream see?
                return _established_to(tansu_port)
            finally:
                for _reader, writer in opened:
                    writer.close()

        during = asyncio.run(run())
        assert before < during <= before + pool_size, (before, during)  # 2,000 clients: at most 4 more
        assert _metric(http_port, 'coordinator_gateway_upstream_connections{kind="shared"}') <= pool_size
        assert _metric(http_port, 'coordinator_gateway_pool_connections_total{event="opened"}') <= pool_size
