"""Counters of one shard for metrics, read at scrape time (bounded: counts, never lists)."""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.core.histogram import REBALANCE_BOUNDS_MS, BucketCounts


@dataclass(slots=True)
class CoreStats:
    rebalances_completed: int = 0
    consumer_group_rebalances: int = 0  # KIP-848 group epoch bumps
    share_group_rebalances: int = 0  # KIP-932 group epoch bumps
    rebalance_durations_ms: BucketCounts = field(default_factory=lambda: BucketCounts(REBALANCE_BOUNDS_MS))
    offsets_expired: int = 0
