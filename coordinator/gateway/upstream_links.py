"""Which upstream connection a forwarded request travels on, and sending it there.

A client connection's requests travel on one of a few upstream connections to their broker,
shared with other client connections (upstream_pool.py: correlation ids are rewritten there);
with the pool off (size 0), and for the requests that would hold a shared connection (see
NEVER_SHARED), on a connection of its own, correlation ids passed through unchanged. Either way
one client's requests go in order on one connection, which answers in order. A lost upstream
connection closes the client connections it owed answers to.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, Final

from coordinator.gateway.broker_addresses import BrokerAddresses
from coordinator.gateway.forwarded import Forwarded
from coordinator.gateway.upstream import PauseReason, UpstreamConnection, UpstreamError, connect
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.gateway.upstream_pool import SlowClientBytes, UpstreamPool
from coordinator.gateway.virtual_brokers import VirtualBrokers
from coordinator.server.byte_budget import ByteBudget
from coordinator.server.connection import Connection, Pipeline
from protocol.apis import ApiKey

log = logging.getLogger(__name__)

ANY_BROKER: Final = -1  # the upstream connection of the bootstrap port: any upstream broker
MAX_PIPELINE: Final = 64  # forwarded requests in flight per client connection
FORWARDED: Final = Pipeline("forwarded", MAX_PIPELINE)
# Kafka serves one request of a connection at a time: a Fetch waiting up to its MaxWaitMs would
# hold every client behind it on a shared connection. They go on the client's own connection
# (docs/gateway.md#shared-upstream-connections), as Produce with acks=0 does (upstream closes
# the connection to report its errors).
NEVER_SHARED: Final = frozenset({ApiKey.FETCH, ApiKey.SHARE_FETCH})

Spawn = Callable[[Coroutine[Any, Any, None]], None]


class Link:
    """A client connection's side of the gateway: its shared (pooled) upstream connection and
    its own one (pool off, Fetches, Produce with acks=0, a broker that left the metadata)."""

    __slots__ = ("connection", "own", "shared", "slow")

    def __init__(self, connection: Connection, slow: SlowClientBytes) -> None:
        self.connection = connection
        self.slow = slow
        self.shared: UpstreamConnection | None = None
        self.own: UpstreamConnection | None = None

    def client_not_reading(self, paused: bool) -> None:
        """The client connection's watcher: its own upstream connection is not read while it does
        not read (a shared one is never paused for one client: SlowClientBytes)."""
        own = self.own
        if own is not None:
            if paused:
                own.pause(PauseReason.CLIENT_NOT_READING)
            else:
                own.resume(PauseReason.CLIENT_NOT_READING)
        if not paused:
            self.slow.release(self.connection)


class UpstreamLinks:
    """The upstream connections of the client connections: shared ones (the pool, None when it
    is off) and each client connection's own."""

    def __init__(
        self,
        upstream: UpstreamCluster,
        brokers: VirtualBrokers,
        addresses: BrokerAddresses,
        slow: SlowClientBytes,
        spawn: Spawn,
        budget: ByteBudget | None = None,
        pool_size: int = 0,
    ) -> None:
        self.upstream = upstream
        self.brokers = brokers
        self.addresses = addresses
        self.slow = slow
        self.budget = budget
        self._spawn = spawn
        self.by_client: dict[Connection, Link] = {}
        # Shared upstream connections (None: each client connection has its own), and what their
        # clients that do not read may hold (docs/gateway.md#back-pressure).
        self.pool = UpstreamPool(pool_size, self._open, self._shared_lost) if pool_size > 0 else None

    def forward(
        self, connection: Connection, api_key: int, frame: bytes, forwarded: Forwarded, expects_response: bool
    ) -> None:
        """Sends ``frame`` on the client connection's upstream connection to the broker it asked
        (opened first if it must be)."""
        link = self.by_client.get(connection)
        if link is None:
            link = self.by_client[connection] = Link(connection, self.slow)
            connection.watch_output(link.client_not_reading)
        node = self.brokers.node_at(connection.advertised)
        target = ANY_BROKER if node is None else node
        # A broker that has left the cluster metadata gets no shared connection (the pool's
        # connections to it were closed when it left: UpstreamPool.retire).
        forwarded.shared = (
            self.pool is not None
            and expects_response
            and api_key not in NEVER_SHARED
            and (node is None or node in self.upstream.brokers)
        )
        upstream = link.shared if forwarded.shared else link.own
        if upstream is not None and not upstream.closed:
            self._send(connection, upstream, frame, forwarded, expects_response)
        else:
            # The reply stays in the server until the upstream connection is open: later
            # requests wait for it.
            self._spawn(self._connect_and_send(connection, link, target, frame, forwarded, expects_response))

    def connection_closed(self, connection: Connection) -> None:
        link = self.by_client.pop(connection, None)
        self.slow.release(connection)
        if self.pool is not None:
            self.pool.detach(connection)  # its answers still to come are read and dropped
        if link is not None and link.own is not None:
            link.own.on_lost = None
            link.own.close()

    def close(self) -> None:
        for connection in list(self.by_client):
            self.connection_closed(connection)
        if self.pool is not None:
            self.pool.close()

    @property
    def own_connections(self) -> int:
        """Open upstream connections owned by one client connection each."""
        return sum(1 for link in self.by_client.values() if link.own is not None and not link.own.closed)

    # ---- sending ---------------------------------------------------------------------------
    def _send(
        self,
        connection: Connection,
        upstream: UpstreamConnection,
        frame: bytes,
        forwarded: Forwarded,
        expects_response: bool,
    ) -> None:
        reply = forwarded.reply
        try:
            if forwarded.shared:
                upstream.send_shared(frame, forwarded, reply.correlation_id)
            else:
                upstream.send_to(frame, forwarded if expects_response else None, prefixed=False)
        except UpstreamError:
            connection.close()
            return
        reply.handled(FORWARDED)  # the next forwarded request may go upstream behind it
        if not expects_response:
            reply.finish_without_response()

    async def _connect_and_send(
        self,
        connection: Connection,
        link: Link,
        target: int,
        frame: bytes,
        forwarded: Forwarded,
        expects_response: bool,
    ) -> None:
        reply = forwarded.reply
        try:
            if forwarded.shared:
                assert self.pool is not None
                upstream = await self.pool.connection_for(connection, target)
            else:
                upstream = await self._open(target, lambda lost: self._lost(connection, lost))
        except UpstreamError as exc:
            if reply.api_key == ApiKey.METADATA and target == ANY_BROKER:
                self.addresses.answer_metadata_unavailable(connection, reply, frame)
                return
            self.upstream.incidents.failed(_node_label(target), str(exc), credentials=exc.credentials)
            connection.close()  # the client sees a broker that is down, retries and refreshes metadata
            return
        if connection.closed:
            if not forwarded.shared:
                upstream.close()
            return
        self.upstream.incidents.recovered(_node_label(target))
        if forwarded.shared:
            link.shared = upstream
        else:
            link.own = upstream
            if connection.client_not_reading:
                upstream.pause(PauseReason.CLIENT_NOT_READING)
        self._send(connection, upstream, frame, forwarded, expects_response)

    async def _open(self, target: int, on_lost: Callable[[UpstreamConnection], None]) -> UpstreamConnection:
        if target == ANY_BROKER:
            candidates = [*self.upstream.brokers.values(), *self.upstream.bootstrap]
        else:
            address = self.upstream.known_addresses.get(target)
            if address is None:
                raise UpstreamError(f"upstream node {target} is not known")
            candidates = [address]
        failure: UpstreamError | None = None
        for host, port in dict.fromkeys(candidates):
            try:
                return await connect(host, port, self.upstream.settings, on_lost, budget=self.budget)
            except UpstreamError as exc:
                if exc.credentials:
                    raise
                failure = exc
        raise failure or UpstreamError("no upstream broker is known")

    def _lost(self, connection: Connection, upstream: UpstreamConnection) -> None:
        """An upstream broker dropped the connection: only the client connection that used it goes."""
        if not connection.closed:
            log.info(
                "upstream %s closed the connection of client %s; closing it", upstream.label, connection.peer
            )
            connection.close()

    def _shared_lost(self, upstream: UpstreamConnection) -> None:
        """A shared connection went away: the client connections whose requests it left
        unanswered are closed, as their own connection's loss would close them."""
        clients = {handler.reply.connection for handler in upstream.orphans if isinstance(handler, Forwarded)}
        closing = [client for client in clients if not client.closed]
        log.info(
            "shared upstream connection to %s lost; closing the %d client connections it owed answers",
            upstream.label, len(closing),
        )  # fmt: skip
        for client in closing:
            client.close()


def _node_label(target: int) -> str:
    return "upstream cluster" if target == ANY_BROKER else f"upstream node {target}"
