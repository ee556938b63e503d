"""Records for share fetches read from the upstream cluster with plain Fetch (docs/share-groups.md,
"The data plane"): the gateway is the share-partition leader of every partition it forwards.

Fetches go to each partition's leader over connections of their own (a Fetch waiting
``MaxWaitMs`` upstream holds its connection), taken from a small pool per broker. Topics are
named (Fetch v12): the topic ids of ShareFetch were mapped to names through the upstream's
metadata already.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from coordinator.gateway.upstream import UpstreamConnection, UpstreamError, connect
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.server.share_records import FetchedPartition, TopicPartition, read_committed, record_batches
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from protocol.primitives import DecodeError

log = logging.getLogger(__name__)

FETCH_VERSION: Final = 12  # the last version naming topics
PRODUCE_VERSION: Final = 12  # the last version naming topics
IDLE_CONNECTIONS_PER_BROKER: Final = 8
PARTITION_MAX_BYTES: Final = 1 << 20
LATEST: Final = -1


class UpstreamShareRecords:
    """share_records.RecordSource over the upstream cluster."""

    def __init__(self, upstream: UpstreamCluster) -> None:
        self.upstream = upstream
        self._idle: dict[int, list[UpstreamConnection]] = {}
        self._closed = False

    async def fetch(
        self,
        wanted: Mapping[TopicPartition, int],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        committed_only: bool = False,
    ) -> dict[TopicPartition, FetchedPartition]:
        by_leader = await self._by_leader(list(wanted))
        out: dict[TopicPartition, FetchedPartition] = {}
        for tp in by_leader.pop(-1, []):
            out[tp] = FetchedPartition(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        answers = await asyncio.gather(
            *(
                self._fetch_from(
                    leader, {tp: wanted[tp] for tp in tps}, max_wait_ms, min_bytes, max_bytes, committed_only
                )
                for leader, tps in by_leader.items()
            )
        )
        for answer in answers:
            out.update(answer)
        return out

    async def start_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets at each leader. For latest, the high watermark a Fetch reports where it is
        further (Tansu answers ListOffsets(latest) behind the log end: high_watermarks.py)."""
        by_leader = await self._by_leader(list(partitions))
        by_leader.pop(-1, None)
        found: dict[TopicPartition, int] = {}
        for leader, tps in by_leader.items():
            try:
                found.update(await self._list_offsets(leader, tps, timestamp))
            except (UpstreamError, DecodeError, TimeoutError) as exc:
                log.info("share-partition start offsets: ListOffsets at node %d failed: %s", leader, exc)
        if timestamp == LATEST and found:
            fetched = await self.fetch(found, 0, 0, 1)
            for tp, answer in fetched.items():
                watermark = answer.high_watermark
                if not answer.error_code and watermark > found[tp]:
                    found[tp] = watermark
        return found

    async def produce(self, topic: str, partition: int, batch: bytes) -> int:
        """Write one record batch at the partition's leader (acks all); the partition's error code,
        NOT_LEADER_OR_FOLLOWER when the upstream cannot be reached."""
        leader = (await self._by_leader([(topic, partition)])).keys()
        node = next(iter(leader))
        if node < 0:
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        request = ProduceRequest(
            acks=-1,
            timeout_ms=int(self.upstream.timeout_s * 1000),
            topic_data=[
                TopicProduceData(name=topic, partition_data=[PartitionProduceData(partition, batch)])
            ],
        )
        version = min(self.upstream.version_for(ApiKey.PRODUCE), PRODUCE_VERSION)
        try:
            response: ProduceResponse = await self._request(
                node, ApiKey.PRODUCE, version, request, self.upstream.timeout_s * 2
            )
        except (UpstreamError, DecodeError, TimeoutError) as exc:
            log.info("dead-letter produce to upstream node %d failed: %s", node, exc)
            self.upstream.refresh_soon()
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        for answered in response.responses:
            for p in answered.partition_responses:
                if p.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH):
                    self.upstream.refresh_soon()
                return int(p.error_code)
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)

    async def close(self) -> None:
        self._closed = True
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()

    # -- internals -------------------------------------------------------------------------------

    async def _by_leader(self, partitions: list[TopicPartition]) -> dict[int, list[TopicPartition]]:
        leaders = self.upstream.catalog.leaders
        if any(tp not in leaders for tp in partitions):
            await self.upstream.wait_refreshed(self.upstream.timeout_s)
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            by_leader.setdefault(leaders.get(tp, -1), []).append(tp)
        return by_leader

    async def _fetch_from(
        self,
        leader: int,
        wanted: Mapping[TopicPartition, int],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        committed_only: bool = False,
    ) -> dict[TopicPartition, FetchedPartition]:
        topics: dict[str, FetchTopic] = {}
        for (topic, index), offset in wanted.items():
            topics.setdefault(topic, FetchTopic(topic=topic)).partitions.append(
                FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=PARTITION_MAX_BYTES)
            )
        request = FetchRequest(
            max_wait_ms=max_wait_ms,
            min_bytes=max(min_bytes, 1),
            max_bytes=max_bytes if max_bytes > 0 else PARTITION_MAX_BYTES,
            topics=list(topics.values()),
            isolation_level=1 if committed_only else 0,
        )
        version = min(self.upstream.version_for(ApiKey.FETCH), FETCH_VERSION)
        timeout_s = self.upstream.timeout_s + max_wait_ms / 1000
        try:
            response: FetchResponse = await self._request(leader, ApiKey.FETCH, version, request, timeout_s)
        except (UpstreamError, DecodeError, TimeoutError) as exc:
            log.info("share fetch from upstream node %d failed: %s", leader, exc)
            self.upstream.refresh_soon()
            return {tp: FetchedPartition(ErrorCode.NOT_LEADER_OR_FOLLOWER) for tp in wanted}
        out: dict[TopicPartition, FetchedPartition] = {}
        for answered in response.responses:
            for p in answered.partitions:
                tp = (answered.topic, p.partition_index)
                if p.error_code:
                    if p.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH):
                        self.upstream.refresh_soon()
                    out[tp] = FetchedPartition(p.error_code, high_watermark=p.high_watermark)
                    continue
                if p.high_watermark >= 0:
                    self.upstream.high_watermarks.observe(tp, p.high_watermark)
                records = p.records or b""
                batches = record_batches(records)
                if not committed_only:
                    out[tp] = FetchedPartition(0, records, batches, p.high_watermark)
                    continue
                aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or []]
                kept, hidden = read_committed(records, batches, p.last_stable_offset, aborted)
                out[tp] = FetchedPartition(0, records, kept, p.high_watermark, hidden)
        if response.error_code:
            for tp in wanted:
                out.setdefault(tp, FetchedPartition(response.error_code))
        return out

    async def _list_offsets(
        self, leader: int, tps: list[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        topics: dict[str, ListOffsetsTopic] = {}
        for topic, index in tps:
            topics.setdefault(topic, ListOffsetsTopic(name=topic)).partitions.append(
                ListOffsetsPartition(partition_index=index, timestamp=timestamp)
            )
        request = ListOffsetsRequest(replica_id=-1, topics=list(topics.values()))
        version = self.upstream.version_for(ApiKey.LIST_OFFSETS)
        response: ListOffsetsResponse = await self._request(
            leader, ApiKey.LIST_OFFSETS, version, request, self.upstream.timeout_s
        )
        found: dict[TopicPartition, int] = {}
        for answered in response.topics:
            for p in answered.partitions:
                if p.error_code == ErrorCode.NONE and p.offset >= 0:
                    found[(answered.name, p.partition_index)] = p.offset
        return found

    async def _request(self, leader: int, api_key: int, version: int, body: object, timeout_s: float) -> Any:
        connection = await self._connection(leader)
        try:
            response = await connection.request(api_key, version, body, timeout_s)
        except BaseException:
            connection.close()
            raise
        self._give_back(leader, connection)
        return response

    async def _connection(self, leader: int) -> UpstreamConnection:
        idle = self._idle.get(leader)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        address = self.upstream.known_addresses.get(leader)
        if address is None:
            raise UpstreamError(f"upstream node {leader} is not in the cluster metadata")
        return await connect(address[0], address[1], self.upstream.settings)

    def _give_back(self, leader: int, connection: UpstreamConnection) -> None:
        idle = self._idle.setdefault(leader, [])
        if self._closed or connection.closed or len(idle) >= IDLE_CONNECTIONS_PER_BROKER:
            connection.close()
        else:
            idle.append(connection)
