"""The stored rows of streams groups, both ways (docs/streams-groups.md#persistence).

A group row carries the epochs and the topology; a member row the member's epochs, state and
process, and a JSON document of the rest: its metadata, its assigned tasks, tasks pending
revocation and its target. Restored, a group is at the epochs it had, every member holds what it
held: nothing is recomputed, so a restart causes no rebalance.
"""

from __future__ import annotations

import json
from typing import Any

from coordinator.core.streams.group import MemberState, StreamsGroup, StreamsMember, TaskMap, TaskSets
from coordinator.core.streams.topology import InternalTopic, Subtopology, Topology
from storage.records import StreamsGroupRecord, StreamsMemberRecord


def _topic_json(t: InternalTopic) -> list[Any]:
    return [t.name, t.partitions, t.replication_factor, [list(kv) for kv in t.configs]]


def _topic(raw: list[Any]) -> InternalTopic:
    return InternalTopic(raw[0], raw[1], raw[2], tuple((k, v) for k, v in raw[3]))


def topology_json(topology: Topology | None) -> str:
    if topology is None:
        return ""
    return json.dumps(
        {
            "epoch": topology.epoch,
            "subtopologies": [
                {
                    "id": s.subtopology_id,
                    "sources": list(s.source_topics),
                    "repartition_sinks": list(s.repartition_sink_topics),
                    "repartition_sources": [_topic_json(t) for t in s.repartition_source_topics],
                    "changelogs": [_topic_json(t) for t in s.changelog_topics],
                    "copartition_groups": [sorted(g) for g in s.copartition_groups],
                }
                for s in topology.subtopologies
            ],
        },
        separators=(",", ":"),
    )


def topology_from_json(text: str) -> Topology | None:
    if not text:
        return None
    raw = json.loads(text)
    return Topology(
        raw["epoch"],
        tuple(
            Subtopology(
                s["id"],
                tuple(s["sources"]),
                tuple(s["repartition_sinks"]),
                tuple(_topic(t) for t in s["repartition_sources"]),
                tuple(_topic(t) for t in s["changelogs"]),
                tuple(frozenset(g) for g in s["copartition_groups"]),
            )
            for s in raw["subtopologies"]
        ),
    )


def _tasks_json(tasks: TaskSets) -> list[dict[str, list[int]]]:
    return [
        {s: sorted(ps) for s, ps in sorted(m.items())} for m in (tasks.active, tasks.standby, tasks.warmup)
    ]


def _tasks(raw: list[dict[str, list[int]]]) -> TaskSets:
    maps: list[TaskMap] = [{s: frozenset(ps) for s, ps in m.items()} for m in raw]
    return TaskSets(*maps)


def group_record(group: StreamsGroup) -> StreamsGroupRecord:
    return StreamsGroupRecord(
        group.group_id,
        group.group_epoch,
        group.assignment_epoch,
        group.state_ms,
        topology_json(group.topology),
    )


def member_record(group: StreamsGroup, member: StreamsMember) -> StreamsMemberRecord:
    details = {
        "rack_id": member.rack_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "topology_epoch": member.topology_epoch,
        "user_endpoint": None if member.user_endpoint is None else list(member.user_endpoint),
        "client_tags": [list(kv) for kv in member.client_tags],
        "assigned": _tasks_json(member.assigned),
        "pending_revocation": _tasks_json(member.pending_revocation),
        "target": _tasks_json(group.target.get(member.member_id, TaskSets())),
    }
    return StreamsMemberRecord(
        group.group_id,
        member.member_id,
        member.instance_id,
        member.member_epoch,
        member.previous_member_epoch,
        int(member.state),
        member.process_id,
        json.dumps(details, separators=(",", ":")),
    )


def group_from_record(record: StreamsGroupRecord) -> StreamsGroup:
    return StreamsGroup(
        record.group_id,
        group_epoch=record.group_epoch,
        assignment_epoch=record.assignment_epoch,
        state_ms=record.state_ms,
        topology=topology_from_json(record.topology),
    )


def add_member_from_record(group: StreamsGroup, record: StreamsMemberRecord) -> None:
    raw = json.loads(record.details)
    endpoint = raw["user_endpoint"]
    member = StreamsMember(
        record.member_id,
        member_epoch=record.member_epoch,
        previous_member_epoch=record.previous_member_epoch,
        state=MemberState(record.state),
        instance_id=record.instance_id,
        rack_id=raw["rack_id"],
        client_id=raw["client_id"],
        client_host=raw["client_host"],
        rebalance_timeout_ms=raw["rebalance_timeout_ms"],
        topology_epoch=raw["topology_epoch"],
        process_id=record.process_id,
        user_endpoint=None if endpoint is None else (endpoint[0], endpoint[1]),
        client_tags=tuple((k, v) for k, v in raw["client_tags"]),
        assigned=_tasks(raw["assigned"]),
        pending_revocation=_tasks(raw["pending_revocation"]),
    )
    group.members[member.member_id] = member
    if member.instance_id is not None:
        group.static_members[member.instance_id] = member.member_id
    group.target[member.member_id] = _tasks(raw["target"])
    group.add_ownership(member)
