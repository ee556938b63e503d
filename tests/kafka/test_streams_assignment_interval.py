"""The streams assignment interval against Kafka 4.4 (docs/streams-groups.md#the-assignment-interval):
two members joining within the group's streams.assignment.interval.ms get the same answers from
Kafka's coordinator and from ours -- the second one waits, told ASSIGNMENT_DELAYED with Kafka's
detail, and gets its tasks once the interval is over."""

from __future__ import annotations

import time
from typing import Any

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import streams_group_heartbeat as sgh
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from tests.kafka.conftest import Sides
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka

GROUP_RESOURCE, SET = 32, 0
INTERVAL_MS = 5000  # wide, so that the second join lands within it on a loaded machine
MISSING_SOURCE_TOPICS = 1
LOADING = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE})


def _topology(topic: str) -> sgh.Topology:
    return sgh.Topology(epoch=1, subtopologies=[sgh.Subtopology(subtopology_id="0", source_topics=[topic])])


def _join(
    client: WireClient, group: str, member: str, topic: str, retriable: frozenset[int] = frozenset()
) -> sgh.StreamsGroupHeartbeatResponse:
    request = sgh.StreamsGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=30000,
        topology=_topology(topic), active_tasks=[], standby_tasks=[], warmup_tasks=[],
        process_id=f"process-{member}",
    )  # fmt: skip
    response: sgh.StreamsGroupHeartbeatResponse = client.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, request)
    assert response.error_code == 0 or response.error_code in retriable, response
    return response


def _beat(
    client: WireClient, group: str, member: str, epoch: int, active: list[sgh.TaskIds]
) -> sgh.StreamsGroupHeartbeatResponse:
    request = sgh.StreamsGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, active_tasks=active, standby_tasks=[],
        warmup_tasks=[],
    )  # fmt: skip
    response: sgh.StreamsGroupHeartbeatResponse = client.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, request)
    assert response.error_code == 0, response
    return response


def _configure(client: WireClient, group: str) -> None:
    request = IncrementalAlterConfigsRequest(
        [
            AlterConfigsResource(
                GROUP_RESOURCE,
                group,
                [
                    AlterableConfig("streams.initial.rebalance.delay.ms", SET, "0"),
                    AlterableConfig("streams.assignment.interval.ms", SET, str(INTERVAL_MS)),
                ],
            )
        ]
    )
    (result,) = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request).responses
    assert result.error_code == 0, result


def _statuses(response: sgh.StreamsGroupHeartbeatResponse) -> list[tuple[int, str]]:
    return [(s.status_code, s.status_detail) for s in response.status or []]


def _tasks(response: sgh.StreamsGroupHeartbeatResponse) -> list[sgh.TaskIds] | None:
    return None if response.active_tasks is None else [t for t in response.active_tasks if t.partitions]


def _partitions(tasks: list[sgh.TaskIds] | None) -> int:
    return sum(len(t.partitions) for t in tasks or [])


def _scenario(bootstrap: str, group: str, topic: str) -> dict[str, Any]:
    """a joins alone (assigned at once), b joins within the interval (the target waits), then
    both heartbeat until b has tasks."""
    with WireClient(bootstrap) as client:
        _configure(client, group)
        a = _join(client, group, "a", topic)
        b = _join(client, group, "b", topic)
        a_tasks = _tasks(a) or []
        a_again = _beat(client, group, "a", a.member_epoch, a_tasks)
        # Epochs counted from a's first one: with no initial rebalance delay Kafka 4.4 starts a new
        # group at epoch 2, ours at 1 (docs/streams-groups.md#the-initial-rebalance-delay).
        base = a.member_epoch
        seen: dict[str, Any] = {
            "a_joined": (_statuses(a), _partitions(_tasks(a))),
            "b_joined": (b.member_epoch - base, _statuses(b), _partitions(_tasks(b))),
            "a_within": (a_again.member_epoch - base, _statuses(a_again)),
        }
        epochs = {"a": a_again.member_epoch, "b": b.member_epoch}
        owned = {"a": _tasks(a_again) or a_tasks, "b": _tasks(b) or []}
        deadline = time.monotonic() + INTERVAL_MS / 1000 + 30
        while not (_partitions(owned["a"]) == 1 and _partitions(owned["b"]) == 1):
            assert time.monotonic() < deadline, (seen, owned)
            time.sleep(0.5)
            for member in ("a", "b"):
                reply = _beat(client, group, member, epochs[member], owned[member])
                epochs[member] = reply.member_epoch
                if reply.active_tasks is not None:
                    owned[member] = _tasks(reply) or []
                seen[f"{member}_last"] = (_statuses(reply),)
        seen["settled_epochs"] = sorted(epoch - base for epoch in epochs.values())
        return seen


def _wait_for_topic(bootstrap: str, topic: str, probe: str) -> None:
    """Our gateway (just started: its groups still loading) learns upstream topics from its
    metadata refresh: wait until a streams group finds the source topic (a probe group, left)."""
    deadline = time.monotonic() + 30
    with WireClient(bootstrap) as client:
        while True:
            joined = _join(client, probe, "probe", topic, LOADING)
            if joined.error_code == 0:
                client.request(
                    ApiKey.STREAMS_GROUP_HEARTBEAT,
                    1,
                    sgh.StreamsGroupHeartbeatRequest(group_id=probe, member_id="probe", member_epoch=-1),
                )
                if MISSING_SOURCE_TOPICS not in [code for code, _ in _statuses(joined)]:
                    return
            assert time.monotonic() < deadline, joined
            time.sleep(0.3)


def test_members_joining_within_the_assignment_interval_get_kafkas_answers(sides: Sides, unique: str) -> None:
    topic, group = f"{unique}-in", f"{unique}-interval"
    with WireClient(sides.kafka) as client:
        created = client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic(topic, 2, 1)]))
        assert created.topics[0].error_code == 0, created
    _wait_for_topic(sides.ours, topic, f"{unique}-probe")
    seen = {side: _scenario(bootstrap, group, topic) for side, bootstrap in sides.items()}
    assert seen["ours"] == seen["kafka"]
    delayed = (5, "Assignment delayed due to the configured assignment interval.")
    assert seen["kafka"]["b_joined"][1] == [delayed]
    assert seen["kafka"]["a_joined"] == ([], 2)
    assert seen["kafka"]["settled_epochs"] == [1, 1]
