"""Wiring gateway mode into a server: upstream view, virtual brokers, forwarder, catalog."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from coordinator.api.expected_identity import expected_identity_check
from coordinator.api.routes import Handler
from coordinator.core.cluster import Cluster
from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.result import Result
from coordinator.core.share.manager import ShareGroupManager
from coordinator.gateway.authorization import ForwardedAuthorization
from coordinator.gateway.authz_rules import PREVIEWS, RULES
from coordinator.gateway.dead_letters import DeadLetterWriter
from coordinator.gateway.forwarder import Forwarder, GroupListing
from coordinator.gateway.group_configs import serve_group_configs_only
from coordinator.gateway.share_lag import serve_share_lag
from coordinator.gateway.share_upstream import UpstreamShareRecords
from coordinator.gateway.streams_topics import UpstreamTopicCreator
from coordinator.gateway.topic_lookup import UpstreamTopicLookup
from coordinator.gateway.transaction_metrics import TransactionCollector
from coordinator.gateway.transaction_resolver import TransactionResolver
from coordinator.gateway.transactions import TransactionOutcomes
from coordinator.gateway.upstream import UpstreamSettings
from coordinator.gateway.upstream_cluster import UpstreamCluster, parse_bootstrap
from coordinator.gateway.upstream_links import ANY_BROKER
from coordinator.gateway.upstream_metrics import UpstreamConnectionCollector
from coordinator.gateway.versions import advertised_versions
from coordinator.gateway.virtual_brokers import OpenListener, VirtualBrokers
from coordinator.security.acl import Authorizer
from coordinator.server.config import Config
from coordinator.server.dispatcher import Dispatcher
from coordinator.server.share_read_ahead import ReadAhead
from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersion, ApiVersionsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest

log = logging.getLogger(__name__)

FIRST_METADATA_WAIT_S: Final = 2.0


@dataclass(slots=True)
class Gateway:
    upstream: UpstreamCluster
    brokers: VirtualBrokers
    forwarder: Forwarder
    share_records: UpstreamShareRecords
    resolver: TransactionResolver
    dead_letters: DeadLetterWriter
    share_read_ahead: ReadAhead
    topic_lookup: UpstreamTopicLookup

    async def close(self) -> None:
        await self.resolver.stop()
        await self.dead_letters.stop()
        self.brokers.close()
        await self.share_read_ahead.close()
        await self.share_records.close()
        await self.forwarder.close()
        await self.upstream.stop()


def authorize_forwarded(gateway: Gateway, authorizer: Authorizer) -> None:
    """Forwarded requests are authorized with the client's principal from now on."""
    gateway.forwarder.authorization = ForwardedAuthorization(
        authorizer, gateway.upstream.catalog, RULES, PREVIEWS
    )
    gateway.topic_lookup.authorizer = authorizer  # asks upstream only about what may be read


def upstream_settings(config: Config) -> UpstreamSettings:
    return UpstreamSettings(
        security_protocol=config.upstream_security_protocol.upper(),
        sasl_mechanism=config.upstream_sasl_mechanism.upper(),
        sasl_username=config.upstream_sasl_username,
        sasl_password=config.upstream_sasl_password,
        ssl_cafile=config.upstream_ssl_cafile,
        ssl_certfile=config.upstream_ssl_certfile,
        ssl_keyfile=config.upstream_ssl_keyfile,
        connect_timeout_s=min(config.upstream_request_timeout_ms / 1000, 10.0),
    )


