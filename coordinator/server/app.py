"""Assembles and runs a server: storage, load, core, runtime, listener, graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import random
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coordinator.api.authz import AclLayer
from coordinator.api.topic_authz import TopicAcls
from coordinator.api.topic_ids import TopicIds
from coordinator.core.cluster import Cluster, NodeIdentity
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.lag_status import LagTracker
from coordinator.core.shard_map import ShardMap, ShardState
from coordinator.core.share.manager import ShareGroupManager
from coordinator.security.acl import Authorizer
from coordinator.server.authn import CredentialLoader, SaslServer
from coordinator.server.byte_budget import ByteBudget
from coordinator.server.cluster_identity import ClusterIdentity, settle_cluster_id
from coordinator.server.collector import server_collector
from coordinator.server.config import Config
from coordinator.server.connection import Connection
from coordinator.server.console import Console
from coordinator.server.denials import DenialLog
from coordinator.server.dispatcher import Dispatcher
from coordinator.server.event_store import EventPersister
from coordinator.server.group_configs_elsewhere import GroupConfigsElsewhere
from coordinator.server.group_loading import GroupLoader
from coordinator.server.group_metrics import GroupMetricsCollector, GroupStateCollector
from coordinator.server.group_views import GroupViews, lag_feeder
from coordinator.server.http_auth import http_guard
from coordinator.server.lag import EndOffsets, LagSampler, shard_committed_offsets
from coordinator.server.limits import ConnectionLimits
from coordinator.server.listeners import BoundListener
from coordinator.server.login_guard import CredentialCache, FailedLoginLimit
from coordinator.server.logs import VERBATIM
from coordinator.server.loop_lag import LoopLagMonitor
from coordinator.server.metrics import HealthServer, MeasuredStore, Metrics
from coordinator.server.ownership import Ownership
from coordinator.server.readiness import StorageProbe
from coordinator.server.runtime import Clock, Runtime
from coordinator.server.scram_users import ScramUsers
from coordinator.server.serving_mode import ServingMode, settle_serving_mode
from coordinator.server.share_metrics import ShareMetricsCollector
from coordinator.server.startup_report import settings_block, sqlite_path, storage_location
from coordinator.server.topic_lookup import TopicLookup
from coordinator.server.topic_views import TopicViews
from storage.base import GroupLoadingStore, Store, StoreError
from storage.postgres import PostgresStore
from storage.records import UserCredentialRecord
from storage.url import open_store
from storage.writer import BatchWriter

if TYPE_CHECKING:
    from coordinator.gateway.setup import Gateway

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
    limits: ConnectionLimits | None = None
    all_listeners: list[asyncio.Server] | None = None
    readiness_probe: StorageProbe | None = None
    lag_sampler: LagSampler | None = None
    # Lag samples for the status rules (docs/observability.md).
    lag: LagTracker = field(default_factory=LagTracker)
    loop_lag: LoopLagMonitor | None = None
    gateway: Gateway | None = None
    scram_users: ScramUsers | None = None
    event_persister: EventPersister | None = None
    # Several nodes on PostgreSQL (docs/multinode.md): this node's shard leases.
    ownership: Ownership | None = None
    group_configs_elsewhere: GroupConfigsElsewhere | None = None
    # One node: loads the groups shard by shard after serving started.
    group_loader: GroupLoader | None = None

    @property
    def port(self) -> int:
        sockets = self.listener.sockets
        return int(sockets[0].getsockname()[1]) if sockets else self.config.port

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight writes finish, flush storage, close everything."""
        if self.lag_sampler is not None:
            await self.lag_sampler.stop()
        if self.group_loader is not None:
            await self.group_loader.stop()
        for listener in self.all_listeners or [self.listener]:
            listener.close()
        await self.dispatcher.share.close()  # share fetches waiting for records (share_fetch.py)
        if self.gateway is not None:
            await self.gateway.close()
        if self.limits is not None:
            self.limits.stop()
        if self.dispatcher.sasl is not None:
            for task in list(self.dispatcher.sasl.tasks):  # logins waiting for their credentials
                task.cancel()
        if self.scram_users is not None:
            await self.scram_users.close()
        if self.group_configs_elsewhere is not None:
            await self.group_configs_elsewhere.close()
        for connection in list(self.dispatcher.connections):
            connection.stop_reading()
        if self.ownership is not None:
            await self.ownership.stop()  # hands every shard over: flushed, unloaded, released
        # Parked JoinGroup/SyncGroup requests learn that this coordinator is going away (Kafka
        # answers NOT_COORDINATOR when it unloads a partition) and rediscover it after restart.
        self.runtime.apply(self.runtime.coordinator.unload(self.runtime.clock.now_ms()))
        if self.readiness_probe is not None:
            await self.readiness_probe.stop()
        try:
            await asyncio.wait_for(self.writer.close(), SHUTDOWN_GRACE_S)
        except TimeoutError:
            log.error("storage did not finish pending writes within %.0f s", SHUTDOWN_GRACE_S)
        await asyncio.sleep(0)  # let the write callbacks send their replies
        self.runtime.stop_timers()
        if self.loop_lag is not None:
            self.loop_lag.stop()
        for connection in list(self.dispatcher.connections):
            connection.close()
        if self.event_persister is not None:
            await self.event_persister.stop()  # the last events (the groups unloading) too
        await self.store.close()
        for listener in self.all_listeners or [self.listener]:
            await listener.wait_closed()
        log.info("coordinator stopped")


