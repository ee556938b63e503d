"""A streams group and its members (docs/streams-groups.md#the-group)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar, Final

from coordinator.core.streams.assignor import Task
from coordinator.core.streams.topology import ConfiguredTopology, Topology
from protocol.messages.list_groups import ListedGroup

STREAMS_GROUP_TYPE: Final = "streams"
STREAMS_PROTOCOL_TYPE: Final = "streams"

JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1
LEAVE_STATIC_EPOCH: Final = -2

TaskMap = dict[str, frozenset[int]]


@dataclass(slots=True)
class TaskSets:
    """Active, standby and warm-up tasks (Kafka's TasksTuple)."""

    active: TaskMap = field(default_factory=dict)
    standby: TaskMap = field(default_factory=dict)
    warmup: TaskMap = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def copy(self) -> TaskSets:
        return TaskSets(dict(self.active), dict(self.standby), dict(self.warmup))


def tasks_of(tasks: TaskMap) -> set[Task]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def task_map(tasks: set[Task]) -> TaskMap:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2


MEMBER_STATE_NAMES: Final = {
    MemberState.STABLE: "STABLE",
    MemberState.UNREVOKED_TASKS: "UNREVOKED_TASKS",
    MemberState.UNRELEASED_TASKS: "UNRELEASED_TASKS",
}


@dataclass(slots=True)
class StreamsMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: TaskSets = field(default_factory=TaskSets)
    pending_revocation: TaskSets = field(default_factory=TaskSets)
    last_heartbeat_ms: int = -1  # monotonic ms of its last heartbeat in this process; -1 none
    # What the member last reported of its local state stores (Kafka's MemberTaskOffsets): the
    # changelog offset sum of each task it has state for, and the end offsets. Kept in memory
    # only, as Kafka does; members send them again every task offset interval.
    task_offsets: dict[Task, int] = field(default_factory=dict)
    task_end_offsets: dict[Task, int] = field(default_factory=dict)


class GroupState:
    """StreamsGroup.StreamsGroupState, as Kafka names the states on the wire."""

    EMPTY: Final = "Empty"
    NOT_READY: Final = "NotReady"
    ASSIGNING: Final = "Assigning"
    RECONCILING: Final = "Reconciling"
    STABLE: Final = "Stable"
    DEAD: Final = "Dead"


@dataclass(slots=True)
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    state_ms: int = 0
    topology: Topology | None = None
    members: dict[str, StreamsMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, TaskSets] = field(default_factory=dict)
    # Who holds each active task (assigned or pending revocation): a task moves only once free.
    active_owners: dict[Task, str] = field(default_factory=dict)
    configured: ConfiguredTopology | None = None
    configured_version: int = -1
    endpoint_epoch: int = 0
    # Monotonic ms of the last target computation in this process (None: none yet), for
    # group.streams.assignment.interval.ms.
    last_assignment_ms: int | None = None
    # The target before a member left while the next one waits for the assignment interval: the
    # history counts the leaver's tasks as moved, not as new (in memory only).
    target_before: dict[str, TaskSets] | None = None
    shutdown_requested: bool = False
    dead: bool = False

    group_type: ClassVar[str] = STREAMS_GROUP_TYPE

    @property
    def member_count(self) -> int:
        return len(self.members)

    @property
    def state_name(self) -> str:
        if self.dead:
            return GroupState.DEAD
        if not self.members:
            return GroupState.EMPTY
        if self.topology is None or self.configured is None or not self.configured.ready:
            return GroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for member in self.members.values():
            if member.state is not MemberState.STABLE or member.member_epoch != self.assignment_epoch:
                return GroupState.RECONCILING
        return GroupState.STABLE

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, STREAMS_PROTOCOL_TYPE, self.state_name, STREAMS_GROUP_TYPE)

    def add_ownership(self, member: StreamsMember) -> None:
        for task in (*tasks_of(member.assigned.active), *tasks_of(member.pending_revocation.active)):
            self.active_owners[task] = member.member_id

    def remove_ownership(self, member: StreamsMember) -> None:
        for task in (*tasks_of(member.assigned.active), *tasks_of(member.pending_revocation.active)):
            if self.active_owners.get(task) == member.member_id:
                del self.active_owners[task]
