"""Gateway mode: DescribeShareGroupOffsets answers its lag from the upstream's log ends.

The core answers start offsets and a lag from the log ends it has seen (the high watermarks of
forwarded fetches); as Kafka 4.4 does, the gateway then asks the partitions' log ends (ListOffsets
latest) and answers lag = log end - start offset - records already done (docs/share-groups.md,
"Admin"). When the upstream cannot say, the lag the core answered stands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from coordinator.api.routes import Handler, Routes
from coordinator.core.context import ReplyTo, RequestContext
from coordinator.core.result import Result
from coordinator.core.share.offsets_admin import share_lag
from coordinator.core.share.partition import PersistedShareState
from protocol.apis import ApiKey
from protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)

log = logging.getLogger(__name__)

Partition = tuple[str, int]
EndOffsets = Callable[[list[Partition]], Awaitable[Mapping[Partition, int]]]
States = Callable[[], Mapping[tuple[str, str, int], PersistedShareState]]


class _LagFromUpstream:
    """A ReplyTo that fills in the lag from the upstream's log ends, then answers."""

    __slots__ = ("end_offsets", "inner", "states", "timeout_s", "version")

    def __init__(
        self, inner: ReplyTo, end_offsets: EndOffsets, states: States, version: int, timeout_s: float
    ):
        self.inner = inner
        self.end_offsets = end_offsets
        self.states = states
        self.version = version
        self.timeout_s = timeout_s

    def send(self, response: Any) -> None:
        wanted = sorted(
            {
                (t.topic_name, p.partition_index)
                for g in response.groups
                for t in g.topics
                for p in t.partitions
                if p.error_code == 0 and p.start_offset >= 0
            }
        )
        if self.version < 1 or not wanted:  # v0 carries no lag
            self.inner.send(response)
            return
        asyncio.get_running_loop().create_task(self._answer(response, wanted))

    async def _answer(self, response: DescribeShareGroupOffsetsResponse, wanted: list[Partition]) -> None:
        try:
            ends = await asyncio.wait_for(self.end_offsets(wanted), self.timeout_s)
        except Exception as exc:  # the lag the core answered stands
            log.debug("share lag: log ends unavailable: %r", exc)
            ends = {}
        states = self.states()
        for group in response.groups:
            for topic in group.topics:
                for p in topic.partitions:
                    state = states.get((group.group_id, topic.topic_name, p.partition_index))
                    end = ends.get((topic.topic_name, p.partition_index))
                    if state is not None and end is not None and p.error_code == 0:
                        p.lag = share_lag(state, end)
        self.inner.send(response)


def serve_share_lag(routes: Routes, end_offsets: EndOffsets, states: States, timeout_s: float) -> None:
    def wrap(inner: Handler[DescribeShareGroupOffsetsRequest]) -> Handler[DescribeShareGroupOffsetsRequest]:
        def handle(ctx: RequestContext, req: DescribeShareGroupOffsetsRequest) -> Result:
            ctx.reply_to = _LagFromUpstream(ctx.reply_to, end_offsets, states, ctx.api_version, timeout_s)
            return inner(ctx, req)

        return handle

    routes.wrap(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, DescribeShareGroupOffsetsRequest, wrap)
