"""The gateway's view of the upstream cluster: brokers, API versions, topics, log-end offsets.

A background task refreshes the metadata every ``upstream.metadata.refresh.ms`` (sooner when
asked, e.g. when a forwarded response says a leader moved) over connections of its own; an
unreachable upstream is logged once per incident and retried every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from coordinator.gateway.catalog import UpstreamCatalog
from coordinator.gateway.high_watermarks import HighWatermarks
from coordinator.gateway.incidents import Incidents
from coordinator.gateway.upstream import UpstreamConnection, UpstreamError, UpstreamSettings, connect
from coordinator.server.tasks import cancel_and_wait
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.primitives import DecodeError

log = logging.getLogger(__name__)

RETRY_S: Final = 1.0
LATEST: Final = -1
BrokersChanged = Callable[[dict[int, tuple[str, int]]], Awaitable[None]]


PROBE_FETCH_VERSION: Final = 12  # the last Fetch version naming topics (v13+: topic ids)
PROBE_BYTES: Final = 1 << 16
PROBE_WAIT_MS: Final = 100


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for server in servers.split(","):
        host, _, port = server.strip().rpartition(":")
        out.append((host, int(port)))
    return out


class UpstreamCluster:
    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        settings: UpstreamSettings,
        refresh_ms: int,
        request_timeout_ms: int,
        on_brokers: BrokersChanged,
    ) -> None:
        self.bootstrap = bootstrap
        self.settings = settings
        self.refresh_s = refresh_ms / 1000
        self.timeout_s = request_timeout_ms / 1000
        self.on_brokers = on_brokers
        self.catalog = UpstreamCatalog()
        self.high_watermarks = HighWatermarks()  # fed by the forwarded Fetch responses
        self.brokers: dict[int, tuple[str, int]] = {}
        # Every address seen, also of nodes that left: their clients are still forwarded there.
        self.known_addresses: dict[int, tuple[str, int]] = {}
        self.api_versions: dict[int, tuple[int, int]] | None = None
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.healthy = False
        self.incidents = Incidents(log)
        self._admin: dict[int | None, UpstreamConnection] = {}
        self._wake = asyncio.Event()
        self._refreshed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="upstream-metadata")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        for connection in list(self._admin.values()):
            connection.close()
        self._admin.clear()

    def refresh_soon(self) -> None:
        self._wake.set()

    async def wait_refreshed(self, timeout_s: float) -> bool:
        self._refreshed.clear()
        self._wake.set()
        try:
            await asyncio.wait_for(self._refreshed.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _run(self) -> None:
        while True:
            try:
                await self.refresh()
            except UpstreamError as exc:
                self.healthy = False
                self.incidents.failed("upstream cluster", str(exc), credentials=exc.credentials)
            except DecodeError as exc:
                self.healthy = False
                self.incidents.failed("upstream cluster", f"upstream sent a malformed metadata answer: {exc}")
            else:
                self.healthy = True
                self.incidents.recovered("upstream cluster")
                self._refreshed.set()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.refresh_s if self.healthy else RETRY_S)

    # ---- metadata --------------------------------------------------------------------------
    async def refresh(self) -> None:
        connection = await self._connection(None)
        if self.api_versions is None:
            answer = await connection.request(
                ApiKey.API_VERSIONS,
                3,
                ApiVersionsRequest(
                    client_software_name="kafka-group-coordinator", client_software_version="1"
                ),
                self.timeout_s,
            )
            if answer.error_code != ErrorCode.NONE:
                raise UpstreamError(f"upstream ApiVersions failed: {ErrorCode(answer.error_code).name}")
            self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        response: MetadataResponse = await connection.request(
            ApiKey.METADATA,
            self.version_for(ApiKey.METADATA),
            MetadataRequest(topics=None, allow_auto_topic_creation=False),
            self.timeout_s,
        )
        self.observe_metadata(response, complete=True)
        await self._brokers_seen(response)

    async def describe_topics(self, names: list[str]) -> None:
        """Ask upstream about these topics now (never creating them) and learn the answer."""
        connection = await self._connection(None)
        response: MetadataResponse = await connection.request(
            ApiKey.METADATA,
            self.version_for(ApiKey.METADATA),
            MetadataRequest(
                topics=[MetadataRequestTopic(name=name) for name in names], allow_auto_topic_creation=False
            ),
            self.timeout_s,
        )
        self.observe_metadata(response)

    def observe_metadata(self, response: MetadataResponse, *, complete: bool = False) -> None:
        """Learn from a metadata answer (ours, or one forwarded to a client)."""
        if complete:
            self.catalog.replace_all(response.topics)
        else:
            self.catalog.observe(response.topics)
        if response.cluster_id:
            self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        # A client's answer can name a node before our own refresh has: its virtual broker is
        # then opened from that answer, and must find the node's address here.
        self.known_addresses.update((b.node_id, (b.host, b.port)) for b in response.brokers)

    async def _brokers_seen(self, response: MetadataResponse) -> None:
        brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        if brokers and brokers != self.brokers:
            for node_id in set(self.brokers) - set(brokers):
                log.info("upstream node %d left the cluster metadata", node_id)
                stale = self._admin.pop(node_id, None)
                if stale is not None:
                    stale.close()
            self.brokers = brokers
            self.known_addresses.update(brokers)
            await self.on_brokers(brokers)

    def version_for(self, api_key: int) -> int:
        """The highest version both we (our codecs) and upstream speak."""
        ours = SERVED_VERSIONS[ApiKey(api_key)]
        theirs = (self.api_versions or {}).get(int(api_key), ours)
        version = min(ours[1], theirs[1])
        if version < max(ours[0], theirs[0]):
            raise UpstreamError(f"upstream does not support a version of api {api_key} the gateway speaks")
        return version

    # ---- connections of our own --------------------------------------------------------------
    async def _connection(self, node_id: int | None) -> UpstreamConnection:
        existing = self._admin.get(node_id)
        if existing is not None and not existing.closed:
            return existing
        if node_id is not None:
            address = self.known_addresses.get(node_id)
            if address is None:
                raise UpstreamError(f"upstream node {node_id} is not in the cluster metadata")
            candidates = [address]
        else:
            candidates = [*self.brokers.values(), *self.bootstrap]
        failure: UpstreamError | None = None
        for host, port in candidates:
            try:
                connection = await connect(host, port, self.settings, self._lost)
            except UpstreamError as exc:
                if exc.credentials:
                    raise
                failure = exc
                continue
            self._admin[node_id] = connection
            return connection
        raise failure or UpstreamError("no upstream broker is known")

    def _lost(self, connection: UpstreamConnection) -> None:
        for key, known in list(self._admin.items()):
            if known is connection:
                del self._admin[key]

    async def connection_to(self, node_id: int | None) -> UpstreamConnection:
        """A connection for the gateway's own requests (any broker when node_id is None)."""
        return await self._connection(node_id)

    # ---- log-end offsets (for lag) -------------------------------------------------------------
    async def list_end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The log-end offset of each partition (ListOffsets latest, to each leader, or the high
        watermark fetched through the gateway where that is further: high_watermarks.py).

        Partitions whose leader is unknown or that answer with an error are left out; a
        NOT_LEADER answer triggers a metadata refresh so the next call asks the new leader.
        """
        if any(p not in self.catalog.leaders for p in partitions):
            await self.wait_refreshed(self.timeout_s)
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for partition in partitions:
            leader = self.catalog.leaders.get(partition, -1)
            if leader >= 0:
                by_leader.setdefault(leader, []).append(partition)
        results = await asyncio.gather(
            *(self._end_offsets_from(leader, wanted) for leader, wanted in by_leader.items()),
            return_exceptions=True,
        )
        offsets: dict[tuple[str, int], int] = {}
        for result in results:
            if isinstance(result, dict):
                offsets.update(result)
            elif isinstance(result, UpstreamError | DecodeError):
                log.debug("list offsets failed: %s", result)
            elif isinstance(result, BaseException):
                raise result
        return offsets

    # ---- high watermarks asked for (ListOffsets(latest) behind the log end) -------------------
    async def probe_high_watermarks(self, listed: dict[tuple[str, int], int]) -> None:
        """Learn the high watermark of each partition with a Fetch of one byte at its listed
        offset (no wait) to its leader: for the ListOffsets(latest) answers of an upstream that
        answers less than the log end (high_watermarks.py). Failures leave partitions unlearned."""
        if any(p not in self.catalog.leaders for p in listed):
            await self.wait_refreshed(self.timeout_s)
        by_leader: dict[int, dict[tuple[str, int], int]] = {}
        for partition, offset in listed.items():
            leader = self.catalog.leaders.get(partition, -1)
            if leader >= 0:
                by_leader.setdefault(leader, {})[partition] = offset
        results = await asyncio.gather(
            *(self._probe_from(leader, wanted) for leader, wanted in by_leader.items()),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, UpstreamError | DecodeError | OSError | TimeoutError):
                log.debug("high watermark probe failed: %r", result)
            elif isinstance(result, BaseException):
                raise result

    async def _probe_from(self, leader: int, listed: dict[tuple[str, int], int]) -> None:
        connection = await self._connection(leader)
        version = min(self.version_for(ApiKey.FETCH), PROBE_FETCH_VERSION)  # v12: topics by name
        if version < 4:
            raise UpstreamError("upstream Fetch is older than v4")
        topics: dict[str, FetchTopic] = {}
        for (topic, index), offset in listed.items():
            topics.setdefault(topic, FetchTopic(topic=topic)).partitions.append(
                FetchPartition(
                    partition=index, fetch_offset=max(offset - 1, 0), partition_max_bytes=PROBE_BYTES
                )
            )
        # Tansu leaves out partitions of a Fetch asking for no bytes: one byte, briefly waited for
        # (the fetch starts at the listed offset - 1, inside the last batch, so it does not wait).
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=PROBE_WAIT_MS,
            min_bytes=1,
            max_bytes=PROBE_BYTES,
            topics=list(topics.values()),
        )
        response = await connection.request(ApiKey.FETCH, version, request, self.timeout_s)
        for topic_answer in response.responses:
            for answer in topic_answer.partitions:
                if answer.error_code == ErrorCode.NONE:
                    self.high_watermarks.observe(
                        (topic_answer.topic, answer.partition_index), answer.high_watermark
                    )

    async def _end_offsets_from(
        self, leader: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        connection = await self._connection(leader)
        version = self.version_for(ApiKey.LIST_OFFSETS)
        if version < 1:
            raise UpstreamError("upstream ListOffsets is older than v1")
        topics: dict[str, ListOffsetsTopic] = {}
        for topic, index in partitions:
            topics.setdefault(topic, ListOffsetsTopic(name=topic)).partitions.append(
                ListOffsetsPartition(partition_index=index, timestamp=LATEST)
            )
        request = ListOffsetsRequest(replica_id=-1, topics=list(topics.values()))
        response = await connection.request(ApiKey.LIST_OFFSETS, version, request, self.timeout_s)
        offsets: dict[tuple[str, int], int] = {}
        for topic_answer in response.topics:
            for answer in topic_answer.partitions:
                if answer.error_code == ErrorCode.NONE:
                    tp = (topic_answer.name, answer.partition_index)
                    offsets[tp] = self.high_watermarks.log_end(tp, answer.offset)
                elif answer.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH):
                    self.refresh_soon()
        return offsets
