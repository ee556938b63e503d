"""How the console and the HTTP API show a share group (coordinator/core/group.py ``GroupView``)."""

from __future__ import annotations

from coordinator.core.group import view_page, view_row
from coordinator.core.share.group import ShareGroup


class ShareGroupView:
    def __init__(self, group: ShareGroup) -> None:
        self.group = group

    def row(self) -> dict[str, object]:
        return view_row(self.group, self.group.group_epoch)

    def page(self) -> dict[str, object]:
        group = self.group
        members = [
            {
                "member_id": member.member_id,
                "instance_id": None,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "member_epoch": member.member_epoch,
                "subscribed_topics": list(member.subscribed_topic_names),
                "assignment": sorted([t, p] for t, p in member.assigned),
            }
            for member in group.members.values()
        ]
        return view_page(group, group.group_epoch) | {
            "assignment_epoch": group.assignment_epoch,
            "members": members,
        }

    def assigned(self) -> list[tuple[str, int, str]]:
        """Share groups commit no offsets: the topic pages do not list them."""
        return []
