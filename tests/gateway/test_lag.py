"""Lag through the gateway: log ends from upstream, committed offsets from here."""

from __future__ import annotations

import time
import urllib.request

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
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


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body: bytes = response.read()
        return body.decode()
