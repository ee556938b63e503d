"""Partitions of unknown topics, answered before the group core (what Kafka's KafkaApis does).

OffsetCommit and OffsetDelete name partitions; those the topic catalog does not know are
answered UNKNOWN_TOPIC_OR_PARTITION here and never reach the core, which sees only the rest.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from coordinator.api.amend import amend, reply
from coordinator.api.routes import Handler
from coordinator.core.cluster import Cluster
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
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
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

UNKNOWN = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class _Partition(Protocol):
    @property
    def partition_index(self) -> int: ...


_P = TypeVar("_P", bound=_Partition)


class KnownTopics:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def commit_offsets(self, inner: Handler[OffsetCommitRequest]) -> Handler[OffsetCommitRequest]:
        def handle(ctx: RequestContext, req: OffsetCommitRequest) -> Result:
            known: list[OffsetCommitRequestTopic] = []
            failed: list[OffsetCommitResponseTopic] = []
            for topic in req.topics:
                good, bad = self._split(topic.name, topic.partitions)
                if good:
                    known.append(OffsetCommitRequestTopic(topic.name, topic.topic_id, good))
                if bad:
                    partitions = [OffsetCommitResponsePartition(p.partition_index, UNKNOWN) for p in bad]
                    failed.append(OffsetCommitResponseTopic(name=topic.name, partitions=partitions))
            if not failed:
                return inner(ctx, req)
            if not known:
                return reply(ctx, OffsetCommitResponse(topics=failed))
            req.topics = known

            def add_failed(response: OffsetCommitResponse) -> None:
                response.topics.extend(failed)

            amend(ctx, add_failed)
            return inner(ctx, req)

        return handle

    def delete_offsets(self, inner: Handler[OffsetDeleteRequest]) -> Handler[OffsetDeleteRequest]:
        def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> Result:
            known: list[OffsetDeleteRequestTopic] = []
            failed: list[OffsetDeleteResponseTopic] = []
            for topic in req.topics:
                good, bad = self._split(topic.name, topic.partitions)
                if good:
                    known.append(OffsetDeleteRequestTopic(topic.name, good))
                if bad:
                    partitions = [OffsetDeleteResponsePartition(p.partition_index, UNKNOWN) for p in bad]
                    failed.append(OffsetDeleteResponseTopic(name=topic.name, partitions=partitions))
            if not failed:
                return inner(ctx, req)
            # The group is still checked by the core, even when no known topic is left.
            req.topics = known

            def add_failed(response: OffsetDeleteResponse) -> None:
                # A top-level error (OffsetDelete) means no topic list at all, as Kafka answers.
                if not response.error_code:
                    response.topics.extend(failed)

            amend(ctx, add_failed)
            return inner(ctx, req)

        return handle

    def _split(self, topic: str, partitions: list[_P]) -> tuple[list[_P], list[_P]]:
        """The partitions the catalog knows, and the rest."""
        known = [p for p in partitions if self.cluster.has_partition(topic, p.partition_index)]
        unknown = [p for p in partitions if not self.cluster.has_partition(topic, p.partition_index)]
        return known, unknown
