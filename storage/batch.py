"""Reduce an ordered batch of records to one statement list per table.

Storage is a state table, so within a batch only the last record per key matters. Reducing
first makes every key appear once, which lets the SQL backends run one bulk upsert and one
bulk delete per table in any order (and keeps PostgreSQL's ``ON CONFLICT DO UPDATE`` from
seeing a key twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from storage.records import (
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
    TopicRecord,
    TopicTombstone,
)

OffsetKey = tuple[str, str, int]


@dataclass(slots=True)
class BatchPlan:
    offset_upserts: list[OffsetCommitRecord] = field(default_factory=list)
    offset_deletes: list[OffsetKey] = field(default_factory=list)
    group_upserts: list[GroupMetadataRecord] = field(default_factory=list)
    group_deletes: list[str] = field(default_factory=list)
    topic_upserts: list[TopicRecord] = field(default_factory=list)
    topic_deletes: list[str] = field(default_factory=list)
    # Every offset commit of the batch in order, superseded ones included (commit history).
    commits: list[OffsetCommitRecord] = field(default_factory=list)


def plan_batch(records: Sequence[Record]) -> BatchPlan:
    offsets: dict[OffsetKey, OffsetCommitRecord | None] = {}
    groups: dict[str, GroupMetadataRecord | None] = {}
    topics: dict[str, TopicRecord | None] = {}
    commits: list[OffsetCommitRecord] = []
    for r in records:
        if isinstance(r, OffsetCommitRecord):
            offsets[(r.group_id, r.topic, r.partition)] = r
            commits.append(r)
        elif isinstance(r, OffsetTombstone):
            offsets[(r.group_id, r.topic, r.partition)] = None
        elif isinstance(r, GroupMetadataRecord):
            groups[r.group_id] = r
        elif isinstance(r, GroupTombstone):
            groups[r.group_id] = None
        elif isinstance(r, TopicRecord):
            topics[r.name] = r
        elif isinstance(r, TopicTombstone):
            topics[r.name] = None
        else:
            raise TypeError(f"not a storage record: {r!r}")

    plan = BatchPlan(commits=commits)
    for key, rec in offsets.items():
        if rec is None:
            plan.offset_deletes.append(key)
        else:
            plan.offset_upserts.append(rec)
    for group_id, grec in groups.items():
        if grec is None:
            plan.group_deletes.append(group_id)
        else:
            plan.group_upserts.append(grec)
    for name, trec in topics.items():
        if trec is None:
            plan.topic_deletes.append(name)
        else:
            plan.topic_upserts.append(trec)
    return plan
