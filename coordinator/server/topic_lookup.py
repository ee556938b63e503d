"""Several nodes: look a topic up in the database before answering as if it did not exist.

A node learns the topics created through other nodes at its next ownership poll. A Metadata
request (which may auto-create) or a CreateTopics naming a topic the node does not know yet
would otherwise create it a second time or answer UNKNOWN_TOPIC_OR_PARTITION for a topic that
exists. Such a request waits for one read of those names from the database; the topics found
join the catalog, then the request is handled (docs/multinode.md#what-other-nodes-learn).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

from coordinator.core.cluster import Cluster
from coordinator.core.context import RequestContext
from protocol.apis import ApiKey
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.metadata import MetadataRequest
from storage.base import StoreError
from storage.records import TopicRecord

log = logging.getLogger(__name__)

ReadTopics = Callable[[Collection[str]], Awaitable[list[TopicRecord]]]


class LooksTopicsUp(Protocol):
    """Where a request naming topics the catalog does not hold waits before it is handled:
    the database (several nodes, here) or the upstream cluster (gateway/topic_lookup.py)."""

    def unknown_names(self, ctx: RequestContext, api_key: int, body: Any) -> list[str]: ...

    def then(self, names: list[str], handle: Callable[[], None]) -> None: ...


class TopicLookup:
    def __init__(self, cluster: Cluster, read: ReadTopics) -> None:
        self.cluster = cluster
        self.read = read
        self._tasks: set[asyncio.Task[None]] = set()
        self._failing = False  # logged once per outage

    def unknown_names(self, ctx: RequestContext, api_key: int, body: Any) -> list[str]:
        """The topic names a request names that the local catalog does not hold."""
        names: list[str] = []
        if api_key == ApiKey.METADATA and isinstance(body, MetadataRequest):
            names = [t.name for t in body.topics or () if t.name]
        elif api_key == ApiKey.CREATE_TOPICS and isinstance(body, CreateTopicsRequest):
            names = [t.name for t in body.topics if t.name]
        known = self.cluster.topics
        return sorted({name for name in names if name not in known})

    def then(self, names: list[str], handle: Callable[[], None]) -> None:
        """Read ``names`` from the database, add what is found to the catalog, then ``handle``."""
        task = asyncio.get_running_loop().create_task(self._lookup(names, handle), name="topic-lookup")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _lookup(self, names: list[str], handle: Callable[[], None]) -> None:
        try:
            self.cluster.merge_topics(await self.read(names))
            self._failing = False
        except StoreError as exc:
            # Answered from the local catalog; the stored topic still wins (create if absent)
            # and the next poll adopts it.
            if not self._failing:
                self._failing = True
                log.warning("cannot look topics %s up in the database: %s", names[:5], exc)
        handle()
