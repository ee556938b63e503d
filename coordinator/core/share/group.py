"""Share groups and their members as the group coordinator keeps them (KIP-932; Kafka's
``ShareGroup`` and ``ShareGroupMember``; docs/share-groups.md, "Membership").

A share group has no revocation: a member's assignment is its target, so its epoch is the
assignment epoch as soon as it heartbeats after the target changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from coordinator.core.share.assignor import TopicPartition
from protocol.messages.list_groups import ListedGroup

SHARE_GROUP_TYPE: Final = "share"
SHARE_EMPTY: Final = "Empty"
SHARE_STABLE: Final = "Stable"
SHARE_DEAD: Final = "Dead"
SIMPLE_ASSIGNOR: Final = "simple"

JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: frozenset[TopicPartition] = frozenset()
    # Monotonic ms of the last heartbeat (-1: none yet in this process); for the console.
    last_heartbeat_ms: int = -1


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    # The subscribed topics as the catalog last showed them: name -> (topic id, partitions).
    subscription_metadata: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    catalog_version: int = -1
    # Monotonic ms of the last target computation in this process (None: none yet), for
    # group.share.assignment.interval.ms.
    last_assignment_ms: int | None = None
    dead: bool = False
    # What a failed write left unwritten (rewritten with the next write of the group).
    unwritten_group: bool = False
    unwritten_members: set[str] = field(default_factory=set)

    @property
    def group_type(self) -> str:
        return SHARE_GROUP_TYPE

    @property
    def state_name(self) -> str:
        if self.dead:
            return SHARE_DEAD
        return SHARE_STABLE if self.members else SHARE_EMPTY

    @property
    def member_count(self) -> int:
        return len(self.members)

    def listed(self) -> ListedGroup:
        return ListedGroup(
            group_id=self.group_id,
            protocol_type=SHARE_GROUP_TYPE,
            group_state=self.state_name,
            group_type=SHARE_GROUP_TYPE,
        )

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(name for m in self.members.values() for name in m.subscribed_topic_names)
