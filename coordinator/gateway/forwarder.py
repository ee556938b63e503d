"""Forwarding a client connection's data-plane requests to the upstream brokers.

Each client connection owns its upstream connections (one per upstream broker it talks to), so
request order is kept and correlation ids pass through unchanged. The connection's one
in-flight slot (see coordinator/server/connection.py) is held until the upstream response has
been written back, so forwarded and locally served responses leave in request order.

Request bodies are never decoded (only the header, and Produce's acks); responses are passed
through as bytes, except those that carry broker addresses: Metadata, DescribeCluster,
FindCoordinator for transactions, and Produce/Fetch responses with KIP-951 NodeEndpoints. A
response that is next in line for its client goes out while it is still arriving (cut_through.py).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from coordinator.core.cluster import NodeIdentity
from coordinator.gateway.cut_through import FetchTail
from coordinator.gateway.group_configs import CONFIG_APIS, names_group_resources
from coordinator.gateway.node_endpoints import carries_node_endpoints, endpoints_in, rewrite_node_endpoints
from coordinator.gateway.transactions import Observed, TransactionOutcomes
from coordinator.gateway.upstream import UpstreamConnection, UpstreamError, connect, frame_with_length
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.gateway.versions import FORWARDED_MAX, SERVED_HERE, api_versions_response
from coordinator.gateway.virtual_brokers import VirtualBrokers
from coordinator.server.authn import SaslServer
from coordinator.server.connection import Connection, PendingReply
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterBroker
from protocol.messages.find_coordinator import FindCoordinatorResponse
from protocol.messages.metadata import MetadataResponse, MetadataResponseBroker, MetadataResponseTopic
from protocol.primitives import DecodeError, read_uvarint, skip_tagged_fields
from protocol.wire import Request, decode_request, decode_response, encode_response, peek_header

log = logging.getLogger(__name__)

_INT16: Final = struct.Struct(">h")
_REWRITTEN: Final = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER, ApiKey.FIND_COORDINATOR})
_MALFORMED: Final = (DecodeError, struct.error, IndexError, UnicodeDecodeError)
ANY_BROKER: Final = -1  # the upstream connection of the bootstrap port: any upstream broker
MAX_PIPELINE: Final = 64  # forwarded requests in flight per client connection
UNKNOWN_API_MESSAGE: Final = "api key {key} v{version} is not forwarded by the gateway"


class _Slot:
    """One forwarded request waiting for its response, in request order."""

    __slots__ = ("api_key", "api_version", "correlation_id", "frame", "observed")

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.frame: bytes | None = None  # the response, with its length prefix, once ready
        # A transactional request whose response teaches the gateway an outcome (transactions.py).
        self.observed: Observed | None = None


class _Forwarded:
    """A forwarded request waiting for its response (the upstream connection's ResponseHandler)."""

    __slots__ = ("connection", "forwarder", "link", "slot")

    def __init__(self, forwarder: Forwarder, connection: Connection, link: _Link, slot: _Slot) -> None:
        self.forwarder = forwarder
        self.connection = connection
        self.link = link
        self.slot = slot

    def stream(self) -> _ToClient | None:
        """Cut-through when the response is next in line for the client and needs no rewriting
        that changes its length (Produce v10+ answers are small: they are held and rewritten)."""
        slot, link, connection = self.slot, self.link, self.connection
        if slot.api_key in _REWRITTEN or slot.observed is not None:
            return None
        if connection.closed or connection.transport is None:
            return None
        if not link.pending or link.pending[0] is not slot:
            return None  # earlier responses are still owed: this one waits its turn, whole
        tail = carries_node_endpoints(slot.api_key, slot.api_version)
        if tail and slot.api_key != ApiKey.FETCH:
            return None
        return _ToClient(self, tail)

    def whole(self, frame: bytes) -> None:
        self.forwarder.respond(self.connection, self.link, self.slot, frame)


class _ToClient:
    """A response passed on to the client while it arrives (upstream.ResponseStream)."""

    __slots__ = ("failed", "forwarded", "tail")

    def __init__(self, forwarded: _Forwarded, fetch_tail: bool) -> None:
        self.forwarded = forwarded
        self.failed = False
        self.tail = FetchTail(self._send, forwarded.forwarder.brokers.address_of) if fetch_tail else None

    def _send(self, chunk: memoryview) -> None:
        connection = self.forwarded.connection
        if not self.failed and not connection.closed and connection.transport is not None:
            connection.transport.write(chunk)
            connection.seen = True

    def write(self, chunk: memoryview) -> None:
        if self.tail is None:
            self._send(chunk)
            return
        try:
            self.tail.write(chunk)
        except _MALFORMED as exc:
            self._fail(exc)

    def end(self) -> None:
        if self.tail is not None:
            try:
                self.tail.end()
            except _MALFORMED as exc:
                self._fail(exc)
        forwarded = self.forwarded
        forwarded.slot.frame = b""  # sent
        forwarded.forwarder.flush(forwarded.connection, forwarded.link)

    def _fail(self, exc: Exception) -> None:
        if not self.failed:
            self.failed = True
            slot = self.forwarded.slot
            log.warning(
                "malformed api %d v%d response from upstream: %s", slot.api_key, slot.api_version, exc
            )
            self.forwarded.connection.close()  # half a response went out: the client must drop it


class _Link:
    """A client connection's side of the gateway: its upstream connection and the responses
    it is owed, oldest first."""

    __slots__ = ("blocked", "deferred", "pending", "upstream")

    def __init__(self) -> None:
        self.upstream: UpstreamConnection | None = None
        self.pending: deque[_Slot] = deque()
        self.blocked: PendingReply | None = None  # the in-flight slot, held while connecting or full
        self.deferred: tuple[PendingReply, bytes] | None = None  # a local request behind forwarded ones


class Forwarder:
    """The gateway's hook in the dispatcher: takes the frames of forwarded APIs.

    Forwarded requests are pipelined: each is written upstream at once (up to MAX_PIPELINE per
    connection), and the responses, which upstream returns in order, go back in that order. A
    request served here that arrives behind forwarded ones waits until they are answered, so the
    client always gets its responses in request order."""

    def __init__(
        self, upstream: UpstreamCluster, brokers: VirtualBrokers, coordinator: Callable[[], NodeIdentity]
    ) -> None:
        self.upstream = upstream
        self.brokers = brokers
        self.coordinator = coordinator
        self.sasl: SaslServer | None = None
        self._links: dict[Connection, _Link] = {}
        self._refused_logged: set[tuple[int, int]] = set()
        self.transactions: TransactionOutcomes | None = None  # docs/transactions.md
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- the dispatcher's hook -------------------------------------------------------------
    def forward(self, connection: Connection, frame: bytes) -> bool:
        """True when the frame was taken here; False leaves it to the dispatcher."""
        if self._take(connection, frame):
            return True
        link = self._links.get(connection)
        if link is not None and link.pending:
            link.deferred = (connection.hold(), frame)  # served once the forwarded ones are answered
            return True
        return False

    def _take(self, connection: Connection, frame: bytes) -> bool:
        try:
            api_key, version, correlation_id = peek_header(frame)
        except DecodeError:
            return False  # the dispatcher closes the connection with its message
        if api_key in SERVED_HERE:
            if api_key == ApiKey.API_VERSIONS and version > SERVED_VERSIONS[ApiKey.API_VERSIONS][1]:
                # KIP-511: a newer ApiVersions gets v0 with our ranges, so the client retries lower.
                body = api_versions_response(self.upstream.api_versions, ErrorCode.UNSUPPORTED_VERSION)
                self._reply_now(connection, encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body))
                return True
            return False
        if api_key == ApiKey.FIND_COORDINATOR:
            try:
                request = decode_request(frame)
            except Exception:
                return False  # malformed or unsupported: the dispatcher answers as it does today
            if request.body.key_type != 1:
                return False  # groups are served here; other key types get the dispatcher's error
        if api_key in CONFIG_APIS and names_group_resources(frame):
            return False  # GROUP config resources are served here (docs/gateway.md)
        if not self._admitted(connection, api_key, version, correlation_id):
            return True
        high = FORWARDED_MAX.get(api_key)
        if api_key == ApiKey.FIND_COORDINATOR:
            high = SERVED_VERSIONS[ApiKey.FIND_COORDINATOR][1]
        if high is None or not 0 <= version <= high:
            if (api_key, version) not in self._refused_logged:
                self._refused_logged.add((api_key, version))
                log.warning(
                    "refused from %s: %s; unknown APIs are not passed blindly to the upstream cluster "
                    "(the connection is closed, as Kafka does for an API it does not know)",
                    connection.peer, UNKNOWN_API_MESSAGE.format(key=api_key, version=version),
                )  # fmt: skip
            connection.close()
            return True
        try:
            expects_response = api_key != ApiKey.PRODUCE or _produce_acks(frame, version) != 0
        except (struct.error, IndexError, DecodeError):
            connection.abort(f"malformed Produce v{version} request")
            return True
        slot = _Slot(api_key, version, correlation_id) if expects_response else None
        if slot is not None and self.transactions is not None:
            slot.observed = self.transactions.request(api_key, version, frame)
        link = self._links.setdefault(connection, _Link())
        if link.upstream is not None and not link.upstream.closed:
            self._send(connection, link, link.upstream, frame, slot)
        else:
            link.blocked = connection.hold()  # later requests wait for the connection
            node = self.brokers.node_at(connection.advertised)
            target = ANY_BROKER if node is None else node
            self._spawn(self._connect_and_send(connection, link, target, frame, slot))
        return True

    def connection_closed(self, connection: Connection) -> None:
        link = self._links.pop(connection, None)
        if link is not None and link.upstream is not None:
            link.upstream.on_lost = None
            link.upstream.close()

    async def close(self) -> None:
        for connection in list(self._links):
            self.connection_closed(connection)
        for task in list(self._tasks):
            task.cancel()

    # ---- sending ---------------------------------------------------------------------------
    def _send(
        self,
        connection: Connection,
        link: _Link,
        upstream: UpstreamConnection,
        frame: bytes,
        slot: _Slot | None,
    ) -> None:
        try:
            upstream.send_to(
                frame, None if slot is None else _Forwarded(self, connection, link, slot), prefixed=False
            )
        except UpstreamError:
            connection.close()
            return
        if slot is not None:
            link.pending.append(slot)
            if len(link.pending) >= MAX_PIPELINE and link.blocked is None:
                link.blocked = connection.hold()  # read no further until responses drain

    async def _connect_and_send(
        self, connection: Connection, link: _Link, target: int, frame: bytes, slot: _Slot | None
    ) -> None:
        try:
            upstream = await self._open(connection, target)
        except UpstreamError as exc:
            if slot is not None and slot.api_key == ApiKey.METADATA and target == ANY_BROKER:
                link.pending.append(slot)
                self._answer_metadata_unavailable(connection, link, slot, frame)
                self._unblock(connection, link)
                return
            self.upstream.incidents.failed(_node_label(target), str(exc), credentials=exc.credentials)
            connection.close()  # the client sees a broker that is down, retries and refreshes metadata
            return
        if connection.closed:
            upstream.close()
            return
        self.upstream.incidents.recovered(_node_label(target))
        link.upstream = upstream
        self._send(connection, link, upstream, frame, slot)
        self._unblock(connection, link)

    def _unblock(self, connection: Connection, link: _Link) -> None:
        blocked = link.blocked
        if blocked is not None and len(link.pending) < MAX_PIPELINE:
            link.blocked = None
            connection.release(blocked)

    async def _open(self, connection: Connection, target: int) -> UpstreamConnection:
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
                return await connect(
                    host, port, self.upstream.settings, lambda lost: self._lost(connection, lost)
                )
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

    # ---- responses -------------------------------------------------------------------------
    def respond(self, connection: Connection, link: _Link, slot: _Slot, frame: bytes) -> None:
        if connection.closed:
            return
        api_key, version = slot.api_key, slot.api_version
        if slot.observed is not None and self.transactions is not None:
            self.transactions.response(
                slot.observed, frame, lambda ok: self._released(connection, link, slot, frame, ok)
            )
            return
        try:
            if api_key in _REWRITTEN:
                correlation_id, body = decode_response(api_key, version, frame[4:])
                missing = self._learn(api_key, body)
                if missing:
                    self._spawn(
                        self._respond_after_listeners(connection, link, slot, correlation_id, body, missing)
                    )
                    return
                slot.frame = self._rewritten(connection, api_key, version, correlation_id, body)
            elif carries_node_endpoints(api_key, version) and endpoints_in(api_key, version, frame, origin=4):
                rewritten = rewrite_node_endpoints(api_key, version, frame[4:], self.brokers.address_of)
                slot.frame = frame_with_length(rewritten)
            else:
                slot.frame = frame  # as upstream sent it, length prefix included
        except _MALFORMED as exc:
            log.warning("malformed api %d v%d response from upstream: %s", api_key, version, exc)
            connection.close()
            return
        self.flush(connection, link)

    def _released(self, connection: Connection, link: _Link, slot: _Slot, frame: bytes, ok: bool) -> None:
        """A transactional response the gateway has learned from (transactions.py): sent once
        what it taught is durable; when that failed, the client's connection closes and it retries."""
        if connection.closed:
            return
        if not ok:
            connection.close()
            return
        slot.frame = frame
        self.flush(connection, link)

    async def _respond_after_listeners(
        self,
        connection: Connection,
        link: _Link,
        slot: _Slot,
        correlation_id: int,
        body: Any,
        missing: list[int],
    ) -> None:
        await self.brokers.ensure(missing)
        if not connection.closed:
            slot.frame = self._rewritten(connection, slot.api_key, slot.api_version, correlation_id, body)
            self.flush(connection, link)

    def _reply_now(self, connection: Connection, frame: bytes) -> None:
        """An answer made here, behind any forwarded responses still owed."""
        link = self._links.get(connection)
        if link is None or not link.pending:
            connection.send_raw(frame)
            return
        slot = _Slot(-1, -1, -1)
        slot.frame = frame
        link.pending.append(slot)

    def flush(self, connection: Connection, link: _Link) -> None:
        """Write the responses that are ready, in request order."""
        pending = link.pending
        ready: list[bytes] = []
        while pending and pending[0].frame is not None:
            ready.append(pending.popleft().frame)  # type: ignore[arg-type]
        if not ready:
            return
        if connection.transport is not None and not connection.closed:
            connection.transport.writelines(ready)
            connection.seen = True
        self._unblock(connection, link)
        if not pending and link.deferred is not None:
            held, frame = link.deferred
            link.deferred = None
            # The local request goes first, then whatever the client sent after it.
            connection.queue.appendleft(frame)
            connection.queued_bytes += len(frame)
            connection.release(held)

    def _learn(self, api_key: int, body: Any) -> list[int]:
        """Feed the catalog; the node ids that have no virtual broker yet."""
        if api_key == ApiKey.METADATA:
            self.upstream.observe_metadata(body)
            return self.brokers.missing(b.node_id for b in body.brokers)
        if api_key == ApiKey.DESCRIBE_CLUSTER:
            return self.brokers.missing(b.broker_id for b in body.brokers)
        nodes = [c.node_id for c in body.coordinators] if body.coordinators else [body.node_id]
        return self.brokers.missing(n for n in nodes if n >= 0)

    def _rewritten(
        self, connection: Connection, api_key: int, version: int, correlation_id: int, body: Any
    ) -> bytes:
        address = self.brokers.address_of
        # The gateway itself is listed too (at the bootstrap address): some clients (aiokafka)
        # only connect to a group coordinator whose node id is in the metadata.
        node = self.coordinator()
        host, port = node.host, node.port
        if connection.advertised is not None and self.brokers.node_at(connection.advertised) is None:
            host, port = connection.advertised
        # A node without a virtual broker (its port could not be bound) is left out: clients
        # treat its partitions as leaderless and retry, instead of getting an upstream address.
        if api_key == ApiKey.METADATA:
            listed = [(b, address(b.node_id)) for b in body.brokers]
            body.brokers = [b for b, found in listed if found is not None]
            for broker, found in listed:
                if found is not None:
                    broker.host, broker.port = found
            if all(b.node_id != node.node_id for b in body.brokers):
                body.brokers.append(MetadataResponseBroker(node.node_id, host, port, None))
        elif api_key == ApiKey.DESCRIBE_CLUSTER:
            described = [(b, address(b.broker_id)) for b in body.brokers]
            body.brokers = [b for b, found in described if found is not None]
            for broker_entry, found in described:
                if found is not None:
                    broker_entry.host, broker_entry.port = found
            if all(b.broker_id != node.node_id for b in body.brokers):
                body.brokers.append(DescribeClusterBroker(node.node_id, host, port, None))
        else:
            _rewrite_coordinators(body, address)
        return encode_response(api_key, version, correlation_id, body)

    def _answer_metadata_unavailable(
        self, connection: Connection, link: _Link, slot: _Slot, frame: bytes
    ) -> None:
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
        slot.frame = encode_response(slot.api_key, slot.api_version, slot.correlation_id, response)
        self.flush(connection, link)

    # ---- refused here ----------------------------------------------------------------------
    def _admitted(self, connection: Connection, api_key: int, version: int, correlation_id: int) -> bool:
        session = connection.sasl
        if session is None:
            return True
        if self.sasl is None:
            connection.abort("SASL is not configured")
            return False
        return self.sasl.admit(connection, session, Request(api_key, version, correlation_id, None, None))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _node_label(target: int) -> str:
    return "upstream cluster" if target == ANY_BROKER else f"upstream node {target}"


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


def _produce_acks(frame: bytes, version: int) -> int:
    """Produce's acks, read past the header and the transactional id without decoding the rest."""
    (client_id_length,) = _INT16.unpack_from(frame, 8)
    pos = 10 + max(client_id_length, 0)
    if version < 3:
        pass  # no transactional id before v3
    elif version >= 9:
        pos = skip_tagged_fields(frame, pos)
        size, pos = read_uvarint(frame, pos)  # compact nullable transactional id
        pos += max(size - 1, 0)
    else:
        (size,) = _INT16.unpack_from(frame, pos)
        pos += 2 + max(size, 0)
    (acks,) = _INT16.unpack_from(frame, pos)
    return int(acks)
