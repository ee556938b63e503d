"""Gateway mode: ask upstream about a topic before answering as if it did not exist.

The catalog learns topics from the periodic metadata refresh and from the Metadata answers
forwarded to clients. A topic created a moment ago (CreateTopics passes through without
teaching the catalog anything) would otherwise get UNKNOWN_TOPIC_OR_PARTITION on an
OffsetCommit (or TxnOffsetCommit) until the next refresh, where Kafka's coordinator knows it at once. Such a
request waits for one Metadata request naming those topics (requests asking about the same
names share it); then it is handled against what upstream said
(docs/gateway.md#topics-the-catalog-has-not-seen-yet).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

from coordinator.gateway.upstream import UpstreamError
from coordinator.gateway.upstream_cluster import UpstreamCluster
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

    def unknown_names(self, api_key: int, body: Any) -> list[str]:
        """The topics a request names partitions of that the catalog does not hold."""
        catalog = self.upstream.catalog
        return sorted(
            {
                name
                for name, partition in _partitions_named(body)
                if name and not catalog.has_partition(name, partition)
            }
        )

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
