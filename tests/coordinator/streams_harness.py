"""Helpers for streams-group tests on the pure core (docs/streams-groups.md)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.streams.group import StreamsGroup
from coordinator.core.streams.manager import StreamsGroupManager
from protocol.messages import streams_group_heartbeat as sgh
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from tests.coordinator.harness import Harness, Reply

STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 88, 89
UNSET: Any = object()
Tasks = Mapping[str, Collection[int]]


def streams_settings(**settings: Any) -> BrokerGroupSettings:
    """Broker settings for streams tests: no initial rebalance delay and no assignment interval
    unless a test sets one."""
    return BrokerGroupSettings(
        **{
            "group_streams_initial_rebalance_delay_ms": 0,
            "group_streams_assignment_interval_ms": 0,
            **settings,
        }
    )


def word_count(epoch: int = 1, repartition_partitions: int = 0) -> sgh.Topology:
    """A word count: subtopology 0 reads ``words`` and writes the repartition topic that
    subtopology 1 reads and counts into a store with a changelog."""
    return sgh.Topology(
        epoch=epoch,
        subtopologies=[
            sgh.Subtopology(
                subtopology_id="0",
                source_topics=["words"],
                repartition_sink_topics=["app-counts-repartition"],
            ),
            sgh.Subtopology(
                subtopology_id="1",
                source_topics=["app-counts-repartition"],
                repartition_source_topics=[sgh.TopicInfo("app-counts-repartition", repartition_partitions)],
                state_changelog_topics=[sgh.TopicInfo("app-counts-changelog")],
            ),
        ],
    )


def _task_ids(tasks: Tasks | None) -> list[sgh.TaskIds] | None:
    return None if tasks is None else [sgh.TaskIds(s, sorted(ps)) for s, ps in tasks.items()]


def _task_offsets(offsets: Mapping[tuple[str, int], int] | None) -> list[sgh.TaskOffset] | None:
    return None if offsets is None else [sgh.TaskOffset(s, p, o) for (s, p), o in sorted(offsets.items())]


def sg_heartbeat(
    h: Harness,
    group: str = "app",
    member_id: str = "m1",
    epoch: int = 0,
    *,
    version: int = 1,
    topology: sgh.Topology | None = UNSET,
    process_id: str | None = UNSET,
    instance_id: str | None = None,
    rebalance_timeout_ms: int = UNSET,
    active: Tasks | None = UNSET,
    standby: Tasks | None = UNSET,
    warmup: Tasks | None = UNSET,
    endpoint_epoch: int = 0,
    user_endpoint: tuple[str, int] | None = None,
    task_offsets: Mapping[tuple[str, int], int] | None = None,
    task_end_offsets: Mapping[tuple[str, int], int] | None = None,
    client_tags: Mapping[str, str] | None = None,
) -> Reply:
    joining = epoch == 0
    request = sgh.StreamsGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        endpoint_information_epoch=endpoint_epoch,
        instance_id=instance_id,
        rebalance_timeout_ms=(30_000 if joining else -1)
        if rebalance_timeout_ms is UNSET
        else rebalance_timeout_ms,
        topology=(word_count() if joining else None) if topology is UNSET else topology,
        active_tasks=_task_ids(({} if joining else None) if active is UNSET else active),
        standby_tasks=_task_ids(({} if joining else None) if standby is UNSET else standby),
        warmup_tasks=_task_ids(({} if joining else None) if warmup is UNSET else warmup),
        process_id=(f"process-{member_id}" if joining else None) if process_id is UNSET else process_id,
        user_endpoint=None if user_endpoint is None else sgh.Endpoint(*user_endpoint),
        task_offsets=_task_offsets(task_offsets),
        task_end_offsets=_task_offsets(task_end_offsets),
        client_tags=None if client_tags is None else [sgh.KeyValue(k, v) for k, v in client_tags.items()],
    )
    ctx = h.ctx(STREAMS_GROUP_HEARTBEAT, version)
    h.apply(h.coordinator.handle(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


def sg_describe(h: Harness, *groups: str, version: int = 1) -> Reply:
    ctx = h.ctx(STREAMS_GROUP_DESCRIBE, version)
    h.apply(h.coordinator.handle(ctx, StreamsGroupDescribeRequest(list(groups))))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


def sgroup(h: Harness, group: str = "app") -> StreamsGroup:
    return h.coordinator.kind(StreamsGroupManager).groups[group]


def tasks_of(wire: list[sgh.TaskIds] | None) -> dict[str, set[int]] | None:
    if wire is None:
        return None
    return {t.subtopology_id: set(t.partitions) for t in wire if t.partitions}


@dataclass
class StreamsClient:
    """A streams member that does what Kafka Streams does: it reports what it owns and gives up
    revoked tasks on its next heartbeat."""

    h: Harness
    member_id: str
    group: str = "app"
    process_id: str | None = None
    epoch: int = 0
    active: dict[str, set[int]] = field(default_factory=dict)
    standby: dict[str, set[int]] = field(default_factory=dict)
    warmup: dict[str, set[int]] = field(default_factory=dict)

    def join(self, topology: sgh.Topology | None = None) -> Reply:
        reply = sg_heartbeat(
            self.h,
            self.group,
            self.member_id,
            0,
            topology=topology or word_count(),
            process_id=self.process_id or f"process-{self.member_id}",
        )
        return self._absorb(reply)

    def beat(self) -> Reply:
        reply = sg_heartbeat(
            self.h,
            self.group,
            self.member_id,
            self.epoch,
            active=self.active,
            standby=self.standby,
            warmup=self.warmup,
        )
        return self._absorb(reply)

    def _absorb(self, reply: Reply) -> Reply:
        response = reply.wire
        if response.error_code == 0:
            self.epoch = response.member_epoch
            if response.active_tasks is not None:
                self.active = tasks_of(response.active_tasks) or {}
                self.standby = tasks_of(response.standby_tasks) or {}
                self.warmup = tasks_of(response.warmup_tasks) or {}
        return reply

    def tasks(self) -> set[tuple[str, int]]:
        return {(s, p) for s, ps in self.active.items() for p in ps}
