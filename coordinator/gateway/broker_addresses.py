"""The answers that name brokers, rewritten to name the gateway's virtual brokers: Metadata,
DescribeCluster and FindCoordinator for transactions (docs/gateway.md#addressing-port-per-broker),
and the retriable Metadata answer made here when no upstream broker is reachable. What they
teach (topics, node ids) feeds the catalog and the virtual brokers first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from coordinator.core.cluster import NodeIdentity
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.gateway.virtual_brokers import VirtualBrokers
from coordinator.server.connection import Connection, PendingReply
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterBroker
from protocol.messages.find_coordinator import FindCoordinatorResponse
from protocol.messages.metadata import MetadataResponse, MetadataResponseBroker, MetadataResponseTopic
from protocol.wire import decode_request, encode_response

# The responses decoded and rewritten whole (the others are passed through as bytes).
REWRITTEN: Final = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER, ApiKey.FIND_COORDINATOR})


class BrokerAddresses:
    """Rewrites the broker addresses of upstream's answers for the listener a client came in on."""

    def __init__(
        self, upstream: UpstreamCluster, brokers: VirtualBrokers, coordinator: Callable[[], NodeIdentity]
    ) -> None:
        self.upstream = upstream
        self.brokers = brokers
        self.coordinator = coordinator

    def learn(self, api_key: int, body: Any) -> list[int]:
        """Feed the catalog; the node ids that have no virtual broker yet."""
        if api_key == ApiKey.METADATA:
            self.upstream.observe_metadata(body)
            return self.brokers.missing(b.node_id for b in body.brokers)
        if api_key == ApiKey.DESCRIBE_CLUSTER:
            return self.brokers.missing(b.broker_id for b in body.brokers)
        nodes = [c.node_id for c in body.coordinators] if body.coordinators else [body.node_id]
        return self.brokers.missing(n for n in nodes if n >= 0)

    async def respond_after_listeners(
        self, reply: PendingReply, correlation_id: int, body: Any, missing: list[int], budgeted: int
    ) -> None:
        """An answer naming nodes that have no virtual broker yet, sent once their listeners are open."""
        try:
            await self.brokers.ensure(missing)
        finally:
            connection = reply.connection
            frame = None
            if not connection.closed:
                frame = self.rewritten(connection, reply.api_key, reply.api_version, correlation_id, body)
            reply.send_frame(frame, budgeted)

    def rewritten(
        self, connection: Connection, api_key: int, version: int, correlation_id: int, body: Any
    ) -> bytes:
        address = self.brokers.addresses_for(connection.advertised)  # the listener it came in on
        # The gateway itself is listed too (at the bootstrap address): some clients (aiokafka)
        # only connect to a group coordinator whose node id is in the metadata.
        node = self.coordinator()
        host, port = self.brokers.bootstrap_of(connection.advertised) or (node.host, node.port)
        if connection.advertised is not None and self.brokers.node_at(connection.advertised) is None:
            host, port = connection.advertised
        # A node without a virtual broker (its port could not be bound) is left out: clients
        # treat its partitions as leaderless and retry, instead of getting an upstream address.
        if api_key == ApiKey.METADATA:
            gateway: Any = MetadataResponseBroker(node.node_id, host, port, None)
            body.brokers = _at_virtual_brokers(body.brokers, _node_id, address, gateway)
        elif api_key == ApiKey.DESCRIBE_CLUSTER:
            gateway = DescribeClusterBroker(node.node_id, host, port, None)
            body.brokers = _at_virtual_brokers(body.brokers, _broker_id, address, gateway)
        else:
            _rewrite_coordinators(body, address)
        return encode_response(api_key, version, correlation_id, body)

    def answer_metadata_unavailable(self, connection: Connection, reply: PendingReply, frame: bytes) -> None:
        """Upstream unreachable: a retriable answer instead of a closed bootstrap connection."""
        self.upstream.incidents.failed("upstream cluster", "no upstream broker is reachable")
        try:
            request = decode_request(frame)
        except Exception:
            connection.close()
            return
        topics = request.body.topics or []
        node = self.coordinator()
        response = MetadataResponse(
            brokers=[
                MetadataResponseBroker(node.node_id, *(connection.advertised or (node.host, node.port)), None)
            ],
            cluster_id=self.upstream.cluster_id,
            controller_id=-1,
            topics=[
                MetadataResponseTopic(
                    error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=t.name, topic_id=t.topic_id
                )
                for t in topics
            ],
        )
        reply.send(response)


def _at_virtual_brokers(
    entries: list[Any], node_of: Callable[[Any], int], address: Any, gateway: Any
) -> list[Any]:
    """The broker entries that have a virtual broker, at its address, then the gateway's own
    entry unless its node id is among them."""
    listed = [(entry, address(node_of(entry))) for entry in entries]
    kept = [entry for entry, found in listed if found is not None]
    for entry, found in listed:
        if found is not None:
            entry.host, entry.port = found
    if all(node_of(entry) != node_of(gateway) for entry in kept):
        kept.append(gateway)
    return kept


def _node_id(broker: MetadataResponseBroker) -> int:
    return broker.node_id


def _broker_id(broker: DescribeClusterBroker) -> int:
    return broker.broker_id


def _rewrite_coordinators(body: FindCoordinatorResponse, address: Any) -> None:
    """Transaction coordinators at the gateway's address of their node (retriable when it has none)."""
    entries: list[Any] = list(body.coordinators) if body.coordinators else [body]
    for entry in entries:
        if entry.node_id < 0:
            continue
        found = address(entry.node_id)
        if found is None:
            entry.node_id, entry.host, entry.port = -1, "", -1
            entry.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            entry.error_message = "the gateway has no listener for this coordinator's broker"
        else:
            entry.host, entry.port = found
