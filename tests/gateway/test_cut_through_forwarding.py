"""A Fetch response reaches the client while upstream is still sending it, its KIP-951
NodeEndpoints pointing at the gateway (an in-process gateway in front of a scripted upstream
broker that sends half a response and waits until the client has received bytes of it)."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import uuid
import warnings
from collections.abc import Iterator

import pytest

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
from tests.gateway.test_node_endpoints import _fetch
from tests.support.ports import free_port

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse

pytestmark = pytest.mark.integration
NODE = 1
TOPIC_ID = uuid.UUID(int=9)


class HalfwayBroker:
    """One upstream broker: Metadata names itself as node 1; a Fetch v16 is answered with a
    canned response (NodeEndpoints naming node 1 at its upstream address), its
    first half sent at once and the rest only once `release` is set."""

    def __init__(self) -> None:
        self.port = free_port()
        self.release = threading.Event()
        self.response = b""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", self.port), self._loop
        ).result(10)

    def stop(self) -> None:
        self.release.set()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                api_key, version, correlation_id = peek_header(frame)
                if api_key == ApiKey.FETCH:
                    response = bytearray(_fetch(version, [(NODE, "upstream.invalid", self.port, None)]))
                    struct.pack_into(">i", response, 0, correlation_id)
                    whole = struct.pack(">i", len(response)) + bytes(response)
                    self.response = whole
                    writer.write(whole[: len(whole) // 2])
                    await writer.drain()
                    await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 20)
                    writer.write(whole[len(whole) // 2 :])
                else:
                    writer.write(self._answer(api_key, version, correlation_id))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def _answer(self, api_key: int, version: int, correlation_id: int) -> bytes:
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
                brokers=[MetadataResponseBroker(NODE, "127.0.0.1", self.port, None)],
                cluster_id="halfway",
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
        return encode_response(api_key, version, correlation_id, body)  # with its length prefix


@pytest.fixture
def halfway() -> Iterator[HalfwayBroker]:
    broker = HalfwayBroker()
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _fetch_request(correlation_id: int) -> bytes:
    partition = FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20,
    )  # fmt: skip
    request = FetchRequest[16](
        replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 24, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic_id=TOPIC_ID, partitions=[partition])],
        forgotten_topics_data=[], rack_id="",
    )  # fmt: skip
    request.with_header(correlation_id=correlation_id, client_id="cut-through-test")
    body = bytes(request.encode(header=True))
    return struct.pack(">i", len(body)) + body


def _read(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the gateway closed the connection"
        data += chunk
    return bytes(data)


def test_a_fetch_response_reaches_the_client_before_upstream_has_sent_all_of_it(
    monkeypatch: pytest.MonkeyPatch, halfway: HalfwayBroker
) -> None:
    settings = {
        "upstream_bootstrap_servers": f"127.0.0.1:{halfway.port}",
        "upstream_metadata_refresh_ms": 60000,
    }
    with recorded_gateway(monkeypatch, settings) as (bootstrap, _sent):
        host, port = bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(_fetch_request(7))
            # Upstream has sent half and waits: the client must already be receiving it.
            (size,) = struct.unpack(">i", _read(sock, 4))
            first = _read(sock, 50)
            halfway.release.set()
            rest = _read(sock, size - len(first))
        upstream = halfway.response
        assert size == len(upstream) - 4  # the length prefix sent first stayed true
        received = first + rest
        assert received[:4] == struct.pack(">i", 7)
        assert b"upstream.invalid" not in received
        decoded = FetchResponse[16].decode(received, header=True)
        assert [(e.node_id, e.host) for e in decoded.node_endpoints] == [(NODE, host)]
        assert decoded.node_endpoints[0].port != halfway.port  # the gateway's virtual broker
        theirs = FetchResponse[16].decode(upstream[4:], header=True)
        assert decoded.responses[0].partitions[0].records == theirs.responses[0].partitions[0].records
