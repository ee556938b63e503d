"""Share groups' delivery metrics, read from the share-partition leader's counters at scrape time
(docs/observability.md#share-groups): per group the records acquired, delivered again, accepted,
released, rejected, archived, whose lock ran out, and the records in flight and acquired now.

Label cardinality is bounded as for the other per-group series: only the ``top_groups`` groups
with most records acquired get series; ``event`` takes a fixed set of values."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from coordinator.core.share.partition import ShareCounters
from coordinator.server.group_metrics import DEFAULT_TOP_GROUPS

# (the event label, the counter it reads)
EVENTS = (
    ("acquired", "acquired"),
    ("redelivered", "redelivered"),
    ("accepted", "accepted"),
    ("released", "released"),
    ("rejected", "rejected"),
    ("archived", "archived"),
    ("lock_expired", "lock_expiries"),
)

ShareGroupTotals = tuple[str, ShareCounters, int, int]  # group, counters, in flight, acquired now


class ShareMetricsCollector(Collector):
    def __init__(
        self, totals: Callable[[], Sequence[ShareGroupTotals]], top_groups: int = DEFAULT_TOP_GROUPS
    ) -> None:
        self.totals = totals
        self.top_groups = top_groups

    def collect(self) -> Iterable[Metric]:
        top = heapq.nlargest(self.top_groups, self.totals(), key=lambda t: (t[1].acquired, t[2]))
        records = CounterMetricFamily(
            "coordinator_share_group_records",
            "Share-group record deliveries by event since the group was loaded (top N groups by acquisitions)",
            labels=["group", "event"],
        )
        in_flight = GaugeMetricFamily(
            "coordinator_share_group_records_in_flight",
            "Records between the start offset and the end of the share-partitions' windows (top N groups)",
            labels=["group"],
        )
        acquired = GaugeMetricFamily(
            "coordinator_share_group_records_acquired",
            "Records held by a consumer under an acquisition lock now (top N groups)",
            labels=["group"],
        )
        for group_id, counters, window, held in top:
            for event, field in EVENTS:
                records.add_metric([group_id, event], getattr(counters, field))
            in_flight.add_metric([group_id], window)
            acquired.add_metric([group_id], held)
        yield from (records, in_flight, acquired)
