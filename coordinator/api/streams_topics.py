"""The internal topics of streams groups, created where the topics live
(docs/streams-groups.md#internal-topics).

The streams kind decides which repartition and changelog topics a group's topology still needs
and with how many partitions (``ConfiguredTopology.to_create``); creating them is not the group
core's job -- as in Kafka, where the broker's request handler creates them after the
coordinator answers. After each StreamsGroupHeartbeat this layer asks the creator to make the
missing ones: standalone, in the topic catalog (the same path as CreateTopics); in gateway mode,
with CreateTopics on the upstream cluster. The group stays NOT_READY (status
MISSING_INTERNAL_TOPICS) until the catalog shows them; an upstream refusal is added to that
status's detail, so the application's log says why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from coordinator.api.routes import Handler, Routes
from coordinator.core.cluster import Cluster
from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.result import Result
from coordinator.core.streams.manager import StreamsGroupManager
from coordinator.core.streams.topology import MISSING_INTERNAL_TOPICS, InternalTopic
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.streams_group_heartbeat import (
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)

CREATE_TOPICS_VERSION = 7


def create_topics_request(topics: Sequence[InternalTopic]) -> CreateTopicsRequest:
    """Kafka's InternalTopicManager.toCreatableTopic: a replication factor of 0 means the default."""
    return CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=t.name,
                num_partitions=t.partitions,
                replication_factor=t.replication_factor or -1,
                configs=[CreatableTopicConfig(k, v) for k, v in t.configs],
            )
            for t in topics
        ]
    )


class TopicCreator(Protocol):
    def create(self, ctx: RequestContext, topics: Sequence[InternalTopic]) -> Result | None:
        """Start creating ``topics``: a Result to apply first (standalone), or None."""
        ...

    def failure(self, names: Sequence[str]) -> str | None:
        """Why creating some of ``names`` failed last time (None: it did not)."""
        ...


class Failures:
    """The last refusal per topic name, and which topics are being created."""

    def __init__(self) -> None:
        self.by_topic: dict[str, str] = {}
        self.in_flight: set[str] = set()

    def observe(self, response: CreateTopicsResponse) -> None:
        for result in response.topics:
            self.in_flight.discard(result.name)
            if result.error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                self.by_topic.pop(result.name, None)
            else:
                name = ErrorCode(result.error_code).name
                self.by_topic[result.name] = f"{result.name}: {name} {result.error_message or ''}".strip()

    def failure(self, names: Sequence[str]) -> str | None:
        found = [self.by_topic[n] for n in names if n in self.by_topic]
        return "; ".join(found) if found else None


class _Capture:
    """The ReplyTo of a CreateTopics made on a group's behalf: its answer is only observed."""

    def __init__(self, observe: Callable[[CreateTopicsResponse], None]) -> None:
        self.observe = observe

    def send(self, response: Any) -> None:
        self.observe(response)


class CatalogTopicCreator(Failures):
    """Standalone: the topics are created in the topic catalog, through CreateTopics' own path."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.cluster = cluster

    def create(self, ctx: RequestContext, topics: Sequence[InternalTopic]) -> Result | None:
        todo = [t for t in topics if t.name not in self.in_flight and t.name not in self.cluster.topics]
        if not todo:
            return None
        self.in_flight.update(t.name for t in todo)
        own = dataclasses.replace(ctx, api_version=CREATE_TOPICS_VERSION, reply_to=_Capture(self.observe))
        return self.cluster.create_topics(own, create_topics_request(todo))


def _then(first: Result, second: Result) -> Result:
    """``first`` (its replies included), then ``second``, whatever became of ``first``'s write."""
    if not first.records:
        for reply_to, response in first.replies:
            reply_to.send(response)
        return second

    def durable(now_ms: int) -> Result:
        follow_up = first.on_durable(now_ms) if first.on_durable is not None else Result()
        for reply_to, response in follow_up.replies:
            reply_to.send(response)
        return second

    def failed(now_ms: int, code: int) -> Result:
        if first.on_failed is not None:
            for reply_to, response in first.on_failed(now_ms, code).replies:
                reply_to.send(response)
        return second

    return Result(records=first.records, on_durable=durable, on_failed=failed)


class InternalTopics:
    """The wrapper in front of StreamsGroupHeartbeat; its ``creator`` is swapped in gateway mode."""

    def __init__(self, coordinator: GroupCoordinator, creator: TopicCreator) -> None:
        self.coordinator = coordinator
        self.creator = creator

    def install(self, routes: Routes) -> None:
        routes.wrap(ApiKey.STREAMS_GROUP_HEARTBEAT, StreamsGroupHeartbeatRequest, self._wrap)

    def _wrap(self, inner: Handler[StreamsGroupHeartbeatRequest]) -> Handler[StreamsGroupHeartbeatRequest]:
        def handle(ctx: RequestContext, req: StreamsGroupHeartbeatRequest) -> Result:
            result = inner(ctx, req)
            group = self.coordinator.kind(StreamsGroupManager).groups.get(req.group_id)
            configured = group.configured if group is not None else None
            if configured is None or not configured.to_create:
                return result
            missing = list(configured.to_create.values())
            failure = self.creator.failure([t.name for t in missing])
            if failure is not None:
                for _, response in result.replies:
                    if isinstance(response, StreamsGroupHeartbeatResponse):
                        for status in response.status or ():
                            if status.status_code == MISSING_INTERNAL_TOPICS:
                                status.status_detail += f" (creating them failed: {failure})"
            created = self.creator.create(ctx, missing)
            return result if created is None else _then(created, result)

        return handle
