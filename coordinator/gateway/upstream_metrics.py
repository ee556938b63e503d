"""The forwarder's upstream connections as metrics, read at scrape time
(docs/gateway.md#shared-upstream-connections)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from coordinator.gateway.forwarder import Forwarder


class UpstreamConnectionCollector(Collector):
    def __init__(self, forwarder: Forwarder) -> None:
        self._forwarder = forwarder

    def collect(self) -> Iterable[Metric]:
        forwarder, pool = self._forwarder, self._forwarder.links.pool
        connections = GaugeMetricFamily(
            "coordinator_gateway_upstream_connections",
            "Open upstream connections of forwarded requests: shared by client connections (the "
            "pool), or owned by one client connection",
            labels=["kind"],
        )
        connections.add_metric(["shared"], 0 if pool is None else pool.open_connections)
        connections.add_metric(["own"], forwarder.links.own_connections)
        yield connections
        yield GaugeMetricFamily(
            "coordinator_gateway_pooled_clients",
            "Client connections given a shared upstream connection",
            value=0 if pool is None else pool.clients,
        )
        yield GaugeMetricFamily(
            "coordinator_gateway_pooled_requests_in_flight",
            "Requests sent on shared upstream connections and not yet answered",
            value=0 if pool is None else sum(c.unanswered for c in pool.connections()),
        )
        opened = CounterMetricFamily(
            "coordinator_gateway_pool_connections",
            "Shared upstream connections opened, lost, or that could not be opened",
            labels=["event"],
        )
        stats = None if pool is None else pool.stats
        opened.add_metric(["opened"], 0 if stats is None else stats.opened)
        opened.add_metric(["lost"], 0 if stats is None else stats.lost)
        opened.add_metric(["failed"], 0 if stats is None else stats.failed_opens)
        yield opened
        slow = forwarder.slow
        yield GaugeMetricFamily(
            "coordinator_gateway_slow_client_bytes",
            "Answer bytes taken in from shared connections for clients that do not read",
            value=slow.total,
        )
        yield CounterMetricFamily(
            "coordinator_gateway_slow_clients_cut_off",
            "Client connections closed because they did not read and their next answer did not fit",
            value=slow.cut_off,
        )
