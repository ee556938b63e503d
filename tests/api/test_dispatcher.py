"""The dispatcher and its route table: an unexpected failure answers one request, not the connection."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from coordinator.api.routes import Routes
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import Config
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from protocol.messages import CODECS
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.wire import decode_response, encode_request


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader, self.writer, self.client_id = reader, writer, client_id
        self.correlation_id = 0

    @classmethod
    async def connect(cls, port: int, client_id: str) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, client_id)

    def send(self, api_key: int, version: int, body: Any) -> int:
        self.correlation_id += 1
        self.writer.write(encode_request(api_key, version, self.correlation_id, self.client_id, body))
        return self.correlation_id

    async def receive(self, api_key: int, version: int) -> tuple[int, Any]:
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 5))
        frame = await asyncio.wait_for(self.reader.readexactly(size), 5)
        return decode_response(api_key, version, frame)

    async def request(self, api_key: int, version: int, body: Any) -> Any:
        correlation_id = self.send(api_key, version, body)
        received, response = await self.receive(api_key, version)
        assert received == correlation_id
        return response

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@pytest_asyncio.fixture
async def server() -> AsyncIterator[RunningServer]:
    config = Config(host="127.0.0.1", port=0, storage="memory://", group_initial_rebalance_delay_ms=0)
    running = await start_server(config)
    try:
        yield running
    finally:
        await running.shutdown()


def _commit(group: str, topic: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        topics=[OffsetCommitRequestTopic(topic, partitions=[OffsetCommitRequestPartition(0, offset)])],
    )


def _break(routes: Routes, api_key: ApiKey, request_type: type[Any]) -> None:
    def broken(ctx: RequestContext, req: Any) -> Result:
        raise RuntimeError("a bug in the handler")

    routes.replace(api_key, request_type, broken)


@pytest.mark.asyncio
async def test_a_failing_handler_answers_unknown_server_error_and_the_connection_goes_on(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    _break(server.dispatcher.routes, ApiKey.OFFSET_COMMIT, OffsetCommitRequest)
    _break(server.dispatcher.routes, ApiKey.HEARTBEAT, HeartbeatRequest)
    first = await Client.connect(server.port, "the-failing-client")
    second = await Client.connect(server.port, "a-bystander")
    try:
        # Pipelined on one connection: the failing request, then two that work.
        failing = first.send(ApiKey.OFFSET_COMMIT, 8, _commit("g", "t", 42))
        listing = first.send(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
        beat = first.send(ApiKey.HEARTBEAT, 4, HeartbeatRequest("g", 1, "m"))
        correlation_id, commit = await first.receive(ApiKey.OFFSET_COMMIT, 8)
        assert correlation_id == failing
        code = ErrorCode.UNKNOWN_SERVER_ERROR
        assert [
            (t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in commit.topics
        ] == [("t", [(0, code)])]
        assert await first.receive(ApiKey.LIST_GROUPS, 4) == (listing, await _listed(second))
        correlation_id, heartbeat = await first.receive(ApiKey.HEARTBEAT, 4)
        assert (correlation_id, heartbeat.error_code) == (beat, code)
        # Another connection, and the same one, keep being served.
        fetched = await second.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id="g", topics=None))
        assert (fetched.error_code, fetched.topics) == (0, [])
        assert (await first.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())).error_code == 0
    finally:
        await first.close()
        await second.close()
    logged = [r for r in caplog.records if r.levelno == logging.ERROR and "error handling" in r.getMessage()]
    assert len(logged) == 2
    message = logged[0].getMessage()
    for part in ("OFFSET_COMMIT v8", "'the-failing-client'", f"correlation id {failing}"):
        assert part in message
    assert logged[0].exc_info is not None and "a bug in the handler" in str(logged[0].exc_info[1])


async def _listed(client: Client) -> Any:
    return await client.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())


@pytest.mark.asyncio
async def test_every_served_api_has_a_route_for_the_request_class_it_decodes(server: RunningServer) -> None:
    routes = server.dispatcher.routes
    for api_key, (_, high) in SERVED_VERSIONS.items():
        route = routes.get(api_key)
        assert route is not None, api_key.name
        request_class = CODECS[(api_key, high)][0].__annotations__["return"]
        assert route.request_type.__name__ in request_class, api_key.name


def test_a_wrapper_must_be_written_for_the_request_class_of_its_route() -> None:
    routes = Routes()

    def handle(ctx: RequestContext, req: HeartbeatRequest) -> Result:
        return Result()

    routes.add(ApiKey.HEARTBEAT, HeartbeatRequest, handle)
    with pytest.raises(TypeError, match="HEARTBEAT takes HeartbeatRequest"):
        routes.wrap(ApiKey.HEARTBEAT, ListGroupsRequest, lambda inner: inner)
    with pytest.raises(ValueError, match="already has a handler"):
        routes.add(ApiKey.HEARTBEAT, HeartbeatRequest, handle)


@pytest.mark.asyncio
async def test_without_an_error_response_the_failing_request_closes_only_its_connection(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_error_response(*args: Any) -> Any:
        raise KeyError("no builder")

    monkeypatch.setattr("coordinator.server.dispatcher.error_response", no_error_response)
    _break(server.dispatcher.routes, ApiKey.HEARTBEAT, HeartbeatRequest)
    failing = await Client.connect(server.port, "failing")
    other = await Client.connect(server.port, "other")
    try:
        failing.send(ApiKey.HEARTBEAT, 4, HeartbeatRequest("g", 1, "m"))
        assert await asyncio.wait_for(failing.reader.read(), 5) == b""  # closed, nothing answered
        assert (await _listed(other)).error_code == 0
    finally:
        await failing.close()
        await other.close()