async def start_server(
    config: Config, end_offsets: EndOffsets | None = None, init: bool = False, allow_mode_change: bool = False
) -> RunningServer:
    """Start a server; with ``end_offsets`` (log ends of the data cluster) and metrics on, lag is sampled.
    ``init``: accept and (re)write the database's cluster id (``coordinator/server/cluster_identity.py``);
    ``allow_mode_change``: serve a database recorded as served in another mode
    (``coordinator/server/serving_mode.py``).

    The steps below run in order; each registers how to undo what it started in one exit stack,
    so a step that fails undoes every step before it, in reverse. A started server is stopped by
    ``RunningServer.shutdown``."""
    async with contextlib.AsyncExitStack() as undo:
        server = await _start(config, end_offsets, init, allow_mode_change, undo)
        undo.pop_all()  # started: from now on shutdown() stops it
        return server


@dataclass(slots=True)
class _Readiness:
    """What /readyz reads: the shard states (core/shard_map.py) and the storage's health."""

    shard_map: ShardMap | None = None
    runtime: Runtime | None = None

    def is_ready(self) -> bool:
        shard_map, runtime = self.shard_map, self.runtime
        return (
            shard_map is not None and shard_map.ready and runtime is not None and not runtime.storage_failing
        )


@dataclass(slots=True)
class _Core:
    """The server's parts before any port opens."""

    shard_map: ShardMap
    cluster: Cluster
    coordinator: GroupCoordinator
    writer: BatchWriter
    runtime: Runtime
    dispatcher: Dispatcher
    limits: ConnectionLimits
    scram_users: ScramUsers
    stored_topics: int = 0  # topics read at start (for the line that reports the load)


