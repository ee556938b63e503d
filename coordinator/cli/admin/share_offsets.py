"""The start offsets of share groups for the admin commands, as kafka-share-groups reads and
changes them: DescribeShareGroupOffsets (start offset and lag per partition),
AlterShareGroupOffsets (reset, on an empty group) and DeleteShareGroupOffsets (per topic)."""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.cli.admin.client import TP, AdminClient
from coordinator.cli.admin.connection import BrokerConnection
from coordinator.cli.admin.errors import KafkaError
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import alter_share_group_offsets as asgo
from protocol.messages import delete_share_group_offsets as dsgo
from protocol.messages import describe_share_group_offsets as offsets


@dataclass(frozen=True, slots=True)
class StartOffset:
    start: int  # the share-partition start offset (-1: no state)
    lag: int | None  # None when the coordinator cannot tell (the wire's -1)


def start_offsets(client: AdminClient, group: str) -> dict[TP, StartOffset]:
    """Every partition of the share group that has state (DescribeShareGroupOffsets, topics null)."""

    def send(conn: BrokerConnection) -> offsets.DescribeShareGroupOffsetsResponseGroup:
        version = conn.version(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
        request = offsets.DescribeShareGroupOffsetsRequest(
            [offsets.DescribeShareGroupOffsetsRequestGroup(group, None if version >= 1 else [])]
        )
        response: offsets.DescribeShareGroupOffsetsResponse = conn.request(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request, version
        )
        return response.groups[0]

    answer = client.on_coordinator(group, send, lambda g: g.error_code)
    if answer.error_code != ErrorCode.NONE:
        raise KafkaError(answer.error_code, f"start offsets of share group {group!r}")
    return {
        TP(t.topic_name, p.partition_index): StartOffset(p.start_offset, None if p.lag == -1 else p.lag)
        for t in answer.topics
        for p in t.partitions
        if p.error_code == ErrorCode.NONE and p.start_offset >= 0
    }


def alter_start_offsets(client: AdminClient, group: str, new: dict[TP, int]) -> dict[TP, int]:
    """AlterShareGroupOffsets: the error of each partition (a group-level error is raised)."""
    by_topic: dict[str, list[asgo.AlterShareGroupOffsetsRequestPartition]] = {}
    for tp, offset in sorted(new.items()):
        by_topic.setdefault(tp.topic, []).append(
            asgo.AlterShareGroupOffsetsRequestPartition(tp.partition, offset)
        )
    request = asgo.AlterShareGroupOffsetsRequest(
        group, [asgo.AlterShareGroupOffsetsRequestTopic(t, ps) for t, ps in by_topic.items()]
    )

    def send(conn: BrokerConnection) -> asgo.AlterShareGroupOffsetsResponse:
        response: asgo.AlterShareGroupOffsetsResponse = conn.request(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS, request
        )
        return response

    response = client.on_coordinator(group, send, lambda r: r.error_code)
    if response.error_code != ErrorCode.NONE:
        raise KafkaError(
            response.error_code,
            f"resetting the start offsets of share group {group!r}"
            + (f": {response.error_message}" if response.error_message else ""),
        )
    return {
        TP(t.topic_name, p.partition_index): p.error_code for t in response.responses for p in t.partitions
    }


def delete_start_offsets(client: AdminClient, group: str, topics: list[str]) -> dict[str, int]:
    """DeleteShareGroupOffsets: the error of each topic (a group-level error is raised)."""
    request = dsgo.DeleteShareGroupOffsetsRequest(
        group, [dsgo.DeleteShareGroupOffsetsRequestTopic(t) for t in topics]
    )

    def send(conn: BrokerConnection) -> dsgo.DeleteShareGroupOffsetsResponse:
        response: dsgo.DeleteShareGroupOffsetsResponse = conn.request(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS, request
        )
        return response

    response = client.on_coordinator(group, send, lambda r: r.error_code)
    if response.error_code != ErrorCode.NONE:
        raise KafkaError(
            response.error_code,
            f"deleting the start offsets of share group {group!r}"
            + (f": {response.error_message}" if response.error_message else ""),
        )
    return {t.topic_name: t.error_code for t in response.responses}
