"""Record builders and a comparable view of a LoadedState."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any

from storage.records import (
    ConsumerGroupRecord,
    ConsumerGroupTombstone,
    ConsumerMemberRecord,
    ConsumerMemberTombstone,
    GroupConfigRecord,
    GroupConfigTombstone,
    GroupMetadataRecord,
    GroupTombstone,
    LoadedState,
    MemberRecord,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
    TopicPartitionList,
    TopicRecord,
    TopicTombstone,
)


def offset(
    group_id: str = "g",
    topic: str = "t",
    partition: int = 0,
    offset: int = 10,
    *,
    leader_epoch: int = -1,
    metadata: str = "",
    commit_ms: int = 1_700_000_000_000,
    expire_ms: int | None = None,
) -> OffsetCommitRecord:
    return OffsetCommitRecord(
        group_id, topic, partition, offset, leader_epoch, metadata, commit_ms, expire_ms
    )


def member(member_id: str = "m-1", **overrides: object) -> MemberRecord:
    fields: dict[str, object] = {
        "member_id": member_id,
        "group_instance_id": None,
        "client_id": "client",
        "client_host": "/127.0.0.1",
        "rebalance_timeout_ms": 300_000,
        "session_timeout_ms": 45_000,
        "subscription": b"\x00\x01sub",
        "assignment": b"\x00\x01assign",
    }
    fields.update(overrides)
    return MemberRecord(**fields)  # type: ignore[arg-type]


def group(
    group_id: str = "g", *, generation_id: int = 1, members: tuple[MemberRecord, ...] = (), **kw: object
) -> GroupMetadataRecord:
    fields: dict[str, object] = {
        "protocol_type": "consumer",
        "protocol_name": "range",
        "leader_id": members[0].member_id if members else None,
        "state_ms": 1_700_000_000_000,
    }
    fields.update(kw)
    return GroupMetadataRecord(group_id=group_id, generation_id=generation_id, members=members, **fields)  # type: ignore[arg-type]


def topic(
    name: str = "t", *, num_partitions: int = 3, configs: tuple[tuple[str, str | None], ...] = ()
) -> TopicRecord:
    return TopicRecord(name, uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes, num_partitions, 1, configs)


def consumer_group(
    group_id: str = "cg",
    *,
    group_epoch: int = 1,
    assignment_epoch: int = 1,
    state_ms: int = 1_700_000_000_000,
) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(group_id, group_epoch, assignment_epoch, state_ms)


def consumer_member(
    group_id: str = "cg",
    member_id: str = "cm-1",
    *,
    member_epoch: int = 1,
    assigned: TopicPartitionList = (("t", (0, 1)),),
    **overrides: Any,
) -> ConsumerMemberRecord:
    base = ConsumerMemberRecord(
        group_id=group_id,
        member_id=member_id,
        instance_id=None,
        rack_id=None,
        client_id="client",
        client_host="/127.0.0.1",
        subscribed_topic_names=("t",),
        subscribed_topic_regex=None,
        server_assignor="uniform",
        rebalance_timeout_ms=300_000,
        member_epoch=member_epoch,
        previous_member_epoch=member_epoch - 1,
        state=0,
        assigned=assigned,
        pending_revocation=(),
        target=assigned,
    )
    return dataclasses.replace(base, **overrides)


@dataclass(frozen=True)
class Snapshot:
    topics: dict[str, TopicRecord]
    groups: dict[str, GroupMetadataRecord]
    offsets: dict[tuple[str, str, int], OffsetCommitRecord]
    consumer_groups: dict[str, ConsumerGroupRecord] = field(default_factory=dict)
    consumer_members: dict[tuple[str, str], ConsumerMemberRecord] = field(default_factory=dict)
    group_configs: dict[tuple[str, str], GroupConfigRecord] = field(default_factory=dict)


def snapshot(state: LoadedState) -> Snapshot:
    snap = Snapshot(
        topics={t.name: t for t in state.topics},
        groups={g.group_id: g for g in state.groups},
        offsets={(o.group_id, o.topic, o.partition): o for o in state.offsets},
        consumer_groups={g.group_id: g for g in state.consumer_groups},
        consumer_members={(m.group_id, m.member_id): m for m in state.consumer_members},
        group_configs={(c.group_id, c.name): c for c in state.group_configs},
    )
    # A backend returning a key twice would be a bug the dicts would hide.
    assert len(snap.topics) == len(state.topics)
    assert len(snap.groups) == len(state.groups)
    assert len(snap.offsets) == len(state.offsets)
    assert len(snap.consumer_groups) == len(state.consumer_groups)
    assert len(snap.consumer_members) == len(state.consumer_members)
    assert len(snap.group_configs) == len(state.group_configs)
    return snap


def apply_model(model: Snapshot, records: list[Record]) -> None:
    """Reference semantics: records applied in order, last write per key wins."""
    for r in records:
        if isinstance(r, OffsetCommitRecord):
            model.offsets[(r.group_id, r.topic, r.partition)] = r
        elif isinstance(r, OffsetTombstone):
            model.offsets.pop((r.group_id, r.topic, r.partition), None)
        elif isinstance(r, GroupMetadataRecord):
            model.groups[r.group_id] = r
        elif isinstance(r, GroupTombstone):
            model.groups.pop(r.group_id, None)
        elif isinstance(r, TopicRecord):
            model.topics[r.name] = r
        elif isinstance(r, TopicTombstone):
            model.topics.pop(r.name, None)
        elif isinstance(r, ConsumerGroupRecord):
            model.consumer_groups[r.group_id] = r
        elif isinstance(r, ConsumerGroupTombstone):
            model.consumer_groups.pop(r.group_id, None)
            for key in [k for k in model.consumer_members if k[0] == r.group_id]:
                del model.consumer_members[key]
        elif isinstance(r, ConsumerMemberRecord):
            model.consumer_members[(r.group_id, r.member_id)] = r
        elif isinstance(r, ConsumerMemberTombstone):
            model.consumer_members.pop((r.group_id, r.member_id), None)
        elif isinstance(r, GroupConfigRecord):
            model.group_configs[(r.group_id, r.name)] = r
        elif isinstance(r, GroupConfigTombstone):
            model.group_configs.pop((r.group_id, r.name), None)
        else:
            raise AssertionError(f"the model does not know {r!r}")
