"""Pipelined OffsetCommits of one connection share a storage batch; answers stay in request order.

Wire-level, against an in-process server whose store write is tapped: the tap records what each
``store.write`` carried, can hold writes (so that later commits pile up in the writer's open
batch) and refuses a chosen offset, as a database refuses a value it cannot store. See
docs/performance.md#pipelined-offsetcommits for the design these tests check.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio

from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import Config
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from protocol.wire import decode_response, encode_request
from storage.base import StoreError
from storage.records import OffsetCommitRecord, Record

pytestmark = pytest.mark.asyncio

TOPIC = "orders"
POISON = 13  # the tap refuses any write holding this offset
COMMIT_V = 8
FETCH_V = 7


class StoreTap:
    """Replaces the server store's ``write``: logs each write, holds writes while closed."""

    def __init__(self, running: RunningServer) -> None:
        self._write = running.store.write
        self.writes: list[list[tuple[str, int, int]]] = []  # (group, partition, offset) per write
        self.open = asyncio.Event()
        self.open.set()
        self.entered = asyncio.Event()  # a write reached the store

    async def write(self, records: Sequence[Record]) -> None:
        self.entered.set()
        await self.open.wait()
        commits = [(r.group_id, r.partition, r.offset) for r in records if isinstance(r, OffsetCommitRecord)]
        self.writes.append(commits)
        if any(offset == POISON for _, _, offset in commits):
            raise StoreError("value out of range")
        await self._write(records)

    def sizes(self) -> list[int]:
        return [len(w) for w in self.writes]


async def _server(**overrides: Any) -> RunningServer:
    config = Config(
        host="127.0.0.1", port=0, storage="memory://", group_initial_rebalance_delay_ms=0, **overrides
    )
    server = await start_server(config)
    pipe = await Pipe.open(server)
    topic = CreatableTopic(name=TOPIC, num_partitions=8, replication_factor=1)
    (created,) = await _call(
        pipe, (ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics=[topic], timeout_ms=5000))
    )
    assert created.topics[0].error_code == 0
    await pipe.close()
    return server


@pytest_asyncio.fixture
async def running(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[RunningServer, StoreTap]]:
    server = await _server()
    tap = StoreTap(server)
    monkeypatch.setattr(server.store, "write", tap.write)
    try:
        yield server, tap
    finally:
        tap.open.set()
        await server.shutdown()


class Pipe:
    """A raw connection: ``send`` writes several requests in one write, ``receive`` reads in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0
        self.sent: list[tuple[int, int, int]] = []  # (api key, version, correlation id) not yet read

    @classmethod
    async def open(cls, server: RunningServer) -> Pipe:
        return cls(*await asyncio.open_connection("127.0.0.1", server.port))

    async def send(self, *calls: tuple[ApiKey, int, Any]) -> None:
        frames = []
        for api_key, version, body in calls:
            self.correlation_id += 1
            frames.append(encode_request(api_key, version, self.correlation_id, "pipe", body))
            self.sent.append((api_key, version, self.correlation_id))
        self.writer.write(b"".join(frames))
        await self.writer.drain()

    async def receive(self, count: int | None = None, wait_s: float = 5) -> list[Any]:
        """The next replies (all outstanding by default), checking each correlation id in turn."""
        responses = []
        for _ in range(len(self.sent) if count is None else count):
            api_key, version, correlation_id = self.sent.pop(0)
            (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), wait_s))
            frame = await asyncio.wait_for(self.reader.readexactly(size), wait_s)
            got, response = decode_response(api_key, version, frame)
            assert got == correlation_id, f"reply {got} where {correlation_id} was due"
            responses.append(response)
        return responses

    async def nothing_arrives(self, seconds: float = 0.2) -> bool:
        try:
            await asyncio.wait_for(self.reader.read(1), seconds)
        except TimeoutError:
            return True
        return False

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def commit(group: str, offset: int, partition: int = 0, generation: int = -1, member: str = "") -> Any:
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        topics=[
            OffsetCommitRequestTopic(TOPIC, partitions=[OffsetCommitRequestPartition(partition, offset)])
        ],
    )
    return ApiKey.OFFSET_COMMIT, COMMIT_V, body


def fetch(group: str, partitions: list[int]) -> Any:
    body = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic(TOPIC, partitions)])
    return ApiKey.OFFSET_FETCH, FETCH_V, body


def codes(response: Any) -> list[int]:
    return [p.error_code for t in response.topics for p in t.partitions]


def offsets(response: Any) -> dict[int, int]:
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}


async def batched(server: RunningServer, records: int) -> None:
    """Wait until the writer's open batch holds ``records`` records (the store being held)."""
    for _ in range(500):
        if server.writer.pending_records == records:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{server.writer.pending_records} records wait in the open batch, not {records}")


