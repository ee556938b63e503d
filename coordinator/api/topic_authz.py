"""Authorization of the topic APIs, as Kafka's KafkaApis does it (installed with the authorizer).

* CreateTopics: CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED per topic.
* DeleteTopics: DELETE on the topic (named, or resolved from its id), else
  TOPIC_AUTHORIZATION_FAILED. Deleting a topic removes the groups' committed offsets of it, as
  Kafka's coordinator does (``onPartitionsDeleted``), so this check is what protects them.
* CreatePartitions: ALTER on the topic, else TOPIC_AUTHORIZATION_FAILED.
* Metadata: DESCRIBE on each topic. A topic named explicitly without it, or one that would be
  auto-created without CREATE on the cluster or the topic, is answered TOPIC_AUTHORIZATION_FAILED;
  an all-topics request leaves out the topics the principal may not describe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordinator.api.amend import amend
from coordinator.api.routes import Routes
from coordinator.core.cluster import ZERO_UUID, Cluster
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.security.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from protocol.messages.create_topics import CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.delete_topics import DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponseTopic

Handler = Callable[[RequestContext, Any], Result]

TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
_DENIED_MESSAGE = "Authorization failed."


class TopicAcls:
    def __init__(self, authorizer: Authorizer, cluster: Cluster) -> None:
        self.authorizer = authorizer
        self.cluster = cluster

    def install(self, routes: Routes) -> None:
        routes.wrap(ApiKey.CREATE_TOPICS, CreateTopicsRequest, self._create_topics)
        routes.wrap(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, self._delete_topics)
        routes.wrap(ApiKey.CREATE_PARTITIONS, CreatePartitionsRequest, self._create_partitions)
        routes.wrap(ApiKey.METADATA, MetadataRequest, self._metadata)

    # ---- checks ------------------------------------------------------------------------------
    def _topic(self, ctx: RequestContext, operation: int, name: str, *, log_denied: bool = True) -> bool:
        return self.authorizer.authorize(
            ctx.principal, ctx.client_host, operation, ResourceType.TOPIC, name, log_denied=log_denied
        )

    def _may_create(self, ctx: RequestContext, name: str) -> bool:
        # CLUSTER CREATE is tried first and quietly: only the topic's own denial is logged.
        cluster = self.authorizer.authorize(
            ctx.principal,
            ctx.client_host,
            Operation.CREATE,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
            log_denied=False,
        )
        return cluster or self._topic(ctx, Operation.CREATE, name)

    # ---- handlers ----------------------------------------------------------------------------
    def _create_topics(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            may = [self._may_create(ctx, t.name) for t in req.topics]  # one check (and log line) each
            allowed = [t for t, ok in zip(req.topics, may, strict=True) if ok]
            denied = [
                CreatableTopicResult(
                    name=t.name, error_code=TOPIC_DENIED, error_message=_DENIED_MESSAGE, configs=None
                )
                for t, ok in zip(req.topics, may, strict=True)
                if not ok
            ]
            return _partly(ctx, req, inner, "topics", allowed, "topics", denied, CreateTopicsResponse)

        return handle

    def _create_partitions(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            may = [self._topic(ctx, Operation.ALTER, t.name) for t in req.topics]
            allowed = [t for t, ok in zip(req.topics, may, strict=True) if ok]
            denied = [
                CreatePartitionsTopicResult(
                    name=t.name, error_code=TOPIC_DENIED, error_message=_DENIED_MESSAGE
                )
                for t, ok in zip(req.topics, may, strict=True)
                if not ok
            ]
            return _partly(ctx, req, inner, "topics", allowed, "results", denied, CreatePartitionsResponse)

        return handle

    def _delete_topics(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            if ctx.api_version >= 6:
                may = [self._may_delete(ctx, t.name, t.topic_id) for t in req.topics]
                allowed = [t for t, ok in zip(req.topics, may, strict=True) if ok]
                denied = [
                    DeletableTopicResult(
                        name=t.name,
                        topic_id=t.topic_id,
                        error_code=TOPIC_DENIED,
                        error_message=_DENIED_MESSAGE,
                    )
                    for t, ok in zip(req.topics, may, strict=True)
                    if not ok
                ]
                return _partly(ctx, req, inner, "topics", allowed, "responses", denied, DeleteTopicsResponse)
            may = [self._may_delete(ctx, n, ZERO_UUID) for n in req.topic_names]
            names = [n for n, ok in zip(req.topic_names, may, strict=True) if ok]
            refused = [
                DeletableTopicResult(name=n, error_code=TOPIC_DENIED, error_message=_DENIED_MESSAGE)
                for n, ok in zip(req.topic_names, may, strict=True)
                if not ok
            ]
            return _partly(ctx, req, inner, "topic_names", names, "responses", refused, DeleteTopicsResponse)

        return handle

    def _may_delete(self, ctx: RequestContext, name: str | None, topic_id: bytes) -> bool:
        if name is None:
            record = self.cluster.topic_by_id(topic_id)
            if record is None:
                return True  # unknown id: the handler answers UNKNOWN_TOPIC_ID
            name = record.name
        return self._topic(ctx, Operation.DELETE, name)

    def _metadata(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            requested = req.topics
            if requested is None or (ctx.api_version == 0 and not requested):

                def keep_described(response: Any) -> None:
                    response.topics = [
                        t
                        for t in response.topics
                        if t.name is None or self._topic(ctx, Operation.DESCRIBE, t.name, log_denied=False)
                    ]

                amend(ctx, keep_described)
                return inner(ctx, req)
            allowed = []
            denied = []
            for topic in requested:
                name = topic.name
                if name is None:
                    record = self.cluster.topic_by_id(topic.topic_id)
                    name = record.name if record is not None else None
                if name is None or self._metadata_allowed(ctx, req, name):
                    allowed.append(topic)
                else:
                    denied.append(MetadataResponseTopic(error_code=TOPIC_DENIED, name=topic.name))
            if not denied:
                return inner(ctx, req)
            if not allowed and ctx.api_version == 0:
                # An empty v0 list means "every topic": answer the refusals alone.
                req.topics = []
                amend(ctx, lambda response: setattr(response, "topics", denied))
                return inner(ctx, req)
            req.topics = allowed
            amend(ctx, lambda response: response.topics.extend(denied))
            return inner(ctx, req)

        return handle

    def _metadata_allowed(self, ctx: RequestContext, req: Any, name: str) -> bool:
        if not self._topic(ctx, Operation.DESCRIBE, name):
            return False
        would_create = self.cluster.auto_create_topics and (
            req.allow_auto_topic_creation or ctx.api_version < 4
        )
        if would_create and self.cluster.partitions_of(name) is None:
            return self._may_create(ctx, name)
        return True


def _partly(
    ctx: RequestContext,
    req: Any,
    inner: Handler,
    request_field: str,
    allowed: list[Any],
    response_field: str,
    denied: list[Any],
    response_type: Callable[..., Any],
) -> Result:
    """Hand the allowed items to ``inner`` and add the refusals to its response."""
    if not denied:
        return inner(ctx, req)
    if not allowed:
        return Result(replies=[(ctx.reply_to, response_type(**{response_field: denied}))])
    setattr(req, request_field, allowed)
    amend(ctx, lambda response: getattr(response, response_field).extend(denied))
    return inner(ctx, req)