async def _start(
    config: Config,
    end_offsets: EndOffsets | None,
    init: bool,
    allow_mode_change: bool,
    undo: contextlib.AsyncExitStack,
) -> RunningServer:
    metrics = Metrics() if config.metrics_port else None
    readiness = _Readiness()
    console = Console()
    health, metrics_port = await _open_health(config, metrics, readiness, console, undo)
    log.info("effective configuration:\n%s", settings_block(config), extra={VERBATIM: True})
    location = storage_location(config.storage)
    store, raw_store, shared = await _open_storage(config, metrics, location, undo)
    loop = asyncio.get_running_loop()
    clock = Clock(loop)
    # Before any port opens: a refused start never answers a client.
    identity = await _identify(store, config, init, location, clock)
    mode = await _settle_mode(store, config.upstream_bootstrap_servers, allow_mode_change, location, clock)
    if mode.action:
        log.log(logging.WARNING if allow_mode_change else logging.INFO, "serving mode %s", mode.action)
    core = _assemble(config, identity, store, clock, metrics, shared is not None)
    readiness.shard_map, readiness.runtime = core.shard_map, core.runtime
    servers, bound_listeners = await _open_listeners(loop, config, core, undo)
    main = bound_listeners[0]
    cluster, node = core.cluster, core.cluster.node
    if config.listeners or main.listener.advertised_port is None:
        # The first listener is the node's default address (ephemeral ports: the one the OS picked).
        cluster.node = NodeIdentity(node.node_id, main.advertised[0], main.advertised[1], node.cluster_id)
    server = RunningServer(
        config, store, core.writer, core.runtime, core.dispatcher, servers[0], health, metrics_port,
        core.limits, servers,
    )  # fmt: skip
    server.scram_users = core.scram_users
    core.limits.start(loop)
    undo.callback(core.limits.stop)
    _watch_loop_lag(server, metrics, undo)
    _log_listeners(server, cluster, bound_listeners, servers)
    if config.gateway_mode:
        server.gateway = await _start_gateway(loop, config, core, bound_listeners, undo)
    started = time.monotonic()
    log_loaded = _load_logger(core, location, metrics)
    if config.group_events_persist:
        event_persister = EventPersister(core.coordinator.events, raw_store, config.group_events_retention_ms)
        restored = await event_persister.restore()
        log.info("group events are persisted; %d restored", restored)
        server.event_persister = event_persister
    state_acls = await _load(server, core, shared, started, log_loaded, config)
    if server.event_persister is not None:
        server.event_persister.start()
        undo.push_async_callback(server.event_persister.stop)
    _observe(server, core, metrics, console, config)
    _authorize(server, core, config, state_acls)
    # Outermost: OffsetCommit/OffsetFetch v10 topic ids become names before any check sees them.
    TopicIds(core.cluster).install(core.dispatcher.routes)
    _sample_lag(server, core, metrics, config, end_offsets)
    _serve(server, core, config, started, log_loaded)
    return server


async def _open_health(
    config: Config,
    metrics: Metrics | None,
    readiness: _Readiness,
    console: Console,
    undo: contextlib.AsyncExitStack,
) -> tuple[HealthServer | None, int | None]:
    if metrics is None:
        return None, None
    health = HealthServer(metrics, readiness.is_ready, console, http_guard(config))
    metrics_port = await health.start(config.metrics_host, config.metrics_port)
    undo.push_async_callback(health.close)
    log.info(
        "metrics and health endpoints on http://%s:%d/metrics, the console on http://%s:%d/",
        config.metrics_host, metrics_port, config.metrics_host, metrics_port,
    )  # fmt: skip
    return health, metrics_port


async def _open_storage(
    config: Config, metrics: Metrics | None, location: str, undo: contextlib.AsyncExitStack
) -> tuple[Store, Any, PostgresStore | None]:
    """The store (measured when metrics are on), the raw one (group events go to it directly),
    and the shared PostgreSQL store when several nodes share it through shard leases."""
    new_file = sqlite_path(config.storage)
    if new_file is not None and not new_file.exists():
        log.warning("SQLite file %s does not exist: starting with a new, empty database", new_file)
    else:
        log.info("storage: %s", location)
    store: Store = open_store(config.storage, **_store_options(config))
    raw_store: Any = store
    shared = store if isinstance(store, PostgresStore) and not config.gateway_mode else None
    if metrics is not None:
        store = MeasuredStore(store, metrics)
    await store.open()
    undo.push_async_callback(store.close)
    return store, raw_store, shared


async def _identify(store: Store, config: Config, init: bool, location: str, clock: Clock) -> ClusterIdentity:
    identity = await _settle_identity(store, config.cluster_id, init, location, clock)
    if identity.action:
        level = logging.WARNING if init else logging.INFO
        log.log(level, "cluster id %s %s in %s", identity.cluster_id, identity.action, location)
    else:
        log.info("cluster id %s (stored in %s)", identity.cluster_id, location)
    return identity


