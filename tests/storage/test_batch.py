"""plan_batch: one entry per key, and the consumer-group wipe rule."""

from __future__ import annotations

from storage.batch import plan_batch
from storage.records import (
    ConsumerGroupTombstone,
    ConsumerMemberTombstone,
    GroupTombstone,
    OffsetTombstone,
)
from tests.storage.helpers import consumer_group, consumer_member, group, offset, topic


def test_batches_without_consumer_records_have_no_consumer_plan() -> None:
    plan = plan_batch([offset(partition=p) for p in range(10)] + [group(), GroupTombstone("h"), topic()])
    assert plan.consumer is None
    assert plan_batch([OffsetTombstone("g", "t", 0)]).consumer is None


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
    consumer = plan.consumer
    assert consumer is not None
    assert consumer.member_wipes == ["g", "x"]
    assert [(m.group_id, m.member_id) for m in consumer.member_upserts] == [
        ("h", "other-group"),
        ("g", "after-2"),
    ]
    assert consumer.member_deletes == []
    assert [g.group_id for g in consumer.group_upserts] == ["g"]
    assert consumer.group_deletes == ["x"]
    assert (plan.group_upserts, plan.group_deletes) == ([], [])  # classic groups untouched


def test_member_records_reduce_to_the_last_per_key() -> None:
    plan = plan_batch(
        [
            consumer_member("g", "m", member_epoch=1),
            consumer_member("g", "m", member_epoch=2),
            consumer_member("g", "n"),
            ConsumerMemberTombstone("g", "n"),
        ]
    )
    assert plan.consumer is not None
    assert [m.member_epoch for m in plan.consumer.member_upserts] == [2]
    assert plan.consumer.member_deletes == [("g", "n")]
    assert plan.consumer.member_wipes == []
