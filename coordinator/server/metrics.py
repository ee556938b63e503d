"""Prometheus metrics and health endpoints, served from the server's own event loop.

Names follow Kafka's group-coordinator metrics where one exists (NumGroups by state,
offset-commit / offset-expiration counts, group-completed-rebalance count, partition load time),
under the ``coordinator_`` prefix. ``/healthz`` answers while the process runs; ``/readyz``
once loading has finished and storage writes are succeeding.

Label convention (docs/observability.md): an outcome is the label ``result``, ``ok`` on success
and otherwise the Kafka error name in lower case (``unknown_member_id``). Counters have no
``_created`` series; ``/metrics`` answers OpenMetrics when the scraper's Accept header asks.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import time
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from coordinator.core.consumer.group import CONSUMER_GROUP_STATES
from coordinator.core.state import GroupState
from coordinator.server.console import Console
from coordinator.server.group_metrics import histogram_family
from coordinator.server.http_auth import Access, HttpGuard
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


# Every state a classic or a consumer group can be in: each is exported, 0 when no group is in it.
GROUP_STATES = tuple(dict.fromkeys([*(state.value for state in GroupState), *CONSUMER_GROUP_STATES]))
# Bounded reason values of the security counters (a reason outside these is a bug).
AUTHENTICATION_FAILURE_REASONS = ("bad_credentials", "too_many_failures", "credentials_unavailable")
CONNECTION_REJECTION_REASONS = ("max_connections", "max_connections_per_ip")


def result_label(error_code: int) -> str:
    """The ``result`` label value: ``ok``, or the Kafka error name in lower case."""
    return "ok" if error_code == 0 else error_name(error_code).lower()


def package_version() -> str:
    try:
        return version("kafka-group-coordinator")
    except PackageNotFoundError:
        return "unknown"


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
        for state in sorted({*GROUP_STATES, *by_state}):
            groups.add_metric([state], by_state.get(state, 0))
        yield groups
        yield GaugeMetricFamily(
            "coordinator_members", "Members of classic and consumer groups", value=members
        )


class _RebalanceDurationCollector(Collector):
    """Classic rebalance durations, from the core's bucket counts at scrape time."""

    def __init__(self, stats: Any) -> None:
        self._stats = stats  # coordinator.core.stats.CoreStats

    def collect(self) -> Iterable[Metric]:
        yield histogram_family(
            "coordinator_rebalance_duration_seconds", "From entering PreparingRebalance to Stable",
            self._stats.rebalance_durations_ms, _REBALANCE_BUCKETS, 1000,
        )  # fmt: skip


class _WriterCollector(Collector):
    """Storage write outcomes from the batch writer's counters, read at scrape time."""

    def __init__(self, stats: Any) -> None:
        self._stats = stats  # storage.writer.WriterStats

    def collect(self) -> Iterable[Metric]:
        stats = self._stats
        yield CounterMetricFamily(
            "coordinator_storage_write_failures",
            "Writes whose records could not be stored (their requests got an error); a failed "
            "batch retried in parts to isolate a bad record counts once per write it failed",
            value=stats.writes_failed,
        )
        yield CounterMetricFamily(
            "coordinator_storage_isolation_writes",
            "Store writes made to find the bad record of a failed batch (split and retried)",
            value=stats.isolation_writes,
        )


class _SecurityCollector(Collector):
    """Failed authentications and refused connections, by a bounded reason."""

    def __init__(
        self,
        authentication_failures: Callable[[], Mapping[str, int]],
        connection_rejections: Callable[[], Mapping[str, int]],
    ) -> None:
        self._authentication_failures = authentication_failures
        self._connection_rejections = connection_rejections

    def collect(self) -> Iterable[Metric]:
        failures = CounterMetricFamily(
            "coordinator_failed_authentications",
            "Failed SASL authentications by reason (Kafka: failed-authentication-total)",
            labels=["reason"],
        )
        counts = self._authentication_failures()
        for reason in AUTHENTICATION_FAILURE_REASONS:
            failures.add_metric([reason], counts.get(reason, 0))
        yield failures
        rejections = CounterMetricFamily(
            "coordinator_connection_rejections",
            "Connections refused at accept by a connection limit",
            labels=["reason"],
        )
        counts = self._connection_rejections()
        for reason in CONNECTION_REJECTION_REASONS:
            rejections.add_metric([reason], counts.get(reason, 0))
        yield rejections


