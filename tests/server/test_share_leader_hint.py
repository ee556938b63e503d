"""ShareFetch and ShareAcknowledge at a node that does not hold the share group's shard: every
partition answered NOT_LEADER_OR_FOLLOWER with the holder as current leader (the shard's lease
epoch) and its endpoint, nothing read or changed here (docs/share-groups.md, "Several nodes")."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from coordinator.core.context import RequestContext
from coordinator.core.shard_map import NodeAddress, ShardMap, ShardState
from coordinator.server.runtime import Runtime
from coordinator.server.share_fetch import ShareLeader
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import share_acknowledge as sak
from protocol.messages import share_fetch as sf
from protocol.wire import decode_response, encode_response

GROUP = "g"
TOPIC = bytes(range(16))
NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)


class Replies:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.answered = asyncio.Event()

    def send(self, response: Any) -> None:
        self.sent.append(response)
        self.answered.set()


class UntouchedRuntime:
    """The runtime of a node that must not run anything for a group it does not hold."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the runtime was used ({name}) for a group held elsewhere")


def shard_map(owner: int | None, epoch: int = 3) -> ShardMap:
    """Node 1's view: the group's shard held by ``owner`` at ``epoch``."""
    shards = ShardMap(50, 1)
    shard = shards.shard_of(GROUP)
    shards.nodes = {1: NodeAddress(1, "127.0.0.1", 9001), 2: NodeAddress(2, "127.0.0.1", 9002)}
    shards.epochs = {shard: epoch}
    if owner is not None:
        shards.owners = {shard: owner}
    shards.valid_until_ms = 10**12
    return shards


def leader_at(shards: ShardMap) -> ShareLeader:
    return ShareLeader(cast(Runtime, UntouchedRuntime()), 10, shard_map=shards)


def context(replies: Replies, version: int) -> RequestContext:
    return RequestContext(1_000, 1_000, version, "c", "127.0.0.1", replies, ("127.0.0.1", 9001))


async def answer(leader: ShareLeader, replies: Replies) -> Any:
    await asyncio.wait_for(replies.answered.wait(), 5)
    [response] = replies.sent
    return response


def on_the_wire(api_key: int, version: int, response: Any) -> Any:
    frame = encode_response(api_key, version, 5, response)
    correlation_id, decoded = decode_response(api_key, version, frame[4:])
    assert correlation_id == 5
    return decoded


def fetch_request(epoch: int, acknowledge: bool) -> sf.ShareFetchRequest:
    """Partitions 0 and 1 of TOPIC, offsets 0-4 of partition 0 acknowledged when ``acknowledge``."""
    acks = [sf.AcknowledgementBatch(0, 4, [1])] if acknowledge else []
    return sf.ShareFetchRequest(
        group_id=GROUP,
        member_id="m",
        share_session_epoch=epoch,
        max_wait_ms=500,
        topics=[
            sf.FetchTopic(
                topic_id=TOPIC,
                partitions=[
                    sf.FetchPartition(partition_index=0, acknowledgement_batches=acks),
                    sf.FetchPartition(partition_index=1),
                ],
            )
        ],
    )


async def request(leader: ShareLeader, version: int, body: Any) -> Any:
    replies = Replies()
    if isinstance(body, sf.ShareFetchRequest):
        leader.share_fetch(context(replies, version), body)
    else:
        leader.share_acknowledge(context(replies, version), body)
    return await answer(leader, replies)


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [1, 2])
async def test_a_share_fetch_is_sent_to_the_node_holding_the_shard(version: int) -> None:
    leader = leader_at(shard_map(owner=2, epoch=3))
    # The session is opened here (Kafka's brokers keep sessions whatever they lead), then a
    # fetch in it acknowledges records of partition 0.
    opened = on_the_wire(ApiKey.SHARE_FETCH, version, await request(leader, version, fetch_request(0, False)))
    assert {p.partition_index for t in opened.responses for p in t.partitions} == {0, 1}
    response = await request(leader, version, fetch_request(1, True))
    decoded = on_the_wire(ApiKey.SHARE_FETCH, version, response)  # what the client reads
    assert decoded.error_code == 0
    assert [(e.node_id, e.host, e.port) for e in decoded.node_endpoints] == [(2, "127.0.0.1", 9002)]
    [topic] = decoded.responses
    assert topic.topic_id == TOPIC
    by_index = {p.partition_index: p for p in topic.partitions}
    assert set(by_index) == {0, 1}
    for p in by_index.values():
        assert p.error_code == NOT_LEADER
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 3)
        assert not p.acquired_records
    assert by_index[0].acknowledge_error_code == NOT_LEADER  # the acknowledgements were not applied
    assert by_index[1].acknowledge_error_code == 0
    [session] = leader.sessions.sessions.values()
    assert session.epoch == 2
    # The session's epochs are checked here as anywhere.
    stale = await request(leader, version, fetch_request(1, False))
    assert stale.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [1, 2])
