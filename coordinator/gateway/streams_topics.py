"""Gateway mode: streams groups' internal topics are created on the upstream cluster
(docs/streams-groups.md#internal-topics)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from coordinator.api.streams_topics import CREATE_TOPICS_VERSION, Failures, create_topics_request
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.core.streams.topology import InternalTopic
from coordinator.gateway.upstream import UpstreamError
from coordinator.gateway.upstream_cluster import UpstreamCluster
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopicResult, CreateTopicsResponse

log = logging.getLogger(__name__)


class UpstreamTopicCreator(Failures):
    """CreateTopics to any upstream broker (Kafka forwards it to its controller); once answered,
    the catalog is refreshed so that the next heartbeat sees the topics."""

    def __init__(self, upstream: UpstreamCluster) -> None:
        super().__init__()
        self.upstream = upstream
        self._tasks: set[asyncio.Task[None]] = set()

    def create(self, ctx: RequestContext, topics: Sequence[InternalTopic]) -> Result | None:
        todo = [t for t in topics if t.name not in self.in_flight]
        if todo:
            self.in_flight.update(t.name for t in todo)
            task = asyncio.get_running_loop().create_task(self._create(todo))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return None

    async def _create(self, topics: Sequence[InternalTopic]) -> None:
        try:
            connection = await self.upstream.connection_to(None)
            version = min(self.upstream.version_for(ApiKey.CREATE_TOPICS), CREATE_TOPICS_VERSION)
            response = await connection.request(
                ApiKey.CREATE_TOPICS, version, create_topics_request(topics), self.upstream.timeout_s
            )
        except (UpstreamError, OSError, TimeoutError) as exc:
            log.warning("creating internal topics %s upstream failed: %s", [t.name for t in topics], exc)
            response = CreateTopicsResponse(
                topics=[
                    CreatableTopicResult(
                        name=t.name, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(exc)
                    )
                    for t in topics
                ]
            )
        self.observe(response)
        for result in response.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                log.warning(
                    "upstream refused internal topic %s: %s %s",
                    result.name,
                    ErrorCode(result.error_code).name,
                    result.error_message or "",
                )
        self.upstream.refresh_soon()
