"""`groups describe --http`: LAG-SECONDS and STATUS from a running server's lag sampler, and
`--lag-per-topic`; in standalone mode the columns say why they are empty."""

from __future__ import annotations

import asyncio
import time

import pytest

from coordinator.cli.admin.client import TP, AdminClient, Committed
from coordinator.server.app import start_server
from coordinator.server.config import load_config
from coordinator.server.lag import Partition
from tests.admin.support import cli, create_topics, table_rows
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


@pytest.mark.asyncio
async def test_describe_shows_lag_seconds_and_status_from_the_sampler() -> None:
    log_ends = {("secs", 0): 100, ("secs", 1): 60}

    async def end_offsets(partitions: list[Partition]) -> dict[Partition, int]:
        return {tp: log_ends[tp] for tp in partitions if tp in log_ends}

    metrics_port = free_port()
    config = load_config(
        {"storage": "memory://", "port": 0, "metrics_port": metrics_port, "lag_sample_interval_ms": 50},
        env={},
    )
    server = await start_server(config, end_offsets=end_offsets)
    bootstrap, http = f"127.0.0.1:{server.port}", f"127.0.0.1:{metrics_port}"
    try:

        def commit(offsets: dict[TP, Committed]) -> None:
            with AdminClient(bootstrap, timeout=5) as client:
                assert set(client.commit_offsets("secs-g", offsets).values()) == {0}

        await asyncio.to_thread(create_topics, bootstrap, secs=2)
        await asyncio.to_thread(commit, {TP("secs", 0): Committed(40), TP("secs", 1): Committed(60)})
        # The log ends advance: the sampler's table learns when each end was reached.
        for end in (120, 140, 160):
            await asyncio.sleep(0.3)
            log_ends[("secs", 0)] = end

        async def describe(*extra: str) -> list[list[str]]:
            deadline = time.monotonic() + 10
            while True:
                result = await asyncio.to_thread(
                    cli, bootstrap, "groups", "describe", "secs-g", "--http", http, *extra
                )
                assert result.code == 0, result
                rows = table_rows(result.out)
                if all(row[7] != "-" for row in rows[1:3]) or time.monotonic() > deadline:
                    return rows
                await asyncio.sleep(0.1)

        rows = await describe()
        assert rows[0][3:8] == ["CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LAG-SECONDS", "STATUS"]
        # LOG-END-OFFSET and LAG come from ListOffsets, which this server (its data plane is not
        # the fake cluster the sampler reads) answers 0: unknown. The seconds come from the sampler.
        # Partition 1 is caught up (0 s, OK); partition 0 sits at 40 while the end moved on from
        # 100: the committed offset was the end before the first sample, so its age is extrapolated.
        assert rows[2][1:8] == ["secs", "1", "60", "-", "-", "0.0", "OK"]
        assert rows[1][1:6] == ["secs", "0", "40", "-", "-"]
        assert float(rows[1][6]) > 0.5 and rows[1][7] in ("OK", "STALL")

        doc = (
            await asyncio.to_thread(
                cli, bootstrap, "groups", "describe", "secs-g", "--http", http, "--lag-per-topic",
                "--format", "json",
            )
        ).json()[0]  # fmt: skip
        assert doc["offsets"][1]["lag_seconds"] == 0.0 and doc["offsets"][1]["status"] == "OK"
        assert (
            doc["lag_status"]["status"] in ("OK", "STALL") and doc["lag_status"]["unavailable_reason"] is None
        )
        assert doc["lag_status"]["max_lag_seconds"] == doc["offsets"][0]["lag_seconds"]
        (topic,) = doc["lag_per_topic"]
        assert topic == {
            "topic": "secs", "partitions": 2, "lag": None, "unknown_lag_partitions": 2,
            "max_lag_seconds": doc["offsets"][0]["lag_seconds"],
        }  # fmt: skip

        summary = await asyncio.to_thread(cli, bootstrap, "groups", "describe", "secs-g", "--lag-per-topic")
        sections = summary.out.strip().split("\n\n")
        assert table_rows(sections[1]) == [
            ["GROUP", "TOPIC", "PARTITIONS", "LAG"],
            ["secs-g", "secs", "2", "-"],
        ]
    finally:
        await server.shutdown()
        if server.health is not None:
            await server.health.close()


@pytest.mark.asyncio
async def test_standalone_says_why_lag_seconds_are_absent() -> None:
    metrics_port = free_port()
    config = load_config({"storage": "memory://", "port": 0, "metrics_port": metrics_port}, env={})
    server = await start_server(config)
    bootstrap, http = f"127.0.0.1:{server.port}", f"127.0.0.1:{metrics_port}"
    try:
        await asyncio.to_thread(create_topics, bootstrap, alone=1)

        def commit() -> None:
            with AdminClient(bootstrap, timeout=5) as client:
                assert set(client.commit_offsets("alone-g", {TP("alone", 0): Committed(7)}).values()) == {0}

        await asyncio.to_thread(commit)
        result = await asyncio.to_thread(cli, bootstrap, "groups", "describe", "alone-g", "--http", http)
        assert result.code == 0, result
        rows = table_rows(result.out)
        assert rows[1][1:8] == ["alone", "0", "7", "-", "-", "-", "-"]
        assert "LAG-SECONDS and STATUS unknown" in result.err and "runs standalone" in result.err

        doc = (await asyncio.to_thread(
            cli, bootstrap, "groups", "describe", "alone-g", "--http", http, "--format", "json"
        )).json()[0]  # fmt: skip
        assert doc["offsets"][0]["lag_seconds"] is None and doc["offsets"][0]["status"] is None
        assert "runs standalone" in doc["lag_status"]["unavailable_reason"]

        # An HTTP address where nothing listens: the offsets still print, the failure is named, rc 1.
        unreachable = await asyncio.to_thread(
            cli,
            bootstrap,
            "groups",
            "describe",
            "alone-g",
            "--http",
            f"127.0.0.1:{free_port()}",
            "--timeout",
            "2",
        )
        assert unreachable.code == 1 and table_rows(unreachable.out)[1][1] == "alone"
        assert "cannot reach the coordinator's HTTP port" in unreachable.err
    finally:
        await server.shutdown()
        if server.health is not None:
            await server.health.close()
