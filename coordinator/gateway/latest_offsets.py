"""The high watermarks the gateway reads from forwarded Fetch answers, and what it corrects with
them: a ListOffsets(latest) answer that lists less than a fetched high watermark is raised to it,
after a probe where the known one is stale (high_watermarks.py, docs/streams-groups.md).
"""

from __future__ import annotations

from typing import Final

from coordinator.gateway.forwarded import MALFORMED
from coordinator.gateway.high_watermarks import FetchWatch, TopicKey
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.server.connection import PendingReply
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import CODECS
from protocol.messages.headers import decode_request_header_v1, decode_request_header_v2
from protocol.wire import decode_response, encode_response

# ListOffsets v9-v11 answer as v8 does, and ask as v8 does but for a TimeoutMs at the end (v10+):
# the gateway reads and writes their latest offsets with the v8 codec.
_LIST_OFFSETS_AS: Final = 8

Partitions = frozenset[tuple[str, int]]


def asked_latest(frame: bytes, version: int) -> Partitions:
    """The partitions a ListOffsets request asks the latest offset of (none if it cannot be read:
    upstream answers such a request as it will)."""
    version = min(version, _LIST_OFFSETS_AS)
    try:
        header = decode_request_header_v2 if version >= 6 else decode_request_header_v1
        _header, pos = header(frame, 0)
        request, _end = CODECS[(ApiKey.LIST_OFFSETS, version)][0](frame, pos)  # v10+: TimeoutMs after
    except MALFORMED:
        return frozenset()
    return frozenset(
        (topic.name, p.partition_index)
        for topic in request.topics
        for p in topic.partitions
        if p.timestamp == -1
    )


class LatestOffsets:
    """Upstream's high watermarks as the gateway's clients fetched them, applied to ListOffsets."""

    def __init__(self, upstream: UpstreamCluster) -> None:
        self.upstream = upstream

    def fetch_watch(self, reply: PendingReply) -> FetchWatch | None:
        """What reads a forwarded Fetch response's high watermarks (None for other APIs)."""
        if reply.api_key != ApiKey.FETCH:
            return None
        catalog, watermarks = self.upstream.catalog, self.upstream.high_watermarks

        def seen(topic: TopicKey, partition: int, high_watermark: int) -> None:
            if isinstance(topic, bytes):
                record = catalog.topic_by_id(topic)
                if record is None:
                    return
                topic = record.name
            watermarks.observe((topic, partition), high_watermark)

        return FetchWatch(reply.api_version, seen)

    def to_probe(self, api_version: int, latest: Partitions, frame: bytes) -> dict[tuple[str, int], int]:
        """The partitions of a ListOffsets answer whose latest offset waits for a fresh high
        watermark, with the offset upstream listed (high_watermarks.py)."""
        version = min(api_version, _LIST_OFFSETS_AS)
        _, body = decode_response(ApiKey.LIST_OFFSETS, version, frame[4:])
        needs_probe = self.upstream.high_watermarks.needs_probe
        return {
            (topic.name, answer.partition_index): answer.offset
            for topic in body.topics
            for answer in topic.partitions
            if answer.error_code == ErrorCode.NONE
            and answer.offset > 0  # an empty partition: nothing to learn
            and (topic.name, answer.partition_index) in latest
            and needs_probe((topic.name, answer.partition_index))
        }

    async def respond_after_probe(
        self,
        reply: PendingReply,
        latest: Partitions,
        frame: bytes,
        probe: dict[tuple[str, int], int],
        budgeted: int,
    ) -> None:
        """A ListOffsets(latest) answer sent once the high watermarks of ``probe`` are learned
        (or could not be): raised to them where upstream listed less."""
        try:
            await self.upstream.probe_high_watermarks(probe)
        finally:
            out: bytes | None = None
            if not reply.connection.closed:
                out = self.corrected(reply.api_version, latest, frame)
            reply.send_frame(out, budgeted)

    def corrected(self, api_version: int, latest: Partitions, frame: bytes) -> bytes:
        """A ListOffsets answer whose latest offsets are raised to the high watermarks fetched
        through the gateway where upstream answered less (high_watermarks.py)."""
        version = min(api_version, _LIST_OFFSETS_AS)
        correlation_id, body = decode_response(ApiKey.LIST_OFFSETS, version, frame[4:])
        log_end = self.upstream.high_watermarks.log_end
        changed = False
        for topic in body.topics:
            for answer in topic.partitions:
                tp = (topic.name, answer.partition_index)
                if answer.error_code == ErrorCode.NONE and tp in latest:
                    end = log_end(tp, answer.offset)
                    if end != answer.offset:
                        answer.offset, changed = end, True
        if not changed:
            return frame
        return encode_response(ApiKey.LIST_OFFSETS, version, correlation_id, body)
