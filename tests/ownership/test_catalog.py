"""What nodes share besides shards (docs/multinode.md#topics): a topic created through one node
is never created again by another that has not polled yet; the stored topic wins."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.durability.support import Servers, create_topics, servers, wait_for_log
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.timeout(120)]

# Long polls: a node learns other nodes' topics by its poll only after many seconds, so what
# the test sees comes from the look-up, not from a poll that happened to run.
SLOW_POLL = {
    "group-coordinator-lease-ms": "60000",
    "group-coordinator-ownership-poll-ms": "20000",
    "auto-create-topics-enable": "true",
}


@pytest.fixture
def nodes() -> Iterator[Servers]:
    with servers() as started:
        yield started


def start_node(nodes: Servers, dsn: str, node_id: int) -> ServerProcess:
    node = nodes.start(dsn, {**SLOW_POLL, "node-id": str(node_id)}, wait_loaded=False)
    wait_for_log(node, f"node {node_id} ready", timeout=30)
    return node


async def _stored_topics(dsn: str) -> dict[str, tuple[bytes, int]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT name, topic_id, num_partitions FROM topics")
    finally:
        await conn.close()
    return {r["name"]: (bytes(r["topic_id"]), r["num_partitions"]) for r in rows}


def stored_topics(dsn: str) -> dict[str, tuple[bytes, int]]:
    return asyncio.run(_stored_topics(dsn))


def test_a_topic_created_through_one_node_is_adopted_by_another(nodes: Servers, pg_dsn: str) -> None:
    one, two = start_node(nodes, pg_dsn, 1), start_node(nodes, pg_dsn, 2)
    create_topics(one.bootstrap, {"fresh": 3})
    stored = stored_topics(pg_dsn)["fresh"]
    with WireClient(two.bootstrap) as client:
        request = MetadataRequest(topics=[MetadataRequestTopic(name="fresh")], allow_auto_topic_creation=True)
        (topic,) = client.request(ApiKey.METADATA, 12, request).topics
        assert (topic.error_code, topic.topic_id, len(topic.partitions)) == (ErrorCode.NONE, *stored)
        create = CreateTopicsRequest(
            topics=[CreatableTopic(name="fresh", num_partitions=5, replication_factor=1)]
        )
        (created,) = client.request(ApiKey.CREATE_TOPICS, 5, create).topics
        assert created.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        # A topic nobody created is still auto-created, once.
        (new,) = client.request(ApiKey.METADATA, 12, MetadataRequest(
            topics=[MetadataRequestTopic(name="brand-new")], allow_auto_topic_creation=True
        )).topics  # fmt: skip
        assert new.error_code == ErrorCode.NONE
    assert stored_topics(pg_dsn)["fresh"] == stored
    assert stored_topics(pg_dsn)["brand-new"] == (new.topic_id, 1)
