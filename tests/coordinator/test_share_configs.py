"""A share group's settings for the data plane (coordinator/core/share/configs.py): the group's
share.* overrides over the broker's group.share.* settings, and by_duration: resets."""

from __future__ import annotations

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.configs import by_duration_ms, share_group_config
from coordinator.core.share.partition import ShareLimits


def test_overrides_win_over_the_broker_settings() -> None:
    broker = BrokerGroupSettings(group_share_record_lock_duration_ms=5000, group_share_delivery_count_limit=3)
    assert share_group_config(broker, None).limits == ShareLimits(5000, 3, 2000)
    assert share_group_config(broker, None).auto_offset_reset == "latest"
    overridden = share_group_config(
        broker,
        {
            "share.record.lock.duration.ms": "15000",
            "share.partition.max.record.locks": "100",
            "share.auto.offset.reset": "Earliest",
        },
    )
    assert overridden.limits == ShareLimits(15000, 3, 100)
    assert overridden.auto_offset_reset == "earliest"


def test_by_duration_is_an_iso_8601_duration() -> None:
    assert by_duration_ms("by_duration:PT1H") == 3_600_000
    assert by_duration_ms("by_duration:P1DT2M30S") == 86_400_000 + 150_000
    assert by_duration_ms("by_duration:PT0.5S") == 500
    assert by_duration_ms("by_duration:P1M") is None  # months are no fixed duration
    assert by_duration_ms("by_duration:1H") is None
    assert by_duration_ms("latest") is None
