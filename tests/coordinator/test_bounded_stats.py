"""The rebalance statistics the metrics read stay bounded when nobody scrapes them: fixed bucket
counts, not one list entry per rebalance (docs/performance.md#bounded-rebalance-statistics)."""

from __future__ import annotations

import logging
import tracemalloc

import pytest

from coordinator.core.histogram import PHASE_BOUNDS_MS, REBALANCE_BOUNDS_MS, BucketCounts
from coordinator.server.group_metrics import PHASE_BUCKETS
from coordinator.server.metrics import _REBALANCE_BUCKETS
from tests.coordinator.harness import Harness
from tests.coordinator.test_events import assignment

RECORDERS = ("events.py", "classic/rebalance.py", "stats.py", "histogram.py")


def rebalance(h: Harness, member: str) -> None:
    """The lone member rejoins its Stable group: one full classic rebalance."""
    joined = h.join("g", member)
    assert joined.answered and joined.error == 0
    synced = h.sync("g", member, joined.wire.generation_id, assignments={member: assignment({"t": [0, 1]})})
    assert synced.error == 0
    h.advance(500)  # stale timer entries fall due and leave the heap, as in a running server
    h.store.batches.clear()  # the fake store keeps every batch written; the server's does not


def test_many_rebalances_without_a_scrape_keep_the_statistics_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="coordinator")  # pytest keeps every record it captures
    h = Harness()
    (member,), _ = h.stable_group("g", 1)
    tracemalloc.start()
    try:
        for _ in range(3_000):  # warm up: event ring full, free lists of small objects filled
            rebalance(h, member)
        before = tracemalloc.take_snapshot()
        for _ in range(3_000):
            rebalance(h, member)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # What the code that records the statistics allocated and kept.
    recorders = [tracemalloc.Filter(True, f"*/coordinator/core/{name}") for name in RECORDERS]
    changes = after.filter_traces(recorders).compare_to(before.filter_traces(recorders), "lineno")
    grown = sum(stat.size_diff for stat in changes)
    # One list entry per rebalance and statistic (five of them) was >= 100 KB here.
    assert grown < 8_000, "\n".join(str(s) for s in changes[:8])
    stats, core = h.coordinator.events.stats, h.coordinator.stats
    assert stats.preparing_ms.count == stats.completing_ms.count == 6_001
    assert core.rebalance_durations_ms.count == 6_001
    assert stats.partitions_moved.count == 6_000  # the first assignment is not the consumer protocol


@pytest.mark.parametrize(("value", "bucket"), [(0, 0), (10, 0), (11, 1), (600_000, 13), (600_001, 14)])
def test_an_observation_counts_in_the_first_bucket_whose_bound_holds_it(value: int, bucket: int) -> None:
    counts = BucketCounts(PHASE_BOUNDS_MS)
    counts.observe(value)
    assert counts.counts[bucket] == 1 and counts.count == 1 and counts.total == value
    assert counts.cumulative()[-1] == 1


def test_the_exposed_bounds_are_the_core_bounds_in_seconds() -> None:
    assert [b * 1000 for b in PHASE_BUCKETS] == list(PHASE_BOUNDS_MS)
    assert [round(b * 1000) for b in _REBALANCE_BUCKETS] == list(REBALANCE_BOUNDS_MS)


def test_bounds_must_increase() -> None:
    with pytest.raises(ValueError):
        BucketCounts((5, 1))