async def hold_store(server: RunningServer, tap: StoreTap) -> Pipe:
    """Close the tap and put one commit (another group, another connection) in the store, so
    that everything written next waits in the writer's open batch."""
    tap.open.clear()
    tap.entered.clear()
    blocker = await Pipe.open(server)
    await blocker.send(commit("blocker", 1))
    await asyncio.wait_for(tap.entered.wait(), 5)
    return blocker


async def test_pipelined_commits_share_one_batch_and_answer_in_order(
    running: tuple[RunningServer, StoreTap],
) -> None:
    server, tap = running
    blocker = await hold_store(server, tap)
    pipe = await Pipe.open(server)
    await pipe.send(*(commit("g", 100 + i, partition=i) for i in range(8)))
    await batched(server, 8)
    assert await pipe.nothing_arrives()  # not one reply before its batch is durable
    tap.open.set()
    replies = await pipe.receive()
    assert [codes(r) for r in replies] == [[0]] * 8
    assert tap.sizes() == [1, 8]  # the blocker's batch, then all eight commits in one
    (fetched,) = await _call(pipe, fetch("g", list(range(8))))
    assert offsets(fetched) == {i: 100 + i for i in range(8)}
    await blocker.receive()
    await pipe.close()
    await blocker.close()


async def test_a_connection_has_at_most_the_bound_of_commits_in_the_server(
    running: tuple[RunningServer, StoreTap],
) -> None:
    server, tap = running
    bound = server.config.pipelined_commits_per_connection
    blocker = await hold_store(server, tap)
    pipe = await Pipe.open(server)
    await pipe.send(*(commit("g", 200 + i) for i in range(bound + 4)))
    await batched(server, bound)
    assert await pipe.nothing_arrives(0.05)  # the four beyond the bound stay queued meanwhile
    assert server.writer.pending_records == bound
    tap.open.set()
    replies = await pipe.receive()
    assert all(codes(r) == [0] for r in replies)
    assert tap.sizes() == [1, bound, 4]
    (fetched,) = await _call(pipe, fetch("g", [0]))
    assert offsets(fetched) == {0: 200 + bound + 3}  # the last commit wins, as one at a time
    await blocker.receive()
    await pipe.close()
    await blocker.close()


async def test_offset_fetch_behind_pipelined_commits_reads_them(
    running: tuple[RunningServer, StoreTap],
) -> None:
    server, tap = running
    blocker = await hold_store(server, tap)
    pipe = await Pipe.open(server)
    await pipe.send(*(commit("g", 300 + i, partition=i % 3) for i in range(6)), fetch("g", [0, 1, 2]))
    await batched(server, 6)
    assert await pipe.nothing_arrives()  # the fetch, answerable at once, waits for the commits
    tap.open.set()
    *committed, fetched = await pipe.receive()
    assert [codes(r) for r in committed] == [[0]] * 6
    assert offsets(fetched) == {0: 303, 1: 304, 2: 305}
    assert tap.sizes() == [1, 6]
    await blocker.receive()
    await pipe.close()
    await blocker.close()


async def test_another_request_behind_commits_waits_and_later_commits_wait_for_it(
    running: tuple[RunningServer, StoreTap],
) -> None:
    server, tap = running
    blocker = await hold_store(server, tap)
    pipe = await Pipe.open(server)
    heartbeat = HeartbeatRequest(group_id="nobody", generation_id=1, member_id="m")
    await pipe.send(
        commit("g", 1),
        commit("g", 2),
        (ApiKey.HEARTBEAT, 4, heartbeat),
        (ApiKey.API_VERSIONS, 3, ApiVersionsRequest("pipe-test", "1.0")),
        commit("g", 3),
    )
    await batched(server, 2)
    assert await pipe.nothing_arrives()  # the heartbeat would be answered at once if let in
    tap.open.set()
    first, second, beat, versions, third = await pipe.receive()
    assert codes(first) == codes(second) == codes(third) == [0]
    assert beat.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert versions.error_code == 0
    # The commit behind the heartbeat was handled only after it: a batch of its own.
    assert tap.sizes() == [1, 2, 1]
    await blocker.receive()
    await pipe.close()
    await blocker.close()


