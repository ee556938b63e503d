"""Partitions of unknown topics, answered before the group core (what Kafka's KafkaApis does).

OffsetCommit, TxnOffsetCommit and OffsetDelete name partitions; those the topic catalog does not know are
answered UNKNOWN_TOPIC_OR_PARTITION here and never reach the core, which sees only the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

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
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

UNKNOWN = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


class _Partition(Protocol):
    @property
    def partition_index(self) -> int: ...


_P = TypeVar("_P", bound=_Partition)
_Commit = TypeVar("_Commit", OffsetCommitRequest, TxnOffsetCommitRequest)


class KnownTopics:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def commit_offsets(self, inner: Handler[OffsetCommitRequest]) -> Handler[OffsetCommitRequest]:
        return self._commit(
            inner,
            OffsetCommitRequestTopic,
            OffsetCommitResponseTopic,
            OffsetCommitResponsePartition,
            OffsetCommitResponse,
        )

    def commit_txn_offsets(self, inner: Handler[TxnOffsetCommitRequest]) -> Handler[TxnOffsetCommitRequest]:
        """Kafka checks a TxnOffsetCommit's partitions as an OffsetCommit's."""
        return self._commit(
            inner,
            TxnOffsetCommitRequestTopic,
            TxnOffsetCommitResponseTopic,
            TxnOffsetCommitResponsePartition,
            TxnOffsetCommitResponse,
        )

    def _commit(
        self,
        inner: Handler[_Commit],
        request_topic: Callable[[str, bytes, list[Any]], Any],
        response_topic: Callable[..., Any],
        response_partition: Callable[[int, int], Any],
        response: Callable[..., Any],
    ) -> Handler[_Commit]:
        def handle(ctx: RequestContext, req: _Commit) -> Result:
            known: list[Any] = []
            failed: list[Any] = []
            for topic in req.topics:
                good, bad = self._split(topic.name, topic.partitions)
                if good:
                    known.append(request_topic(topic.name, topic.topic_id, good) if bad else topic)
                if bad:
                    partitions = [response_partition(p.partition_index, UNKNOWN) for p in bad]
                    failed.append(response_topic(name=topic.name, partitions=partitions))
            if not failed:
                return inner(ctx, req)
            if not known:
                return reply(ctx, response(topics=failed))
            req.topics = known

            def add_failed(answer: Any) -> None:
                answer.topics.extend(failed)

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
        if self.cluster.external is None:
            # The catalog is ours: the topic's partition count is looked up once, not per
            # partition (docs/performance.md#the-1-partition-commit-where-its-cpu-goes).
            count = self.cluster.partitions_of(topic)
            if count is None:
                return [], partitions
            for p in partitions:
                if not 0 <= p.partition_index < count:
                    break
            else:
                return partitions, []  # the usual case: no list built
            known_here = [p for p in partitions if 0 <= p.partition_index < count]
            return known_here, [p for p in partitions if not 0 <= p.partition_index < count]
        has_partition = self.cluster.has_partition
        known: list[_P] = []
        unknown: list[_P] = []
        for p in partitions:
            (known if has_partition(topic, p.partition_index) else unknown).append(p)
        return known, unknown
