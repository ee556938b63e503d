from __future__ import annotations

import pytest

from coordinator.core.group_config import GroupConfig
from tests.coordinator.harness import Harness


@pytest.fixture
def h() -> Harness:
    """Kafka's default configuration (3 s initial rebalance delay)."""
    return Harness()


@pytest.fixture
def h0() -> Harness:
    """No initial rebalance delay (Kafka's shipped server.properties for development)."""
    return Harness(GroupConfig(group_initial_rebalance_delay_ms=0))
