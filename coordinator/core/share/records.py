"""Share groups as stored: one group row and one row per member, both ways."""

from __future__ import annotations

from coordinator.core.share.assignor import TopicPartition
from coordinator.core.share.group import ShareGroup, ShareMember
from coordinator.core.share.partition import PersistedShareState, StateBatch
from storage.records import (
    ShareGroupRecord,
    ShareMemberRecord,
    SharePartitionStateRecord,
    TopicPartitionList,
)


def group_record(group: ShareGroup) -> ShareGroupRecord:
    return ShareGroupRecord(group.group_id, group.group_epoch, group.assignment_epoch)


def member_record(group: ShareGroup, member: ShareMember) -> ShareMemberRecord:
    return ShareMemberRecord(
        group_id=group.group_id,
        member_id=member.member_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=member.subscribed_topic_names,
        member_epoch=member.member_epoch,
        previous_member_epoch=member.previous_member_epoch,
        assigned=as_list(member.assigned),
        target=as_list(group.target.get(member.member_id, frozenset())),
    )


def member_from_record(m: ShareMemberRecord) -> ShareMember:
    return ShareMember(
        member_id=m.member_id,
        member_epoch=m.member_epoch,
        previous_member_epoch=m.previous_member_epoch,
        rack_id=m.rack_id,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=m.subscribed_topic_names,
        assigned=frozenset((topic, p) for topic, parts in m.assigned for p in parts),
    )


def target_from_record(m: ShareMemberRecord) -> frozenset[TopicPartition]:
    return frozenset((topic, p) for topic, parts in m.target for p in parts)


def as_list(assigned: frozenset[TopicPartition]) -> TopicPartitionList:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assigned:
        by_topic.setdefault(topic, []).append(partition)
    return tuple((topic, tuple(sorted(parts))) for topic, parts in sorted(by_topic.items()))


def partition_state_record(
    group_id: str, topic: str, partition: int, state: PersistedShareState
) -> SharePartitionStateRecord:
    """A share-partition's persisted state (SharePartition.persisted()) as stored."""
    batches = tuple(
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.batches
    )
    return SharePartitionStateRecord(
        group_id, topic, partition, state.start_offset, state.state_epoch, batches
    )


def partition_state_from_record(record: SharePartitionStateRecord) -> PersistedShareState:
    """What SharePartition.restore() takes back."""
    return PersistedShareState(
        start_offset=record.start_offset,
        state_epoch=record.state_epoch,
        batches=tuple(StateBatch(first, last, state, count) for first, last, state, count in record.batches),
    )
