"""Every backend keeps the serving-mode row across reopens, and a switch of mode goes through
settle_serving_mode as a server start does (coordinator/server/serving_mode.py)."""

from __future__ import annotations

import pytest

from coordinator.server.serving_mode import ServingModeError, settle_serving_mode
from storage.records import ServingModeRecord
from tests.storage.conftest import StoreFactory

pytestmark = pytest.mark.asyncio


async def test_the_mode_recorded_at_the_first_start_refuses_a_switch(store_factory: StoreFactory) -> None:
    first = await store_factory.opened()
    standalone = settle_serving_mode(await first.load_identity(), "", False, "db", 1)
    assert standalone.records == [ServingModeRecord("standalone", "", 1)]
    await first.write(standalone.records)
    await first.close()

    second = await store_factory.opened()
    assert (await second.load_identity()).serving_mode == [ServingModeRecord("standalone", "", 1)]
    assert settle_serving_mode(await second.load_identity(), "", False, "db", 2).records == []
    with pytest.raises(ServingModeError, match="was served as a standalone coordinator"):
        settle_serving_mode(await second.load_identity(), "kafka:9092", False, "db", 2)
    switched = settle_serving_mode(await second.load_identity(), "kafka:9092", True, "db", 3)
    await second.write(switched.records)  # the old row goes, the new one comes, in one batch
    assert (await second.load_identity()).serving_mode == [ServingModeRecord("gateway", "kafka:9092", 3)]
