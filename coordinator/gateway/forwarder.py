"""Forwarding a client connection's data-plane requests to the upstream brokers.

A client connection's requests travel on one of a few upstream connections to their broker,
shared with other client connections (upstream_pool.py: correlation ids are rewritten there);
with the pool off (size 0), and for the requests that would hold a shared connection (see
_NEVER_SHARED), on a connection of its own, correlation ids passed through unchanged.
Either way one client's requests go in order on one connection, which answers in order, and
the client connection sends its answers in request order (coordinator/server/connection.py).

Request bodies are never decoded (only the header, and Produce's acks); responses are passed
through as bytes, except those that carry broker addresses: Metadata, DescribeCluster,
FindCoordinator for transactions, and Produce/Fetch responses with KIP-951 NodeEndpoints. A
response that is next in line for its client goes out while it is still arriving (cut_through.py).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Any, Final

from coordinator.api.table import GROUP_CONFIG_APIS
from coordinator.core.cluster import NodeIdentity
from coordinator.gateway.authorization import ForwardedAuthorization
from coordinator.gateway.cut_through import FetchTail
from coordinator.gateway.group_configs import names_group_resources
from coordinator.gateway.high_watermarks import FetchWatch, TopicKey
from coordinator.gateway.node_endpoints import carries_node_endpoints, endpoints_in, rewrite_node_endpoints
from coordinator.gateway.old_formats import (
    ConversionError,
    converts,
    downgrade_response,
    produce_error_response,
    upgrade_request,
    upgraded_version,
)
from coordinator.gateway.transactions import Observed, TransactionOutcomes
from coordinator.gateway.upstream import (
    PauseReason,
    UpstreamConnection,
    UpstreamError,
    connect,
    frame_with_length,
)
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.gateway.upstream_pool import SlowClientBytes, UpstreamPool
from coordinator.gateway.versions import FORWARDED_MAX, SERVED_HERE, api_versions_response
from coordinator.gateway.virtual_brokers import VirtualBrokers
from coordinator.server.authn import SaslServer
from coordinator.server.byte_budget import UNLIMITED, ByteBudget
from coordinator.server.connection import Connection, PendingReply, Pipeline
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from protocol.gateway_wire import encode_forwarded_response
from protocol.messages import CODECS
from protocol.messages.describe_cluster import DescribeClusterBroker
from protocol.messages.find_coordinator import FindCoordinatorResponse
from protocol.messages.headers import decode_request_header_v1, decode_request_header_v2
from protocol.messages.metadata import MetadataResponse, MetadataResponseBroker, MetadataResponseTopic
from protocol.primitives import DecodeError, read_uvarint, skip_tagged_fields
from protocol.wire import Request, decode_request, decode_response, encode_response, peek_header

log = logging.getLogger(__name__)

_INT16: Final = struct.Struct(">h")
_REWRITTEN: Final = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER, ApiKey.FIND_COORDINATOR})
_MALFORMED: Final = (DecodeError, struct.error, IndexError, UnicodeDecodeError)
# ListOffsets v9-v11 answer as v8 does, and ask as v8 does but for a TimeoutMs at the end (v10+):
# the gateway reads and writes their latest offsets with the v8 codec.
_LIST_OFFSETS_AS: Final = 8
ANY_BROKER: Final = -1  # the upstream connection of the bootstrap port: any upstream broker
MAX_PIPELINE: Final = 64  # forwarded requests in flight per client connection
FORWARDED: Final = Pipeline("forwarded", MAX_PIPELINE)
# Forwarded unless they name groups (FindCoordinator for groups, GROUP config resources).
_SOMETIMES_SERVED_HERE: Final = frozenset({ApiKey.FIND_COORDINATOR, *GROUP_CONFIG_APIS})
UNKNOWN_API_MESSAGE: Final = "api key {key} v{version} is not forwarded by the gateway"
# Kafka serves one request of a connection at a time: a Fetch waiting up to its MaxWaitMs would
# hold every client behind it on a shared connection. They go on the client's own connection
# (docs/gateway.md#shared-upstream-connections), as Produce with acks=0 does (upstream closes
# the connection to report its errors).
_NEVER_SHARED: Final = frozenset({ApiKey.FETCH, ApiKey.SHARE_FETCH})


class _Forwarded:
    """A forwarded request waiting for its response (the upstream connection's ResponseHandler)."""

    __slots__ = ("forwarder", "latest", "merge", "observed", "reply", "shared")

    def __init__(
        self,
        forwarder: Forwarder,
        reply: PendingReply,
        merge: Callable[[bytes], bytes] | None = None,
        latest: frozenset[tuple[str, int]] = frozenset(),
    ) -> None:
        self.forwarder = forwarder
        self.reply = reply
        # Puts the refusals of an authorized-in-part request back into upstream's response.
        self.merge = merge
        # ListOffsets: the partitions asked for their latest offset (their answers are checked
        # against the fetched high watermarks: high_watermarks.py).
        self.latest = latest
        # A transactional request whose response teaches the gateway an outcome (transactions.py):
        # held whole until what it taught is durable.
        self.observed: Observed | None = None
        self.shared = False  # sent on a pooled connection

    def stream(self, size: int) -> _ToClient | _Collected | _Discarded | None:
        """Cut-through when the response is next in line for the client and needs no rewriting
        that changes its length (Produce v10+ answers are small: they are held and rewritten).
        On a shared connection, the answer of a client that does not read is taken in without
        pausing the connection, within SlowClientBytes, or the client is cut off."""
        if self.shared:
            connection = self.reply.connection
            if connection.closed:
                return _DISCARDED
            if connection.client_not_reading:
                if not self.forwarder.slow.admit(connection, size):
                    self.forwarder.cut_off(connection, size)
                    return _DISCARDED
                return self._cut_through() or _Collected(self)
        return self._cut_through()

    def _cut_through(self) -> _ToClient | None:
        reply = self.reply
        if reply.api_key in _REWRITTEN or self.merge is not None or self.observed is not None:
            return None
        if self.latest:
            return None  # held whole: its log ends may be corrected
        if converts(reply.api_key, reply.api_version):
            return None  # converted whole (old_formats.py)
        tail = carries_node_endpoints(reply.api_key, reply.api_version)
        if tail and reply.api_key != ApiKey.FETCH:
            return None
        if not reply.connection.stream_turn(reply):
            return None  # earlier responses are still owed: this one waits its turn, whole
        return _ToClient(self, tail)

    def whole(self, frame: bytes, budgeted: int) -> None:
        self.forwarder.respond(self, frame, budgeted)


class _Collected:
    """An answer for a client that does not read, gathered whole outside the byte budget (its
    bytes are counted in SlowClientBytes) and then handled as any answer received whole."""

    __slots__ = ("chunks", "forwarded")

    def __init__(self, forwarded: _Forwarded) -> None:
        self.forwarded = forwarded
        self.chunks: list[bytes] = []

    def write(self, chunk: memoryview) -> None:
        self.chunks.append(bytes(chunk))

    def end(self) -> None:
        forwarded = self.forwarded
        forwarded.forwarder.respond(forwarded, b"".join(self.chunks), 0)


class _Discarded:
    """The answer of a client connection that is gone: read and dropped."""

    __slots__ = ()

    def write(self, chunk: memoryview) -> None:
        pass

    def end(self) -> None:
        pass


_DISCARDED: Final = _Discarded()


class _ToClient:
    """A response passed on to the client while it arrives (upstream.ResponseStream)."""

    __slots__ = ("failed", "forwarded", "tail", "watch")

    def __init__(self, forwarded: _Forwarded, fetch_tail: bool) -> None:
        self.forwarded = forwarded
        self.failed = False
        brokers, advertised = forwarded.forwarder.brokers, forwarded.reply.connection.advertised
        self.tail = FetchTail(self._send, brokers.addresses_for(advertised)) if fetch_tail else None
        self.watch = forwarded.forwarder.watch(forwarded.reply)

    def _send(self, chunk: memoryview) -> None:
        if not self.failed:
            reply = self.forwarded.reply
            reply.connection.stream(reply, chunk)
        if self.watch is not None:
            self.watch.feed(chunk)

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
        reply = self.forwarded.reply
        reply.connection.end_stream(reply)

    def _fail(self, exc: Exception) -> None:
        if not self.failed:
            self.failed = True
            reply = self.forwarded.reply
            log.warning(
                "malformed api %d v%d response from upstream: %s", reply.api_key, reply.api_version, exc
            )
            reply.connection.close()  # half a response went out: the client must drop it


class _Link:
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


class Forwarder:
    """The gateway's hook in the dispatcher: takes the frames of forwarded APIs.

    Forwarded requests are pipelined: each is written upstream at once (up to MAX_PIPELINE per
    connection, the connection's FORWARDED pipeline), and the responses, which upstream returns
    in order, are handed to the client connection, which sends them in request order. A request
    served here that arrives behind forwarded ones waits until they are answered (the connection
    lets only requests of one pipeline be in the server together)."""

    def __init__(
        self,
        upstream: UpstreamCluster,
        brokers: VirtualBrokers,
        coordinator: Callable[[], NodeIdentity],
        budget: ByteBudget | None = None,
        pool_size: int = 0,
    ) -> None:
        self.upstream = upstream
        self.brokers = brokers
        self.coordinator = coordinator
        self.budget = budget
        self.sasl: SaslServer | None = None
        # With the authorizer on, every forwarded request is authorized with the client's
        # principal (authorization.py); until the hook is installed nothing is forwarded.
        self.authorization_required = False
        self.authorization: ForwardedAuthorization | None = None
        self._links: dict[Connection, _Link] = {}
        self._refused_logged: set[tuple[int, int]] = set()
        self.transactions: TransactionOutcomes | None = None  # docs/transactions.md
        self._tasks: set[asyncio.Task[None]] = set()
        # Shared upstream connections (None: each client connection has its own), and what their
        # clients that do not read may hold (docs/gateway.md#back-pressure).
        self.pool = UpstreamPool(pool_size, self._open, self._shared_lost) if pool_size > 0 else None
        self.slow = SlowClientBytes(UNLIMITED if budget is None else budget.limit // 2)

    # ---- the dispatcher's hook -------------------------------------------------------------
    def forward(self, connection: Connection, frame: bytes) -> bool:
        """True when the frame was taken here; False leaves it to the dispatcher."""
        return self._take(connection, frame)

    def pipeline_of(self, connection: Connection, frame: bytes) -> str | None:
        """FORWARDED for a frame that is surely forwarded (the connection lets it join earlier
        forwarded requests in flight); None when it may be served here."""
        if len(frame) < 4:
            return None
        api_key = int.from_bytes(frame[:2], "big", signed=True)
        version = int.from_bytes(frame[2:4], "big", signed=True)
        if (
            api_key in SERVED_HERE
            or api_key in _SOMETIMES_SERVED_HERE
            or not 0 <= version <= FORWARDED_MAX.get(api_key, -1)
        ):
            return None
        session = connection.sasl
        if session is not None and not session.authenticated:
            return None
        return FORWARDED.name

    def _take(self, connection: Connection, frame: bytes) -> bool:
        try:
            api_key, version, correlation_id = peek_header(frame)
        except DecodeError:
            return False  # the dispatcher closes the connection with its message
        if api_key in SERVED_HERE:
            if api_key == ApiKey.API_VERSIONS and version > SERVED_VERSIONS[ApiKey.API_VERSIONS][1]:
                # KIP-511: a newer ApiVersions gets v0 with our ranges, so the client retries lower.
                body = api_versions_response(self.upstream.api_versions, ErrorCode.UNSUPPORTED_VERSION)
                connection.send_raw(encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body))
                return True
            return False
        if api_key == ApiKey.FIND_COORDINATOR:
            try:
                request = decode_request(frame)
            except Exception:
                return False  # malformed or unsupported: the dispatcher answers as it does today
            if request.body.key_type != 1:
                return False  # groups are served here; other key types get the dispatcher's error
        if api_key in GROUP_CONFIG_APIS and names_group_resources(frame):
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
        upstream_version = version
        if converts(api_key, version):
            # An old client's request is authorized as the version it goes upstream in (the
            # rules know current versions only); answers made here go back in the client's.
            upgraded = self._upgraded(connection, frame, expects_response)
            if upgraded is None:
                return True
            frame, upstream_version = upgraded, upgraded_version(api_key)
        merge: Callable[[bytes], bytes] | None = None
        if self.authorization_required:
            screened = self._authorized(connection, api_key, upstream_version, frame, version)
            if screened is None:
                return True
            frame, merge = screened
        latest = (
            _asked_latest(frame, version) if api_key == ApiKey.LIST_OFFSETS and version >= 1 else frozenset()
        )
        reply = connection.start(api_key, version, correlation_id)
        held = None if self.transactions is None else self.transactions.held_answer(api_key, version, frame)
        if held is not None:
            reply.send_frame(encode_forwarded_response(api_key, version, correlation_id, held))
            return True
        forwarded = _Forwarded(self, reply, merge, latest)
        if expects_response and self.transactions is not None:
            forwarded.observed = self.transactions.request(api_key, version, frame)
        link = self._links.get(connection)
        if link is None:
            link = self._links[connection] = _Link(connection, self.slow)
            connection.watch_output(link.client_not_reading)
        node = self.brokers.node_at(connection.advertised)
        target = ANY_BROKER if node is None else node
        # A broker that has left the cluster metadata gets no shared connection (the pool's
        # connections to it were closed when it left: UpstreamPool.retire).
        forwarded.shared = (
            self.pool is not None
            and expects_response
            and api_key not in _NEVER_SHARED
            and (node is None or node in self.upstream.brokers)
        )
        upstream = link.shared if forwarded.shared else link.own
        if upstream is not None and not upstream.closed:
            self._send(connection, upstream, frame, forwarded, expects_response)
        else:
            # The reply stays in the server until the upstream connection is open: later
            # requests wait for it.
            self._spawn(self._connect_and_send(connection, link, target, frame, forwarded, expects_response))
        return True

    def _upgraded(self, connection: Connection, frame: bytes, expects_response: bool) -> bytes | None:
        """An old client's Produce v0-2 or Fetch v0-3 as upstream gets it (old_formats.py); None
        when it was answered here (a message set that cannot be converted) or was malformed."""
        try:
            return upgrade_request(frame)
        except ConversionError as exc:
            log.info("produce from %s refused: %s", connection.peer, exc)
            if expects_response:
                connection.send_raw(produce_error_response(frame, exc.code))
            return None
        except _MALFORMED as exc:
            connection.abort(f"malformed request: {exc}")
            return None

    def _authorized(
        self, connection: Connection, api_key: int, version: int, frame: bytes, client_version: int
    ) -> tuple[bytes, Callable[[bytes], bytes] | None] | None:
        """The frame to forward (and how to merge its answer), or None when answered or refused
        here; ``version`` is the frame's, ``client_version`` the one an answer made here takes."""
        authorization = self.authorization
        if authorization is None:
            connection.abort("the gateway's authorization is not ready yet")
            return None
        screened = authorization.screen(connection.principal, connection.client_host, api_key, version, frame)
        if screened.answer is not None:
            answer = screened.answer
            if client_version != version:
                answer = downgrade_response(api_key, client_version, answer)
            connection.send_raw(answer)
            return None
        if screened.frame is None:
            if (api_key, -2) not in self._refused_logged:
                self._refused_logged.add((api_key, -2))
                log.warning(
                    "refused from %s: %s (the connection is closed)", connection.peer, screened.refuse
                )
            connection.close()
            return None
        return screened.frame, screened.merge

    def connection_closed(self, connection: Connection) -> None:
        link = self._links.pop(connection, None)
        self.slow.release(connection)
        if self.pool is not None:
            self.pool.detach(connection)  # its answers still to come are read and dropped
        if link is not None and link.own is not None:
            link.own.on_lost = None
            link.own.close()

    async def close(self) -> None:
        for connection in list(self._links):
            self.connection_closed(connection)
        if self.pool is not None:
            self.pool.close()
        for task in list(self._tasks):
            task.cancel()

    def cut_off(self, connection: Connection, size: int) -> None:
        """A client that does not read, whose next answer does not fit in SlowClientBytes."""
        self.slow.cut_off += 1
        self.slow.release(connection)
        connection.abort(
            f"it does not read its answers and the next one ({size} bytes) does not fit in the bytes "
            "kept for such clients (docs/gateway.md#back-pressure)"
        )

    @property
    def own_connections(self) -> int:
        """Open upstream connections owned by one client connection each."""
        return sum(1 for link in self._links.values() if link.own is not None and not link.own.closed)

    # ---- sending ---------------------------------------------------------------------------
    def _send(
        self,
        connection: Connection,
        upstream: UpstreamConnection,
        frame: bytes,
        forwarded: _Forwarded,
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
        link: _Link,
        target: int,
        frame: bytes,
        forwarded: _Forwarded,
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
                self._answer_metadata_unavailable(connection, reply, frame)
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
        clients = {
            handler.reply.connection for handler in upstream.orphans if isinstance(handler, _Forwarded)
        }
        closing = [client for client in clients if not client.closed]
        log.info(
            "shared upstream connection to %s lost; closing the %d client connections it owed answers",
            upstream.label, len(closing),
        )  # fmt: skip
        for client in closing:
            client.close()

    # ---- responses -------------------------------------------------------------------------
    def respond(self, forwarded: _Forwarded, frame: bytes, budgeted: int) -> None:
        reply = forwarded.reply
        connection = reply.connection
        if connection.closed:
            reply.send_frame(None, budgeted)  # gives the bytes back
            return
        api_key, version = reply.api_key, reply.api_version
        if forwarded.observed is not None and self.transactions is not None:
            self.transactions.response(
                forwarded.observed, frame, lambda ok: self._released(forwarded, frame, budgeted, ok)
            )
            return
        try:
            if (watch := self.watch(reply)) is not None:
                watch.feed(frame)
            # The refusals of a request authorized in part are merged into upstream's answer, then
            # an old client's answer goes back to its version (old_formats.py).
            if forwarded.merge is not None:
                frame = forwarded.merge(frame)
            if converts(api_key, version):
                frame = downgrade_response(api_key, version, frame)
            if api_key in _REWRITTEN:
                correlation_id, body = decode_response(api_key, version, frame[4:])
                missing = self._learn(api_key, body)
                if missing:
                    self._spawn(self._respond_after_listeners(reply, correlation_id, body, missing, budgeted))
                    return
                frame = self._rewritten(connection, api_key, version, correlation_id, body)
            elif carries_node_endpoints(api_key, version) and endpoints_in(api_key, version, frame, origin=4):
                rewritten = rewrite_node_endpoints(
                    api_key, version, frame[4:], self.brokers.addresses_for(connection.advertised)
                )
                frame = frame_with_length(rewritten)
            elif forwarded.latest:
                probe = self._to_probe(version, forwarded.latest, frame)
                if probe:
                    self._spawn(self._respond_after_probe(reply, forwarded.latest, frame, probe, budgeted))
                    return
                frame = self._latest_corrected(version, forwarded.latest, frame)
            # else as upstream sent it, length prefix included
        except _MALFORMED as exc:
            log.warning("malformed api %d v%d response from upstream: %s", api_key, version, exc)
            connection.close()
            reply.send_frame(None, budgeted)
            return
        reply.send_frame(frame, budgeted)

    def _released(self, forwarded: _Forwarded, frame: bytes, budgeted: int, ok: bool) -> None:
        """A transactional response the gateway has learned from (transactions.py): sent once
        what it taught is durable; when that failed, the client's connection closes and it retries."""
        reply = forwarded.reply
        connection = reply.connection
        if connection.closed or not ok:
            if not connection.closed:
                connection.close()
            reply.send_frame(None, budgeted)  # gives the bytes back
            return
        reply.send_frame(frame, budgeted)

    async def _respond_after_listeners(
        self, reply: PendingReply, correlation_id: int, body: Any, missing: list[int], budgeted: int
    ) -> None:
        try:
            await self.brokers.ensure(missing)
        finally:
            connection = reply.connection
            frame = None
            if not connection.closed:
                frame = self._rewritten(connection, reply.api_key, reply.api_version, correlation_id, body)
            reply.send_frame(frame, budgeted)

    def watch(self, reply: PendingReply) -> FetchWatch | None:
        """What reads a forwarded Fetch response's high watermarks (None for other APIs)."""
        if reply.api_key != ApiKey.FETCH:
            return None
        catalog, watermarks = self.upstream.catalog, self.upstream.high_watermarks

        def seen(topic: TopicKey, partition: int, high_watermark: int) -> None:
            if isinstance(topic, bytes):
                record = catalog.topic_by_id(topic)
                if record is None:
                    return
                topic = record.name
            watermarks.observe((topic, partition), high_watermark)

        return FetchWatch(reply.api_version, seen)

    def _to_probe(
        self, api_version: int, latest: frozenset[tuple[str, int]], frame: bytes
    ) -> dict[tuple[str, int], int]:
        """The partitions of a ListOffsets answer whose latest offset waits for a fresh high
        watermark, with the offset upstream listed (high_watermarks.py)."""
        version = min(api_version, _LIST_OFFSETS_AS)
        _, body = decode_response(ApiKey.LIST_OFFSETS, version, frame[4:])
        needs_probe = self.upstream.high_watermarks.needs_probe
        return {
            (topic.name, answer.partition_index): answer.offset
            for topic in body.topics
            for answer in topic.partitions
            if answer.error_code == ErrorCode.NONE
            and answer.offset > 0  # an empty partition: nothing to learn
            and (topic.name, answer.partition_index) in latest
            and needs_probe((topic.name, answer.partition_index))
        }

    async def _respond_after_probe(
        self,
        reply: PendingReply,
        latest: frozenset[tuple[str, int]],
        frame: bytes,
        probe: dict[tuple[str, int], int],
        budgeted: int,
    ) -> None:
        """A ListOffsets(latest) answer sent once the high watermarks of ``probe`` are learned
        (or could not be): raised to them where upstream listed less."""
        try:
            await self.upstream.probe_high_watermarks(probe)
        finally:
            out: bytes | None = None
            if not reply.connection.closed:
                out = self._latest_corrected(reply.api_version, latest, frame)
            reply.send_frame(out, budgeted)

    def _latest_corrected(self, api_version: int, latest: frozenset[tuple[str, int]], frame: bytes) -> bytes:
        """A ListOffsets answer whose latest offsets are raised to the high watermarks fetched
        through the gateway where upstream answered less (high_watermarks.py)."""
        version = min(api_version, _LIST_OFFSETS_AS)
        correlation_id, body = decode_response(ApiKey.LIST_OFFSETS, version, frame[4:])
        log_end = self.upstream.high_watermarks.log_end
        changed = False
        for topic in body.topics:
            for answer in topic.partitions:
                tp = (topic.name, answer.partition_index)
                if answer.error_code == ErrorCode.NONE and tp in latest:
                    end = log_end(tp, answer.offset)
                    if end != answer.offset:
                        answer.offset, changed = end, True
        if not changed:
            return frame
        return encode_response(ApiKey.LIST_OFFSETS, version, correlation_id, body)

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

    def _answer_metadata_unavailable(self, connection: Connection, reply: PendingReply, frame: bytes) -> None:
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


def _asked_latest(frame: bytes, version: int) -> frozenset[tuple[str, int]]:
    """The partitions a ListOffsets request asks the latest offset of (none if it cannot be read:
    upstream answers such a request as it will)."""
    version = min(version, _LIST_OFFSETS_AS)
    try:
        header = decode_request_header_v2 if version >= 6 else decode_request_header_v1
        _header, pos = header(frame, 0)
        request, _end = CODECS[(ApiKey.LIST_OFFSETS, version)][0](frame, pos)  # v10+: TimeoutMs after
    except _MALFORMED:
        return frozenset()
    return frozenset(
        (topic.name, p.partition_index)
        for topic in request.topics
        for p in topic.partitions
        if p.timestamp == -1
    )


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
