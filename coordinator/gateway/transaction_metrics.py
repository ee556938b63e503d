"""Transactional offsets as metrics, read at scrape time (docs/transactions.md#metrics)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from coordinator.gateway.transactions import TransactionOutcomes


class TransactionCollector(Collector):
    def __init__(self, outcomes: TransactionOutcomes) -> None:
        self._outcomes = outcomes

    def collect(self) -> Iterable[Metric]:
        stats = self._outcomes.stats
        yield GaugeMetricFamily(
            "coordinator_pending_transactional_offsets",
            "Partitions with a transactional offset waiting for its transaction's outcome",
            value=self._outcomes.coordinator.pending_txn_offset_count(),
        )
        resolutions = CounterMetricFamily(
            "coordinator_transaction_resolutions",
            "Transactions whose pending offsets were resolved, by outcome and by how it was learned",
            labels=["outcome", "learned_from"],
        )
        resolutions.add_metric(["commit", "EndTxn"], stats.committed_by_end_txn)
        resolutions.add_metric(["abort", "EndTxn"], stats.aborted_by_end_txn)
        resolutions.add_metric(["abort", "InitProducerId"], stats.aborted_by_init_producer_id)
        resolutions.add_metric(["commit", "DescribeTransactions"], stats.committed_by_describe)
        resolutions.add_metric(["abort", "DescribeTransactions"], stats.aborted_by_describe)
        yield resolutions
        partitions = CounterMetricFamily(
            "coordinator_transactional_offsets_resolved",
            "Pending transactional offsets (partitions) applied (commit) or discarded (abort)",
            labels=["outcome"],
        )
        partitions.add_metric(["commit"], stats.partitions_committed)
        partitions.add_metric(["abort"], stats.partitions_aborted)
        yield partitions
        yield CounterMetricFamily(
            "coordinator_transaction_resolution_write_failures",
            "Outcomes whose write failed (the client's connection was closed: it retries EndTxn)",
            value=stats.resolution_write_failures,
        )