def _assemble(
    config: Config,
    identity: ClusterIdentity,
    store: Store,
    clock: Clock,
    metrics: Metrics | None,
    shared: bool,
) -> _Core:
    node_id = config.gateway_coordinator_node_id if config.gateway_mode else config.node_id
    node = NodeIdentity(node_id, config.listener_host, config.listener_port, identity.cluster_id)
    shards = config.offsets_topic_num_partitions
    shard_map = ShardMap(shards, node_id) if shared else ShardMap.for_one_process(shards, node_id)
    cluster = Cluster(
        node,
        auto_create_topics=config.auto_create_topics_enable,
        num_partitions=config.num_partitions,
        shard_map=shard_map,
    )
    coordinator = GroupCoordinator(config.group_settings(), random_unit=random.Random().random)
    coordinator.attach_catalog(cluster)
    # Standalone keeps no records: every partition's log ends at 0 (docs/share-groups.md, "Admin").
    coordinator.kind(ShareGroupManager).attach_log_ends(
        lambda topic, partition: 0 if cluster.has_partition(topic, partition) else None
    )
    writer = BatchWriter(store)
    runtime = Runtime(coordinator, writer, clock, config.offsets_commit_timeout_ms)
    dispatcher = Dispatcher(runtime, cluster, metrics)
    dispatcher.budget = ByteBudget(config.buffer_memory_bytes)
    if metrics is not None:
        metrics.watch_writer(writer.stats)
    dispatcher.limits = config.request_limits()
    scram_users = ScramUsers(runtime, _all_credentials(store))
    scram_users.install(dispatcher.routes)
    limits = ConnectionLimits(
        config.max_connections, config.max_connections_per_ip, config.connections_max_idle_ms
    )
    if any(spec.uses_sasl for spec in config.listener_specs()):
        dispatcher.sasl = SaslServer(
            config.sasl_mechanisms,
            config.connections_max_reauth_ms,
            CredentialCache(_credential_loader(store)).load,
            failed_authentication_delay_ms=config.connection_failed_authentication_delay_ms,
            login_limit=FailedLoginLimit(),
        )
    if metrics is not None:
        sasl = dispatcher.sasl
        metrics.watch_security(
            lambda: sasl.failures_by_reason if sasl is not None else {}, lambda: limits.refused_by_reason
        )
    return _Core(shard_map, cluster, coordinator, writer, runtime, dispatcher, limits, scram_users)


async def _open_listeners(
    loop: asyncio.AbstractEventLoop, config: Config, core: _Core, undo: contextlib.AsyncExitStack
) -> tuple[list[asyncio.Server], list[BoundListener]]:
    servers: list[asyncio.Server] = []
    bound_listeners: list[BoundListener] = []
    for spec in config.listener_specs():
        bound_listener = BoundListener(spec, config.ssl_context() if spec.uses_tls else None)
        opened = await _listen(loop, config, core.dispatcher, core.limits, bound_listener)
        undo.callback(opened.close)
        servers.append(opened)
        bound_listeners.append(bound_listener)
    return servers, bound_listeners


def _watch_loop_lag(server: RunningServer, metrics: Metrics | None, undo: contextlib.AsyncExitStack) -> None:
    if metrics is None:
        return
    lag_metrics = metrics

    def observe_lag(lag_s: float) -> None:
        lag_metrics.loop_lag.observe(lag_s)
        if server.loop_lag is not None:
            lag_metrics.loop_lag_max.set(server.loop_lag.max_lag_s)

    server.loop_lag = LoopLagMonitor(observe_lag)
    server.loop_lag.start()
    undo.callback(server.loop_lag.stop)


def _log_listeners(
    server: RunningServer,
    cluster: Cluster,
    bound_listeners: list[BoundListener],
    servers: list[asyncio.Server],
) -> None:
    main = bound_listeners[0]
    log.info(
        "coordinator node %d listening on %s:%d (advertised %s:%d)",
        cluster.node.node_id, main.listener.host, server.port, cluster.node.host, cluster.node.port,
    )  # fmt: skip
    for bound_listener, opened in zip(bound_listeners, servers, strict=True):
        log.info(
            "listener %s (%s) on %s:%d advertised as %s:%d",
            bound_listener.name, bound_listener.security_protocol, bound_listener.listener.host,
            opened.sockets[0].getsockname()[1], *bound_listener.advertised,
        )  # fmt: skip


