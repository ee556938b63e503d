"""Start-up on a big store: the coordinator listens first, then loads (docs/groups.md#loading).

The store is prefilled through the store API (300 000 offsets in 3 000 groups, a Stable group
with two members, an Empty group). A raw client connects as soon as the server logs
"listening" and sends rounds of requests. A round counts as "during the load" when the
OffsetFetch that opens it and the one that closes it both answer COORDINATOR_LOAD_IN_PROGRESS
(loading only ever ends), and then every group request in it must get 14 (Heartbeat 0,
SyncGroup 27) while ApiVersions, FindCoordinator and DescribeCluster are served. The groups a
round names all hash into the shard of the sentinel's group: the server loads shard by shard in
the background (docs/performance.md#loading-in-the-background), so another shard may be served
already. Metadata and
CreateTopics sent during the load wait for the topic catalog. Afterwards everything stored is
served: all 300 000 offsets, the Stable group at its generation with its members and
assignments, the Empty group.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from coordinator.core.sharding import shard_of
from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartition,
    encode_consumer_protocol_assignment_v0,
    encode_consumer_protocol_subscription_v0,
)
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from protocol.messages.sync_group import SyncGroupRequest
from storage.records import ClusterRecord, GroupMetadataRecord, MemberRecord, OffsetCommitRecord, TopicRecord
from storage.url import open_store
from tests.durability.support import (
    COORDINATOR_LOAD_IN_PROGRESS,
    FETCH_VERSION,
    ILLEGAL_GENERATION,
    LOADED,
    NONE,
    REBALANCE_IN_PROGRESS,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_MEMBER_ID,
    PipelinedClient,
    Servers,
    commit,
    describe,
    fetch,
    wait_for_log,
)
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "load-t"
PARTITIONS = 100
GROUPS = 3000  # x PARTITIONS offsets


def same_shard(prefix: str, as_group: str = "load-g0") -> str:
    """A group id starting with ``prefix`` in the shard of ``as_group``."""
    wanted = shard_of(as_group, SHARDS)
    return next(f"{prefix}-{i}" for i in range(100_000) if shard_of(f"{prefix}-{i}", SHARDS) == wanted)


SHARDS = 50  # offsets.topic.num.partitions
STABLE, EMPTY = same_shard("load-stable"), same_shard("load-empty")
SCRATCH_JOIN, SCRATCH_DELETE = same_shard("load-scratch-join"), same_shard("load-scratch-delete")
GENERATION = 7
LOADING = COORDINATOR_LOAD_IN_PROGRESS


def expected_offset(group_index: int, partition: int) -> int:
    return group_index * 1000 + partition


def subscription(topics: list[str]) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    encode_consumer_protocol_subscription_v0(ConsumerProtocolSubscription(topics=topics), out)
    return bytes(out)


def assignment(partitions: list[int]) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    message = ConsumerProtocolAssignment(assigned_partitions=[TopicPartition(TOPIC, partitions)])
    encode_consumer_protocol_assignment_v0(message, out)
    return bytes(out)


MEMBERS = {"m-1": assignment(list(range(50))), "m-2": assignment(list(range(50, 100)))}


async def prefill(url: str) -> None:
    store = open_store(url)
    await store.open()
    try:
        now = int(time.time() * 1000)
        members = tuple(
            MemberRecord(m, None, f"client-{m}", "/127.0.0.1", 60_000, 30_000, subscription([TOPIC]), a)
            for m, a in MEMBERS.items()
        )
        await store.write(
            [
                ClusterRecord("loading-test", now),  # formatted, as a server would have done
                TopicRecord(TOPIC, uuid.uuid4().bytes, PARTITIONS, 1, ()),
                GroupMetadataRecord(STABLE, "consumer", GENERATION, "range", "m-1", now, members),
                # An Empty group keeps its offsets (without any it would be swept away).
                GroupMetadataRecord(EMPTY, "consumer", 3, None, None, now, ()),
                OffsetCommitRecord(EMPTY, TOPIC, 0, 42, -1, "kept", now, None),
            ]
        )
        await store.write(
            [
                OffsetCommitRecord(f"load-g{g}", TOPIC, p, expected_offset(g, p), -1, "", now, None)
                for g in range(GROUPS)
                for p in range(PARTITIONS)
            ]
        )
    finally:
        await store.close()


def send_round(client: PipelinedClient) -> list[tuple[str, Any]]:
    """One pipelined round; the first and the last request are the OffsetFetch sentinels."""
    fetch_g0 = OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(
                group_id="load-g0", topics=[OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1])]
            )
        ]
    )
    requests: list[tuple[str, int, int, Any]] = [
        ("fetch-first", ApiKey.OFFSET_FETCH, FETCH_VERSION, fetch_g0),
        ("api-versions", ApiKey.API_VERSIONS, 3, ApiVersionsRequest("durability", "1")),
        ("find-coordinator", ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(coordinator_keys=[STABLE])),
        ("find-coordinator-v1", ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key=STABLE)),
        ("describe-cluster", ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest()),
        ("heartbeat", ApiKey.HEARTBEAT, 4, HeartbeatRequest(STABLE, GENERATION, "m-1")),
        ("heartbeat-unknown", ApiKey.HEARTBEAT, 4, HeartbeatRequest(STABLE, GENERATION, "nobody")),
        (
            "sync",
            ApiKey.SYNC_GROUP,
            5,
            SyncGroupRequest(STABLE, GENERATION, "m-2", protocol_type="consumer", protocol_name="range"),
        ),
        (
            "join",
            ApiKey.JOIN_GROUP,
            5,
            JoinGroupRequest(
                group_id=SCRATCH_JOIN,
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
                protocol_type="consumer",
                protocols=[JoinGroupRequestProtocol("range", subscription([TOPIC]))],
            ),
        ),
        ("describe", ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[STABLE, EMPTY])),
        ("list", ApiKey.LIST_GROUPS, 4, ListGroupsRequest()),
        ("leave", ApiKey.LEAVE_GROUP, 3, LeaveGroupRequest(EMPTY, members=[MemberIdentity("nobody")])),
        ("delete", ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[SCRATCH_DELETE])),
        ("fetch-last", ApiKey.OFFSET_FETCH, FETCH_VERSION, fetch_g0),
    ]
    for _name, api_key, version, body in requests:
        client.send(api_key, version, body)
    answers = [(name, client.receive()) for name, *_ in requests]
    return answers


def check_loading_round(answers: dict[str, Any], port: int) -> None:
    assert answers["api-versions"].error_code == NONE and answers["api-versions"].api_keys
    [found] = answers["find-coordinator"].coordinators
    assert (found.error_code, found.node_id, found.port) == (NONE, 0, port), found
    v1 = answers["find-coordinator-v1"]
    assert (v1.error_code, v1.node_id, v1.port) == (NONE, 0, port), v1
    assert answers["describe-cluster"].error_code == NONE
    assert answers["heartbeat"].error_code == NONE  # members must not be kicked out by a restart
    assert answers["heartbeat-unknown"].error_code == NONE  # blind: nothing is known yet
    assert answers["sync"].error_code == REBALANCE_IN_PROGRESS
    assert answers["join"].error_code == LOADING
    assert [(g.group_id, g.error_code) for g in answers["describe"].groups] == [
        (STABLE, LOADING),
        (EMPTY, LOADING),
    ]
    assert answers["list"].error_code == LOADING
    assert answers["leave"].error_code == LOADING
    assert [(r.group_id, r.error_code) for r in answers["delete"].results] == [(SCRATCH_DELETE, LOADING)]


def test_requests_during_load_then_the_loaded_state(coordinators: Servers, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'big.db'}"
    started = time.monotonic()
    asyncio.run(prefill(url))
    prefill_s = time.monotonic() - started

    server = coordinators.start(url, wait_loaded=False)  # returns as soon as "listening" is logged
    with (
        PipelinedClient(server.bootstrap, client_id="early") as client,
        PipelinedClient(server.bootstrap, client_id="deferred") as deferred,
    ):
        # Requests that need the topic catalog wait for it, then see the stored catalog.
        deferred.send(ApiKey.METADATA, 9, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]))
        deferred.send(
            ApiKey.CREATE_TOPICS,
            5,
            CreateTopicsRequest(topics=[CreatableTopic(TOPIC, 1, 1)], timeout_ms=10_000),
        )
        rounds: list[dict[str, Any]] = []
        loading_rounds = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            answers = dict(send_round(client))
            rounds.append(answers)
            first = answers["fetch-first"].groups[0].error_code
            last = answers["fetch-last"].groups[0].error_code
            if first == LOADING and last == LOADING:
                check_loading_round(answers, server.port)
                loading_rounds += 1
            if last != LOADING:
                break
        assert loading_rounds >= 1, (
            f"no request round completed during the load ({len(rounds)} rounds); make the prefill bigger"
        )
        wait_for_log(server, LOADED)
        metadata = deferred.receive()
        created = deferred.receive()
        [topic] = metadata.topics
        assert (topic.name, topic.error_code, len(topic.partitions)) == (TOPIC, NONE, PARTITIONS)
        assert [t.error_code for t in created.topics] == [TOPIC_ALREADY_EXISTS]

        # After the load: the right data.
        check_offsets(client)
        stable, empty = (describe(client, g) for g in (STABLE, EMPTY))
        assert (stable.error_code, stable.group_state, stable.protocol_type, stable.protocol_data) == (
            NONE,
            "Stable",
            "consumer",
            "range",
        )
        assert {m.member_id: m.member_assignment for m in stable.members} == MEMBERS
        assert (empty.error_code, empty.group_state, empty.protocol_type, empty.members) == (
            NONE,
            "Empty",
            "consumer",
            [],
        )
        kept = fetch(client, EMPTY, [(TOPIC, 0)])
        assert (kept.offsets, kept.metadata) == ({(TOPIC, 0): 42}, {(TOPIC, 0): "kept"})
        assert (
            client.request(ApiKey.HEARTBEAT, 4, HeartbeatRequest(STABLE, GENERATION, "m-1")).error_code
            == NONE
        )
        assert (
            client.request(ApiKey.HEARTBEAT, 4, HeartbeatRequest(STABLE, GENERATION + 1, "m-1")).error_code
            == ILLEGAL_GENERATION
        )
        assert (
            client.request(ApiKey.HEARTBEAT, 4, HeartbeatRequest(STABLE, GENERATION, "nobody")).error_code
            == UNKNOWN_MEMBER_ID
        )
        synced = client.request(
            ApiKey.SYNC_GROUP,
            5,
            SyncGroupRequest(STABLE, GENERATION, "m-2", protocol_type="consumer", protocol_name="range"),
        )
        assert (synced.error_code, synced.assignment) == (NONE, MEMBERS["m-2"])
        listed = client.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
        assert listed.error_code == NONE
        assert {g.group_id for g in listed.groups} >= {STABLE, EMPTY} | {f"load-g{g}" for g in range(GROUPS)}
        assert commit(client, "load-g0", {(TOPIC, 0): 1}) == {(TOPIC, 0): NONE}
    load_line = next(line for line in server.log_text().splitlines() if LOADED in line)
    print(
        f"\nprefill {prefill_s:.1f}s; {loading_rounds} of {len(rounds)} rounds during the load; {load_line}"
    )
    server.stop()


def check_offsets(client: WireClient) -> None:
    """All 300 000 offsets, fetched 100 groups per OffsetFetch v8."""
    partitions = list(range(PARTITIONS))
    for start in range(0, GROUPS, 100):
        request = OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id=f"load-g{g}",
                    topics=[OffsetFetchRequestTopics(name=TOPIC, partition_indexes=partitions)],
                )
                for g in range(start, start + 100)
            ]
        )
        response = client.request(ApiKey.OFFSET_FETCH, FETCH_VERSION, request)
        for answer in response.groups:
            g = int(answer.group_id.removeprefix("load-g"))
            assert answer.error_code == NONE
            [topic] = answer.topics
            got = {p.partition_index: (p.committed_offset, p.error_code) for p in topic.partitions}
            assert got == {p: (expected_offset(g, p), NONE) for p in partitions}, answer.group_id
