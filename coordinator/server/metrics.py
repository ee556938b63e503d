"""Prometheus metrics and health endpoints, served from the server's own event loop.

Names follow Kafka's group-coordinator metrics where one exists (NumGroups by state,
offset-commit / offset-expiration counts, group-completed-rebalance count, partition load time),
under the ``coordinator_`` prefix. ``/healthz`` answers while the process runs; ``/readyz``
once loading has finished and storage writes are succeeding.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator.server.console import Console
from protocol.apis import ApiKey
from protocol.errors import error_name

log = logging.getLogger(__name__)

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
)
_REBALANCE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_GROUP_RESULT_APIS: dict[int, str] = {
    ApiKey.JOIN_GROUP: "join",
    ApiKey.SYNC_GROUP: "sync",
    ApiKey.HEARTBEAT: "heartbeat",
    ApiKey.LEAVE_GROUP: "leave",
}


def _api_label(api_key: int) -> str:
    try:
        return ApiKey(api_key).name.lower()
    except ValueError:
        return str(api_key)


class _GroupCollector(Collector):
    """Group and member counts, read from the core at scrape time (nothing to keep in sync)."""

    def __init__(self, snapshot: Callable[[], tuple[dict[str, int], int]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterable[GaugeMetricFamily]:
        by_state, members = self._snapshot()
        groups = GaugeMetricFamily(
            "coordinator_groups", "Groups by state (Kafka: NumGroups<State>)", labels=["state"]
        )
        for state, count in sorted(by_state.items()):
            groups.add_metric([state], count)
        yield groups
        yield GaugeMetricFamily(
            "coordinator_members", "Members of classic and consumer groups", value=members
        )


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "coordinator_requests",
            "Requests answered, by API, version and top-level error",
            ["api", "version", "error"],
            registry=r,
        )
        self.request_latency = Histogram(
            "coordinator_request_latency_seconds", "Time from decode to response, by API and version",
            ["api", "version"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.group_results = Counter(
            "coordinator_group_requests",
            "JoinGroup/SyncGroup/Heartbeat/LeaveGroup results",
            ["request", "result"],
            registry=r,
        )
        self.offset_commits = Counter(
            "coordinator_offset_commits",
            "Committed partitions by result (Kafka: offset-commit-count)",
            ["result"],
            registry=r,
        )
        self.offsets_expired = Counter(
            "coordinator_offset_expirations",
            "Offsets removed by retention (Kafka: offset-expiration-count)",
            registry=r,
        )
        self.rebalances = Counter(
            "coordinator_group_completed_rebalances",
            "Rebalances completed (Kafka: group-completed-rebalance-count)",
            registry=r,
        )
        self.consumer_rebalances = Counter(
            "coordinator_consumer_group_rebalances",
            "Group epoch bumps of KIP-848 consumer groups (Kafka: consumer-group-rebalance-count)",
            registry=r,
        )
        self.rebalance_duration = Histogram(
            "coordinator_rebalance_duration_seconds", "From entering PreparingRebalance to Stable",
            buckets=_REBALANCE_BUCKETS, registry=r,
        )  # fmt: skip
        self.connections = Gauge("coordinator_connections", "Open client connections", registry=r)
        self.storage_write_latency = Histogram(
            "coordinator_storage_write_latency_seconds", "Duration of one batched storage write",
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.storage_batch_records = Histogram(
            "coordinator_storage_batch_records", "Records per storage write (group commit)",
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 20000), registry=r,
        )  # fmt: skip
        self.storage_failures = Counter(
            "coordinator_storage_write_failures", "Failed storage writes", registry=r
        )
        self.loop_lag = Histogram(
            "coordinator_event_loop_lag_seconds", "How late the event loop runs a scheduled callback",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=r,
        )  # fmt: skip
        self.loop_lag_max = Gauge(
            "coordinator_event_loop_lag_max_seconds", "Largest event loop lag since start", registry=r
        )
        self.load_time = Gauge(
            "coordinator_partition_load_time_seconds", "Time to load groups and offsets at start (Kafka: partition-load-time)",
            registry=r,
        )  # fmt: skip
        self._children: dict[tuple[int, int, int], tuple[Any, Any, Any]] = {}
        self._commit_children: dict[int, Any] = {}
        self._core_stats: Any = None
        self._seen_rebalances = 0
        self._seen_consumer_rebalances = 0
        self._seen_expired = 0

    def watch_core(self, snapshot: Callable[[], tuple[dict[str, int], int]], stats: Any) -> None:
        """Group counts are read at scrape time; the core's counters are carried over then too."""
        self.registry.register(_GroupCollector(snapshot))
        self._core_stats = stats

    def _collect_core_stats(self) -> None:
        stats = self._core_stats
        if stats is None:
            return
        durations, stats.rebalance_durations_ms = stats.rebalance_durations_ms, []
        for duration_ms in durations:
            self.rebalance_duration.observe(duration_ms / 1000)
        self.rebalances.inc(stats.rebalances_completed - self._seen_rebalances)
        self._seen_rebalances = stats.rebalances_completed
        self.consumer_rebalances.inc(stats.consumer_group_rebalances - self._seen_consumer_rebalances)
        self._seen_consumer_rebalances = stats.consumer_group_rebalances
        self.offsets_expired.inc(stats.offsets_expired - self._seen_expired)
        self._seen_expired = stats.offsets_expired

    def observe_response(self, api_key: int, api_version: int, response: Any, seconds: float) -> None:
        error = int(getattr(response, "error_code", 0) or 0)
        key = (api_key, api_version, error)
        children = self._children.get(key)
        if children is None:
            children = self._children_for(api_key, api_version, error)
            self._children[key] = children
        requests, latency, group_result = children
        requests.inc()
        latency.observe(seconds)
        if group_result is not None:
            group_result.inc()
        elif api_key == ApiKey.OFFSET_COMMIT:
            for topic in response.topics:
                for partition in topic.partitions:
                    self._commit_result(partition.error_code).inc()

    def _children_for(self, api_key: int, api_version: int, error: int) -> tuple[Any, Any, Any]:
        """Labelled children are looked up once per (api, version, error), not per request."""
        api, version, name = _api_label(api_key), str(api_version), error_name(error)
        request = _GROUP_RESULT_APIS.get(api_key)
        return (
            self.requests.labels(api, version, name),
            self.request_latency.labels(api, version),
            self.group_results.labels(request, name) if request is not None else None,
        )

    def _commit_result(self, error: int) -> Any:
        child = self._commit_children.get(error)
        if child is None:
            child = self._commit_children[error] = self.offset_commits.labels(error_name(error))
        return child

    def render(self) -> bytes:
        self._collect_core_stats()
        return generate_latest(self.registry)


