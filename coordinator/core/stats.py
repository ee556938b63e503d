"""Counters of one shard for metrics; the runtime reads them and drains the duration list."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class CoreStats:
    rebalances_completed: int = 0
    consumer_group_rebalances: int = 0  # KIP-848 group epoch bumps
    share_group_rebalances: int = 0  # KIP-932 group epoch bumps
    rebalance_durations_ms: list[int] = field(default_factory=list)
    offsets_expired: int = 0
