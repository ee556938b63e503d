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
    AclRecord,
    AclTombstone,
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
    TopicRecord,
    TopicTombstone,
    UserCredentialRecord,
    UserCredentialTombstone,
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
    credential_upserts: list[UserCredentialRecord] = field(default_factory=list)
    credential_deletes: list[tuple[str, str]] = field(default_factory=list)
    acl_upserts: list[AclRecord] = field(default_factory=list)
    acl_deletes: list[AclRecord] = field(default_factory=list)
    # Every offset commit of the batch in order, superseded ones included (commit history).
    commits: list[OffsetCommitRecord] = field(default_factory=list)


def plan_batch(records: Sequence[Record]) -> BatchPlan:
    offsets: dict[OffsetKey, OffsetCommitRecord | None] = {}
    groups: dict[str, GroupMetadataRecord | None] = {}
    topics: dict[str, TopicRecord | None] = {}
    commits: list[OffsetCommitRecord] = []
    credentials: dict[tuple[str, str], UserCredentialRecord | None] = {}
    acls: dict[AclRecord, bool] = {}
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
        elif isinstance(r, UserCredentialRecord):
            credentials[(r.user, r.mechanism)] = r
        elif isinstance(r, UserCredentialTombstone):
            credentials[(r.user, r.mechanism)] = None
        elif isinstance(r, AclRecord):
            acls[r] = True
        elif isinstance(r, AclTombstone):
            acls[r.acl] = False
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
    for ckey, crec in credentials.items():
        if crec is None:
            plan.credential_deletes.append(ckey)
        else:
            plan.credential_upserts.append(crec)
    for acl, present in acls.items():
        (plan.acl_upserts if present else plan.acl_deletes).append(acl)
    return plan
