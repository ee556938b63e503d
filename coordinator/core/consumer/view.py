"""How the console and the HTTP API show a consumer group (coordinator/core/group.py ``GroupView``)."""

from __future__ import annotations

from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.group import view_page, view_row


class ConsumerGroupView:
    def __init__(self, group: ConsumerGroup, assignor: str) -> None:
        self.group = group
        self.assignor = assignor  # the server assignor the group's target assignment uses

    def row(self) -> dict[str, object]:
        return view_row(self.group, self.group.group_epoch) | {"assignor": self.assignor}

    def page(self) -> dict[str, object]:
        group = self.group
        members = [
            {
                "member_id": member.member_id,
                "instance_id": member.instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "member_epoch": member.member_epoch,
                "subscribed_topics": list(member.subscribed_topic_names),
                "subscribed_regex": member.subscribed_topic_regex,
                "assignment": sorted([t, p] for t, ps in member.assigned.items() for p in ps),
                "pending_revocation": sorted(
                    [t, p] for t, ps in member.pending_revocation.items() for p in ps
                ),
            }
            for member in group.members.values()
        ]
        return view_page(group, group.group_epoch) | {
            "assignment_epoch": group.assignment_epoch,
            "state_ms": group.state_ms,
            "members": members,
            "assignor": self.assignor,
        }

    def assigned(self) -> list[tuple[str, int, str]]:
        return [
            (topic, partition, member.member_id)
            for member in self.group.members.values()
            for topic, partitions in member.assigned.items()
            for partition in partitions
        ]
