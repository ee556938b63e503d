"""Rebalance and lag metrics: histogram buckets, bounded group labels, drained observations."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from coordinator.core.clock import ShardClock
from coordinator.core.events import MEMBER_JOINED, SESSION_TIMEOUT, GroupEvents
from coordinator.core.lag_status import LagTracker
from coordinator.server.group_metrics import GroupMetricsCollector


def scrape(collector: GroupMetricsCollector) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(collector)
    samples: dict[str, float] = {}
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_phase_histograms_count_each_observation_once() -> None:
    clock = ShardClock()
    events = GroupEvents(clock)
    collector = GroupMetricsCollector(events, LagTracker(), lambda: clock.now_ms)
    clock.set(0, 0)
    events.record("g", MEMBER_JOINED, "classic", "Empty", 0, "member m joined", "m")
    events.rebalance_started("g", "Empty", 0)
    clock.set(700, 700)
    events.generation_formed("g", 1, 1, "range", "m")
    clock.set(800, 800)
    events.group_stable("g", 1, {"m": b""})
    first = scrape(collector)
    assert first['coordinator_group_preparing_rebalance_seconds_bucket{le="0.5"}'] == 0
    assert first['coordinator_group_preparing_rebalance_seconds_bucket{le="1"}'] == 1
    assert first["coordinator_group_preparing_rebalance_seconds_sum"] == 0.7
    assert first["coordinator_group_completing_rebalance_seconds_count"] == 1
    assert first['coordinator_group_rebalances_total{protocol="classic",reason="member_joined"}'] == 1
    assert first['coordinator_group_slowest_rejoin_seconds{group="g",member="m"}'] == 0
    second = scrape(collector)
    assert second["coordinator_group_preparing_rebalance_seconds_count"] == 1  # drained, not re-added


def test_group_labels_are_limited_to_the_top_groups() -> None:
    clock = ShardClock()
    events = GroupEvents(clock)
    collector = GroupMetricsCollector(events, LagTracker(), lambda: 60_000, top_groups=3)
    for i in range(10):
        for _ in range(i):
            events.begin_operation()
            events.record(
                f"g{i}", SESSION_TIMEOUT, "classic", "Stable", 1, "session timeout of member m", "m"
            )
            events.rebalance_started(f"g{i}", "Stable", 1)
    samples = scrape(collector)
    by_group = {k for k in samples if k.startswith("coordinator_group_rebalances_by_group{")}
    assert by_group == {f'coordinator_group_rebalances_by_group{{group="g{i}"}}' for i in (7, 8, 9)}
    in_progress = {k for k in samples if k.startswith("coordinator_group_rebalance_in_progress_seconds{")}
    assert len(in_progress) == 3
    assert samples['coordinator_group_rebalances_total{protocol="classic",reason="session_timeout"}'] == 45


def test_lag_seconds_that_are_unknown_are_no_sample_not_zero() -> None:
    clock = ShardClock()
    lag = LagTracker()
    collector = GroupMetricsCollector(GroupEvents(clock), lag, lambda: 0)
    # One sample, the log end already past the committed offset: when the group's offset was
    # the log end is unknown, so are its seconds behind.
    lag.observe("stalled", "t", 0, 1_000, committed=0, log_end=220)
    # Caught up: zero seconds behind is known.
    lag.observe("caught-up", "t", 1, 1_000, committed=50, log_end=50)
    stalled = lag.status("stalled")
    assert stalled is not None and stalled.max_lag_seconds is None
    samples = scrape(collector)
    assert samples['coordinator_group_lag_records{group="stalled"}'] == 220
    assert 'coordinator_group_lag_seconds{group="stalled"}' not in samples
    assert samples['coordinator_group_lag_seconds{group="caught-up"}'] == 0
