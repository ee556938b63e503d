"""Helpers for KIP-848 consumer-group tests on the pure core (docs/groups.md#consumer-groups-kip-848)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coordinator.core.consumer.group import ConsumerGroup
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest, TopicPartitions
from tests.coordinator.harness import Harness, Reply, consumer_group_of

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
UNSET: Any = object()


def cg_heartbeat(
    h: Harness,
    group: str = "g",
    member_id: str = "m1",
    epoch: int = 0,
    *,
    version: int = 1,
    instance_id: str | None = None,
    rack_id: str | None = None,
    rebalance_timeout_ms: int = UNSET,
    topics: Sequence[str] | None = UNSET,
    regex: str | None = None,
    assignor: str | None = None,
    owned: Mapping[str, Sequence[int]] | None = UNSET,
    client_id: str = "client",
) -> Reply:
    """A ConsumerGroupHeartbeat; joins (epoch 0) get the mandatory fields filled in."""
    joining = epoch == 0
    if rebalance_timeout_ms is UNSET:
        rebalance_timeout_ms = 30_000 if joining else -1
    if topics is UNSET:
        topics = ["t"] if joining and regex is None else None
    if owned is UNSET:
        owned = {} if joining else None
    request = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=None if topics is None else list(topics),
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=None
        if owned is None
        else [
            TopicPartitions(topic_id=h.catalog.topics[t].topic_id, partitions=list(ps))
            for t, ps in owned.items()
        ],
    )
    ctx = h.ctx(CONSUMER_GROUP_HEARTBEAT, version, client_id)
    h.apply(h.coordinator.handle(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


def cg_describe(h: Harness, *groups: str, version: int = 1, include_operations: bool = False) -> Reply:
    ctx = h.ctx(CONSUMER_GROUP_DESCRIBE, version)
    h.apply(h.coordinator.handle(ctx, ConsumerGroupDescribeRequest(list(groups), include_operations)))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


def assignment_of(h: Harness, reply: Reply) -> dict[str, set[int]] | None:
    """The Assignment of a heartbeat response by topic name (None when the response has none)."""
    wire = reply.wire
    assert wire.error_code == 0, (wire.error_code, wire.error_message)
    if wire.assignment is None:
        return None
    out: dict[str, set[int]] = {}
    for tp in wire.assignment.topic_partitions:
        topic = h.catalog.topic_by_id(tp.topic_id)
        assert topic is not None
        out[topic.name] = set(tp.partitions)
    return out


def cgroup(h: Harness, group: str = "g") -> ConsumerGroup:
    found = consumer_group_of(h.coordinator, group)
    assert found is not None, f"no consumer group {group}"
    return found


@dataclass
class Client:
    """A well-behaved KIP-848 consumer: it heartbeats with its epoch, reports what it owns, and
    revokes immediately what the coordinator takes away (it never uses a partition it was not
    given). ``history`` records every owned set, to check that no partition is ever owned twice."""

    h: Harness
    member_id: str
    group: str = "g"
    topics: Sequence[str] = ("t",)
    instance_id: str | None = None
    assignor: str | None = None
    epoch: int = 0
    owned: dict[str, set[int]] = field(default_factory=dict)
    last: Reply | None = None

    def join(self) -> Reply:
        self.epoch = 0
        self.owned = {}
        reply = cg_heartbeat(
            self.h,
            self.group,
            self.member_id,
            0,
            topics=self.topics,
            instance_id=self.instance_id,
            assignor=self.assignor,
        )
        return self._absorb(reply)

    def beat(self) -> Reply:
        reply = cg_heartbeat(
            self.h,
            self.group,
            self.member_id,
            self.epoch,
            instance_id=self.instance_id,
            owned={t: sorted(ps) for t, ps in self.owned.items() if ps},
        )
        return self._absorb(reply)

    def _absorb(self, reply: Reply) -> Reply:
        self.last = reply
        wire = reply.wire
        if wire.error_code == 0:
            self.epoch = wire.member_epoch
            new = assignment_of(self.h, reply)
            if new is not None:
                self.owned = {t: ps for t, ps in new.items() if ps}
        return reply

    def partitions(self) -> set[tuple[str, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}
