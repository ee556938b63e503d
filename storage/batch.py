"""Reduce an ordered batch of records to one statement list per table.

Storage is a state table, so within a batch only the last record per key matters. Reducing
first makes every key appear once, which lets the SQL backends run one bulk upsert and one
bulk delete per table in any order (and keeps PostgreSQL's ``ON CONFLICT DO UPDATE`` from
seeing a key twice).

Consumer groups (KIP-848) add one cross-key rule: a ``ConsumerGroupTombstone`` deletes the
group row and every member row of the group. In the batch it cancels the group's member records
before it, so the group's remaining member records all come after its last tombstone: backends
run the group-wide member delete (``ConsumerPlan.member_wipes``) first, then the member
deletes and upserts. A group id wiped and then upserted in one batch appears both in
``member_wipes`` and in ``group_upserts``. Classic and consumer groups are separate tables,
so a ``GroupTombstone`` and a ``ConsumerGroupRecord`` of one id both apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from storage.records import (
    AclRecord,
    AclTombstone,
    ConsumerGroupRecord,
    ConsumerGroupTombstone,
    ConsumerMemberRecord,
    ConsumerMemberTombstone,
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
ConsumerMemberKey = tuple[str, str]


@dataclass(slots=True)
class ConsumerPlan:
    """The consumer-group part of a batch; apply in this order: ``member_wipes`` (delete every
    member row of these groups), then the rest in any order (each key appears once)."""

    member_wipes: list[str] = field(default_factory=list)
    member_deletes: list[ConsumerMemberKey] = field(default_factory=list)
    member_upserts: list[ConsumerMemberRecord] = field(default_factory=list)
    group_deletes: list[str] = field(default_factory=list)
    group_upserts: list[ConsumerGroupRecord] = field(default_factory=list)


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
    # None when the batch holds no consumer-group record (keeps the offset path free of it).
    consumer: ConsumerPlan | None = None


def plan_batch(records: Sequence[Record]) -> BatchPlan:
    offsets: dict[OffsetKey, OffsetCommitRecord | None] = {}
    groups: dict[str, GroupMetadataRecord | None] = {}
    topics: dict[str, TopicRecord | None] = {}
    commits: list[OffsetCommitRecord] = []
    credentials: dict[tuple[str, str], UserCredentialRecord | None] = {}
    acls: dict[AclRecord, bool] = {}
    consumer: _ConsumerReducer | None = None  # created on the first consumer-group record
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
        elif isinstance(r, _CONSUMER_RECORDS):
            if consumer is None:
                consumer = _ConsumerReducer()
            consumer.add(r)
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
    if consumer is not None:
        plan.consumer = consumer.plan()
    return plan


_CONSUMER_RECORDS: Final = (
    ConsumerMemberRecord,
    ConsumerMemberTombstone,
    ConsumerGroupRecord,
    ConsumerGroupTombstone,
)


class _ConsumerReducer:
    __slots__ = ("groups", "members", "wipes")

    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroupRecord | None] = {}
        # group_id -> member_id -> last record (None: tombstone); per group so a wipe is O(1)
        self.members: dict[str, dict[str, ConsumerMemberRecord | None]] = {}
        self.wipes: dict[str, None] = {}  # an ordered set

    def add(
        self,
        r: ConsumerMemberRecord | ConsumerMemberTombstone | ConsumerGroupRecord | ConsumerGroupTombstone,
    ) -> None:
        if isinstance(r, ConsumerMemberRecord):
            self.members.setdefault(r.group_id, {})[r.member_id] = r
        elif isinstance(r, ConsumerMemberTombstone):
            self.members.setdefault(r.group_id, {})[r.member_id] = None
        elif isinstance(r, ConsumerGroupRecord):
            self.groups[r.group_id] = r
        else:
            self.groups[r.group_id] = None
            self.wipes[r.group_id] = None
            self.members.pop(r.group_id, None)  # earlier member records are superseded by the wipe

    def plan(self) -> ConsumerPlan:
        plan = ConsumerPlan(member_wipes=list(self.wipes))
        for group_id, grec in self.groups.items():
            if grec is None:
                plan.group_deletes.append(group_id)
            else:
                plan.group_upserts.append(grec)
        for group_id, by_member in self.members.items():
            for member_id, mrec in by_member.items():
                if mrec is None:
                    plan.member_deletes.append((group_id, member_id))
                else:
                    plan.member_upserts.append(mrec)
        return plan
