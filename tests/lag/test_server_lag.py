"""A running server samples lag from its own committed offsets and a fake data cluster's log ends."""

from __future__ import annotations

import asyncio
import time
import urllib.request

import pytest

from coordinator.cli.admin.client import TP, AdminClient, Committed
from coordinator.server.app import start_server
from coordinator.server.config import load_config
from coordinator.server.lag import Partition
from tests.admin.support import create_topics
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text


@pytest.mark.asyncio
async def test_lag_gauge_follows_commits_and_log_ends() -> None:
    log_ends = {("orders", 0): 100, ("orders", 1): 60}
    asked: list[list[Partition]] = []

    async def end_offsets(partitions: list[Partition]) -> dict[Partition, int]:
        asked.append(partitions)
        return {tp: log_ends[tp] for tp in partitions if tp in log_ends}

    metrics_port = free_port()
    config = load_config(
        {"storage": "memory://", "port": 0, "metrics_port": metrics_port, "lag_sample_interval_ms": 50},
        env={},
    )
    server = await start_server(config, end_offsets=end_offsets)
    try:

        def commit(offsets: dict[TP, Committed]) -> None:
            with AdminClient(f"127.0.0.1:{server.port}", timeout=5) as client:
                assert set(client.commit_offsets("billing", offsets).values()) == {0}

        async def lag_line(expected: str) -> None:
            deadline = time.monotonic() + 10
            while expected not in (text := await asyncio.to_thread(_scrape, metrics_port)):
                assert time.monotonic() < deadline, f"{expected!r} not in\n{text}"
                await asyncio.sleep(0.05)

        await asyncio.to_thread(create_topics, f"127.0.0.1:{server.port}", orders=2)
        await asyncio.to_thread(commit, {TP("orders", 0): Committed(40), TP("orders", 1): Committed(60)})
        await lag_line('coordinator_group_lag{group="billing",topic="orders"} 60.0')
        await lag_line('coordinator_group_partition_lag{group="billing",partition="0",topic="orders"} 60.0')
        assert [("orders", 0), ("orders", 1)] in asked

        await asyncio.to_thread(commit, {TP("orders", 0): Committed(90)})
        log_ends[("orders", 1)] = 75
        await lag_line('coordinator_group_lag{group="billing",topic="orders"} 25.0')
    finally:
        await server.shutdown()
        if server.health is not None:
            await server.health.close()
    assert server.lag_sampler is not None and server.lag_sampler.samples_ok >= 3