async def test_a_failed_write_fails_its_own_commit_only(running: tuple[RunningServer, StoreTap]) -> None:
    server, tap = running
    blocker = await hold_store(server, tap)
    pipe = await Pipe.open(server)
    values = [400, 401, POISON, 403, 404, 405]
    await pipe.send(*(commit("g", value, partition=i) for i, value in enumerate(values)))
    await batched(server, 6)
    tap.open.set()
    replies = await pipe.receive()
    assert [codes(r) for r in replies] == [
        [0],
        [0],
        [ErrorCode.COORDINATOR_NOT_AVAILABLE],
        [0],
        [0],
        [0],
    ]
    assert tap.sizes()[:2] == [1, 6]  # one batch, then bisected to find the bad write
    (fetched,) = await _call(pipe, fetch("g", list(range(6))))
    assert offsets(fetched) == {0: 400, 1: 401, 2: -1, 3: 403, 4: 404, 5: 405}
    await blocker.receive()
    await pipe.close()
    await blocker.close()


async def test_timed_out_commits_answer_in_order_and_land_later(monkeypatch: pytest.MonkeyPatch) -> None:
    server = await _server(offsets_commit_timeout_ms=200)
    tap = StoreTap(server)
    monkeypatch.setattr(server.store, "write", tap.write)
    try:
        blocker = await hold_store(server, tap)
        pipe = await Pipe.open(server)
        await pipe.send(*(commit("g", 500 + i) for i in range(4)))
        await batched(server, 4)
        replies = await pipe.receive(wait_s=3)
        assert [codes(r) for r in replies] == [[ErrorCode.REQUEST_TIMED_OUT]] * 4
        tap.open.set()
        await blocker.receive()
        # The late writes landed after all (in request order): memory follows storage.
        for _ in range(50):
            (fetched,) = await _call(pipe, fetch("g", [0]))
            if offsets(fetched) == {0: 503}:
                break
            await asyncio.sleep(0.02)
        assert offsets(fetched) == {0: 503}
        assert tap.sizes() == [1, 4]
        await pipe.close()
        await blocker.close()
    finally:
        tap.open.set()
        await server.shutdown()


async def test_closing_mid_pipeline_loses_nothing_acknowledged(
    running: tuple[RunningServer, StoreTap],
) -> None:
    server, tap = running
    pipe = await Pipe.open(server)
    await pipe.send(*(commit("g", 600 + i) for i in range(4)))
    acknowledged = await pipe.receive()
    assert all(codes(r) == [0] for r in acknowledged)
    blocker = await hold_store(server, tap)
    await pipe.send(*(commit("g", 700 + i) for i in range(4)))
    await batched(server, 4)
    pipe.writer.transport.abort()  # gone before any of the last four is answered
    tap.open.set()
    await blocker.receive()
    reader = await Pipe.open(server)
    for _ in range(50):
        (fetched,) = await _call(reader, fetch("g", [0]))
        if offsets(fetched) == {0: 703}:
            break
        await asyncio.sleep(0.02)
    # The unanswered commits were in the store's hands already: they land, in order.
    assert offsets(fetched) == {0: 703}
    *first, blocked, last = tap.sizes()
    assert (sum(first), blocked, last) == (4, 1, 4)
    await reader.close()
    await blocker.close()


async def test_pipelined_answers_equal_one_at_a_time_answers() -> None:
    """Commits whose validation depends on what earlier ones did (a simple group created by a
    generation -1 commit, then commits as members of it) get the answers one at a time gives."""
    sequence = [
        commit("s", 1),  # creates the Empty simple group
        commit("s", 2, generation=3, member="m"),  # a member commit to that group
        commit("s", 3, generation=-1, member="m"),
        commit("s", POISON),  # refused by storage
        commit("s", 5, partition=1),
        commit("fresh", 1, generation=2, member="m"),  # unknown group, a generation
        commit("fresh", 2),
        fetch("s", [0, 1]),
        fetch("fresh", [0]),
    ]
    answers = []
    for bound in (1, 16):
        server = await _server(pipelined_commits_per_connection=bound)
        tap = StoreTap(server)
        try:
            server.store.write = tap.write  # type: ignore[method-assign]
            pipe = await Pipe.open(server)
            await pipe.send(*sequence)
            answers.append([_plain(r) for r in await pipe.receive()])
            await pipe.close()
        finally:
            await server.shutdown()
    one_at_a_time, pipelined = answers
    assert pipelined == one_at_a_time


def _plain(response: Any) -> Any:
    if hasattr(response, "topics"):
        return [
            (
                t.name,
                [
                    (p.partition_index, p.error_code, getattr(p, "committed_offset", None))
                    for p in t.partitions
                ],
            )
            for t in response.topics
        ]
    return response


async def _call(pipe: Pipe, call: tuple[ApiKey, int, Any]) -> list[Any]:
    await pipe.send(call)
    return await pipe.receive()
