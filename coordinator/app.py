"""Assembles and runs a server: storage, load, core, runtime, listener, graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from dataclasses import dataclass

from coordinator.cluster import Cluster, NodeIdentity
from coordinator.config import Config
from coordinator.dispatcher import Dispatcher
from coordinator.metrics import HealthServer, MeasuredStore, Metrics
from coordinator.runtime import Clock, Runtime
from coordinator.server import Connection
from coordinator.shard import GroupCoordinator
from storage.base import Store
from storage.url import open_store, redact_url
from storage.writer import BatchWriter

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5.0


@dataclass(slots=True)
class RunningServer:
    config: Config
    store: Store
    writer: BatchWriter
    runtime: Runtime
    dispatcher: Dispatcher
    listener: asyncio.Server
    health: HealthServer | None = None
    metrics_port: int | None = None

    @property
    def port(self) -> int:
        sockets = self.listener.sockets
        return int(sockets[0].getsockname()[1]) if sockets else self.config.port

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight writes finish, flush storage, close everything."""
        self.listener.close()
        for connection in list(self.dispatcher.connections):
            connection.stop_reading()
        # Parked JoinGroup/SyncGroup requests learn that this coordinator is going away (Kafka
        # answers NOT_COORDINATOR when it unloads a partition) and rediscover it after restart.
        self.runtime.apply(self.runtime.coordinator.unload(self.runtime.clock.now_ms()))
        try:
            await asyncio.wait_for(self.writer.close(), SHUTDOWN_GRACE_S)
        except TimeoutError:
            log.error("storage did not finish pending writes within %.0f s", SHUTDOWN_GRACE_S)
        await asyncio.sleep(0)  # let the write callbacks send their replies
        self.runtime.stop_timers()
        for connection in list(self.dispatcher.connections):
            connection.close()
        await self.store.close()
        await self.listener.wait_closed()
        log.info("coordinator stopped")


async def start_server(config: Config) -> RunningServer:
    metrics = Metrics() if config.metrics_port else None
    health: HealthServer | None = None
    state_ready = False
    runtime: Runtime | None = None

    def is_ready() -> bool:
        return state_ready and runtime is not None and not runtime.storage_failing

    metrics_port = None
    if metrics is not None:
        health = HealthServer(metrics, is_ready)
        metrics_port = await health.start(config.metrics_host, config.metrics_port)
        log.info("metrics and health endpoints on http://%s:%d/metrics", config.metrics_host, metrics_port)
    store: Store = open_store(config.storage, **_store_options(config))
    if metrics is not None:
        store = MeasuredStore(store, metrics)
    await store.open()
    loop = asyncio.get_running_loop()
    clock = Clock(loop)
    node = NodeIdentity(config.node_id, config.listener_host, config.listener_port, config.cluster_id)
    cluster = Cluster(
        node, auto_create_topics=config.auto_create_topics_enable, num_partitions=config.num_partitions
    )
    coordinator = GroupCoordinator(config.group_config())
    writer = BatchWriter(store)
    runtime = Runtime(coordinator, writer, clock)
    dispatcher = Dispatcher(runtime, cluster, metrics)
    listener = await loop.create_server(
        lambda: Connection(dispatcher, config.socket_request_max_bytes, config.queued_max_request_bytes),
        config.host,
        config.port,
        reuse_address=True,
    )
    if config.advertised_port is None and config.port == 0:
        # Listening on an ephemeral port: advertise the one the OS picked.
        bound = int(listener.sockets[0].getsockname()[1])
        cluster.node = NodeIdentity(node.node_id, node.host, bound, node.cluster_id)
    server = RunningServer(config, store, writer, runtime, dispatcher, listener, health, metrics_port)
    log.info(
        "coordinator node %d listening on %s:%d (advertised %s:%d)",
        config.node_id, config.host, server.port, cluster.node.host, cluster.node.port,
    )  # fmt: skip

    # While loading, group requests are answered COORDINATOR_LOAD_IN_PROGRESS (see loading.py)
    # and requests that need the topic catalog wait for it.
    started = time.monotonic()
    state = await store.load()
    cluster.load(state.topics)
    coordinator.load(state.groups, state.offsets, clock.now_ms(), clock.wall_ms())
    load_seconds = time.monotonic() - started
    log.info(
        "loaded %d topics, %d groups and %d offsets from %s in %.0f ms",
        len(state.topics), len(state.groups), len(state.offsets), redact_url(config.storage), load_seconds * 1000,
    )  # fmt: skip
    del state
    if metrics is not None:
        metrics.load_time.set(load_seconds)
        metrics.watch_core(
            lambda: (coordinator.group_count_by_state(), coordinator.member_count()), coordinator.stats
        )
    dispatcher.finish_loading()
    runtime.rearm_timer()
    state_ready = True
    return server


async def serve(config: Config) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        server = await start_server(config)
        try:
            await stop.wait()
            log.info("shutting down")
        finally:
            await server.shutdown()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def _store_options(config: Config) -> dict[str, object]:
    if config.storage.startswith("sqlite:"):
        return {"synchronous": config.sqlite_synchronous.upper()}
    return {}
