"""The log-end offsets the gateway reads from upstream (the basis of lag)."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from coordinator.gateway.upstream import UpstreamSettings
from coordinator.gateway.upstream_cluster import UpstreamCluster
from tests.gateway.conftest import Upstream

pytestmark = pytest.mark.integration


@pytest.mark.asyncio
async def test_list_end_offsets_asks_the_leaders(upstream: Upstream) -> None:
    bootstrap = upstream.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("ends", 2, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for partition in (0, 1, 1):  # each partition gets records (a sticky partitioner would not)
            producer.send("ends", b"x", partition=partition).get(timeout=30)
    finally:
        producer.close()

    async def brokers_changed(_nodes: dict[int, tuple[str, int]]) -> None:
        return None

    cluster = UpstreamCluster(
        [("127.0.0.1", upstream.port)], UpstreamSettings(), 60000, 5000, brokers_changed
    )
    cluster.start()
    try:
        assert await cluster.wait_refreshed(10)
        offsets = await cluster.list_end_offsets([("ends", 0), ("ends", 1), ("missing", 0)])
    finally:
        await cluster.stop()
    assert set(offsets) == {("ends", 0), ("ends", 1)}  # unknown partitions are left out
    # The same answer kafka-python's end_offsets gets. (Tansu's ListOffsets latest is not the
    # record count: after one batch per partition it answers 1.)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        theirs = consumer.end_offsets([TopicPartition("ends", 0), TopicPartition("ends", 1)])
    finally:
        consumer.close()
    assert offsets == {(tp.topic, tp.partition): offset for tp, offset in theirs.items()}
    assert all(offset > 0 for offset in offsets.values())
