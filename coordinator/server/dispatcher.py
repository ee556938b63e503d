"""From a frame to the API layer and back.

Per request: decode (malformed → close the connection, as Kafka does), build the context, look
up the request's route in the table (coordinator.api.table) and hand the handler's Result to the
runtime. A handler that raises answers UNKNOWN_SERVER_ERROR for that request alone (the whole-
request error response of its API) and the connection goes on; see docs/architecture.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, Protocol

from coordinator.api.amend import amend
from coordinator.api.amend import reply as reply_now
from coordinator.api.config_listing import asked_types
from coordinator.api.config_resources import GROUP
from coordinator.api.limits import PAYLOAD_APIS
from coordinator.api.loading import load_in_progress_response
from coordinator.api.routes import Routes
from coordinator.api.streams_topics import CatalogTopicCreator, InternalTopics
from coordinator.api.table import GROUP_CONFIG_APIS, api_routes
from coordinator.api.validation import screen_request
from coordinator.core.cluster import Cluster
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.server.authn import SASL_APIS, SaslServer
from coordinator.server.byte_budget import ByteBudget
from coordinator.server.config import Config
from coordinator.server.connection import (
    COMMITS,
    PIPELINED_API,
    Connection,
    PendingReply,
    is_pipelined_commit,
)
from coordinator.server.metrics import Metrics
from coordinator.server.runtime import Runtime
from coordinator.server.share_fetch import ShareLeader
from coordinator.server.topic_lookup import LooksTopicsUp
from coordinator.server.unsupported_log import UnsupportedRequestLog
from protocol.apis import ApiKey
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.primitives import DecodeError
from protocol.wire import Request, UnsupportedApi, decode_request, encode_response

log = logging.getLogger(__name__)


class ForwardingHook(Protocol):
    """Gateway mode: takes the frames of APIs forwarded upstream (True) before any decoding."""

    def forward(self, connection: Connection, frame: bytes) -> bool: ...

    def pipeline_of(self, connection: Connection, frame: bytes) -> str | None: ...

    def connection_closed(self, connection: Connection) -> None: ...


# Answered while the unsharded state is read: they do not depend on stored state.
_NEEDS_NO_CATALOG = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER, *SASL_APIS}
)


# Requests a broker parks until an event (Kafka's purgatory): their wait is not processing time.
LONG_POLL_APIS = frozenset({ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.FETCH, ApiKey.SHARE_FETCH})

# Enum members read by every request, as module constants: a member lookup on the class costs a
# descriptor call (≈ 0.1 µs each on Python 3.11, docs/performance.md#heartbeats-and-session-timers-2026-11-28).
_DELETE_TOPICS: Final = ApiKey.DELETE_TOPICS
_LIST_CONFIG_RESOURCES: Final = ApiKey.LIST_CONFIG_RESOURCES
_PRODUCE: Final = ApiKey.PRODUCE


class Dispatcher:
    def __init__(self, runtime: Runtime, cluster: Cluster, metrics: Metrics | None = None) -> None:
        self.runtime = runtime
        self.cluster = cluster
        self.metrics = metrics
        self.connections: set[Connection] = set()
        self.sasl: SaslServer | None = None  # set when a listener uses SASL
        self.gateway: ForwardingHook | None = None  # set in gateway mode
        self.budget = ByteBudget()  # buffered bytes of every connection (docs/gateway.md#back-pressure)
        # The node's unsharded state (topic catalog, ACLs, credentials) is not read yet: a state of
        # the node before any shard's, not one of them (docs/architecture.md#shard-states).
        self.reading_unsharded_state = True
        # Several nodes: topics created through another node are looked up before an answer
        # that would treat them as absent (docs/multinode.md#what-other-nodes-learn).
        self.topic_lookup: LooksTopicsUp | None = None
        self.limits = Config().request_limits()  # the settings table's defaults; start_server sets them
        self.unsupported_log = UnsupportedRequestLog(time.monotonic)
        self._deferred: list[tuple[Connection, PendingReply, RequestContext, Request]] = []
        # DeleteTopics while a single node's shards still load: it drops the topics' offsets of
        # the groups held, so it waits until every group is held (see _defer_until_groups).
        self._after_groups: list[tuple[Connection, PendingReply, RequestContext, Request]] = []
        self._when_groups_loaded: list[Callable[[], None]] = []
        # GROUP config requests while a single node's shards still load: group configs, unlike
        # groups, have no retriable "loading" answer in Kafka (they live in the cluster metadata),
        # so the request waits for its groups' shards, which are loaded next (shard_loaded).
        self._after_shards: list[tuple[set[int], Connection, PendingReply, RequestContext, Request]] = []
        # coordinator.api.authz.AclLayer.install() adds its checks when authorizer.enabled is true.
        self.routes: Routes = api_routes(cluster, runtime.coordinator)
        # Streams groups' internal topics (gateway mode swaps in the upstream creator).
        self.internal_topics = InternalTopics(runtime.coordinator, CatalogTopicCreator(cluster))
        self.internal_topics.install(self.routes)
        self.routes.add(ApiKey.FETCH, FetchRequest, self.fetch)
        # ShareFetch/ShareAcknowledge (gateway mode swaps in the upstream as the record source).
        self.share = ShareLeader(
            runtime, runtime.coordinator.config.group_share_max_share_sessions, shard_map=cluster.shard_map
        )
        self.share.install(self.routes)
        self.routes.add(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, self.delete_topics)
        self.routes.add(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest, self._sasl_handler)
        self.routes.add(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest, self._sasl_handler)

    # ---- connections ---------------------------------------------------------------------
    def connection_opened(self, connection: Connection) -> None:
        self.connections.add(connection)
        if self.metrics is not None:
            self.metrics.connections.set(len(self.connections))

    def connection_closed(self, connection: Connection) -> None:
        self.connections.discard(connection)
        self.share.connection_closed(connection)
        if self.gateway is not None:
            self.gateway.connection_closed(connection)
        if self.metrics is not None:
            self.metrics.connections.set(len(self.connections))

    def pipeline_of(self, connection: Connection, frame: bytes) -> str | None:
        if is_pipelined_commit(frame):
            return COMMITS
        return self.gateway.pipeline_of(connection, frame) if self.gateway is not None else None

    def dispatch(self, connection: Connection, frame: bytes) -> None:
        session = connection.sasl
        if session is not None and session.raw_tokens and self.sasl is not None:
            self.sasl.raw_token(connection, frame)  # after SaslHandshake v0: bare SASL tokens
            return
        if len(frame) > self.limits.control_request_max_bytes and _api_key(frame) not in PAYLOAD_APIS:
            connection.abort(f"request of {len(frame)} bytes is over control.request.max.bytes")
            return
        if self.gateway is not None and self.gateway.forward(connection, frame):
            return
        try:
            request = decode_request(frame)
        except UnsupportedApi as exc:
            self._unsupported(connection, exc)
            return
        except DecodeError as exc:
            connection.abort(f"malformed request: {exc}")
            return
        if session is not None and (self.sasl is None or not self.sasl.admit(connection, session, request)):
            connection.abort("SASL is not configured")  # no-op when admit() already closed it
            return
        reply = connection.start(request.api_key, request.api_version, request.correlation_id)
        clock = self.runtime.clock
        ctx = RequestContext(
            now_ms=clock.now_ms(),
            wall_ms=clock.wall_ms(),
            api_version=request.api_version,
            client_id=request.client_id or "",
            client_host=connection.client_host,
            reply_to=reply,
            advertised=connection.advertised,
            principal=connection.principal,
        )
        screening = screen_request(
            self.limits,
            request.api_key,
            request.api_version,
            ctx.client_id,
            request.body,
            frame_bytes=len(frame),
        )
        if screening is not None:
            if screening.close is not None:
                connection.abort(screening.close)
                return
            if screening.answer is not None:
                reply.send(screening.answer)
                return
            if screening.extra is not None:
                attribute, items = screening.extra
                amend(ctx, lambda response: getattr(response, attribute).extend(items))
        if self.reading_unsharded_state:
            if request.api_key in self.routes.group_apis:
                response = load_in_progress_response(request.api_key, request.api_version, request.body)
                reply.send(response)
                return
            if request.api_key not in _NEEDS_NO_CATALOG:
                self._deferred.append((connection, reply, ctx, request))
                return
        if request.api_key == _DELETE_TOPICS and self.cluster.shard_map.loading:
            self._after_groups.append((connection, reply, ctx, request))
            return
        if request.api_key == _LIST_CONFIG_RESOURCES and self._lists_groups_while_loading(request):
            self._after_groups.append((connection, reply, ctx, request))
            return
        if request.api_key in GROUP_CONFIG_APIS:
            awaited = self._group_config_shards_loading(request)
            if awaited:
                self._after_shards.append((awaited, connection, reply, ctx, request))
                return
        if self.topic_lookup is None:  # a single node, no gateway: every topic is known here
            self._handle(connection, reply, ctx, request)
        else:
            self._handle_or_look_up(connection, reply, ctx, request)

    def _handle_or_look_up(
        self, connection: Connection, reply: PendingReply, ctx: RequestContext, request: Request
    ) -> None:
        lookup = self.topic_lookup
        unknown = lookup.unknown_names(ctx, request.api_key, request.body) if lookup is not None else []
        if lookup is not None and unknown:
            lookup.then(unknown, lambda: self._handle_late(connection, reply, ctx, request))
            return
        self._handle(connection, reply, ctx, request)

    def unsharded_state_read(self) -> None:
        """The unsharded state is read: serve what waited for the topic catalog, in arrival order."""
        self.reading_unsharded_state = False
        deferred, self._deferred = self._deferred, []
        self._serve_deferred(deferred)

    def groups_loaded(self) -> None:
        """A single node's last shard is loaded: serve the DeleteTopics that waited for it."""
        deferred, self._after_groups = self._after_groups, []
        self._serve_deferred(deferred)
        waiting, self._when_groups_loaded = self._when_groups_loaded, []
        for callback in waiting:
            callback()

    def when_groups_loaded(self, callback: Callable[[], None]) -> None:
        """Calls back once a single node's last shard is loaded (the gateway's split listings)."""
        self._when_groups_loaded.append(callback)

    def shard_loaded(self) -> None:
        """A single node loaded a shard: serve the GROUP config requests whose shards are in."""
        loading = self.cluster.shard_map.loading
        ready = [entry for entry in self._after_shards if not entry[0] & loading]
        if ready:
            self._after_shards = [entry for entry in self._after_shards if entry[0] & loading]
            self._serve_deferred([entry[1:] for entry in ready])

    def _group_config_shards_loading(self, request: Request) -> set[int]:
        """A single node's shards still loading that a GROUP config request names (they are
        wanted next); empty for every other request."""
        shard_map = self.cluster.shard_map
        if request.api_key not in GROUP_CONFIG_APIS or not shard_map.loading or not shard_map.single_node:
            return set()
        names = [
            r.resource_name for r in request.body.resources if r.resource_type == GROUP and r.resource_name
        ]
        for name in names:
            shard_map.want(name)
        return {shard_map.shard_of(name) for name in names} & shard_map.loading

    def _lists_groups_while_loading(self, request: Request) -> bool:
        """A ListConfigResources asking for GROUP resources while a single node loads shards:
        it waits for every group's configs (docs/group-configs.md#listing-config-resources)."""
        shard_map = self.cluster.shard_map
        if not shard_map.loading or not shard_map.single_node:
            return False
        asked = asked_types(request.api_version, request.body)
        return asked is not None and GROUP in asked

    def _serve_deferred(
        self, deferred: list[tuple[Connection, PendingReply, RequestContext, Request]]
    ) -> None:
        for connection, reply, ctx, request in deferred:
            if not connection.closed:
                ctx.now_ms, ctx.wall_ms = self.runtime.clock.now_ms(), self.runtime.clock.wall_ms()
                self._handle_or_look_up(connection, reply, ctx, request)

    def _handle_late(
        self, connection: Connection, reply: PendingReply, ctx: RequestContext, request: Request
    ) -> None:
        if not connection.closed:
            ctx.now_ms, ctx.wall_ms = self.runtime.clock.now_ms(), self.runtime.clock.wall_ms()
            self._handle(connection, reply, ctx, request)

    def _handle(
        self, connection: Connection, reply: PendingReply, ctx: RequestContext, request: Request
    ) -> None:
        route = self.routes.get(request.api_key)
        if route is None:  # a served version without a route: a bug, answered like one
            self._failed(connection, reply, request, None)
            return
        try:
            result = route.handle(ctx, request.body)
        except Exception as exc:
            self._failed(connection, reply, request, exc)
            return
        if request.api_key == PIPELINED_API:
            # The core has validated it: the connection's next OffsetCommit may follow it in
            # (docs/performance.md#pipelined-offsetcommits).
            reply.handled(connection.commit_pipeline)
        if request.api_key == _PRODUCE and not result.replies and not result.records:
            reply.finish_without_response()  # acks=0
            return
        self.runtime.apply(result)
        if request.api_key in LONG_POLL_APIS and not result.records:
            # Unanswered without a write pending: parked until the rebalance (JoinGroup,
            # SyncGroup) or the max wait (Fetch); latency metrics keep that wait apart.
            reply.park()

    def _failed(
        self, connection: Connection, reply: PendingReply, request: Request, exc: Exception | None
    ) -> None:
        """Answer UNKNOWN_SERVER_ERROR for this request only; the connection goes on."""
        log.error(
            "error handling %s v%d (client id %r, correlation id %d) from %s",
            _api_name(request.api_key), request.api_version, request.client_id, request.correlation_id,
            connection.peer, exc_info=exc,
        )  # fmt: skip
        if reply.answered:
            return  # the handler answered before it failed
        body = request.body
        if isinstance(body, ProduceRequest) and body.acks == 0:
            # Kafka never answers acks=0; it closes the connection so the producer notices.
            connection.abort("internal error on a Produce with acks=0")
            return
        try:
            response = error_response(
                request.api_key, request.api_version, body, ErrorCode.UNKNOWN_SERVER_ERROR
            )
        except Exception:
            log.exception("no error response for %s v%d", _api_name(request.api_key), request.api_version)
            connection.abort("internal error")
            return
        reply.send(response)

    def _sasl_handler(
        self, ctx: RequestContext, req: SaslHandshakeRequest | SaslAuthenticateRequest
    ) -> Result:
        reply = ctx.reply_to
        assert isinstance(reply, PendingReply)
        request = Request(reply.api_key, reply.api_version, reply.correlation_id, ctx.client_id, req)
        self._sasl(reply.connection, reply, request)
        return Result()

    def _sasl(self, connection: Connection, reply: PendingReply, request: Request) -> None:
        if self.sasl is not None:
            self.sasl.handle(connection, reply, request)
        else:  # no SASL listener at all (Kafka's KafkaApis)
            message = "this listener does not use SASL"  # SaslHandshake has no field for it
            body = error_response(
                request.api_key, request.api_version, request.body, ErrorCode.ILLEGAL_SASL_STATE, message
            )
            reply.send(body)

    def _unsupported(self, connection: Connection, exc: UnsupportedApi) -> None:
        if exc.api_key == ApiKey.API_VERSIONS:
            # KIP-511: answer an unknown ApiVersions version with a v0 response carrying the
            # error and our supported ranges, so the client can retry with a version we know.
            body = self.cluster.api_versions_response(ErrorCode.UNSUPPORTED_VERSION)
            connection.send_raw(encode_response(ApiKey.API_VERSIONS, 0, exc.correlation_id, body))
            return
        what = f"{_api_name(exc.api_key)} (key {exc.api_key}) version {exc.api_version}"
        self.unsupported_log.refused(connection.peer, connection.client_host, exc.client_id, what)
        connection.abort(what, log_reason=False)

    # ---- handlers that need the runtime --------------------------------------------------
    def fetch(self, ctx: RequestContext, req: FetchRequest) -> Result:
        response = self.cluster.fetch_response(ctx.api_version, req)
        errored = response.error_code != 0 or any(
            p.error_code != 0 for topic in response.responses for p in topic.partitions
        )
        if errored or req.max_wait_ms <= 0:
            return reply_now(ctx, response)
        # Every topic is an empty log: wait max_wait_ms for data that never comes, as a broker does.
        reply_to = ctx.reply_to
        self.runtime.call_later(min(req.max_wait_ms, 30000), lambda: reply_to.send(response))
        return Result()

    def delete_topics(self, ctx: RequestContext, req: DeleteTopicsRequest) -> Result:
        result, deleted = self.cluster.delete_topics(ctx, req)
        if deleted:
            self.runtime.apply(self.runtime.coordinator.delete_topics(deleted, ctx.now_ms, ctx.wall_ms))
        return result


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"


def _api_key(frame: bytes) -> int:
    return int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