class HealthServer:
    """A tiny HTTP/1.1 server for /metrics, /healthz and /readyz on the coordinator's loop."""

    def __init__(
        self, metrics: Metrics, is_ready: Callable[[], bool], console: Console | None = None
    ) -> None:
        self.metrics = metrics
        self.is_ready = is_ready
        self.console = console  # the web console and its JSON API (console.py)
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._handle, host, port, reuse_address=True)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = request_line.decode("latin-1").split()
            path, _, query = parts[1].partition("?") if len(parts) >= 2 else ("", "", "")
            headers: tuple[tuple[str, str], ...] = ()
            if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
                status, body, kind = "405 Method Not Allowed", b"only GET\n", "text/plain"
            elif path == "/metrics":
                status, body, kind = (
                    "200 OK",
                    self.metrics.render(),
                    "text/plain; version=0.0.4; charset=utf-8",
                )
            elif path == "/healthz":
                status, body, kind = "200 OK", b"ok\n", "text/plain"
            elif path == "/readyz":
                ready = self.is_ready()
                status = "200 OK" if ready else "503 Service Unavailable"
                body, kind = (b"ready\n" if ready else b"not ready\n"), "text/plain"
            elif self.console is not None and self.console.handles(path):
                routed = self.console.handle(path, query)
                status, body, kind, headers = routed.status, routed.body, routed.content_type, routed.headers
            else:
                status, body, kind = "404 Not Found", b"not found\n", "text/plain"
            extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
            head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
            writer.write(head.encode() + (body if parts and parts[0] != "HEAD" else b""))
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError) as exc:
            log.debug("health endpoint request failed: %r", exc)
        finally:
            writer.close()


class MeasuredStore:
    """A Store wrapper that reports write latency, batch sizes and failures."""

    def __init__(self, store: Any, metrics: Metrics) -> None:
        self._store = store
        self._metrics = metrics

    async def open(self) -> None:
        await self._store.open()

    async def load(self) -> Any:
        return await self._store.load()

    async def write(self, records: Any) -> None:
        started = time.perf_counter()
        try:
            await self._store.write(records)
        except BaseException:
            self._metrics.storage_failures.inc()
            raise
        finally:
            self._metrics.storage_write_latency.observe(time.perf_counter() - started)
            self._metrics.storage_batch_records.observe(len(records))

    async def load_credentials(self, user: str | None = None) -> Any:
        return await self._store.load_credentials(user)

    async def close(self) -> None:
        await self._store.close()
