"""From a decoded request to the core and back: the API layer.

Per request: decode (malformed → close the connection, as Kafka does), build the context, run
the handler (pure core or cluster view) and hand its Result to the runtime. The API layer also
does what Kafka's KafkaApis does before the coordinator: partitions of unknown topics are
answered UNKNOWN_TOPIC_OR_PARTITION here and never reach the group core.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from coordinator.api.authz import security_disabled
from coordinator.api.limits import PAYLOAD_APIS, RequestLimits
from coordinator.api.loading import GROUP_APIS, load_in_progress_response
from coordinator.api.validation import screen_request
from coordinator.core.cluster import Cluster
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.server.authn import SASL_APIS, SaslServer
from coordinator.server.connection import Connection, PendingReply
from coordinator.server.metrics import Metrics
from coordinator.server.runtime import Runtime
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeResponse
from protocol.primitives import DecodeError
from protocol.wire import Request, UnsupportedApi, decode_request, encode_response

log = logging.getLogger(__name__)

Handler = Callable[[RequestContext, Any], Result]

# Answered while loading: they do not depend on stored state.
_NEEDS_NO_CATALOG = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER, *SASL_APIS}
)


class Dispatcher:
    def __init__(self, runtime: Runtime, cluster: Cluster, metrics: Metrics | None = None) -> None:
        self.runtime = runtime
        self.cluster = cluster
        self.metrics = metrics
        self.connections: set[Connection] = set()
        self.sasl: SaslServer | None = None  # set when a listener uses SASL
        self.loading = True
        self.limits = RequestLimits()
        self._deferred: list[tuple[Connection, PendingReply, RequestContext, Request]] = []
        coordinator = runtime.coordinator
        self.handlers: dict[int, Handler] = {
            ApiKey.API_VERSIONS: cluster.api_versions,
            ApiKey.METADATA: cluster.metadata,
            ApiKey.DESCRIBE_CLUSTER: cluster.describe_cluster,
            ApiKey.FIND_COORDINATOR: cluster.find_coordinator,
            ApiKey.CREATE_TOPICS: cluster.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: cluster.create_partitions,
            ApiKey.LIST_OFFSETS: cluster.list_offsets,
            ApiKey.PRODUCE: cluster.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.JOIN_GROUP: coordinator.join_group,
            ApiKey.SYNC_GROUP: coordinator.sync_group,
            ApiKey.HEARTBEAT: coordinator.heartbeat,
            ApiKey.LEAVE_GROUP: coordinator.leave_group,
            ApiKey.OFFSET_COMMIT: self.commit_offsets,
            ApiKey.OFFSET_FETCH: coordinator.fetch_offsets,
            ApiKey.LIST_GROUPS: coordinator.list_groups,
            ApiKey.DESCRIBE_GROUPS: coordinator.describe_groups,
            ApiKey.DELETE_GROUPS: coordinator.delete_groups,
            ApiKey.OFFSET_DELETE: self.delete_offsets,
            ApiKey.CONSUMER_GROUP_HEARTBEAT: coordinator.consumer_group_heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: coordinator.consumer_group_describe,
            # Replaced by coordinator.api.authz.AclLayer when authorizer.enabled is true.
            ApiKey.DESCRIBE_ACLS: security_disabled(ApiKey.DESCRIBE_ACLS),
            ApiKey.CREATE_ACLS: security_disabled(ApiKey.CREATE_ACLS),
            ApiKey.DELETE_ACLS: security_disabled(ApiKey.DELETE_ACLS),
            ApiKey.SASL_HANDSHAKE: self._sasl_handler,
            ApiKey.SASL_AUTHENTICATE: self._sasl_handler,
        }

    # ---- connections ---------------------------------------------------------------------
    def connection_opened(self, connection: Connection) -> None:
        self.connections.add(connection)
        if self.metrics is not None:
            self.metrics.connections.set(len(self.connections))

    def connection_closed(self, connection: Connection) -> None:
        self.connections.discard(connection)
        if self.metrics is not None:
            self.metrics.connections.set(len(self.connections))

    def dispatch(self, connection: Connection, frame: bytes) -> None:
        session = connection.sasl
        if session is not None and session.raw_tokens and self.sasl is not None:
            self.sasl.raw_token(connection, frame)  # after SaslHandshake v0: bare SASL tokens
            return
        if len(frame) > self.limits.control_request_max_bytes and _api_key(frame) not in PAYLOAD_APIS:
            connection.abort(f"request of {len(frame)} bytes is over control.request.max.bytes")
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
            self.limits, request.api_key, request.api_version, ctx.client_id, request.body
        )
        if screening is not None:
            if screening.close is not None:
                connection.abort(screening.close)
                return
            if screening.answer is not None:
                reply.send(screening.answer)
                return
            if screening.extra is not None:
                ctx.reply_to = _Appending(ctx.reply_to, *screening.extra)
        if self.loading:
            if request.api_key in GROUP_APIS:
                response = load_in_progress_response(request.api_key, request.api_version, request.body)
                reply.send(response)
                return
            if request.api_key not in _NEEDS_NO_CATALOG:
                self._deferred.append((connection, reply, ctx, request))
                return
        self._handle(connection, reply, ctx, request)

    def finish_loading(self) -> None:
        """Loading is over: serve what waited for the topic catalog, in arrival order."""
        self.loading = False
        deferred, self._deferred = self._deferred, []
        clock = self.runtime.clock
        for connection, reply, ctx, request in deferred:
            if not connection.closed:
                ctx.now_ms, ctx.wall_ms = clock.now_ms(), clock.wall_ms()
                self._handle(connection, reply, ctx, request)

    def _handle(
        self, connection: Connection, reply: PendingReply, ctx: RequestContext, request: Request
    ) -> None:
        try:
            result = self.handlers[request.api_key](ctx, request.body)
        except Exception:
            log.exception(
                "error handling api %d v%d from %s", request.api_key, request.api_version, connection.peer
            )
            connection.abort("internal error")
            return
        if request.api_key == ApiKey.PRODUCE and not result.replies and not result.records:
            reply.finish_without_response()  # acks=0
            return
        self.runtime.apply(result)

    def _sasl_handler(self, ctx: RequestContext, req: Any) -> Result:
        reply = ctx.reply_to
        assert isinstance(reply, PendingReply)
        request = Request(reply.api_key, reply.api_version, reply.correlation_id, ctx.client_id, req)
        self._sasl(reply.connection, reply, request)
        return Result()

    def _sasl(self, connection: Connection, reply: PendingReply, request: Request) -> None:
        if self.sasl is not None:
            self.sasl.handle(connection, reply, request)
        elif request.api_key == ApiKey.SASL_HANDSHAKE:  # no SASL listener at all (Kafka's KafkaApis)
            reply.send(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]))
        else:
            reply.send(
                SaslAuthenticateResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message="this listener does not use SASL"
                )
            )

    def _unsupported(self, connection: Connection, exc: UnsupportedApi) -> None:
        if exc.api_key == ApiKey.API_VERSIONS:
            # KIP-511: answer an unknown ApiVersions version with a v0 response carrying the
            # error and our supported ranges, so the client can retry with a version we know.
            body = self.cluster.api_versions_response(ErrorCode.UNSUPPORTED_VERSION)
            connection.send_raw(encode_response(ApiKey.API_VERSIONS, 0, exc.correlation_id, body))
            return
        connection.abort(f"unsupported request: api key {exc.api_key} version {exc.api_version}")

    # ---- handlers that need the API layer ------------------------------------------------
    def fetch(self, ctx: RequestContext, req: Any) -> Result:
        response = self.cluster.fetch_response(ctx.api_version, req)
        errored = response.error_code != 0 or any(
            p.error_code != 0 for topic in response.responses for p in topic.partitions
        )
        if errored or req.max_wait_ms <= 0:
            return Result(replies=[(ctx.reply_to, response)])
        # Every topic is an empty log: wait max_wait_ms for data that never comes, as a broker does.
        reply_to = ctx.reply_to
        self.runtime.call_later(min(req.max_wait_ms, 30000), lambda: reply_to.send(response))
        return Result()

    def delete_topics(self, ctx: RequestContext, req: Any) -> Result:
        result, deleted = self.cluster.delete_topics(ctx, req)
        if deleted:
            self.runtime.apply(self.runtime.coordinator.delete_topics(deleted, ctx.now_ms, ctx.wall_ms))
        return result

    def commit_offsets(self, ctx: RequestContext, req: OffsetCommitRequest) -> Result:
        known, unknown = self._split_known(req.topics)
        if not unknown:
            return self.runtime.coordinator.commit_offsets(ctx, req)
        failed = [
            OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponsePartition(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    for p in topic.partitions
                ],
            )
            for topic in unknown
        ]
        if not known:
            return Result(replies=[(ctx.reply_to, OffsetCommitResponse(topics=failed))])
        req.topics = known
        ctx.reply_to = _Appending(ctx.reply_to, "topics", failed)
        return self.runtime.coordinator.commit_offsets(ctx, req)

    def delete_offsets(self, ctx: RequestContext, req: OffsetDeleteRequest) -> Result:
        known, unknown = self._split_known(req.topics)
        if not unknown:
            return self.runtime.coordinator.delete_offsets(ctx, req)
        failed = [
            OffsetDeleteResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetDeleteResponsePartition(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    for p in topic.partitions
                ],
            )
            for topic in unknown
        ]
        req.topics = known
        ctx.reply_to = _Appending(ctx.reply_to, "topics", failed, only_without_error=True)
        return self.runtime.coordinator.delete_offsets(ctx, req)

    def _split_known(self, topics: list[Any]) -> tuple[list[Any], list[Any]]:
        """Split request topics into the partitions the catalog knows and the rest."""
        known: list[Any] = []
        unknown: list[Any] = []
        for topic in topics:
            good = [p for p in topic.partitions if self.cluster.has_partition(topic.name, p.partition_index)]
            bad = [
                p for p in topic.partitions if not self.cluster.has_partition(topic.name, p.partition_index)
            ]
            if good:
                known.append(_with_partitions(topic, good))
            if bad:
                unknown.append(_with_partitions(topic, bad))
        return known, unknown


def _api_key(frame: bytes) -> int:
    return int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1


def _with_partitions(topic: Any, partitions: list[Any]) -> Any:
    if isinstance(topic, OffsetCommitRequestTopic):
        return OffsetCommitRequestTopic(topic.name, topic.topic_id, partitions)
    if isinstance(topic, OffsetDeleteRequestTopic):
        return OffsetDeleteRequestTopic(topic.name, partitions)
    raise TypeError(type(topic))


class _Appending:
    """A ReplyTo that adds the API layer's per-partition errors to the core's response."""

    __slots__ = ("attribute", "extra", "inner", "only_without_error")

    def __init__(
        self, inner: Any, attribute: str, extra: list[Any], only_without_error: bool = False
    ) -> None:
        self.inner = inner
        self.attribute = attribute
        self.extra = extra
        self.only_without_error = only_without_error

    def send(self, response: Any) -> None:
        # A top-level error (OffsetDelete) means no topic list at all, as Kafka answers.
        if not (self.only_without_error and response.error_code):
            getattr(response, self.attribute).extend(self.extra)
        self.inner.send(response)
