"""Whole-server fuzzing (issue 9): many connections send random frames and random valid group
requests, in random order, against one group of an in-process server on memory storage.

Asserted after every example: the server still answers, it logged no internal error, every
connection it accepted is gone once the clients closed (no leaked connections or limit
counters), no task outlives the server, and the group invariants held throughout — generation
never decreases and each generation has exactly one leader (seen both in the core after every
step and in every successful JoinGroup response).

Bounded for CI (FUZZ_SERVER_EXAMPLES, default 25 examples, ~30 s); for a longer run raise the
variable and pytest-timeout's limit, e.g.
``FUZZ_SERVER_EXAMPLES=500 pytest tests/security/test_fuzz_server.py --timeout=1200``.
A second test runs the same traffic against a SASL_PLAINTEXT listener, where no client ever
authenticates: every request other than ApiVersions/SaslHandshake/SaslAuthenticate must close
its connection without touching the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import Config
from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from protocol.wire import decode_response, encode_request
from tests.coordinator.harness import classic_group_of

EXAMPLES = int(os.environ.get("FUZZ_SERVER_EXAMPLES", "25"))
GROUP = "fuzz-group"

OPS = ("join", "sync", "heartbeat", "leave", "commit", "fetch", "describe", "list", "api_versions",
       "metadata", "sasl", "random_frame", "garbage", "truncated", "reconnect")  # fmt: skip

op_strategy = st.tuples(
    st.integers(0, 5),  # connection
    st.sampled_from(OPS),
    st.binary(max_size=64),  # payload for the random ones
    st.integers(0, 2**16),  # a number for versions, lengths, offsets
)


@dataclass
class Client:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    pending: dict[int, tuple[int, int]] = field(default_factory=dict)
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: list[str] = field(default_factory=list)
    next_corr: int = 1
    pump: asyncio.Task[None] | None = None


@dataclass
class Observed:
    leaders: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    responses: int = 0


async def _pump(client: Client, observed: Observed) -> None:
    try:
        while True:
            size = struct.unpack(">i", await client.reader.readexactly(4))[0]
            frame = await client.reader.readexactly(size)
            corr = struct.unpack_from(">i", frame)[0]
            api = client.pending.pop(corr, None)
            if api is None:
                continue  # e.g. a response to a random frame that happened to be valid
            observed.responses += 1
            _, body = decode_response(api[0], api[1], frame)
            if api[0] == ApiKey.JOIN_GROUP:
                if body.member_id:
                    client.member_id = body.member_id
                if body.error_code == 0:
                    client.generation = body.generation_id
                    client.leader = body.leader == body.member_id
                    client.members = [m.member_id for m in body.members]
                    observed.leaders[body.generation_id].add(body.leader)
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        return


def _send(client: Client, api_key: int, version: int, body: Any) -> None:
    corr = client.next_corr
    client.next_corr += 1
    client.pending[corr] = (api_key, version)
    client.writer.write(encode_request(api_key, version, corr, "fuzz", body))


def _request(client: Client, op: str, payload: bytes, number: int) -> None:
    member = client.member_id
    if op == "join":
        protocols = [JoinGroupRequestProtocol("range", payload)]
        body = JoinGroupRequest(GROUP, 400, 300, member, None, "consumer", protocols)
        _send(client, ApiKey.JOIN_GROUP, 5, body)
    elif op == "sync":
        assignments = (
            [SyncGroupRequestAssignment(m, payload) for m in client.members] if client.leader else []
        )
        _send(
            client,
            ApiKey.SYNC_GROUP,
            3,
            SyncGroupRequest(GROUP, client.generation, member, None, None, None, assignments),
        )
    elif op == "heartbeat":
        _send(client, ApiKey.HEARTBEAT, 3, HeartbeatRequest(GROUP, client.generation, member))
    elif op == "leave":
        _send(client, ApiKey.LEAVE_GROUP, 3, LeaveGroupRequest(GROUP, "", [MemberIdentity(member)]))
    elif op == "commit":
        partitions = [OffsetCommitRequestPartition(number % 3, number, -1, -1, "")]
        body = OffsetCommitRequest(
            GROUP, client.generation, member, None, -1, [OffsetCommitRequestTopic("t", bytes(16), partitions)]
        )
        _send(client, ApiKey.OFFSET_COMMIT, 7, body)
    elif op == "fetch":
        _send(client, ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(GROUP, None))
    elif op == "describe":
        _send(client, ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest([GROUP, "other"], True))
    elif op == "list":
        _send(client, ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
    elif op == "api_versions":
        _send(client, ApiKey.API_VERSIONS, number % 5, ApiVersionsRequest("fuzz", "1"))
    elif op == "metadata":
        _send(client, ApiKey.METADATA, 9, MetadataRequest(topics=None))
    elif op == "sasl":
        _send(client, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN"))
    elif op == "random_frame":
        header = struct.pack(">hhi", number % 70, number % 13, 0x7FFF0000 + number % 0xFFFF)
        frame = header + payload
        client.writer.write(struct.pack(">i", len(frame)) + frame)
    elif op == "garbage":
        client.writer.write(payload)
    elif op == "truncated":
        frame = encode_request(ApiKey.JOIN_GROUP, 5, 0x7FFF0000, "fuzz", JoinGroupRequest(GROUP, 400, 300))
        cut = 4 + (number % (len(frame) - 4))
        client.writer.write(struct.pack(">i", cut - 4) + frame[4:cut])


def _check_core(server: RunningServer, last_generation: list[int], leaders: dict[int, set[str]]) -> None:
    group = classic_group_of(server.runtime.coordinator, GROUP)
    if group is None:
        return
    assert group.generation_id >= last_generation[0], "generation went backwards"
    last_generation[0] = group.generation_id
    # Kafka moves leadership at once when the leader leaves, and the group then prepares the
    # next generation: the leader of a generation is the one of its CompletingRebalance/Stable.
    if group.leader_id is not None and group.state.value in ("CompletingRebalance", "Stable"):
        leaders[group.generation_id].add(group.leader_id)


async def _connect(port: int, observed: Observed) -> Client:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = Client(reader, writer)
    client.pump = asyncio.get_running_loop().create_task(_pump(client, observed))
    return client


async def _close(client: Client) -> None:
    client.writer.close()
    with contextlib.suppress(ConnectionError, OSError, TimeoutError):
        await asyncio.wait_for(client.writer.wait_closed(), 2)
    if client.pump is not None:
        client.pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await client.pump


async def _scenario(ops: list[tuple[int, str, bytes, int]], security_protocol: str = "PLAINTEXT") -> None:
    config = Config(
        security_protocol=security_protocol,
        host="127.0.0.1",
        port=0,
        storage="memory://",
        group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=100,
        group_max_size=4,
        connections_max_idle_ms=5000,
        max_connections_per_ip=20,
    )
    before = {t for t in asyncio.all_tasks()}
    server = await start_server(config)
    observed = Observed()
    core_leaders: dict[int, set[str]] = defaultdict(set)
    last_generation = [-1]
    clients: dict[int, Client] = {}
    closed: list[Client] = []
    try:
        for index, op, payload, number in ops:
            client = clients.get(index)
            if client is None or client.writer.is_closing():
                if client is not None:
                    closed.append(client)
                client = clients[index] = await _connect(server.port, observed)
            if op == "reconnect":
                closed.append(client)
                clients[index] = await _connect(server.port, observed)
            else:
                _request(client, op, payload, number)
            await asyncio.sleep(0.002 * (number % 4))
            _check_core(server, last_generation, core_leaders)
        # Let parked requests finish (rebalance timeout 300 ms, session timeout 400 ms).
        for _ in range(20):
            await asyncio.sleep(0.05)
            _check_core(server, last_generation, core_leaders)
        # The server is alive and answers a fresh connection.
        probe = await _connect(server.port, observed)
        _send(probe, ApiKey.API_VERSIONS, 3, ApiVersionsRequest("probe", "1"))
        for _ in range(100):
            if not probe.pending:
                break
            await asyncio.sleep(0.01)
        assert not probe.pending, "the server stopped answering"
        if security_protocol != "PLAINTEXT":
            assert classic_group_of(server.runtime.coordinator, GROUP) is None, (
                "an unauthenticated client reached the group"
            )
        closed.append(probe)
        closed.extend(clients.values())
        for client in closed:
            await _close(client)
        for _ in range(200):  # the server sees every close
            if (
                not server.dispatcher.connections
                and server.limits is not None
                and not server.limits.connections
            ):
                break
            await asyncio.sleep(0.01)
        assert not server.dispatcher.connections, "connections leaked"
        assert server.limits is not None and not server.limits.connections and not server.limits.per_ip
    finally:
        for client in [*closed, *clients.values()]:
            await _close(client)
        await server.shutdown()
    for generation in set(core_leaders) | set(observed.leaders):
        leaders = observed.leaders.get(generation, set()) | core_leaders.get(generation, set())
        assert len(leaders) == 1, f"generation {generation} has leaders {leaders}"
    await asyncio.sleep(0)
    left = {t for t in asyncio.all_tasks() if not t.done()} - before - {asyncio.current_task()}
    assert not left, f"tasks outlived the server: {left}"


class _ErrorLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(op_strategy, min_size=1, max_size=60))
def test_server_survives_random_traffic(ops: list[tuple[int, str, bytes, int]]) -> None:
    handler = _ErrorLog()
    root = logging.getLogger("coordinator")
    root.addHandler(handler)
    try:
        asyncio.run(_scenario(ops))
    finally:
        root.removeHandler(handler)
    assert not handler.records, [r.getMessage() for r in handler.records]


@settings(max_examples=max(EXAMPLES // 3, 5), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(op_strategy, min_size=1, max_size=40))
def test_sasl_listener_survives_unauthenticated_random_traffic(
    ops: list[tuple[int, str, bytes, int]],
) -> None:
    handler = _ErrorLog()
    root = logging.getLogger("coordinator")
    root.addHandler(handler)
    try:
        asyncio.run(_scenario(ops, "SASL_PLAINTEXT"))
    finally:
        root.removeHandler(handler)
    assert not handler.records, [r.getMessage() for r in handler.records]
