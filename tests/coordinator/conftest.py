from __future__ import annotations

import pytest

from coordinator.core.group_settings import BrokerGroupSettings
from tests.coordinator.harness import Harness


@pytest.fixture
def h() -> Harness:
    """Kafka's default configuration (3 s initial rebalance delay)."""
    return Harness()


@pytest.fixture
def h0() -> Harness:
    """No initial rebalance delay (Kafka's shipped server.properties for development)."""
    return Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
