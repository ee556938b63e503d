"""ShareGroupDescribe (v1): members, their subscriptions and assignments, the group's epochs."""

from __future__ import annotations

from coordinator.core.errors import GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NONE
from coordinator.core.group import AUTHORIZED_OPERATIONS_OMITTED, GROUP_AUTHORIZED_OPERATIONS
from coordinator.core.share.group import SIMPLE_ASSIGNOR, ShareGroup
from coordinator.core.share.membership import ShareMembership
from protocol.messages import share_group_describe as sgd


def describe_groups(
    kind: ShareMembership, req: sgd.ShareGroupDescribeRequest
) -> sgd.ShareGroupDescribeResponse:
    operations = (
        GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    )
    described: list[sgd.DescribedGroup] = []
    for group_id in req.group_ids:
        group = kind.groups.get(group_id)
        if not group_id:
            described.append(
                sgd.DescribedGroup(error_code=INVALID_GROUP_ID, error_message="Group id can't be empty.")
            )
        elif group is None:
            message = (
                f"Group {group_id} is not a share group."
                if kind.registry.holds(group_id)
                else f"Group {group_id} not found."
            )
            described.append(
                sgd.DescribedGroup(error_code=GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id)
            )
        else:
            described.append(_describe(kind, group, operations))
    return sgd.ShareGroupDescribeResponse(groups=described)


def _describe(kind: ShareMembership, group: ShareGroup, operations: int) -> sgd.DescribedGroup:
    topics = kind.catalog.topics
    members = []
    for m in group.members.values():
        by_topic: dict[str, list[int]] = {}
        for topic, partition in m.assigned:
            by_topic.setdefault(topic, []).append(partition)
        assignment = sgd.Assignment(
            topic_partitions=[
                sgd.TopicPartitions(topic_id=topics[name].topic_id, topic_name=name, partitions=sorted(parts))
                for name, parts in sorted(by_topic.items())
                if name in topics
            ]
        )
        members.append(
            sgd.Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                assignment=assignment,
            )
        )
    return sgd.DescribedGroup(
        error_code=NONE,
        group_id=group.group_id,
        group_state=group.state_name,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=SIMPLE_ASSIGNOR,
        members=members,
        authorized_operations=operations,
    )