async def start_gateway(
    config: Config,
    dispatcher: Dispatcher,
    cluster: Cluster,
    coordinator: GroupCoordinator,
    open_listener: OpenListener,
    bootstraps: Sequence[tuple[str, int]] = (),
) -> Gateway:
    """Take over the topic catalog and the forwarded APIs; the first metadata is awaited briefly
    (an unreachable upstream does not stop the gateway from starting)."""
    brokers = VirtualBrokers(config.gateway_broker_port_base, open_listener, bootstraps)

    async def brokers_changed(nodes: dict[int, tuple[str, int]]) -> None:
        if forwarder.links.pool is not None:
            forwarder.links.pool.retire(set(nodes), keep=ANY_BROKER)
        await brokers.ensure(nodes)

    upstream = UpstreamCluster(
        parse_bootstrap(config.upstream_bootstrap_servers),
        upstream_settings(config),
        config.upstream_metadata_refresh_ms,
        config.upstream_request_timeout_ms,
        brokers_changed,
    )
    cluster.use_catalog(upstream.catalog)
    coordinator.attach_catalog(upstream.catalog)
    # Share lag reads the high watermarks the gateway's clients fetched (docs/share-groups.md, "Admin").
    coordinator.kind(ShareGroupManager).attach_log_ends(
        lambda topic, partition: upstream.high_watermarks.get((topic, partition))
    )
    dispatcher.internal_topics.creator = UpstreamTopicCreator(upstream)
    share_records = UpstreamShareRecords(upstream)
    # Records read ahead count in the same memory budget as every buffered request and answer.
    share_read_ahead = ReadAhead(share_records, budget=dispatcher.budget)
    dispatcher.share.source = share_read_ahead  # the gateway is the share-partition leader
    dead_letters = DeadLetterWriter(
        lambda: coordinator.kind(ShareGroupManager),
        share_records,
        dispatcher.share.operate,
        dispatcher.runtime.clock.wall_ms,
        config.errors_deadletterqueue_topic_name_prefix,
        config.errors_deadletterqueue_auto_create_topics_enable,
    )
    coordinator.kind(ShareGroupManager).dead_letters_due = dead_letters.wake
    shard_map = cluster.shard_map

    def loading() -> bool:
        # A single node serves before its shards are even queued for loading (docs/transactions.md,
        # the hold): until each has a state, the pending offsets are not known yet either.
        return bool(shard_map.loading) or (shard_map.single_node and len(shard_map.states) < shard_map.shards)

    transactions = TransactionOutcomes(coordinator, dispatcher.runtime, loading)
    forwarder = Forwarder(
        upstream,
        brokers,
        lambda: cluster.node,
        dispatcher.budget,
        config.upstream_connections_per_broker,
        transactions,
    )
    forwarder.sasl = dispatcher.sasl
    forwarder.authorization_required = config.authorizer_enabled
    if shard_map.single_node:  # several nodes list GROUP resources from storage: not split
        forwarder.group_listing = GroupListing(
            lambda: sorted(coordinator.group_configs.overrides),
            lambda: bool(shard_map.loading),
            dispatcher.when_groups_loaded,
        )
    resolver = TransactionResolver(transactions, upstream, loading)
    if dispatcher.metrics is not None:
        dispatcher.metrics.registry.register(TransactionCollector(transactions))
        dispatcher.metrics.registry.register(UpstreamConnectionCollector(forwarder))
    dispatcher.gateway = forwarder
    topic_lookup = UpstreamTopicLookup(upstream)
    dispatcher.topic_lookup = topic_lookup
    _serve_api_versions(dispatcher, upstream)
    _present_one_identity(dispatcher, upstream, brokers, cluster)
    serve_group_configs_only(dispatcher.routes, forwarder.upstream_lists)
    share = coordinator.kind(ShareGroupManager)
    serve_share_lag(
        dispatcher.routes,
        upstream.list_end_offsets,
        lambda: share.partition_states,
        config.upstream_request_timeout_ms / 1000,
    )
    _coordinator_on_bootstrap_address(dispatcher, brokers, cluster)
    upstream.start()
    resolver.start()
    dead_letters.start()
    if not await upstream.wait_refreshed(FIRST_METADATA_WAIT_S):
        log.warning(
            "gateway mode: upstream %s not reachable yet; serving groups, data-plane requests fail until it is",
            config.upstream_bootstrap_servers,
        )
    else:
        log.info(
            "gateway mode: upstream cluster %s, %d brokers, %d topics",
            upstream.cluster_id, len(upstream.brokers), len(upstream.catalog.topics),
        )  # fmt: skip
    return Gateway(
        upstream, brokers, forwarder, share_records, resolver, dead_letters, share_read_ahead, topic_lookup
    )


def _serve_api_versions(dispatcher: Dispatcher, upstream: UpstreamCluster) -> None:
    """ApiVersions answers the gateway's ranges (see versions.py), after the usual checks."""

    def gateway_ranges(check: Handler[ApiVersionsRequest]) -> Handler[ApiVersionsRequest]:
        def api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> Result:
            result = check(ctx, req)
            for _, response in result.replies:
                if response.error_code == 0:
                    ranges = advertised_versions(upstream.api_versions)
                    response.api_keys = [
                        ApiVersion(k, low, high) for k, (low, high) in sorted(ranges.items())
                    ]
            return result

        return api_versions

    dispatcher.routes.wrap(ApiKey.API_VERSIONS, ApiVersionsRequest, gateway_ranges)


def _present_one_identity(
    dispatcher: Dispatcher, upstream: UpstreamCluster, brokers: VirtualBrokers, cluster: Cluster
) -> None:
    """KIP-1242 in gateway mode: the upstream cluster's id (the one forwarded Metadata carries)
    and, per listener, the node id clients know for that address: the virtual broker's upstream
    node, or the coordinator's node id on the bootstrap address
    (docs/protocol.md#kip-1242-the-cluster-and-node-a-client-expects)."""

    def identity(ctx: RequestContext) -> tuple[str | None, int]:
        node = brokers.node_at(ctx.advertised)
        return upstream.cluster_id, cluster.node.node_id if node is None else node

    check = expected_identity_check(identity, consume=True)
    dispatcher.routes.wrap(ApiKey.API_VERSIONS, ApiVersionsRequest, check)


def _coordinator_on_bootstrap_address(
    dispatcher: Dispatcher, brokers: VirtualBrokers, cluster: Cluster
) -> None:
    """The group coordinator is named at the bootstrap address, never at a virtual broker's
    address, so clients never tie it to an upstream node (its node id is
    gateway.coordinator.node.id)."""

    def at_bootstrap(find: Handler[FindCoordinatorRequest]) -> Handler[FindCoordinatorRequest]:
        def find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest) -> Result:
            if brokers.node_at(ctx.advertised) is not None:
                ctx.advertised = brokers.bootstrap_of(ctx.advertised) or (
                    cluster.node.host,
                    cluster.node.port,
                )
            return find(ctx, req)

        return find_coordinator

    dispatcher.routes.wrap(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, at_bootstrap)