async def _start_gateway(
    loop: asyncio.AbstractEventLoop,
    config: Config,
    core: _Core,
    bound_listeners: list[BoundListener],
    undo: contextlib.AsyncExitStack,
) -> Gateway:
    from coordinator.gateway.setup import start_gateway

    async def open_virtual_broker(port: int, listener: int) -> tuple[asyncio.Server, tuple[str, int]]:
        # A virtual broker speaks the security protocol of the listener it belongs to.
        of = bound_listeners[listener]
        spec = dataclasses.replace(of.listener, port=port, advertised_port=None)
        bound = BoundListener(spec, of.ssl_context)
        return await _listen(loop, config, core.dispatcher, core.limits, bound), bound.advertised

    gateway = await start_gateway(
        config,
        core.dispatcher,
        core.cluster,
        core.coordinator,
        open_virtual_broker,
        [b.advertised for b in bound_listeners],
    )
    undo.push_async_callback(gateway.close)
    return gateway


def _load_logger(core: _Core, location: str, metrics: Metrics | None) -> Callable[[float], None]:
    coordinator = core.coordinator

    def log_loaded(load_seconds: float) -> None:
        # What the coordinator holds after loading (one stored row may be dropped, e.g. a group
        # stored as both classic and consumer group), so that this is the one line with counts.
        groups = ", ".join(f"{n} {kind} groups" for kind, n in coordinator.groups_by_protocol().items())
        log.info(
            "loaded %d topics, %s and %d offsets from %s in %.0f ms",
            core.stored_topics, groups, coordinator.offset_count(), location, load_seconds * 1000,
        )  # fmt: skip
        if metrics is not None:
            metrics.load_time.set(load_seconds)
            metrics.loading.set(0)

    return log_loaded


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Loading allocates millions of objects that live as long as the server: collector passes
    over them midway cost a third of the load's CPU and find nothing. Once loaded they are frozen
    (the collector's full passes need not walk them: with a million offsets each pass would hold
    the event loop for a good part of a second). The collector runs again on every path."""
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        gc.enable()


async def _load(
    server: RunningServer,
    core: _Core,
    shared: PostgresStore | None,
    started: float,
    log_loaded: Callable[[float], None],
    config: Config,
) -> list[Any]:
    """Read the unsharded state; prepare the groups' load (a single node reads the group ids and
    loads the shards in the background; several nodes register and take their shards later).
    While loading, group requests are answered COORDINATOR_LOAD_IN_PROGRESS (see loading.py) and
    requests that need the topic catalog wait for it (docs/performance.md#loading-in-the-background).
    Returns the stored ACLs."""
    store, shard_map, dispatcher, runtime = server.store, core.shard_map, core.dispatcher, core.runtime
    if not isinstance(store, GroupLoadingStore):
        raise TypeError(f"{type(store).__name__} cannot load groups by shard")
    with _collector_paused():
        state = await store.load_unsharded()  # the groups come shard by shard
        core.cluster.load(state.topics)
        core.stored_topics = len(state.topics)
        if shared is None:
            for shard in range(shard_map.shards):
                shard_map.move(shard, ShardState.LOADING)

            def groups_loaded(load_seconds: float) -> None:
                log_loaded(load_seconds)
                dispatcher.groups_loaded()

            server.group_loader = GroupLoader(store, runtime, shard_map, groups_loaded, started)
            server.group_loader.on_shard = dispatcher.shard_loaded
            await server.group_loader.read_ids()
        else:  # the groups come with the shards this node takes
            ownership = Ownership(
                shared,
                shared.lease_table(shard_map.node_id, shard_map.shards, config.group_coordinator_lease_ms),
                runtime,
                core.cluster,
                shard_map,
                lease_ms=config.group_coordinator_lease_ms,
                poll_ms=config.group_coordinator_ownership_poll_ms,
            )
            dispatcher.topic_lookup = TopicLookup(core.cluster, ownership.leases.topics)
            server.group_configs_elsewhere = GroupConfigsElsewhere(
                runtime,
                ownership.leases,
                shard_map,
                lambda: core.cluster.node.node_id,
                core.cluster.topics.get,
            )
            server.group_configs_elsewhere.install(dispatcher.routes)
            await ownership.register(core.cluster.node.host, core.cluster.node.port)
            server.ownership = ownership
        acls: list[Any] = state.acls
        del state
    return acls


def _observe(
    server: RunningServer, core: _Core, metrics: Metrics | None, console: Console, config: Config
) -> None:
    coordinator = core.coordinator
    if metrics is not None:
        metrics.watch_core(
            lambda: (coordinator.group_count_by_state(), coordinator.member_count()), coordinator.stats
        )
        group_metrics = GroupMetricsCollector(coordinator.events, server.lag, core.runtime.clock.now_ms)
        metrics.registry.register(group_metrics)
        metrics.registry.register(
            GroupStateCollector(
                coordinator.group_sizes,
                coordinator.last_commit_ms,
                coordinator.events.session_expiries_by_group,
            )
        )
        metrics.registry.register(ShareMetricsCollector(coordinator.kind(ShareGroupManager).share_metrics))
    console.views = GroupViews(
        coordinator,
        server.lag,
        core.runtime.clock,
        gateway_mode=config.gateway_mode,
        history_persisted=config.group_events_persist,
    )
    console.topics = TopicViews(coordinator, server.lag, core.cluster)


def _authorize(server: RunningServer, core: _Core, config: Config, acls: list[Any]) -> None:
    if not config.authorizer_enabled:
        return
    authorizer = Authorizer(
        [u.strip() for u in config.super_users.split(";") if u.strip()],
        config.allow_everyone_if_no_acl_found,
    )
    authorizer.load(acls)
    authorizer.on_denied = DenialLog().denied
    if server.ownership is not None:  # ACL changes made through other nodes
        server.ownership.watch_acls(authorizer.load)
    AclLayer(authorizer).install(core.dispatcher.routes)
    TopicAcls(authorizer, core.cluster).install(core.dispatcher.routes)
    if server.gateway is not None:
        from coordinator.gateway.setup import authorize_forwarded

        authorize_forwarded(server.gateway, authorizer)
    log.info(
        "authorizer enabled: %d ACLs, super users %s", len(authorizer.acls), config.super_users or "none"
    )


def _sample_lag(
    server: RunningServer,
    core: _Core,
    metrics: Metrics | None,
    config: Config,
    end_offsets: EndOffsets | None,
) -> None:
    if end_offsets is None and server.gateway is not None:
        end_offsets = server.gateway.upstream.list_end_offsets  # gateway mode: upstream's log ends
    if metrics is None or end_offsets is None:
        return
    server.lag_sampler = LagSampler(
        shard_committed_offsets([core.coordinator], core.runtime.clock),
        end_offsets,
        config.lag_sample_interval_ms,
        config.lag_metric_max_series,
        on_sample=lag_feeder(server.lag, core.coordinator),
    )
    server.lag_sampler.register(metrics.registry)
    server.lag_sampler.start()


def _serve(
    server: RunningServer, core: _Core, config: Config, started: float, log_loaded: Callable[[float], None]
) -> None:
    """The last step (nothing after it can fail): serve, and load the groups in the background."""
    core.dispatcher.unsharded_state_read()
    core.runtime.rearm_timer()
    server.readiness_probe = StorageProbe(core.runtime)
    server.readiness_probe.start()
    if server.group_loader is not None:
        log.info("serving; the groups of %d shards load in the background", core.shard_map.shards)
        server.group_loader.start()
    elif server.ownership is not None:
        shard_map = core.shard_map

        def owning_its_share() -> None:
            log_loaded(time.monotonic() - started)
            shard_map.share_loaded = True  # /readyz: this node's share is taken and loaded

        log.info("serving; this node takes and loads its share of the shards in the background")
        server.ownership.start(owning_its_share)


async def serve(config: Config, init: bool = False, allow_mode_change: bool = False) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        with server_collector():
            server = await start_server(config, init=init, allow_mode_change=allow_mode_change)
            try:
                await _until_stopped(stop, server)
                log.info("shutting down")
            finally:
                await server.shutdown()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


async def _until_stopped(stop: asyncio.Event, server: RunningServer) -> None:
    """Until ``stop`` is set; a background load that fails (a bug: storage errors are retried)
    ends the server as a failed load at start always did."""
    loading = server.group_loader.task if server.group_loader is not None else None
    stopping = asyncio.ensure_future(stop.wait())
    try:
        if loading is not None:
            await asyncio.wait({stopping, loading}, return_when=asyncio.FIRST_COMPLETED)
            if loading.done() and not loading.cancelled() and (failure := loading.exception()) is not None:
                raise failure
        await stopping
    finally:
        stopping.cancel()


async def _listen(
    loop: asyncio.AbstractEventLoop,
    config: Config,
    dispatcher: Dispatcher,
    limits: ConnectionLimits,
    bound_listener: BoundListener,
) -> asyncio.Server:
    spec = bound_listener.listener
    tls = bound_listener.ssl_context
    server = await loop.create_server(
        lambda: Connection(
            dispatcher,
            config.socket_request_max_bytes,
            config.queued_max_request_bytes,
            limits,
            config.queued_max_requests,
            bound_listener,
            config.pipelined_commits_per_connection,
            dispatcher.budget,
            config.connection_unsent_max_bytes,
        ),
        spec.host,
        spec.port,
        reuse_address=True,
        ssl=tls,
        # A TLS handshake that never completes is a slow-loris too.
        ssl_handshake_timeout=min(config.connections_max_idle_ms / 1000, 60.0) if tls is not None else None,
    )
    if spec.advertised_port is None:
        bound_listener.advertised = (spec.advertised_host, int(server.sockets[0].getsockname()[1]))
    return server


def _credential_loader(store: Store) -> CredentialLoader:
    async def load(user: str) -> list[UserCredentialRecord]:
        return await store.load_credentials(user)

    return load


def _all_credentials(store: Store) -> Callable[[], Awaitable[list[UserCredentialRecord]]]:
    async def load() -> list[UserCredentialRecord]:
        return await store.load_credentials(None)

    return load


async def _settle_identity(
    store: Store, configured: str, init: bool, location: str, clock: Clock
) -> ClusterIdentity:
    """Check or write the stored cluster id (docs/hardening.md). Several nodes formatting one new
    PostgreSQL database at once race to write their ids; the table takes one row, so a loser's
    write fails and its second pass reads the winner's id back and adopts it."""

    async def settle() -> ClusterIdentity:
        return settle_cluster_id(await store.load_identity(), configured, init, location, clock.wall_ms())

    identity = await settle()
    if identity.records:
        try:
            await store.write(identity.records)
        except StoreError:
            identity = await settle()
            if identity.records:
                await store.write(identity.records)
    return identity


async def _settle_mode(
    store: Store, upstream: str, allow_change: bool, location: str, clock: Clock
) -> ServingMode:
    """Check or record how the database is served (coordinator/server/serving_mode.py). Nodes
    starting one new PostgreSQL database at once race to record it; a loser's write fails (one
    row at most) and its second pass checks the winner's row."""

    async def settle() -> ServingMode:
        return settle_serving_mode(
            await store.load_identity(), upstream, allow_change, location, clock.wall_ms()
        )

    mode = await settle()
    if mode.records:
        try:
            await store.write(mode.records)
        except StoreError:
            mode = await settle()
            if mode.records:
                await store.write(mode.records)
    return mode


def _store_options(config: Config) -> dict[str, object]:
    options: dict[str, object] = {}
    if config.storage.startswith("sqlite:"):
        # One server per SQLite file: a second one is refused at start (storage/process_lock.py).
        options["exclusive"] = True
        if "synchronous=" not in config.storage:
            options["synchronous"] = config.sqlite_synchronous.upper()
    retention = config.offset_commit_history_retention_ms
    if retention and "history_retention_ms=" not in config.storage:  # the URL's own option wins
        if config.storage.startswith("memory:"):
            options["history"] = True
        else:
            options["history_retention_ms"] = retention
    return options
