"""KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe, with the error paths
(fenced member epoch, unknown member, a join without a subscription, a stale epoch in
OffsetCommit) and the leave."""

from __future__ import annotations

from protocol.apis import ApiKey
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from tests.kafka.corpus import PARTITIONS, VERSION, Await, Context, Names, Scenario, Step, Until
from tests.kafka.corpus.classic import fetch

MEMBER = "corpus-member-0000000a"
STRANGER = "corpus-member-0000000z"


def _heartbeat(
    names: Names, ctx: Context, epoch: int | None = None, join: bool = False, **fields: object
) -> ConsumerGroupHeartbeatRequest:
    request = ConsumerGroupHeartbeatRequest(
        group_id=names.group,
        member_id=MEMBER,
        member_epoch=ctx.get("epoch", 0) if epoch is None else epoch,
    )
    if join:
        request.rebalance_timeout_ms = 30_000
        request.subscribed_topic_names = [names.topic]
        request.topic_partitions = []
    for key, value in fields.items():
        setattr(request, key, value)
    return request


def _keep_epoch(answer: object, ctx: Context) -> None:
    epoch = getattr(answer, "member_epoch", -1)
    if epoch > 0:
        ctx["epoch"] = epoch


def _commit(names: Names, ctx: Context, epoch_delta: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=names.group,
        generation_id_or_member_epoch=ctx["epoch"] + epoch_delta,
        member_id=MEMBER,
        topics=[
            OffsetCommitRequestTopic(
                name=names.topic,
                partitions=[
                    OffsetCommitRequestPartition(partition_index=p, committed_offset=1)
                    for p in range(PARTITIONS)
                ],
            )
        ],
    )


def member_life(v: int, names: Names) -> list[Step | Await | Until]:
    hb = ApiKey.CONSUMER_GROUP_HEARTBEAT
    describe = ApiKey.CONSUMER_GROUP_DESCRIBE
    return [
        Step(hb, lambda c: _heartbeat(names, c, epoch=0, join=True, subscribed_topic_names=None), v),
        Step(hb, lambda c: _heartbeat(names, c, epoch=0, join=True), v, capture=_keep_epoch),
        Step(hb, lambda c: _heartbeat(names, c, epoch=c["epoch"] + 5), v),
        Step(hb, lambda c: _heartbeat(names, c, member_id=STRANGER, epoch=3), v),
        Step(describe, lambda c: ConsumerGroupDescribeRequest(group_ids=[names.group, names.other_group])),
        Step(ApiKey.OFFSET_COMMIT, lambda c: _commit(names, c, 0)),
        Step(ApiKey.OFFSET_COMMIT, lambda c: _commit(names, c, -1)),
        Step(ApiKey.OFFSET_FETCH, lambda c: fetch(names.group, names.topic, c[VERSION])),
        Step(hb, lambda c: _heartbeat(names, c, epoch=-1), v),
        Step(describe, lambda c: ConsumerGroupDescribeRequest(group_ids=[names.group])),
    ]


SCENARIOS = [
    Scenario("consumer-member-life", ApiKey.CONSUMER_GROUP_HEARTBEAT, member_life),
    Scenario(
        "consumer-describe",
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        lambda v, n: [
            Step(s.api, s.request, v, s.connection, s.wait, s.capture, s.only)
            if isinstance(s, Step) and s.api == ApiKey.CONSUMER_GROUP_DESCRIBE
            else s
            for s in member_life(1, n)
        ],
    ),
]
