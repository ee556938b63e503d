"""A scripted upstream of several brokers in front of one real Tansu (a test double).

Tansu is a single broker (node id 111). This double listens on one port per scripted node id
and relays every request to Tansu, except that it answers as a cluster of those nodes:

* Metadata lists the scripted nodes at the double's ports, and partition leaders as scripted;
* ApiVersions caps Produce at v9, so the double can decode Produce requests (its codecs);
* a Produce for a partition this node does not lead is answered NOT_LEADER_OR_FOLLOWER.

The test edits `leaders` and `listed` while it runs (leadership moves, a node leaving the
metadata, a new node appearing).
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from protocol.wire import decode_request, decode_response, encode_response, peek_header
from tests.support.ports import free_port


class ScriptedCluster:
    def __init__(self, tansu_port: int, node_ids: list[int]) -> None:
        self.tansu_port = tansu_port
        self.ports: dict[int, int] = {}
        self.listed: list[int] = list(node_ids)  # nodes named in Metadata answers
        self.leaders: dict[tuple[str, int], int] = {}  # (topic, partition) -> node; default by index
        self.not_leader_answers = 0
        self._servers: dict[int, asyncio.Server] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._initial = node_ids

    # ---- control, from the test thread --------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        for node_id in self._initial:
            self.add_node(node_id)

    def add_node(self, node_id: int) -> int:
        port = free_port()
        asyncio.run_coroutine_threadsafe(self._listen(node_id, port), self._loop).result(10)
        self.ports[node_id] = port
        return port

    def stop_node(self, node_id: int) -> None:
        server = self._servers.pop(node_id)
        self._loop.call_soon_threadsafe(server.close)

    def stop(self) -> None:
        for node_id in list(self._servers):
            self.stop_node(node_id)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def leader(self, topic: str, partition: int) -> int:
        return self.leaders.get((topic, partition), self.listed[partition % len(self.listed)])

    # ---- the brokers -------------------------------------------------------------------------
    async def _listen(self, node_id: int, port: int) -> None:
        self._servers[node_id] = await asyncio.start_server(
            lambda r, w: self._serve(node_id, r, w), "127.0.0.1", port
        )

    async def _serve(self, node_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.tansu_port)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                answer = await self._answer(node_id, frame, up_reader, up_writer)
                if answer is not None:
                    writer.write(answer)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            for w in (writer, up_writer):
                w.close()

    async def _answer(
        self, node_id: int, frame: bytes, up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter
    ) -> bytes | None:
        api_key, version, correlation_id = peek_header(frame)
        if api_key == ApiKey.PRODUCE:
            request = decode_request(frame).body
            if any(
                self.leader(t.name, p.index) != node_id for t in request.topic_data for p in t.partition_data
            ):
                self.not_leader_answers += 1
                response = ProduceResponse(
                    responses=[
                        TopicProduceResponse(
                            name=t.name,
                            partition_responses=[
                                PartitionProduceResponse(p.index, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
                                for p in t.partition_data
                            ],
                        )
                        for t in request.topic_data
                    ]
                )
                return encode_response(api_key, version, correlation_id, response)
            if request.acks == 0:
                up_writer.write(struct.pack(">i", len(frame)) + frame)
                await up_writer.drain()
                return None
        up_writer.write(struct.pack(">i", len(frame)) + frame)
        await up_writer.drain()
        size = struct.unpack(">i", await up_reader.readexactly(4))[0]
        response_frame = await up_reader.readexactly(size)
        if api_key == ApiKey.API_VERSIONS:
            _, body = decode_response(api_key, version, response_frame)
            for key in body.api_keys:
                if key.api_key == ApiKey.PRODUCE:
                    key.min_version, key.max_version = 3, 9
            return encode_response(api_key, version, correlation_id, body)
        if api_key == ApiKey.METADATA:
            _, body = decode_response(api_key, version, response_frame)
            brokers = body.brokers
            template = brokers[0]
            body.brokers = []
            for listed in self.listed:
                broker = type(template)(listed, "127.0.0.1", self.ports[listed], None)
                body.brokers.append(broker)
            body.controller_id = self.listed[0]
            for topic in body.topics:
                for partition in topic.partitions:
                    leader = self.leader(topic.name, partition.partition_index)
                    partition.leader_id = leader
                    partition.replica_nodes = partition.isr_nodes = [leader]
            return encode_response(api_key, version, correlation_id, body)
        return struct.pack(">i", len(response_frame)) + response_frame


@contextmanager
def scripted_cluster(tansu_port: int, node_ids: list[int]) -> Iterator[ScriptedCluster]:
    cluster = ScriptedCluster(tansu_port, node_ids)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