class Metrics:
    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # process-wide: no `_created` series on counters and histograms
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            r.register(collector)  # process_*, python_info, python_gc_*: stateless readers
        self.build_info = Gauge(
            "coordinator_build_info", "Always 1; the labels name the running build",
            ["version", "python"], registry=r,
        )  # fmt: skip
        self.build_info.labels(package_version(), platform.python_version()).set(1)
        self.loading = Gauge(
            "coordinator_loading", "1 while groups and offsets are being loaded at start, then 0", registry=r
        )
        self.loading.set(1)
        self.requests = Counter(
            "coordinator_requests",
            "Requests answered, by API, version and top-level result",
            ["api", "version", "result"],
            registry=r,
        )
        self.request_latency = Histogram(
            "coordinator_request_latency_seconds",
            "Time from decode to response, by API and version; without the time a request waits "
            "parked (JoinGroup/SyncGroup for the rebalance, Fetch for max wait)",
            ["api", "version"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.request_parked = Histogram(
            "coordinator_request_parked_seconds",
            "Time requests waited parked for an event (JoinGroup/SyncGroup: the rebalance; Fetch: max wait)",
            ["api"], buckets=_REBALANCE_BUCKETS, registry=r,
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
        self.share_rebalances = Counter(
            "coordinator_share_group_rebalances",
            "Group epoch bumps of KIP-932 share groups (Kafka: share-group-rebalance-count)",
            registry=r,
        )
        self.connections = Gauge("coordinator_connections", "Open client connections", registry=r)
        self.storage_write_latency = Histogram(
            "coordinator_storage_write_latency_seconds", "Duration of one batched storage write",
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.storage_batch_records = Histogram(
            "coordinator_storage_batch_records", "Records per storage write (group commit)",
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 20000), registry=r,
        )  # fmt: skip
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
        self._seen_share_rebalances = 0
        self._seen_expired = 0

    def watch_writer(self, stats: Any) -> None:
        self.registry.register(_WriterCollector(stats))

    def watch_security(
        self,
        authentication_failures: Callable[[], Mapping[str, int]],
        connection_rejections: Callable[[], Mapping[str, int]],
    ) -> None:
        self.registry.register(_SecurityCollector(authentication_failures, connection_rejections))

    def watch_core(self, snapshot: Callable[[], tuple[dict[str, int], int]], stats: Any) -> None:
        """Group counts are read at scrape time; the core's counters are carried over then too."""
        self.registry.register(_GroupCollector(snapshot))
        self.registry.register(_RebalanceDurationCollector(stats))
        self._core_stats = stats

    def _collect_core_stats(self) -> None:
        stats = self._core_stats
        if stats is None:
            return
        self.rebalances.inc(stats.rebalances_completed - self._seen_rebalances)
        self._seen_rebalances = stats.rebalances_completed
        self.consumer_rebalances.inc(stats.consumer_group_rebalances - self._seen_consumer_rebalances)
        self._seen_consumer_rebalances = stats.consumer_group_rebalances
        self.share_rebalances.inc(stats.share_group_rebalances - self._seen_share_rebalances)
        self._seen_share_rebalances = stats.share_group_rebalances
        self.offsets_expired.inc(stats.offsets_expired - self._seen_expired)
        self._seen_expired = stats.offsets_expired

    def observe_response(
        self, api_key: int, api_version: int, response: Any, seconds: float, parked_seconds: float = 0.0
    ) -> None:
        """``seconds``: processing time; ``parked_seconds``: the wait of a parked request."""
        error = int(getattr(response, "error_code", 0) or 0)
        key = (api_key, api_version, error)
        children = self._children.get(key)
        if children is None:
            children = self._children_for(api_key, api_version, error)
            self._children[key] = children
        requests, latency, group_result = children
        requests.inc()
        latency.observe(seconds)
        if parked_seconds > 0:
            self.request_parked.labels(_api_label(api_key)).observe(parked_seconds)
        if group_result is not None:
            group_result.inc()
        elif api_key == ApiKey.OFFSET_COMMIT:
            for topic in response.topics:
                for partition in topic.partitions:
                    self._commit_result(partition.error_code).inc()

    def _children_for(self, api_key: int, api_version: int, error: int) -> tuple[Any, Any, Any]:
        """Labelled children are looked up once per (api, version, error), not per request."""
        api, version, name = _api_label(api_key), str(api_version), result_label(error)
        request = _GROUP_RESULT_APIS.get(api_key)
        return (
            self.requests.labels(api, version, name),
            self.request_latency.labels(api, version),
            self.group_results.labels(request, name) if request is not None else None,
        )

    def _commit_result(self, error: int) -> Any:
        child = self._commit_children.get(error)
        if child is None:
            child = self._commit_children[error] = self.offset_commits.labels(result_label(error))
        return child

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """The exposition and its content type: OpenMetrics when ``accept`` asks for it."""
        self._collect_core_stats()
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


MAX_HTTP_LINE_BYTES: Final = 8192  # a longer request line is answered 414, a longer header line 431
MAX_HTTP_HEADERS: Final = 100


def _refuse(writer: asyncio.StreamWriter, status: str, body: bytes) -> None:
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    writer.write(head.encode() + body)


class HealthServer:
    """A tiny HTTP/1.1 server for /metrics, /healthz and /readyz on the coordinator's loop."""

    def __init__(
        self,
        metrics: Metrics,
        is_ready: Callable[[], bool],
        console: Console | None = None,
        guard: HttpGuard | None = None,
    ) -> None:
        self.metrics = metrics
        self.is_ready = is_ready
        self.console = console  # the web console and its JSON API (console.py)
        self.guard = guard or HttpGuard(None, False, False)  # who may read what (http_auth.py)
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(
            self._handle, host, port, reuse_address=True, limit=MAX_HTTP_LINE_BYTES
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                request_line = await asyncio.wait_for(reader.readline(), 5)
            except ValueError:  # longer than the reader's limit
                _refuse(writer, "414 URI Too Long", b"request line too long\n")
                return
            accept = authorization = None
            header_lines = 0
            try:
                while (line := await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                    header_lines += 1
                    if header_lines > MAX_HTTP_HEADERS:
                        raise ValueError("too many header lines")
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "accept":
                        accept = value.strip()
                    elif name.strip().lower() == "authorization":
                        authorization = value.strip()
            except ValueError:
                _refuse(writer, "431 Request Header Fields Too Large", b"request headers too large\n")
                return
            parts = request_line.decode("latin-1").split()
            path, _, query = parts[1].partition("?") if len(parts) >= 2 else ("", "", "")
            headers: tuple[tuple[str, str], ...] = ()
            console = self.console is not None and self.console.handles(path)
            access = (
                self.guard.metrics(authorization)
                if path == "/metrics"
                else self.guard.console(authorization)
                if console
                else Access.ALLOWED
            )
            if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
                status, body, kind = "405 Method Not Allowed", b"only GET\n", "text/plain"
            elif access is Access.DISABLED:
                status, kind = "403 Forbidden", "text/plain"
                body = b"the authorizer is on: the console needs console-token-file\n"
            elif access is Access.NO_CREDENTIAL:
                status, body, kind = "401 Unauthorized", b"a credential is needed\n", "text/plain"
                headers = (("WWW-Authenticate", 'Basic realm="coordinator", charset="UTF-8"'),)
            elif path == "/metrics":
                body, kind = self.metrics.render(accept)
                status = "200 OK"
            elif path == "/healthz":
                status, body, kind = "200 OK", b"ok\n", "text/plain"
            elif path == "/readyz":
                ready = self.is_ready()
                status = "200 OK" if ready else "503 Service Unavailable"
                body, kind = (b"ready\n" if ready else b"not ready\n"), "text/plain"
            elif console and self.console is not None:
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

    async def load_identity(self) -> Any:
        return await self._store.load_identity()

    async def load_unsharded(self) -> Any:
        return await self._store.load_unsharded()

    async def group_ids(self) -> Any:
        return await self._store.group_ids()

    async def load_groups(self, group_ids: Any) -> Any:
        return await self._store.load_groups(group_ids)

    async def write(self, records: Any) -> None:
        started = time.perf_counter()
        try:
            await self._store.write(records)
        finally:
            self._metrics.storage_write_latency.observe(time.perf_counter() - started)
            self._metrics.storage_batch_records.observe(len(records))

    async def load_credentials(self, user: str | None = None) -> Any:
        return await self._store.load_credentials(user)

    async def close(self) -> None:
        await self._store.close()
