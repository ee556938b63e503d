"""Rebalance and lag metrics, read from the group events and the lag tracker at scrape time.

Label cardinality is bounded: ``reason`` and ``protocol`` take a fixed set of values (see
``coordinator.core.events.CAUSES``); a ``group`` label appears only on the per-group series, and
only for the ``top_groups`` groups that rebalanced most (rebalance series) or lag most in
seconds (lag series); ``member`` appears once per such group.

It also measures the event loop's lag: how late a callback scheduled every ``interval`` runs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from coordinator.core.events import GroupEvents
from coordinator.core.histogram import BucketCounts
from coordinator.core.lag_status import STATUSES, LagTracker

DEFAULT_TOP_GROUPS = 20
PHASE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
MOVED_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)


def histogram_family(
    name: str, documentation: str, counts: BucketCounts, labels: Sequence[float], scale: float = 1.0
) -> HistogramMetricFamily:
    """A histogram family from the core's bucket counts; ``labels`` are the bounds as exposed
    (``counts.bounds`` divided by ``scale``), the sum is divided by ``scale`` too."""
    if len(labels) != len(counts.bounds):
        raise ValueError("one label per bound")
    buckets = list(zip((*map(str, labels), "+Inf"), counts.cumulative(), strict=True))
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=counts.total / scale)


class GroupMetricsCollector(Collector):
    def __init__(
        self,
        events: GroupEvents,
        lag: LagTracker,
        now_ms: Callable[[], int],
        top_groups: int = DEFAULT_TOP_GROUPS,
    ) -> None:
        self.events = events
        self.now_ms = now_ms  # the shard's monotonic clock
        self.lag = lag
        self.top_groups = top_groups
        self._by_group: dict[str, int] = {}

    def collect(self) -> Iterable[Metric]:
        stats = self.events.stats
        rebalances = CounterMetricFamily(
            "coordinator_group_rebalances",
            "Rebalances started (classic) and group epoch bumps (consumer), by reason",
            labels=["protocol", "reason"],
        )
        for (protocol, reason), count in sorted(stats.rebalances_by_reason.items()):
            rebalances.add_metric([protocol, reason], count)
        yield rebalances
        yield histogram_family(
            "coordinator_group_preparing_rebalance_seconds",
            "Time classic groups spent in PreparingRebalance",
            stats.preparing_ms, PHASE_BUCKETS, 1000,
        )  # fmt: skip
        yield histogram_family(
            "coordinator_group_completing_rebalance_seconds",
            "Time classic groups spent in CompletingRebalance",
            stats.completing_ms, PHASE_BUCKETS, 1000,
        )  # fmt: skip
        yield histogram_family(
            "coordinator_consumer_group_reconcile_seconds",
            "From a consumer group's epoch bump until every member reconciled its assignment",
            stats.reconciling_ms, PHASE_BUCKETS, 1000,
        )  # fmt: skip
        yield histogram_family(
            "coordinator_group_partitions_moved", "Partitions that changed owner per rebalance",
            stats.partitions_moved, MOVED_BUCKETS,
        )  # fmt: skip
        per_group = GaugeMetricFamily(
            "coordinator_group_rebalances_by_group",
            "Rebalances (by reason) of the groups that rebalanced most (top N groups only)",
            labels=["group"],
        )
        for group, count in heapq.nlargest(
            self.top_groups, self.events.rebalances_by_group().items(), key=_value
        ):
            per_group.add_metric([group], count)
        yield per_group
        slowest = GaugeMetricFamily(
            "coordinator_group_slowest_rejoin_seconds",
            "Longest wait for the last member to rejoin, and who it was (top N groups only)",
            labels=["group", "member"],
        )
        waits = heapq.nlargest(self.top_groups, stats.slowest_rejoin.items(), key=lambda item: item[1][1])
        for group, (member, wait_ms) in waits:
            slowest.add_metric([group, member], wait_ms / 1000)
        yield slowest
        ongoing = GaugeMetricFamily(
            "coordinator_group_rebalance_in_progress_seconds",
            "How long the groups rebalancing now have been at it (top N longest)",
            labels=["group"],
        )
        now = self.now_ms()
        in_progress = self.events.rebalances_in_progress().items()
        for group, started in heapq.nsmallest(self.top_groups, in_progress, key=_value):
            ongoing.add_metric([group], max(now - started, 0) / 1000)
        yield ongoing
        yield from self._lag_families()

    def _lag_families(self) -> Iterable[Metric]:
        statuses = [s for g in self.lag.groups() if (s := self.lag.status(g)) is not None]
        top = heapq.nlargest(self.top_groups, statuses, key=lambda s: (s.max_lag_seconds or 0.0, s.total_lag))
        records = GaugeMetricFamily(
            "coordinator_group_lag_records", "Records behind the log end, summed over partitions (top N groups)",
            labels=["group"],
        )  # fmt: skip
        seconds = GaugeMetricFamily(
            "coordinator_group_lag_seconds", "Estimated seconds behind, worst partition (top N groups)",
            labels=["group"],
        )  # fmt: skip
        status = GaugeMetricFamily(
            "coordinator_group_lag_status",
            "Burrow-style status: 0 OK, 1 WARNING, 2 STALL, 3 STOP, 4 ERR (top N groups)",
            labels=["group"],
        )
        by_status = GaugeMetricFamily(
            "coordinator_groups_by_lag_status", "Sampled groups by Burrow-style status", labels=["status"]
        )
        for group in top:
            records.add_metric([group.group_id], group.total_lag)
            if group.max_lag_seconds is not None:
                # Unknown (no log-end time for the committed offset yet) is no sample, never 0:
                # docs/observability.md#lag-in-seconds-unknown.
                seconds.add_metric([group.group_id], group.max_lag_seconds)
            status.add_metric([group.group_id], STATUSES.index(group.status))
        for name in STATUSES:
            by_status.add_metric([name], sum(1 for s in statuses if s.status == name))
        yield from (records, seconds, status, by_status)


def _value(item: tuple[str, int]) -> int:
    return item[1]


class GroupStateCollector(Collector):
    """Per-group members, state, last commit time and session expiries, kafka-lag-exporter style,
    for the ``top_groups`` groups with most members only (ties: the first found), so the series stay
    bounded however many groups there are."""

    def __init__(
        self,
        sizes: Callable[[], Iterable[tuple[str, str, int]]],
        last_commit_ms: Callable[[str], int | None],
        session_expiries: Callable[[], Mapping[str, int]],
        top_groups: int = DEFAULT_TOP_GROUPS,
    ) -> None:
        self.sizes = sizes  # (group id, state, members) of every group
        self.last_commit_ms = last_commit_ms
        self.session_expiries = session_expiries
        self.top_groups = top_groups

    def collect(self) -> Iterable[Metric]:
        top = heapq.nlargest(self.top_groups, self.sizes(), key=itemgetter(2))
        members = GaugeMetricFamily(
            "coordinator_group_members", "Members of the group (top N groups by members)", labels=["group"]
        )
        state = GaugeMetricFamily(
            "coordinator_group_state", "1 for the group's current state (top N groups by members)",
            labels=["group", "state"],
        )  # fmt: skip
        committed = GaugeMetricFamily(
            "coordinator_group_last_commit_timestamp_seconds",
            "Wall-clock time of the group's latest offset commit (top N groups by members)",
            labels=["group"],
        )
        for group_id, group_state, count in top:
            members.add_metric([group_id], count)
            state.add_metric([group_id, group_state], 1)
            last = self.last_commit_ms(group_id)
            if last is not None:
                committed.add_metric([group_id], last / 1000)
        expiries = GaugeMetricFamily(
            "coordinator_group_session_expiries",
            "Members expired by session timeout since the group was created or loaded (top N groups)",
            labels=["group"],
        )
        for group_id, count in heapq.nlargest(self.top_groups, self.session_expiries().items(), key=_value):
            expiries.add_metric([group_id], count)
        yield from (members, state, committed, expiries)
