"""Share groups' delivery metrics in /metrics through the gateway: a share consumer's accepted
records are counted under its group (docs/observability.md#share-groups)."""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest

from tests.gateway.conftest import Upstream, running_gateway
from tests.gateway.share_support import (
    Received,
    all_assigned,
    create_topic,
    poll_once,
    produce,
    share_consumer,
    wait_for,
)
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body: bytes = response.read()
        return body.decode()


def test_accepted_records_are_counted_per_group(upstream: Upstream) -> None:
    metrics_port = free_port()
    with running_gateway(upstream.bootstrap, **{"metrics-port": str(metrics_port)}) as gateway:
        bootstrap = gateway.bootstrap
        topic, group_id = f"metrics-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, 1)
        consumer = share_consumer(bootstrap, group_id, topic)
        received = Received()
        try:
            wait_for(
                lambda: all_assigned(bootstrap, group_id, 1, 1),
                lambda: poll_once(consumer, received),
                60,
                "assignment",
            )
            for _ in range(5):  # the share-partition started at the log end before producing
                poll_once(consumer, received)
            produce(bootstrap, topic, [f"r{n}" for n in range(5)])
            wait_for(
                lambda: len(received.records) >= 5, lambda: poll_once(consumer, received), 60, "the records"
            )
            consumer.commit_sync()  # implicit mode: the records polled are accepted
            accepted = f'coordinator_share_group_records_total{{event="accepted",group="{group_id}"}} 5.0'
            deadline = time.monotonic() + 30
            while accepted not in (text := scrape(metrics_port)):
                assert time.monotonic() < deadline, text[-3000:]
                poll_once(consumer, received)
            acquired = f'coordinator_share_group_records_total{{event="acquired",group="{group_id}"}} 5.0'
            assert acquired in text
            assert f'coordinator_share_group_records_acquired{{group="{group_id}"}} 0.0' in text
        finally:
            consumer.close()
