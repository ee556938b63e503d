"""OffsetCommit and OffsetFetch v10 (and TxnOffsetCommit v6) name topics by id (KIP-848): ids are resolved here.

The ids are looked up in the topic catalog (gateway mode: upstream metadata); a resolved topic
goes on by name, so every later layer and the group core see names only, and the response names
topics by id again. An id no topic has gets UNKNOWN_TOPIC_ID for each of its partitions, as
Kafka 4.4 answers (OffsetCommit lists those topics first, OffsetFetch last). OffsetFetch of all
of a group's offsets leaves out topics the catalog no longer knows: they have no id to name
them by. Installed in front of every other layer (the ACL checks need the names);
docs/protocol.md#kafka-44s-group-api-versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from coordinator.api.amend import amend, reply
from coordinator.api.routes import Handler, Routes
from coordinator.core.cluster import Cluster
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from storage.records import TopicRecord

FIRST_VERSION = 10
FIRST_TXN_VERSION = 6  # TxnOffsetCommit
UNKNOWN_TOPIC_ID = int(ErrorCode.UNKNOWN_TOPIC_ID)


@runtime_checkable
class TopicCatalog(Protocol):
    @property
    def topics(self) -> Mapping[str, TopicRecord]: ...

    def topic_by_id(self, topic_id: bytes) -> TopicRecord | None: ...


class TopicIds:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def install(self, routes: Routes) -> None:
        routes.wrap(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, self._commit)
        routes.wrap(ApiKey.OFFSET_FETCH, OffsetFetchRequest, self._fetch)
        routes.wrap(ApiKey.TXN_OFFSET_COMMIT, TxnOffsetCommitRequest, self._txn_commit)

    def _catalog(self) -> TopicCatalog:
        external = self.cluster.external
        if isinstance(external, TopicCatalog):
            return external
        return self.cluster

    def _named(self, topic_id: bytes) -> str | None:
        record = self._catalog().topic_by_id(topic_id)
        return record.name if record is not None else None

    def _id_of(self, name: str) -> bytes | None:
        record = self._catalog().topics.get(name)
        return record.topic_id if record is not None else None

    # ---- OffsetCommit ---------------------------------------------------------------------
    def _commit(self, inner: Handler[OffsetCommitRequest]) -> Handler[OffsetCommitRequest]:
        def handle(ctx: RequestContext, req: OffsetCommitRequest) -> Result:
            if ctx.api_version < FIRST_VERSION:
                return inner(ctx, req)
            known: list[OffsetCommitRequestTopic] = []
            unknown: list[OffsetCommitResponseTopic] = []
            ids: dict[str, bytes] = {}
            for topic in req.topics:
                name = self._named(topic.topic_id)
                if name is None:
                    partitions = [
                        OffsetCommitResponsePartition(p.partition_index, UNKNOWN_TOPIC_ID)
                        for p in topic.partitions
                    ]
                    unknown.append(OffsetCommitResponseTopic(topic_id=topic.topic_id, partitions=partitions))
                    continue
                topic.name = name
                ids[name] = topic.topic_id
                known.append(topic)
            if not known and unknown:
                return reply(ctx, OffsetCommitResponse(topics=unknown))

            def by_id(response: OffsetCommitResponse) -> None:
                for topic in response.topics:
                    topic.topic_id = ids.get(topic.name) or self._id_of(topic.name) or topic.topic_id
                response.topics[:0] = unknown

            req.topics = known
            amend(ctx, by_id)
            return inner(ctx, req)

        return handle

    # ---- TxnOffsetCommit v6 (as OffsetCommit v10) -------------------------------------------
    def _txn_commit(self, inner: Handler[TxnOffsetCommitRequest]) -> Handler[TxnOffsetCommitRequest]:
        def handle(ctx: RequestContext, req: TxnOffsetCommitRequest) -> Result:
            if ctx.api_version < FIRST_TXN_VERSION:
                return inner(ctx, req)
            known: list[TxnOffsetCommitRequestTopic] = []
            unknown: list[TxnOffsetCommitResponseTopic] = []
            ids: dict[str, bytes] = {}
            for topic in req.topics:
                name = self._named(topic.topic_id)
                if name is None:
                    partitions = [
                        TxnOffsetCommitResponsePartition(p.partition_index, UNKNOWN_TOPIC_ID)
                        for p in topic.partitions
                    ]
                    unknown.append(
                        TxnOffsetCommitResponseTopic(topic_id=topic.topic_id, partitions=partitions)
                    )
                    continue
                topic.name = name
                ids[name] = topic.topic_id
                known.append(topic)
            if not known and unknown:
                return reply(ctx, TxnOffsetCommitResponse(topics=unknown))

            def by_id(response: TxnOffsetCommitResponse) -> None:
                for topic in response.topics:
                    topic.topic_id = ids.get(topic.name) or self._id_of(topic.name) or topic.topic_id
                response.topics[:0] = unknown

            req.topics = known
            amend(ctx, by_id)
            return inner(ctx, req)

        return handle

    # ---- OffsetFetch ----------------------------------------------------------------------
    def _fetch(self, inner: Handler[OffsetFetchRequest]) -> Handler[OffsetFetchRequest]:
        def handle(ctx: RequestContext, req: OffsetFetchRequest) -> Result:
            if ctx.api_version < FIRST_VERSION:
                return inner(ctx, req)
            unknown: dict[str, list[OffsetFetchResponseTopics]] = {}
            ids: dict[str, bytes] = {}
            for group in req.groups:
                if group.topics is None:
                    continue
                known: list[OffsetFetchRequestTopics] = []
                for topic in group.topics:
                    name = self._named(topic.topic_id)
                    if name is None:
                        unknown.setdefault(group.group_id, []).append(_unknown_fetch(topic))
                        continue
                    topic.name = name
                    ids[name] = topic.topic_id
                    known.append(topic)
                group.topics = known

            def by_id(response: OffsetFetchResponse) -> None:
                for group in response.groups:
                    named: list[OffsetFetchResponseTopics] = []
                    for topic in group.topics:
                        topic_id = ids.get(topic.name) or self._id_of(topic.name)
                        if topic_id is not None:
                            topic.topic_id = topic_id
                            named.append(topic)
                    group.topics = named
                    if group.error_code == ErrorCode.NONE:
                        group.topics.extend(unknown.get(group.group_id, ()))

            amend(ctx, by_id)
            return inner(ctx, req)

        return handle


def _unknown_fetch(topic: OffsetFetchRequestTopics) -> OffsetFetchResponseTopics:
    partitions = [
        OffsetFetchResponsePartitions(
            partition_index=p, committed_offset=-1, metadata="", error_code=UNKNOWN_TOPIC_ID
        )
        for p in topic.partition_indexes
    ]
    return OffsetFetchResponseTopics(topic_id=topic.topic_id, partitions=partitions)
