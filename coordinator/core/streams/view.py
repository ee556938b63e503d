"""How the console and the HTTP API show a streams group (coordinator/core/group.py ``GroupView``)."""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.core.group import view_page, view_row
from coordinator.core.streams.group import StreamsGroup


def _tasks(tasks: Mapping[str, frozenset[int]]) -> list[list[object]]:
    return sorted([s, p] for s, ps in tasks.items() for p in ps)


class StreamsGroupView:
    def __init__(self, group: StreamsGroup) -> None:
        self.group = group

    def row(self) -> dict[str, object]:
        return view_row(self.group, self.group.group_epoch)

    def page(self) -> dict[str, object]:
        group = self.group
        members = [
            {
                "member_id": member.member_id,
                "instance_id": member.instance_id,
                "process_id": member.process_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "member_epoch": member.member_epoch,
                "active_tasks": _tasks(member.assigned.active),
                "standby_tasks": _tasks(member.assigned.standby),
                "warmup_tasks": _tasks(member.assigned.warmup),
                "pending_revocation": _tasks(member.pending_revocation.active),
            }
            for member in group.members.values()
        ]
        return view_page(group, group.group_epoch) | {
            "assignment_epoch": group.assignment_epoch,
            "state_ms": group.state_ms,
            "members": members,
        }

    def assigned(self) -> list[tuple[str, int, str]]:
        """Streams groups are assigned tasks, not partitions: the topic pages show their commits only."""
        return []
