"""Epochs, the target assignment and the revocation handshake of streams groups
(docs/streams-groups.md#epochs-and-reconciliation); Kafka's TargetAssignmentBuilder and
CurrentAssignmentBuilder for streams groups.

A member moves to a new target in two steps. First it gives up what the target takes away: its
tasks pending revocation are handed back by heartbeats that no longer report them (the member
keeps its epoch meanwhile: UNREVOKED_TASKS). Then it takes its target at the target's epoch,
except active tasks another member still holds (assigned or pending revocation): those wait
(UNRELEASED_TASKS) until their holder lets them go.
"""

from __future__ import annotations

from coordinator.core.streams.assignor import AssignmentMember, assign
from coordinator.core.streams.group import (
    MemberState,
    StreamsGroup,
    StreamsMember,
    TaskMap,
    TaskSets,
    task_map,
    tasks_of,
)


def compute_target(group: StreamsGroup, num_standby_replicas: int) -> None:
    """The target assignment at the group epoch (empty for every member while NOT_READY)."""
    configured = group.configured
    if group.topology is None or configured is None or not configured.ready:
        group.target = {m: TaskSets() for m in group.members}
    else:
        stateful = frozenset(s.subtopology_id for s in group.topology.subtopologies if s.stateful)
        previous = group.target
        members = [
            AssignmentMember(
                member.member_id,
                member.process_id,
                previous.get(member.member_id, TaskSets()).active,
                previous.get(member.member_id, TaskSets()).standby,
                member.task_offsets,
            )
            for member in group.members.values()
        ]
        result = assign(configured.tasks, stateful, members, num_standby_replicas)
        group.target = {m: TaskSets(dict(t.active), dict(t.standby), {}) for m, t in result.items()}
    group.assignment_epoch = group.group_epoch
    group.endpoint_epoch += 1


def _subtract(a: TaskMap, b: TaskMap) -> TaskMap:
    return task_map(tasks_of(a) - tasks_of(b))


def _intersect(a: TaskMap, b: TaskMap) -> TaskMap:
    return task_map(tasks_of(a) & tasks_of(b))


def _contains_any(owned: TaskSets | None, tasks: TaskSets) -> bool:
    """Whether the member still reports any of ``tasks`` (None: it did not say; assume it does)."""
    if owned is None:
        return True
    return bool(
        tasks_of(owned.active) & tasks_of(tasks.active)
        or tasks_of(owned.standby) & tasks_of(tasks.standby)
        or tasks_of(owned.warmup) & tasks_of(tasks.warmup)
    )


def reconcile(group: StreamsGroup, member: StreamsMember, owned: TaskSets | None) -> bool:
    """Move the member towards its target; returns whether its assigned tasks changed.
    ``owned``: the tasks the member reported in this heartbeat (None: unchanged)."""
    target = group.target.get(member.member_id, TaskSets())
    before = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
    if member.state is MemberState.UNREVOKED_TASKS:
        if _contains_any(owned, member.pending_revocation):
            return False
        group.remove_ownership(member)
        member.pending_revocation = TaskSets()
        group.add_ownership(member)
        _take_target(group, member, target)
    elif member.member_epoch != group.assignment_epoch or member.state is MemberState.UNRELEASED_TASKS:
        revoke = TaskSets(
            _subtract(member.assigned.active, target.active),
            _subtract(member.assigned.standby, target.standby),
            _subtract(member.assigned.warmup, target.warmup),
        )
        if not revoke.is_empty():
            group.remove_ownership(member)
            member.assigned = TaskSets(
                _intersect(member.assigned.active, target.active),
                _intersect(member.assigned.standby, target.standby),
                _intersect(member.assigned.warmup, target.warmup),
            )
            member.pending_revocation = revoke
            member.state = MemberState.UNREVOKED_TASKS
            group.add_ownership(member)
        else:
            _take_target(group, member, target)
    after = (member.member_epoch, member.state, member.assigned, member.pending_revocation)
    return before[2] != after[2]


def _take_target(group: StreamsGroup, member: StreamsMember, target: TaskSets) -> None:
    free = {
        t for t in tasks_of(target.active) if group.active_owners.get(t, member.member_id) == member.member_id
    }
    group.remove_ownership(member)
    member.assigned = TaskSets(task_map(free), dict(target.standby), dict(target.warmup))
    group.add_ownership(member)
    if member.member_epoch != group.assignment_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
    unreleased = len(free) != len(tasks_of(target.active))
    member.state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
