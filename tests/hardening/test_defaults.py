"""Defaults that protect a default install from one misbehaving client."""

from __future__ import annotations

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.server.config import load_config
from protocol.errors import ErrorCode
from tests.coordinator.harness import Harness


def test_default_limits_are_bounded() -> None:
    config = load_config(env={})
    assert config.group_max_groups == 100_000
    assert config.group_max_size == 10_000
    assert config.max_connections_per_ip == 4096
    assert config.group_member_metadata_max_bytes == 1024 * 1024
    assert config.group_id_max_chars == 1024
    limits = config.request_limits()
    assert (limits.topic_max_partitions, limits.request_max_items) == (10_000, 100_000)


def test_pending_members_are_bounded_by_group_max_size() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_max_size=3))
    codes = [h.join("g", version=4).error for _ in range(5)]
    assert codes == [ErrorCode.MEMBER_ID_REQUIRED] * 3 + [ErrorCode.GROUP_MAX_SIZE_REACHED] * 2
