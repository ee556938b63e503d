"""Streams groups on a running standalone server: the internal topics are created in the topic
catalog with the partition counts the topology needs, the group becomes ready and assigns every
task, and a restart brings it back at its epoch (docs/streams-groups.md)."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest

from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import Config
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import streams_group_heartbeat as sgh
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from protocol.wire import decode_response, encode_request
from tests.admin.support import cli, table_rows

pytestmark = pytest.mark.asyncio


def word_count() -> sgh.Topology:
    return sgh.Topology(
        epoch=1,
        subtopologies=[
            sgh.Subtopology(
                subtopology_id="0", source_topics=["words"], repartition_sink_topics=["wc-repartition"]
            ),
            sgh.Subtopology(
                subtopology_id="1",
                source_topics=["wc-repartition"],
                repartition_source_topics=[sgh.TopicInfo("wc-repartition")],
                state_changelog_topics=[
                    sgh.TopicInfo("wc-changelog", topic_configs=[sgh.KeyValue("cleanup.policy", "compact")])
                ],
            ),
        ],
    )


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.correlation_id = reader, writer, 0

    @classmethod
    async def open(cls, server: RunningServer) -> Client:
        return cls(*await asyncio.open_connection("127.0.0.1", server.port))

    async def call(self, api_key: ApiKey, version: int, body: Any) -> Any:
        self.correlation_id += 1
        self.writer.write(encode_request(api_key, version, self.correlation_id, "streams-test", body))
        await self.writer.drain()
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))
        _, response = decode_response(
            api_key, version, await asyncio.wait_for(self.reader.readexactly(size), 10)
        )
        return response

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()

    async def heartbeat(self, epoch: int, **fields: Any) -> sgh.StreamsGroupHeartbeatResponse:
        request = sgh.StreamsGroupHeartbeatRequest(
            group_id="wc", member_id="m1", member_epoch=epoch, **fields
        )
        response: sgh.StreamsGroupHeartbeatResponse = await self.call(
            ApiKey.STREAMS_GROUP_HEARTBEAT, 1, request
        )
        assert response.error_code == 0, response
        return response


def _config(storage: str) -> Config:
    return Config(
        host="127.0.0.1",
        port=0,
        storage=storage,
        auto_create_topics_enable=False,
        group_streams_initial_rebalance_delay_ms=0,
    )


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_internal_topics_are_created_and_the_group_comes_back_after_a_restart(
    backend: str, tmp_path: Path
) -> None:
    storage = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'coordinator.db'}"
    server = await start_server(_config(storage))
    try:
        client = await Client.open(server)
        created = await client.call(
            ApiKey.CREATE_TOPICS,
            5,
            CreateTopicsRequest(
                topics=[CreatableTopic(name="words", num_partitions=3, replication_factor=1)]
            ),
        )
        assert created.topics[0].error_code == 0
        joined = await client.heartbeat(
            0,
            rebalance_timeout_ms=30000,
            topology=word_count(),
            active_tasks=[],
            standby_tasks=[],
            warmup_tasks=[],
            process_id="p1",
        )
        assert [s.status_code for s in joined.status or ()] == [3]  # MISSING_INTERNAL_TOPICS
        epoch = joined.member_epoch
        tasks: dict[str, list[int]] = {}
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:  # the topics come after the first answer
            beat = await client.heartbeat(epoch, active_tasks=[], standby_tasks=[], warmup_tasks=[])
            epoch = beat.member_epoch
            if beat.active_tasks is not None:
                tasks = {t.subtopology_id: t.partitions for t in beat.active_tasks}
            if not beat.status and tasks:
                break
            await asyncio.sleep(0.05)
        assert tasks == {"0": [0, 1, 2], "1": [0, 1, 2]}
        metadata = await client.call(
            ApiKey.METADATA,
            9,
            MetadataRequest(
                topics=[MetadataRequestTopic(name=n) for n in ("wc-repartition", "wc-changelog")]
            ),
        )
        assert {t.name: len(t.partitions) for t in metadata.topics} == {
            "wc-repartition": 3,
            "wc-changelog": 3,
        }
        listed = await client.call(ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["streams"]))
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("wc", "Stable")]
        bootstrap = f"127.0.0.1:{server.port}"
        members = await asyncio.to_thread(cli, bootstrap, "groups", "describe", "wc", "--members")
        assert members.code == 0, members.err
        assert table_rows(members.out) == [
            [
                "GROUP",
                "MEMBER",
                "PROCESS",
                "CLIENT-ID",
                "EPOCH",
                "ACTIVE-TASKS",
                "STANDBY-TASKS",
                "WARMUP-TASKS",
            ],
            ["wc", "m1", "p1", "streams-test", str(epoch), "0:0,0:1,0:2,1:0,1:1,1:2", "-", "-"],
        ]
        state = await asyncio.to_thread(cli, bootstrap, "groups", "describe", "wc", "--state")
        assert table_rows(state.out)[1][-4:] == ["Stable", str(epoch), str(epoch), "1"]
        # The lag per task: each active task's input partitions (subtopology 0 reads words, 1 the
        # repartition topic), grouped by task; a standalone server stores no records, so every log
        # is empty and the committed 5 is past its end (unknown), the others lag 0 from the start.
        committed = await client.call(
            ApiKey.OFFSET_COMMIT,
            9,
            OffsetCommitRequest(
                group_id="wc",
                generation_id_or_member_epoch=epoch,
                member_id="m1",
                topics=[
                    OffsetCommitRequestTopic("words", partitions=[OffsetCommitRequestPartition(0, 5, 3)])
                ],
            ),
        )
        assert committed.topics[0].partitions[0].error_code == 0
        offsets = await asyncio.to_thread(cli, bootstrap, "groups", "describe", "wc", "--offsets")
        assert offsets.code == 0, offsets.err
        assert table_rows(offsets.out) == [
            ["GROUP", "TASK", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH", "LOG-END-OFFSET",
             "OFFSET-LAG", "MEMBER", "PROCESS"],
            ["wc", "0:0", "words", "0", "5", "3", "-", "-", "m1", "p1"],
            ["wc", "0:1", "words", "1", "-", "-", "0", "0", "m1", "p1"],
            ["wc", "0:2", "words", "2", "-", "-", "0", "0", "m1", "p1"],
            *[["wc", f"1:{p}", "wc-repartition", str(p), "-", "-", "0", "0", "m1", "p1"] for p in range(3)],
        ]  # fmt: skip
        await client.close()
    finally:
        await server.shutdown()
    if backend == "memory":
        return
    server = await start_server(_config(storage))
    try:
        client = await Client.open(server)
        deadline = asyncio.get_running_loop().time() + 30
        while True:  # the groups are loaded in the background: COORDINATOR_LOAD_IN_PROGRESS until then
            described = await client.call(
                ApiKey.STREAMS_GROUP_DESCRIBE, 1, StreamsGroupDescribeRequest(["wc"])
            )
            group = described.groups[0]
            if group.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        assert group.error_code == 0, group
        assert (group.group_state, group.group_epoch, group.members[0].member_epoch) == (
            "Stable",
            epoch,
            epoch,
        )
        beat = await client.heartbeat(
            epoch,
            active_tasks=[sgh.TaskIds(s, ps) for s, ps in tasks.items()],
            standby_tasks=[],
            warmup_tasks=[],
        )
        assert beat.member_epoch == epoch
        await client.close()
    finally:
        await server.shutdown()
