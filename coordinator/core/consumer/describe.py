"""ConsumerGroupDescribe (v0-1): members, their assignments and targets, the group's epochs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from coordinator.core.consumer.assignment import ConsumerAssignment
from coordinator.core.consumer.group import (
    ConsumerGroup,
)
from coordinator.core.context import RequestContext
from coordinator.core.errors import (
    GROUP_ID_NOT_FOUND,
    INVALID_GROUP_ID,
    NONE,
)
from coordinator.core.group import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_AUTHORIZED_OPERATIONS,
)
from protocol.messages import consumer_group_describe as cgd

MEMBER_TYPE_CLASSIC: Final = 0
MEMBER_TYPE_CONSUMER: Final = 1


def describe_groups(
    kind: ConsumerAssignment, ctx: RequestContext, req: cgd.ConsumerGroupDescribeRequest
) -> cgd.ConsumerGroupDescribeResponse:
    operations = (
        GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    )
    described: list[cgd.DescribedGroup] = []
    for group_id in req.group_ids:
        group = kind.groups.get(group_id)
        if not group_id:
            described.append(
                cgd.DescribedGroup(
                    error_code=INVALID_GROUP_ID, error_message="Group id can't be empty.", group_id=""
                )
            )
        elif group is None:
            message = (
                f"Group {group_id} is not a consumer group."
                if kind.registry.holds(group_id)
                else f"Group {group_id} not found."
            )
            described.append(
                cgd.DescribedGroup(error_code=GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id)
            )
        else:
            described.append(_describe_group(kind, group, operations))
    return cgd.ConsumerGroupDescribeResponse(groups=described)


def _describe_group(kind: ConsumerAssignment, group: ConsumerGroup, operations: int) -> cgd.DescribedGroup:
    topics = kind.catalog.topics

    def wire(assignment: Mapping[str, frozenset[int]]) -> cgd.Assignment:
        return cgd.Assignment(
            topic_partitions=[
                cgd.TopicPartitions(topic_id=topics[name].topic_id, topic_name=name, partitions=sorted(parts))
                for name, parts in sorted(assignment.items())
                if name in topics
            ]
        )

    members = [
        cgd.Member(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names),
            # Kafka's ConsumerGroupMember has "" for no regex (docs/kafka-differences.md).
            subscribed_topic_regex=m.subscribed_topic_regex or "",
            assignment=wire(m.assigned),
            target_assignment=wire(group.target.get(m.member_id, {})),
            member_type=MEMBER_TYPE_CONSUMER if m.classic is None else MEMBER_TYPE_CLASSIC,
        )
        for m in group.members.values()
    ]
    return cgd.DescribedGroup(
        error_code=NONE,
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=kind.preferred_assignor(group),
        members=members,
        authorized_operations=operations,
    )
