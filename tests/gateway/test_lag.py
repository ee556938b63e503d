"""Lag through the gateway: log ends from upstream, committed offsets from here."""

from __future__ import annotations

import time
import urllib.request

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from tests.admin.support import cli
from tests.gateway.clients import produce_kafka_python
from tests.gateway.conftest import Upstream, running_gateway
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


def test_groups_describe_and_the_lag_metric_show_log_end_minus_committed(upstream: Upstream) -> None:
    metrics_port = free_port()
    extra = {"metrics-port": str(metrics_port), "lag-sample-interval-ms": "200"}
    with running_gateway(upstream.bootstrap, **extra) as gateway:
        admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        try:
            admin.create_topics([NewTopic("lagging", 1, 1)])
        finally:
            admin.close()
        for i in range(5):  # one batch each: Tansu's log-end offset moves with every batch
            produce_kafka_python(gateway.bootstrap, "lagging", [f"m-{i}".encode()])
        consumer = KafkaConsumer(
            bootstrap_servers=gateway.bootstrap, group_id="laggards", enable_auto_commit=False
        )
        try:
            partition = TopicPartition("lagging", 0)
            end = consumer.end_offsets([partition])[partition]
            consumer.commit({partition: OffsetAndMetadata(2, "", -1)})
        finally:
            consumer.close()
        assert end > 2

        described = cli(
            gateway.bootstrap, "groups", "describe", "laggards", "--offsets", "--format", "json"
        ).json()
        offsets = described[0]["offsets"]
        assert [(o["current_offset"], o["log_end_offset"], o["lag"]) for o in offsets] == [(2, end, end - 2)]

        line = f'coordinator_group_lag{{group="laggards",topic="lagging"}} {float(end - 2)}'
        deadline = time.monotonic() + 15
        while line not in (text := _scrape(metrics_port)):
            assert time.monotonic() < deadline, text[-2000:]
            time.sleep(0.2)


def test_lag_of_a_batch_on_tansu_uses_the_high_watermark_the_gateway_fetched(tansu_port: int) -> None:
    """Tansu 0.6 answers ListOffsets(latest) with the last batch's base offset + 1: after one batch
    of 100 records, 1. The gateway takes the log end from the Fetch responses it forwards."""
    metrics_port = free_port()
    extra = {"metrics-port": str(metrics_port), "lag-sample-interval-ms": "200"}
    with running_gateway(f"127.0.0.1:{tansu_port}", **extra) as gateway:
        admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        try:
            admin.create_topics([NewTopic("batched", 1, 1)])
        finally:
            admin.close()
        partition = TopicPartition("batched", 0)
        producer = KafkaProducer(bootstrap_servers=gateway.bootstrap, linger_ms=1000, batch_size=1 << 20)
        try:
            for i in range(100):
                producer.send("batched", f"r-{i}".encode(), partition=0)
            producer.flush(60)  # one batch of 100 records
        finally:
            producer.close()
        upstream = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{tansu_port}")
        try:
            assert upstream.end_offsets([partition])[partition] < 100  # what Tansu answers itself
        finally:
            upstream.close()

        reader = KafkaConsumer(
            bootstrap_servers=gateway.bootstrap, group_id="batch-readers", enable_auto_commit=False,
            auto_offset_reset="earliest",
        )  # fmt: skip
        try:
            reader.assign([partition])
            read = 0
            deadline = time.monotonic() + 30
            while read < 100:
                assert time.monotonic() < deadline, f"read {read} of 100 records"
                read += sum(len(batch) for batch in reader.poll(timeout_ms=500).values())
            reader.commit({partition: OffsetAndMetadata(100, "", -1)})
            behind = KafkaConsumer(bootstrap_servers=gateway.bootstrap, group_id="batch-behind")
            try:
                behind.commit({partition: OffsetAndMetadata(0, "", -1)})
                # Through the gateway, ListOffsets(latest) answers the fetched high watermark.
                assert behind.end_offsets([partition])[partition] == 100
            finally:
                behind.close()
        finally:
            reader.close()

        for group, lag in (("batch-readers", 0), ("batch-behind", 100)):
            described = cli(gateway.bootstrap, "groups", "describe", group, "--offsets", "--format", "json")
            offsets = described.json()[0]["offsets"]
            assert [(o["log_end_offset"], o["lag"]) for o in offsets] == [(100, lag)], described
            line = f'coordinator_group_lag{{group="{group}",topic="batched"}} {float(lag)}'
            deadline = time.monotonic() + 15
            while line not in (text := _scrape(metrics_port)):
                assert time.monotonic() < deadline, text[-2000:]
                time.sleep(0.2)
        assert "upstream answers ListOffsets(latest) behind the log end" in gateway.log_text()


def test_list_offsets_latest_on_tansu_is_the_log_end_for_a_partition_nobody_fetched(tansu_port: int) -> None:
    """A changelog is written and not read until a task's state is restored: Kafka Streams asks
    ListOffsets(latest) for its end before fetching it. Through the gateway the answer is the
    log end even then, and stays so as batches follow (docs/streams-groups.md#tansu)."""
    with running_gateway(f"127.0.0.1:{tansu_port}") as gateway:
        admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        try:
            admin.create_topics([NewTopic("unread", 1, 1)])
        finally:
            admin.close()
        partition = TopicPartition("unread", 0)
        producer = KafkaProducer(bootstrap_servers=gateway.bootstrap, linger_ms=1000, batch_size=1 << 20)
        ends = []
        try:
            for round_ in range(2):
                for i in range(50):
                    producer.send("unread", f"r-{round_}-{i}".encode(), partition=0)
                producer.flush(60)  # one batch of 50 records
                asker = KafkaConsumer(bootstrap_servers=gateway.bootstrap)
                try:
                    ends.append(asker.end_offsets([partition])[partition])
                finally:
                    asker.close()
        finally:
            producer.close()
        assert ends == [50, 100], gateway.log_text()[-3000:]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body: bytes = response.read()
        return body.decode()
