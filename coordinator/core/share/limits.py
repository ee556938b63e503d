"""The bounds a share-partition runs under, from its group's settings (docs/group-configs.md#share-groups)."""

from __future__ import annotations

from coordinator.core.share.partition import ShareLimits
from coordinator.core.share_configs import ShareGroupSettings


def share_limits(settings: ShareGroupSettings) -> ShareLimits:
    """The lock duration, delivery count limit and in-flight cap of the group's share-partitions."""
    return ShareLimits(
        record_lock_duration_ms=settings.record_lock_duration_ms,
        delivery_count_limit=settings.delivery_count_limit,
        max_record_locks=settings.partition_max_record_locks,
    )
