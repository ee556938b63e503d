"""Gateway mode: ask upstream about a topic before answering as if it did not exist.

The catalog learns topics from the periodic metadata refresh and from the Metadata answers
forwarded to clients. A topic created a moment ago (CreateTopics passes through without
teaching the catalog anything) would otherwise get UNKNOWN_TOPIC_OR_PARTITION on an
OffsetCommit (or TxnOffsetCommit) until the next refresh, where Kafka's coordinator knows it at once. Such a
request waits for one Metadata request naming those topics (requests asking about the same
names share it); then it is handled against what upstream said
(docs/gateway.md#topics-the-catalog-has-not-seen-yet). With an authorizer, only the topics the
request's own ACL check would let through are asked about: a client without READ on the group or
on a topic cannot make the gateway ask upstream anything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

from coordinator.core.context import RequestContext
from coordinator.gateway.upstream import UpstreamError
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.security.acl import Authorizer, Operation, ResourceType
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from protocol.primitives import DecodeError

log = logging.getLogger(__name__)


class UpstreamTopicLookup:
    def __init__(self, upstream: UpstreamCluster) -> None:
        self.upstream = upstream
        self._asking: dict[str, asyncio.Task[None]] = {}
        self._failing = False  # logged once per outage
        self.authorizer: Authorizer | None = None  # set when ACLs are enforced

    def unknown_names(self, ctx: RequestContext, api_key: int, body: Any) -> list[str]:
        """The topics a request names partitions of that the catalog does not hold (and that the
        client may read, under an authorizer)."""
        catalog = self.upstream.catalog
        unknown = {
            name
            for name, partition in _partitions_named(body)
            if name and not catalog.has_partition(name, partition)
        }
        if unknown and self.authorizer is not None:
            unknown = self._authorized(ctx, body, unknown)
        return sorted(unknown)

    def _authorized(self, ctx: RequestContext, body: Any, names: set[str]) -> set[str]:
        """The names the request's ACL check (api/authz.py) would not refuse: the group first
        (DELETE for OffsetDelete, READ otherwise), then READ on each topic. Checked quietly: the
        check that answers the request logs its own denials."""
        authorizer = self.authorizer
        assert authorizer is not None

        def allowed(operation: int, resource_type: int, name: str) -> bool:
            return authorizer.authorize(
                ctx.principal, ctx.client_host, operation, resource_type, name, log_denied=False
            )

        group_operation = Operation.DELETE if isinstance(body, OffsetDeleteRequest) else Operation.READ
        if not allowed(group_operation, ResourceType.GROUP, body.group_id):
            return set()
        if isinstance(body, TxnOffsetCommitRequest) and not allowed(
            Operation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
        ):
            return set()
        return {name for name in names if allowed(Operation.READ, ResourceType.TOPIC, name)}

    def then(self, names: list[str], handle: Callable[[], None]) -> None:
        """Ask upstream about ``names`` (one question for names already being asked), then
        ``handle``."""
        new = [name for name in names if name not in self._asking]
        if new:
            task = asyncio.get_running_loop().create_task(self._ask(new), name="upstream-topic-lookup")
            for name in new:
                self._asking[name] = task
        waits = {self._asking[name] for name in names}
        answered = asyncio.get_running_loop().create_task(asyncio.wait(waits))
        answered.add_done_callback(lambda _: handle())

    async def _ask(self, names: list[str]) -> None:
        try:
            await self.upstream.describe_topics(names)
            self._failing = False
        except (UpstreamError, DecodeError, TimeoutError) as exc:
            # Answered from the catalog as it stands.
            if not self._failing:
                self._failing = True
                log.warning("cannot ask upstream about topics %s: %s", names[:5], exc)
        finally:
            for name in names:
                del self._asking[name]


def _partitions_named(body: Any) -> Iterator[tuple[str, int]]:
    if isinstance(body, OffsetCommitRequest | TxnOffsetCommitRequest | OffsetDeleteRequest):
        for topic in body.topics:
            for partition in topic.partitions:
                yield topic.name, partition.partition_index
