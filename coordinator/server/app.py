"""Assembles and runs a server: storage, load, core, runtime, listener, graceful shutdown."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import random
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coordinator.api.authz import AclLayer
from coordinator.api.topic_authz import TopicAcls
from coordinator.api.topic_ids import TopicIds
from coordinator.core.cluster import Cluster, NodeIdentity
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.lag_status import LagTracker
from coordinator.core.shard_map import ShardMap
from coordinator.security.acl import Authorizer
from coordinator.server.authn import CredentialLoader, SaslServer
from coordinator.server.cluster_identity import ClusterIdentity, settle_cluster_id
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
from coordinator.server.startup_report import settings_block, sqlite_path, storage_location
from coordinator.server.topic_lookup import TopicLookup
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
    config: Config, end_offsets: EndOffsets | None = None, init: bool = False
) -> RunningServer:
    """Start a server; with ``end_offsets`` (log ends of the data cluster) and metrics on, lag is sampled.
    ``init``: accept and (re)write the database's cluster id (``coordinator/server/cluster_identity.py``)."""
    metrics = Metrics() if config.metrics_port else None
    health: HealthServer | None = None
    state_ready = False
    runtime: Runtime | None = None

    def is_ready() -> bool:
        return state_ready and runtime is not None and not runtime.storage_failing

    metrics_port = None
    console = Console()
    if metrics is not None:
        health = HealthServer(metrics, is_ready, console)
        metrics_port = await health.start(config.metrics_host, config.metrics_port)
        log.info("metrics and health endpoints on http://%s:%d/metrics", config.metrics_host, metrics_port)
    log.info("effective configuration:\n%s", settings_block(config), extra={VERBATIM: True})
    location = storage_location(config.storage)
    new_file = sqlite_path(config.storage)
    if new_file is not None and not new_file.exists():
        log.warning("SQLite file %s does not exist: starting with a new, empty database", new_file)
    else:
        log.info("storage: %s", location)
    store: Store = open_store(config.storage, **_store_options(config))
    raw_store: Any = store  # what MeasuredStore wraps: group events go to it directly
    # Several nodes share a PostgreSQL database through shard leases (not in gateway mode).
    shared = store if isinstance(store, PostgresStore) and not config.gateway_mode else None
    if metrics is not None:
        store = MeasuredStore(store, metrics)
    await store.open()
    loop = asyncio.get_running_loop()
    clock = Clock(loop)
    try:  # before any port opens: a refused start never answers a client
        identity = await _settle_identity(store, config.cluster_id, init, location, clock)
    except BaseException:
        await store.close()
        if health is not None:
            await health.close()
        raise
    if identity.action:
        level = logging.WARNING if init else logging.INFO
        log.log(level, "cluster id %s %s in %s", identity.cluster_id, identity.action, location)
    else:
        log.info("cluster id %s (stored in %s)", identity.cluster_id, location)
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
    writer = BatchWriter(store)
    runtime = Runtime(coordinator, writer, clock, config.offsets_commit_timeout_ms)
    dispatcher = Dispatcher(runtime, cluster, metrics)
    if metrics is not None:
        metrics.watch_writer(writer.stats)
    dispatcher.limits = config.request_limits()
    scram_users = ScramUsers(runtime, _all_credentials(store))
    scram_users.install(dispatcher.routes)
    limits = ConnectionLimits(
        config.max_connections, config.max_connections_per_ip, config.connections_max_idle_ms
    )
    specs = config.listener_specs()
    if any(spec.uses_sasl for spec in specs):
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
    servers: list[asyncio.Server] = []
    bound_listeners: list[BoundListener] = []
    try:
        for spec in specs:
            bound_listener = BoundListener(spec, config.ssl_context() if spec.uses_tls else None)
            servers.append(await _listen(loop, config, dispatcher, limits, bound_listener))
            bound_listeners.append(bound_listener)
    except BaseException:
        for opened in servers:
            opened.close()
        raise
    main = bound_listeners[0]
    if config.listeners or main.listener.advertised_port is None:
        # The first listener is the node's default address (ephemeral ports: the one the OS picked).
        cluster.node = NodeIdentity(node.node_id, main.advertised[0], main.advertised[1], node.cluster_id)
    server = RunningServer(
        config, store, writer, runtime, dispatcher, servers[0], health, metrics_port, limits, servers
    )
    server.scram_users = scram_users
    limits.start(loop)
    if metrics is not None:
        lag_metrics = metrics

        def observe_lag(lag_s: float) -> None:
            lag_metrics.loop_lag.observe(lag_s)
            if server.loop_lag is not None:
                lag_metrics.loop_lag_max.set(server.loop_lag.max_lag_s)

        server.loop_lag = LoopLagMonitor(observe_lag)
        server.loop_lag.start()
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

    if config.gateway_mode:
        from coordinator.gateway.setup import start_gateway

        async def open_virtual_broker(port: int) -> tuple[asyncio.Server, tuple[str, int]]:
            spec = dataclasses.replace(main.listener, port=port, advertised_port=None)
            bound = BoundListener(spec, main.ssl_context)
            return await _listen(loop, config, dispatcher, limits, bound), bound.advertised

        try:
            server.gateway = await start_gateway(
                config, dispatcher, cluster, coordinator, open_virtual_broker
            )
        except BaseException:
            for opened in servers:
                opened.close()
            raise

    # While loading, group requests are answered COORDINATOR_LOAD_IN_PROGRESS (see loading.py)
    # and requests that need the topic catalog wait for it. A single node serves once the
    # unsharded state and the group ids are read and loads its groups shard by shard in the background
    # (docs/performance.md#loading-in-the-background); several nodes load the shards they take.
    started = time.monotonic()
    event_persister = None
    if config.group_events_persist:
        event_persister = EventPersister(coordinator.events, raw_store, config.group_events_retention_ms)
        restored = await event_persister.restore()
        log.info("group events are persisted; %d restored", restored)
    # Loading allocates millions of objects that live as long as the server: collector passes over
    # them midway cost a third of the load's CPU and find nothing (enabled again below; a failed
    # load ends the server).
    gc.disable()
    if not isinstance(store, GroupLoadingStore):
        raise TypeError(f"{type(store).__name__} cannot load groups by shard")
    state = await store.load_unsharded()  # the groups come shard by shard (below)
    cluster.load(state.topics)
    topic_count = len(state.topics)

    def log_loaded(load_seconds: float) -> None:
        # What the coordinator holds after loading (one stored row may be dropped, e.g. a group
        # stored as both classic and consumer group), so that this is the one line with counts.
        classic_groups, consumer_groups, share_groups = coordinator.groups_by_protocol()
        log.info(
            "loaded %d topics, %d classic groups, %d consumer groups, %d share groups and %d offsets "
            "from %s in %.0f ms",
            topic_count, classic_groups, consumer_groups, share_groups, coordinator.offset_count(),
            location, load_seconds * 1000,
        )  # fmt: skip
        if metrics is not None:
            metrics.load_time.set(load_seconds)
            metrics.loading.set(0)

    if shared is None:
        shard_map.loading = set(range(shards))

        def groups_loaded(load_seconds: float) -> None:
            nonlocal state_ready
            log_loaded(load_seconds)
            dispatcher.groups_loaded()
            state_ready = True  # /readyz: every group is served (and storage accepts writes)

        server.group_loader = GroupLoader(store, runtime, shard_map, groups_loaded, started)
        server.group_loader.on_shard = dispatcher.shard_loaded
        try:
            await server.group_loader.read_ids()
        except BaseException:
            for opened in servers:
                opened.close()
            await store.close()
            raise
    else:  # the groups come with the shards this node takes
        server.ownership = Ownership(
            shared,
            shared.lease_table(node_id, shards, config.group_coordinator_lease_ms),
            runtime,
            cluster,
            shard_map,
            lease_ms=config.group_coordinator_lease_ms,
            poll_ms=config.group_coordinator_ownership_poll_ms,
        )
        dispatcher.topic_lookup = TopicLookup(cluster, server.ownership.leases.topics)
        server.group_configs_elsewhere = GroupConfigsElsewhere(
            runtime, server.ownership.leases, shard_map, lambda: cluster.node.node_id, cluster.topics.get
        )
        server.group_configs_elsewhere.install(dispatcher.routes)
        try:
            await server.ownership.register(cluster.node.host, cluster.node.port)
        except BaseException:
            server.ownership = None
            for opened in servers:
                opened.close()
            await store.close()
            raise
    state_acls = state.acls
    del state
    # The loaded state lives as long as the server: the collector's full passes need not walk it
    # (with a million offsets each pass would hold the event loop for a good part of a second).
    gc.freeze()
    gc.enable()
    if event_persister is not None:
        server.event_persister = event_persister
        event_persister.start()
    if metrics is not None:
        metrics.watch_core(
            lambda: (coordinator.group_count_by_state(), coordinator.member_count()), coordinator.stats
        )
        group_metrics = GroupMetricsCollector(coordinator.events, server.lag, clock.now_ms)
        metrics.registry.register(group_metrics)
        metrics.registry.register(
            GroupStateCollector(
                coordinator.group_sizes,
                coordinator.last_commit_ms,
                coordinator.events.session_expiries_by_group,
            )
        )
    console.views = GroupViews(coordinator, server.lag)
    if config.authorizer_enabled:
        authorizer = Authorizer(
            [u.strip() for u in config.super_users.split(";") if u.strip()],
            config.allow_everyone_if_no_acl_found,
        )
        authorizer.load(state_acls)
        authorizer.on_denied = DenialLog().denied
        if server.ownership is not None:  # ACL changes made through other nodes
            server.ownership.watch_acls(authorizer.load)
        AclLayer(authorizer).install(dispatcher.routes)
        TopicAcls(authorizer, cluster).install(dispatcher.routes)
        log.info(
            "authorizer enabled: %d ACLs, super users %s", len(authorizer.acls), config.super_users or "none"
        )
    # Outermost: OffsetCommit/OffsetFetch v10 topic ids become names before any check sees them.
    TopicIds(cluster).install(dispatcher.routes)
    if end_offsets is None and server.gateway is not None:
        end_offsets = server.gateway.upstream.list_end_offsets  # gateway mode: upstream's log ends
    if metrics is not None and end_offsets is not None:
        server.lag_sampler = LagSampler(
            shard_committed_offsets([coordinator], clock),
            end_offsets,
            config.lag_sample_interval_ms,
            config.lag_metric_max_series,
            on_sample=lag_feeder(server.lag, coordinator),
        )
        server.lag_sampler.register(metrics.registry)
        server.lag_sampler.start()
    dispatcher.finish_loading()
    runtime.rearm_timer()
    server.readiness_probe = StorageProbe(runtime)
    server.readiness_probe.start()
    if server.group_loader is not None:
        log.info("serving; the groups of %d shards load in the background", shards)
        server.group_loader.start()
    elif server.ownership is not None:

        def owning_its_share() -> None:
            nonlocal state_ready
            log_loaded(time.monotonic() - started)
            state_ready = True  # /readyz: this node's share is taken and loaded

        log.info("serving; this node takes and loads its share of the shards in the background")
        server.ownership.start(owning_its_share)
    else:
        state_ready = True
    return server


async def serve(config: Config, init: bool = False) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        server = await start_server(config, init=init)
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
    loader = getattr(store, "load_credentials", None)

    async def load(user: str) -> list[UserCredentialRecord]:
        if loader is not None:
            found: list[UserCredentialRecord] = await loader(user)
            return found
        return [c for c in (await store.load()).credentials if c.user == user]

    return load


def _all_credentials(store: Store) -> Callable[[], Awaitable[list[UserCredentialRecord]]]:
    loader = getattr(store, "load_credentials", None)

    async def load() -> list[UserCredentialRecord]:
        if loader is not None:
            found: list[UserCredentialRecord] = await loader(None)
            return found
        return list((await store.load()).credentials)

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
