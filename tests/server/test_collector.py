"""The collector's thresholds while a server runs (docs/performance.md, "Group creation and the
garbage collector")."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from collections.abc import Iterator

import pytest

from coordinator.server.app import serve
from coordinator.server.collector import SERVER_THRESHOLDS, server_collector
from coordinator.server.config import Config

DEFAULTS = (700, 10, 10)


@pytest.fixture
def default_thresholds() -> Iterator[None]:
    previous = gc.get_threshold()
    gc.set_threshold(*DEFAULTS)
    yield
    gc.set_threshold(*previous)


def test_server_thresholds_promote_fewer_and_collect_all_rarely() -> None:
    young, middle, oldest = SERVER_THRESHOLDS
    assert young > DEFAULTS[0]
    assert oldest > DEFAULTS[2]
    assert middle >= DEFAULTS[1]


@pytest.mark.usefixtures("default_thresholds")
def test_server_collector_sets_and_restores_thresholds() -> None:
    with server_collector():
        assert gc.get_threshold() == SERVER_THRESHOLDS
    assert gc.get_threshold() == DEFAULTS


@pytest.mark.asyncio
@pytest.mark.usefixtures("default_thresholds")
async def test_a_serving_server_runs_under_the_server_thresholds() -> None:
    config = Config(host="127.0.0.1", port=0, storage="memory://", group_initial_rebalance_delay_ms=0)
    serving = asyncio.ensure_future(serve(config))
    try:
        async with asyncio.timeout(60):
            while gc.get_threshold() != SERVER_THRESHOLDS:
                assert not serving.done(), serving
                await asyncio.sleep(0.01)
        # serve() has its SIGTERM handler installed before it sets the thresholds
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(60):
            await serving
    finally:
        serving.cancel()
    assert gc.get_threshold() == DEFAULTS
