"""Fixed-bucket counts of observations: what the metrics expose, bounded however long the
server runs without a scrape (a list of observations drained at scrape time grew by one entry
per rebalance forever when nobody scraped, docs/performance.md#bounded-rebalance-statistics)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

# Upper bounds (inclusive), in milliseconds, of the rebalance phase and duration histograms.
PHASE_BOUNDS_MS = (
    10,
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
)
REBALANCE_BOUNDS_MS = (1, 5, *PHASE_BOUNDS_MS)
# Partitions that changed owner per rebalance.
MOVED_BOUNDS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 5_000)


class BucketCounts:
    """How many observations fell at or below each bound (one more slot for above the last),
    and their sum: a Prometheus histogram's state, without keeping the observations."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[int]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError("bounds must be strictly increasing")
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0

    def observe(self, value: int) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """Observations at or below each bound, then all of them (the ``+Inf`` bucket)."""
        running, out = 0, []
        for count in self.counts:
            running += count
            out.append(running)
        return out
