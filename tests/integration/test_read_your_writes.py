"""Read-your-writes: a reply leaves only after the state it reports is applied.

Each test pipelines a write and a read on one connection (both frames in one ``write``, so the
server has the read queued before the write's reply exists) against an in-process server on
every storage backend, and asserts that the read sees what the write acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import struct
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import Config
from protocol.apis import ApiKey
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from protocol.wire import decode_response, encode_request
from tests.storage.pg_server import PgServer, PostgresUnavailable

pytestmark = pytest.mark.asyncio

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
TOPIC = "orders"

Call = tuple[ApiKey, int, Any]


@pytest.fixture(scope="module")
def postgres() -> Iterator[PgServer]:
    try:
        server = PgServer.create()
    except PostgresUnavailable as exc:
        if os.environ.get("STORAGE_TESTS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL required but unavailable: {exc}")
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.destroy()


async def _admin(server: PgServer, sql: str) -> None:
    conn = await asyncpg.connect(server.dsn(), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest_asyncio.fixture(params=BACKENDS)
async def server(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunningServer]:
    backend: str = request.param
    database = None
    pg: PgServer | None = None
    if backend == "memory":
        storage = "memory://"
    elif backend == "sqlite":
        storage = f"sqlite:///{tmp_path / 'coordinator.db'}"
    else:
        pg = request.getfixturevalue("postgres")
        database = f"ryw_{uuid.uuid4().hex}"
        await _admin(pg, f'CREATE DATABASE "{database}"')
        storage = pg.dsn(database)
    config = Config(
        host="127.0.0.1",
        port=0,
        storage=storage,
        group_initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=100,
        auto_create_topics_enable=False,
    )
    running = await start_server(config)
    if running.ownership is not None:  # PostgreSQL: its share of the shards is taken in the background
        await asyncio.wait_for(running.ownership.ready.wait(), 30)
    try:
        yield running
    finally:
        await running.shutdown()
        if pg is not None and database is not None:
            await _admin(pg, f'DROP DATABASE "{database}" WITH (FORCE)')


class Pipe:
    """One connection; ``pipeline`` sends several requests in one write and reads every reply."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.correlation_id = 0

    @classmethod
    async def open(cls, server: RunningServer) -> Pipe:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        return cls(reader, writer)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()

    async def pipeline(self, *calls: Call) -> list[Any]:
        frames = []
        expected = []
        for api_key, version, body in calls:
            self.correlation_id += 1
            frames.append(encode_request(api_key, version, self.correlation_id, "ryw", body))
            expected.append((api_key, version, self.correlation_id))
        self.writer.write(b"".join(frames))
        await self.writer.drain()
        responses = []
        for api_key, version, correlation_id in expected:
            (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))
            frame = await asyncio.wait_for(self.reader.readexactly(size), 10)
            got_id, response = decode_response(api_key, version, frame)
            assert got_id == correlation_id
            responses.append(response)
        return responses

    async def call(self, api_key: ApiKey, version: int, body: Any) -> Any:
        return (await self.pipeline((api_key, version, body)))[0]


def _create_topic(name: str, partitions: int = 2) -> Call:
    topic = CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    return ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics=[topic], timeout_ms=5000)


async def _with_topic(server: RunningServer) -> Pipe:
    pipe = await Pipe.open(server)
    (created,) = await pipe.pipeline(_create_topic(TOPIC))
    assert created.topics[0].error_code == 0
    return pipe


async def test_create_topics_then_metadata_sees_the_topic(server: RunningServer) -> None:
    pipe = await Pipe.open(server)
    try:
        metadata = (
            ApiKey.METADATA,
            9,
            MetadataRequest(topics=[MetadataRequestTopic(name="fresh")], allow_auto_topic_creation=False),
        )
        created, described = await pipe.pipeline(_create_topic("fresh", 3), metadata)
        assert created.topics[0].error_code == 0
        (topic,) = described.topics
        assert topic.error_code == 0
        assert len(topic.partitions) == 3
    finally:
        await pipe.close()


async def test_offset_commit_then_fetch_answers_the_committed_offset(server: RunningServer) -> None:
    pipe = await _with_topic(server)
    try:
        for offset in (42, 43, 7):  # every acknowledged commit, not only the first one
            commit = OffsetCommitRequest(
                group_id="ryw-offsets",
                generation_id_or_member_epoch=-1,
                topics=[
                    OffsetCommitRequestTopic(
                        name=TOPIC,
                        partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)],
                    )
                ],
            )
            fetch = OffsetFetchRequest(
                group_id="ryw-offsets", topics=[OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]
            )
            committed, fetched = await pipe.pipeline(
                (ApiKey.OFFSET_COMMIT, 8, commit), (ApiKey.OFFSET_FETCH, 7, fetch)
            )
            assert committed.topics[0].partitions[0].error_code == 0
            (partition,) = fetched.topics[0].partitions
            assert (partition.error_code, partition.committed_offset) == (0, offset)
    finally:
        await pipe.close()


async def test_sync_group_then_describe_groups_sees_the_stable_assignment(server: RunningServer) -> None:
    pipe = await _with_topic(server)
    try:
        join = JoinGroupRequest(
            group_id="ryw-classic",
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"subscription")],
        )
        joined = await pipe.call(ApiKey.JOIN_GROUP, 3, join)  # v3: no MEMBER_ID_REQUIRED round trip
        assert joined.error_code == 0
        assert joined.leader == joined.member_id
        sync = SyncGroupRequest(
            group_id="ryw-classic",
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"all of it")],
        )
        describe = DescribeGroupsRequest(groups=["ryw-classic"])
        synced, described = await pipe.pipeline(
            (ApiKey.SYNC_GROUP, 3, sync), (ApiKey.DESCRIBE_GROUPS, 3, describe)
        )
        assert (synced.error_code, synced.assignment) == (0, b"all of it")
        (group,) = described.groups
        assert group.group_state == "Stable"
        (member,) = group.members
        assert member.member_assignment == b"all of it"
    finally:
        await pipe.close()


async def test_consumer_group_heartbeat_then_describe_sees_the_member(server: RunningServer) -> None:
    pipe = await _with_topic(server)
    try:
        heartbeat = ConsumerGroupHeartbeatRequest(
            group_id="ryw-consumer",
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout_ms=10000,
            subscribed_topic_names=[TOPIC],
            topic_partitions=[],
        )
        describe = ConsumerGroupDescribeRequest(group_ids=["ryw-consumer"])
        joined, described = await pipe.pipeline(
            (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, heartbeat), (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, describe)
        )
        assert joined.error_code == 0
        assert joined.member_epoch > 0
        (group,) = described.groups
        assert group.error_code == 0
        (member,) = group.members
        assert (member.member_id, member.member_epoch) == (joined.member_id, joined.member_epoch)
        assert sorted(p for t in member.assignment.topic_partitions for p in t.partitions) == [0, 1]
    finally:
        await pipe.close()
