"""The events of streams groups for `groups history` (coordinator/core/events.py): members joining
and leaving, the target assignments with the tasks they move, and each assignment epoch once
every member reached it (docs/streams-groups.md#history)."""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.core.events import (
    ASSIGNMENT_RECONCILED,
    MEMBER_JOINED,
    TARGET_COMPUTED,
    GroupEvents,
)
from coordinator.core.streams.group import STREAMS_GROUP_TYPE, StreamsGroup, StreamsMember, TaskSets, tasks_of


class StreamsHistory:
    """Reports a shard's streams group events (nothing when the shard keeps no events)."""

    def __init__(self, events: GroupEvents | None) -> None:
        self.events = events
        self._reconciled: dict[str, int] = {}  # group -> the last assignment epoch reported reached

    def _record(self, group: StreamsGroup, kind: str, epoch: int, message: str, member_id: str | None = None,
                **details: str | int | None) -> None:  # fmt: skip
        if self.events is not None:
            self.events.record(
                group.group_id,
                kind,
                STREAMS_GROUP_TYPE,
                group.state_name,
                epoch,
                message,
                member_id,
                **details,
            )

    def joined(self, group: StreamsGroup, member: StreamsMember) -> None:
        instance = f", instance {member.instance_id}" if member.instance_id else ""
        self._record(
            group, MEMBER_JOINED, group.group_epoch,
            f"member {member.member_id} joined (client {member.client_id}{instance}, process "
            f"{member.process_id}) from {member.client_host}",
            member.member_id, client_id=member.client_id, client_host=member.client_host,
            process_id=member.process_id,
        )  # fmt: skip

    def left(self, group: StreamsGroup, member: StreamsMember, kind: str, why: str) -> None:
        """``kind``: member_left, session_timeout or rebalance_timeout (events.py's causes)."""
        self._record(group, kind, group.group_epoch, f"member {member.member_id} {why}", member.member_id)

    def target_computed(self, group: StreamsGroup, before: Mapping[str, TaskSets]) -> None:
        """The target of the assignment epoch replaced ``before``: how many active tasks moved
        to another member, and how many got their first one."""
        owners = {task: m for m, t in before.items() for task in tasks_of(t.active)}
        moved = first = 0
        for member_id, target in group.target.items():
            for task in tasks_of(target.active):
                owner = owners.get(task)
                if owner is None:
                    first += 1
                elif owner != member_id:
                    moved += 1
        standbys = sum(len(tasks_of(t.standby)) for t in group.target.values())
        self._record(
            group, TARGET_COMPUTED, group.assignment_epoch,
            f"target assignment of epoch {group.assignment_epoch} computed: {moved} active tasks moved, "
            f"{first} assigned for the first time, {standbys} standby tasks, {len(group.members)} members",
            tasks_moved=moved, tasks_assigned_first_time=first, standby_tasks=standbys,
        )  # fmt: skip

    def maybe_reconciled(self, group: StreamsGroup) -> None:
        """Once per assignment epoch: every member reached it (the group is Stable)."""
        epoch = group.assignment_epoch
        if self._reconciled.get(group.group_id, -1) >= epoch or group.state_name != "Stable":
            return
        self._reconciled[group.group_id] = epoch
        self._record(
            group, ASSIGNMENT_RECONCILED, epoch,
            f"assignment of epoch {epoch} reconciled by {len(group.members)} members",
        )  # fmt: skip

    def forget(self, group_id: str) -> None:
        self._reconciled.pop(group_id, None)
