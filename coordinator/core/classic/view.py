"""How the console and the HTTP API show a classic group (coordinator/core/group.py ``GroupView``)."""

from __future__ import annotations

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.events import consumer_assignment
from coordinator.core.group import view_page, view_row


class ClassicGroupView:
    def __init__(self, group: ClassicGroup) -> None:
        self.group = group

    def row(self) -> dict[str, object]:
        group = self.group
        return view_row(group, group.generation_id, group.protocol_type, group.protocol_name) | {
            "assignor": group.protocol_name
        }

    def page(self) -> dict[str, object]:
        group = self.group
        members = []
        for member in group.members.values():
            partitions = consumer_assignment(member.assignment) if group.uses_consumer_protocol() else None
            members.append(
                {
                    "member_id": member.member_id,
                    "instance_id": member.group_instance_id,
                    "client_id": member.client_id,
                    "client_host": member.client_host,
                    "session_timeout_ms": member.session_timeout_ms,
                    "rebalance_timeout_ms": member.rebalance_timeout_ms,
                    "assignment": None if partitions is None else [[t, p] for t, p in sorted(partitions)],
                    "leader": member.member_id == group.leader_id,
                }
            )
        return view_page(group, group.generation_id, group.protocol_type, group.protocol_name) | {
            "assignor": group.protocol_name,
            "leader_id": group.leader_id,
            "state_ms": group.state_ms,
            "members": members,
        }

    def assigned(self) -> list[tuple[str, int, str]]:
        """Only a group of the consumer protocol type has assignments the coordinator can read."""
        group = self.group
        if not group.uses_consumer_protocol():
            return []
        return [
            (topic, partition, member.member_id)
            for member in group.members.values()
            for topic, partition in consumer_assignment(member.assignment) or ()
        ]
