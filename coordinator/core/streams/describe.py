"""StreamsGroupDescribe (v0-1): the topology, members with their tasks and targets, epochs."""

from __future__ import annotations

from coordinator.core.errors import GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NONE
from coordinator.core.group import AUTHORIZED_OPERATIONS_OMITTED, GROUP_AUTHORIZED_OPERATIONS
from coordinator.core.registry import GroupRegistry
from coordinator.core.streams.group import StreamsGroup, TaskMap, TaskSets
from coordinator.core.streams.topology import InternalTopic, Topology
from protocol.messages import streams_group_describe as sgd

ASSIGNOR_NAME = "sticky"
# TopologyDescriptionStatus: NOT_REQUESTED, NOT_STORED (KIP-1331 descriptions are not kept).
NOT_REQUESTED = 0
NOT_STORED = 1


def describe_groups(
    groups: dict[str, StreamsGroup], registry: GroupRegistry, req: sgd.StreamsGroupDescribeRequest
) -> sgd.StreamsGroupDescribeResponse:
    operations = (
        GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    )
    described = []
    for group_id in req.group_ids:
        group = groups.get(group_id)
        if not group_id:
            described.append(
                sgd.DescribedGroup(error_code=INVALID_GROUP_ID, error_message="Group id can't be empty.")
            )
        elif group is None:
            message = (
                f"Group {group_id} is not a streams group."
                if registry.holds(group_id)
                else f"Group {group_id} not found."
            )
            described.append(
                sgd.DescribedGroup(error_code=GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id)
            )
        else:
            described.append(describe_group(group, operations, req.include_topology_description))
    return sgd.StreamsGroupDescribeResponse(groups=described)


def _tasks(tasks: TaskMap) -> list[sgd.TaskIds]:
    return [sgd.TaskIds(s, sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


def _assignment(tasks: TaskSets) -> sgd.Assignment:
    return sgd.Assignment(_tasks(tasks.active), _tasks(tasks.standby), _tasks(tasks.warmup))


def _topic(topic: InternalTopic) -> sgd.TopicInfo:
    return sgd.TopicInfo(
        topic.name,
        topic.partitions,
        topic.replication_factor,
        [sgd.KeyValue(k, v) for k, v in topic.configs],
    )


def _topology(topology: Topology) -> sgd.Topology:
    return sgd.Topology(
        topology.epoch,
        [
            sgd.Subtopology(
                s.subtopology_id,
                list(s.source_topics),
                list(s.repartition_sink_topics),
                [_topic(t) for t in s.changelog_topics],
                [_topic(t) for t in s.repartition_source_topics],
            )
            for s in topology.subtopologies
        ],
    )


def describe_group(group: StreamsGroup, operations: int, with_description: bool) -> sgd.DescribedGroup:
    members = [
        sgd.Member(
            member_id=m.member_id,
            member_epoch=m.member_epoch,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            topology_epoch=m.topology_epoch,
            process_id=m.process_id,
            user_endpoint=None if m.user_endpoint is None else sgd.Endpoint(*m.user_endpoint),
            client_tags=[sgd.KeyValue(k, v) for k, v in m.client_tags],
            assignment=_assignment(m.assigned),
            target_assignment=_assignment(group.target.get(m.member_id, TaskSets())),
        )
        for m in group.members.values()
    ]
    return sgd.DescribedGroup(
        error_code=NONE,
        group_id=group.group_id,
        group_state=group.state_name,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        topology=None if group.topology is None else _topology(group.topology),
        members=members,
        authorized_operations=operations,
        topology_description_status=NOT_STORED if with_description else NOT_REQUESTED,
        assignor_name=ASSIGNOR_NAME,
    )