async def test_a_share_acknowledge_is_sent_to_the_node_holding_the_shard(version: int) -> None:
    leader = leader_at(shard_map(owner=2, epoch=7))
    await request(leader, version, fetch_request(0, False))
    acknowledgement = sak.ShareAcknowledgeRequest(
        group_id=GROUP,
        member_id="m",
        share_session_epoch=1,
        topics=[
            sak.AcknowledgeTopic(
                topic_id=TOPIC,
                partitions=[
                    sak.AcknowledgePartition(
                        partition_index=0, acknowledgement_batches=[sak.AcknowledgementBatch(0, 0, [1])]
                    )
                ],
            )
        ],
    )
    response = await request(leader, version, acknowledgement)
    decoded = on_the_wire(ApiKey.SHARE_ACKNOWLEDGE, version, response)
    assert [(e.node_id, e.port) for e in decoded.node_endpoints] == [(2, 9002)]
    [[p]] = [t.partitions for t in decoded.responses]
    assert p.error_code == NOT_LEADER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 7)


@pytest.mark.asyncio
async def test_a_shard_without_a_live_owner_names_no_leader() -> None:
    """The client falls back to Metadata and tries again (Kafka: leader -1, epoch -1)."""
    leader = leader_at(shard_map(owner=None))
    response = await request(leader, 2, fetch_request(0, False))
    assert response.node_endpoints == []
    for p in response.responses[0].partitions:
        assert p.error_code == NOT_LEADER
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (-1, -1)


@pytest.mark.asyncio
async def test_a_shard_loading_here_names_no_leader() -> None:
    """A takeover loading the group's shard: the members are not known yet (UNKNOWN_MEMBER_ID
    is fatal to Kafka's share consumer), so the answer is retriable, and the shard is wanted."""
    shards = shard_map(owner=None)
    shard = shards.shard_of(GROUP)
    shards.move(shard, ShardState.LOADING)
    wanted: list[int] = []
    shards.on_wanted = wanted.append
    response = await request(leader_at(shards), 2, fetch_request(0, False))
    for p in response.responses[0].partitions:
        assert p.error_code == NOT_LEADER
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (-1, -1)
    assert wanted == [shard]


def test_the_hint_follows_the_shard_and_its_epoch() -> None:
    shards = shard_map(owner=2, epoch=3)
    assert shards.status(GROUP, 1_000) is None  # not held here: the request is answered with a hint
    owner, epoch = shards.leader(GROUP, 1_000)
    assert owner is not None and (owner.node_id, epoch) == (2, 3)
    # A takeover by this node: the group is served here, no hint.
    shard = shards.shard_of(GROUP)
    shards.owners = {}
    shards.move(shard, ShardState.LOADING)
    shards.move(shard, ShardState.ACTIVE)
    shards.epochs[shard] = 4
    assert shards.status(GROUP, 1_000) is ShardState.ACTIVE
    owner, epoch = shards.leader(GROUP, 1_000)
    assert owner is not None and (owner.node_id, epoch) == (1, 4)


def test_one_process_holds_every_group() -> None:
    shards = ShardMap.for_one_process(50, 0)
    assert shards.status(GROUP, 0) is ShardState.ACTIVE
