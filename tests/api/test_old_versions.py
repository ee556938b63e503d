"""Versions Kafka 4.0 dropped that 2018-era clients send without asking ApiVersions first.

Fetch v0-3 is served as Kafka 3.x did (here: every log empty), Produce v0-2 refused with an answer
as the newer versions are (no records are stored here); a request we do not serve still
closes its connection, with one WARNING line per client and interval, however often it retries.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import Config
from coordinator.server.unsupported_log import UnsupportedRequestLog
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from tests.api.test_dispatcher import Client

LOGGER = "coordinator.server.unsupported_log"


@pytest_asyncio.fixture
async def server() -> AsyncIterator[RunningServer]:
    running = await start_server(Config(host="127.0.0.1", port=0, storage="memory://"))
    try:
        yield running
    finally:
        await running.shutdown()


def _fetch(topic: str, offset: int) -> FetchRequest:
    partitions = [
        FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20) for p in (0, 1)
    ]
    return FetchRequest(
        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[FetchTopic(topic, partitions=partitions)]
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_fetch_versions_kafka_4_dropped_are_served_without_api_versions(
    server: RunningServer, version: int
) -> None:
    client = await Client.connect(server.port, "kafka-go")
    try:
        created = await client.request(
            ApiKey.CREATE_TOPICS, 0, CreateTopicsRequest([CreatableTopic("events", 2, 1)], timeout_ms=5000)
        )
        assert [t.error_code for t in created.topics] == [0]
        response = await client.request(ApiKey.FETCH, version, _fetch("events", 0))
        assert [(t.topic, [(p.partition_index, p.error_code, p.high_watermark, p.records) for p in t.partitions])
                for t in response.responses] == [("events", [(0, 0, 0, b""), (1, 0, 0, b"")])]  # fmt: skip
        beyond = await client.request(ApiKey.FETCH, version, _fetch("events", 7))
        assert {p.error_code for p in beyond.responses[0].partitions} == {ErrorCode.OFFSET_OUT_OF_RANGE}
        unknown = await client.request(ApiKey.FETCH, version, _fetch("nosuch", 0))
        assert {p.error_code for p in unknown.responses[0].partitions} == {
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        }
    finally:
        await client.close()


def _describe_acls_v0(client_id: str) -> bytes:
    """DescribeAcls v0 (Kafka 4.0 dropped it; we serve v1-3): any GROUP ACL; we have no codec for it."""
    name = client_id.encode()
    header = struct.pack(">hhih", ApiKey.DESCRIBE_ACLS, 0, 1, len(name)) + name
    frame = header + struct.pack(">bhhhbb", 3, -1, -1, -1, 1, 1)
    return struct.pack(">i", len(frame)) + frame


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1, 2])
async def test_produce_versions_kafka_4_dropped_are_refused_with_an_answer(
    server: RunningServer, version: int
) -> None:
    """A standalone coordinator stores no records: old producers get INVALID_REQUEST per
    partition, as newer ones do, instead of a closed connection they would retry forever."""
    client = await Client.connect(server.port, "kafka-go")
    try:
        data = [TopicProduceData("events", partition_data=[PartitionProduceData(0, b"")])]
        response = await client.request(
            ApiKey.PRODUCE, version, ProduceRequest(acks=1, timeout_ms=1000, topic_data=data)
        )
        assert [
            (t.name, [(p.index, p.error_code) for p in t.partition_responses]) for t in response.responses
        ] == [("events", [(0, ErrorCode.INVALID_REQUEST)])]
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_a_client_retrying_an_unsupported_version_gets_one_warning_line(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for client_id in ["old-go-client"] * 10 + ["another-client"]:
        client = await Client.connect(server.port, client_id)
        try:
            client.writer.write(_describe_acls_v0(client_id))
            assert await asyncio.wait_for(client.reader.read(), 5) == b""  # closed without an answer
        finally:
            await client.close()
    lines = [r.getMessage() for r in caplog.records if "unsupported request" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "'old-go-client'" in lines[0] and "DESCRIBE_ACLS (key 29) version 0" in lines[0]
    assert "'another-client'" in lines[1]
    assert not [r for r in caplog.records if r.name == "coordinator.server.connection"]


def test_the_warning_repeats_after_the_interval_with_the_count_of_unlogged_refusals(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    now = [0.0]
    refusals = UnsupportedRequestLog(lambda: now[0], interval_s=60)
    for _ in range(10):  # ten a second, as such clients reconnect
        refusals.refused("10.0.0.1:40000", "10.0.0.1", "go", "FETCH (key 1) version 99")
        now[0] += 0.1
    refusals.refused("10.0.0.2:40000", "10.0.0.2", "go", "FETCH (key 1) version 99")  # another host
    now[0] = 61.0
    refusals.refused("10.0.0.1:40001", "10.0.0.1", "go", "FETCH (key 1) version 99")
    refusals.refused("10.0.0.1:40002", "10.0.0.1", "go", "FETCH (key 1) version 99")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert "10.0.0.1:40000" in lines[0] and "not logged" not in lines[0]
    assert "10.0.0.2:40000" in lines[1]
    assert "10.0.0.1:40001" in lines[2] and "(9 more from this client not logged)" in lines[2]
