"""A client that pipelines large Fetches and does not read them: the gateway stops reading that
client's upstream connection instead of buffering the answers, and goes on once the client
reads (an in-process gateway in front of a scripted upstream broker; docs/gateway.md#back-pressure)."""

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
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.wire import encode_response, peek_header
from tests.gateway.inprocess import recorded_gateway
from tests.gateway.test_cut_through_forwarding import NODE, TOPIC_ID, _fetch_request, _read
from tests.gateway.test_node_endpoints import _fetch
from tests.support.ports import free_port

pytestmark = pytest.mark.integration
RESPONSE_BYTES = 2 << 20
REQUESTS = 16


class BigFetchBroker:
    """One upstream broker that answers every Fetch v16 at once with a 2 MB response and counts
    the bytes the gateway has taken from it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.sent = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        response = bytearray(_fetch(16, [(NODE, "upstream.invalid", self.port, None)]))
        # The records of the canned response, grown to RESPONSE_BYTES (a record set is opaque here).
        self._template = bytes(response)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", self.port), self._loop
        ).result(10)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _response(self, correlation_id: int) -> bytes:
        from kafka.protocol.consumer.fetch import FetchResponse

        decoded = FetchResponse[16].decode(self._template, header=True)
        decoded.responses[0].partitions[0].records = b"\x00" * RESPONSE_BYTES
        decoded.with_header(correlation_id=correlation_id)
        body = bytes(decoded.encode(header=True))
        return struct.pack(">i", len(body)) + body

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.set_write_buffer_limits(high=1 << 16)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                api_key, version, correlation_id = peek_header(frame)
                if api_key == ApiKey.FETCH:
                    data = self._response(correlation_id)
                else:
                    data = _answer(api_key, version, correlation_id, self.port)
                writer.write(data)
                await writer.drain()
                self.sent += len(data)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def _answer(api_key: int, version: int, correlation_id: int, port: int) -> bytes:
    if api_key == ApiKey.API_VERSIONS:
        body: object = ApiVersionsResponse(
            api_keys=[
                ApiVersion(ApiKey.FETCH, 4, 16),
                ApiVersion(ApiKey.METADATA, 0, 12),
                ApiVersion(ApiKey.API_VERSIONS, 0, 3),
            ]
        )
        version = min(version, 3)
    elif api_key == ApiKey.METADATA:
        body = MetadataResponse(
            brokers=[MetadataResponseBroker(NODE, "127.0.0.1", port, None)],
            cluster_id="big-fetches",
            controller_id=NODE,
            topics=[
                MetadataResponseTopic(
                    name="t",
                    topic_id=TOPIC_ID.bytes,
                    partitions=[MetadataResponsePartition(partition_index=0, leader_id=NODE)],
                )
            ],
        )
    else:
        raise AssertionError(f"unexpected api {api_key}")
    return encode_response(api_key, version, correlation_id, body)


@pytest.fixture
def broker() -> Iterator[BigFetchBroker]:
    started = BigFetchBroker()
    started.start()
    try:
        yield started
    finally:
        started.stop()


def _poll(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_client_that_does_not_read_stops_its_upstream_and_resumes_when_it_reads(
    monkeypatch: pytest.MonkeyPatch, broker: BigFetchBroker
) -> None:
    clients: list[Connection] = []
    original = Connection.connection_made

    def connection_made(self: Connection, transport: asyncio.BaseTransport) -> None:
        original(self, transport)
        clients.append(self)

    monkeypatch.setattr(Connection, "connection_made", connection_made)
    settings = {
        "upstream_bootstrap_servers": f"127.0.0.1:{broker.port}",
        "upstream_metadata_refresh_ms": 60000,
    }
    with recorded_gateway(monkeypatch, settings) as (bootstrap, sent):
        host, port = bootstrap.rsplit(":", 1)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        sock.settimeout(20)
        with sock:
            sock.connect((host, int(port)))
            sock.sendall(b"".join(_fetch_request(i) for i in range(1, REQUESTS + 1)))
            _poll(
                lambda: bool(clients) and clients[-1].client_not_reading, "the client connection to fill up"
            )
            connection = clients[-1]
            forwarder: Any = connection.dispatcher.gateway  # type: ignore[attr-defined]
            link = forwarder.links.by_client[connection]
            _poll(
                lambda: link.own is not None and PauseReason.CLIENT_NOT_READING in link.own.paused,
                "the upstream connection to be paused",
            )
            unsent = connection.transport.get_write_buffer_size()  # type: ignore[union-attr]
            assert unsent <= connection.max_unsent_bytes + (1 << 18)  # the bound, plus one read
            assert connection.budget.used <= 1 << 20  # nothing is held whole
            assert broker.sent < REQUESTS * RESPONSE_BYTES // 2  # upstream waits, in its own buffers
            sent.clear()
            for expected in range(1, REQUESTS + 1):
                (size,) = struct.unpack(">i", _read(sock, 4))
                body = _read(sock, size)
                assert struct.unpack_from(">i", body, 0)[0] == expected
                assert size > RESPONSE_BYTES
        _poll(lambda: not link.own.paused or link.own.closed, "the upstream connection to be read")
        assert broker.sent >= REQUESTS * RESPONSE_BYTES
