"""plan_batch: one entry per key and table, and the consumer-group wipe rule."""

from __future__ import annotations

import pytest

from storage.batch import plan_batch
from storage.records import (
    AclRecord,
    AclTombstone,
    ConsumerGroupTombstone,
    ConsumerMemberTombstone,
    GroupTombstone,
    OffsetTombstone,
    TopicTombstone,
)
from storage.tables import CONSUMER_GROUPS, CONSUMER_MEMBERS, GROUPS, OFFSETS, TOPICS
from tests.storage.helpers import consumer_group, consumer_member, group, offset, topic


def test_only_touched_tables_are_planned() -> None:
    plan = plan_batch([offset(partition=p) for p in range(10)] + [group(), GroupTombstone("h"), topic()])
    assert [c.table for c in plan.tables] == [OFFSETS, GROUPS, TOPICS]
    assert plan.changes(CONSUMER_MEMBERS) is None
    assert [c.table for c in plan_batch([OffsetTombstone("g", "t", 0)]).tables] == [OFFSETS]


def test_last_record_per_key_wins_and_every_commit_is_kept_in_order() -> None:
    plan = plan_batch(
        [
            offset(partition=0, offset=1),
            offset(partition=1, offset=1),
            offset(partition=0, offset=2),
            OffsetTombstone("g", "t", 1),
            topic("a"),
            TopicTombstone("a"),
            TopicTombstone("b"),
            topic("b", num_partitions=7),
        ]
    )
    offsets = plan.changes(OFFSETS)
    assert offsets is not None
    assert [(o.partition, o.offset) for o in offsets.upserts] == [(0, 2)]
    assert offsets.deletes == [("g", "t", 1)]
    assert offsets.wipes == []
    topics = plan.changes(TOPICS)
    assert topics is not None
    # "b" deleted, then created anew: deleted first, as an upsert keeps a stored topic of
    # another id (TOPICS.identity).
    assert topics.deletes == ["a", "b"]
    assert [(t.name, t.num_partitions) for t in topics.upserts] == [("b", 7)]
    assert [(c.partition, c.offset) for c in plan.commits] == [(0, 1), (1, 1), (0, 2)]


def test_acl_bindings_are_their_own_key() -> None:
    acl = AclRecord(3, "g", 3, "User:a", "*", 3, 3)
    other = AclRecord(3, "g", 3, "User:b", "*", 3, 3)
    plan = plan_batch([acl, other, AclTombstone(acl)])
    (changes,) = plan.tables
    assert changes.upserts == [other]
    assert changes.deletes == [acl]


def test_consumer_group_tombstone_supersedes_earlier_member_records_of_its_group_only() -> None:
    plan = plan_batch(
        [
            consumer_member("g", "before"),
            ConsumerMemberTombstone("g", "deleted-before"),
            consumer_member("h", "other-group"),
            ConsumerGroupTombstone("g"),
            consumer_member("g", "after"),
            ConsumerMemberTombstone("g", "deleted-after"),
            ConsumerGroupTombstone("g"),  # a second wipe of the same group is planned once
            consumer_member("g", "after-2"),
            consumer_group("g", group_epoch=2),
            consumer_group("x"),
            ConsumerGroupTombstone("x"),
        ]
    )
    members = plan.changes(CONSUMER_MEMBERS)
    groups = plan.changes(CONSUMER_GROUPS)
    assert members is not None and groups is not None
    assert members.wipes == ["g", "x"]
    assert [(m.group_id, m.member_id) for m in members.upserts] == [("h", "other-group"), ("g", "after-2")]
    assert members.deletes == []
    assert [g.group_id for g in groups.upserts] == ["g"]
    assert groups.deletes == ["x"]
    assert plan.changes(GROUPS) is None  # classic groups untouched


def test_member_records_reduce_to_the_last_per_key() -> None:
    plan = plan_batch(
        [
            consumer_member("g", "m", member_epoch=1),
            consumer_member("g", "m", member_epoch=2),
            consumer_member("g", "n"),
            ConsumerMemberTombstone("g", "n"),
        ]
    )
    members = plan.changes(CONSUMER_MEMBERS)
    assert members is not None
    assert [m.member_epoch for m in members.upserts] == [2]
    assert members.deletes == [("g", "n")]
    assert members.wipes == []


def test_a_non_record_is_refused() -> None:
    with pytest.raises(TypeError, match="not a storage record"):
        plan_batch([object()])  # type: ignore[list-item]
