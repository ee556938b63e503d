"""Kafka's sticky task assignor for streams groups (docs/streams-groups.md#task-assignment).

Active tasks first -- stateful ones, then stateless ones, each kind balanced on its own -- then
standby tasks for the stateful ones. A task stays with the member that had it while that member
is under its quota (ceil(tasks / members), recomputed as members fill up); a task nobody keeps
goes to a standby candidate, then to the least loaded process (the process's tasks per member),
within it to its member with the fewest tasks. A standby never lands on the process that runs the
task or already holds a standby of it. The standby candidates of a task, in Kafka's order: the
members that had it as a standby, then the members that report state for it (task offsets), each
by the offset sum they report, highest first. Kafka 4.4's assignor assigns no warm-up tasks
(docs/streams-groups.md#task-assignment). Rack-aware standby placement (client tags) is not
built.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Task = tuple[str, int]  # (subtopology id, partition)
Tasks = Mapping[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class AssignmentMember:
    member_id: str
    process_id: str
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    # The changelog offset sum of each task the member reports state for (its task offsets).
    task_offsets: Mapping[Task, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemberTasks:
    active: dict[str, frozenset[int]]
    standby: dict[str, frozenset[int]]


def _tasks(tasks: Tasks) -> Iterable[Task]:
    for sub, partitions in tasks.items():
        for p in partitions:
            yield (sub, p)


def _per_member(total: int, members: int) -> int:
    return 0 if members <= 0 else -(-total // members)


class _Process:
    __slots__ = ("active", "counts", "process_id", "standby", "tasks")

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.counts: dict[str, int] = {}
        self.tasks: set[Task] = set()
        self.active: dict[str, set[Task]] = {}
        self.standby: dict[str, set[Task]] = {}

    def load(self) -> float:
        return sum(self.counts.values()) / len(self.counts)

    def add(self, member_id: str, task: Task, active: bool) -> int:
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.counts[member_id] += 1
        return self.counts[member_id]

    def least_loaded_member(self) -> str:
        return min(self.counts, key=lambda m: (self.counts[m], m))


class _Quota:
    """ceil(remaining tasks / members with room), recomputed when a member reaches it."""

    __slots__ = ("members", "per_member", "total")

    def __init__(self, total: int, members: int) -> None:
        self.total = total
        self.members = members
        self.per_member = _per_member(total, members)

    def reached(self, count: int) -> None:
        if count == self.per_member:
            self.members -= 1
            self.total -= count
            self.per_member = _per_member(self.total, self.members)


def assign(
    tasks: Mapping[str, int],
    stateful: frozenset[str],
    members: Iterable[AssignmentMember],
    num_standby_replicas: int,
) -> dict[str, MemberTasks]:
    """The target assignment of every member for ``tasks`` (tasks of each subtopology)."""
    members = sorted(members, key=lambda m: m.member_id)
    if not members:
        return {}
    processes: dict[str, _Process] = {}
    member_process: dict[str, _Process] = {}
    prev_active: dict[Task, str] = {}
    for m in members:
        process = processes.setdefault(m.process_id, _Process(m.process_id))
        process.counts[m.member_id] = 0
        member_process[m.member_id] = process
        for task in _tasks(m.active):
            prev_active[task] = m.member_id
    prev_standby = _standby_candidates(members)

    stateful_tasks = [(s, p) for s, n in tasks.items() if s in stateful for p in range(n)]
    stateless_tasks = [(s, p) for s, n in tasks.items() if s not in stateful for p in range(n)]
    n = len(members)
    total_active = len(stateful_tasks) + len(stateless_tasks)
    stateful_quota = _Quota(len(stateful_tasks), n)
    active_quota = _Quota(total_active, n)
    total_quota = _Quota(total_active + len(stateful_tasks) * num_standby_replicas, n)

    def place_active(member_id: str, task: Task, is_stateful: bool) -> None:
        count = member_process[member_id].add(member_id, task, True)
        if is_stateful:
            stateful_quota.reached(count)
        active_quota.reached(count)
        total_quota.reached(count)

    def assign_active(todo: list[Task], is_stateful: bool) -> None:
        def under_quota(member_id: str) -> bool:
            quota = stateful_quota if is_stateful else active_quota
            return member_process[member_id].counts[member_id] < quota.per_member

        todo.sort(key=lambda t: (t[1], t[0]))
        rest: list[Task] = []
        for task in todo:
            owner = prev_active.get(task)
            if owner is not None and owner in member_process and under_quota(owner):
                place_active(owner, task, is_stateful)
            else:
                rest.append(task)
        remaining: list[Task] = []
        for task in rest:
            candidate = _least_loaded_prev(prev_standby.get(task), member_process, None)
            if candidate is not None and under_quota(candidate):
                place_active(candidate, task, is_stateful)
            else:
                remaining.append(task)
        remaining.sort()
        heap = [(p.load(), p.process_id) for p in processes.values()]
        heapq.heapify(heap)
        for task in remaining:
            _, pid = heapq.heappop(heap)
            process = processes[pid]
            count = process.add(process.least_loaded_member(), task, True)
            active_quota.reached(count)
            total_quota.reached(count)
            heapq.heappush(heap, (process.load(), pid))

    assign_active(list(stateful_tasks), True)
    assign_active(list(stateless_tasks), False)
    if num_standby_replicas > 0:
        _assign_standby(
            stateful_tasks, num_standby_replicas, processes, member_process, prev_standby, total_quota
        )

    out: dict[str, MemberTasks] = {}
    for m in members:
        process = member_process[m.member_id]
        out[m.member_id] = MemberTasks(
            _compact(process.active.get(m.member_id, ())), _compact(process.standby.get(m.member_id, ()))
        )
    return out


def _standby_candidates(members: list[AssignmentMember]) -> dict[Task, list[str]]:
    """Kafka's collectStandbyCandidates and rankStandbyCandidates: per task, the members that
    had it as a standby and those reporting state for it, previous standbys first, then by
    reported offset sum, highest first (a stable sort over the members in id order)."""
    ranked: dict[Task, list[tuple[int, int, str]]] = {}
    for m in members:
        standby = set(_tasks(m.standby))
        for task in standby:
            ranked.setdefault(task, []).append((0, -m.task_offsets.get(task, 0), m.member_id))
        for task, offset in m.task_offsets.items():
            if task not in standby:
                ranked.setdefault(task, []).append((1, -offset, m.member_id))
    return {
        task: [member_id for _, _, member_id in sorted(c, key=lambda c: (c[0], c[1]))]
        for task, c in ranked.items()
    }


def _least_loaded_prev(
    candidates: list[str] | None, member_process: Mapping[str, _Process], task: Task | None
) -> str | None:
    """The previous holder on the least loaded process (skipping processes holding ``task``)."""
    best: str | None = None
    best_key: tuple[float, int] | None = None
    for member_id in candidates or ():
        process = member_process.get(member_id)
        if process is None or (task is not None and task in process.tasks):
            continue
        key = (process.load(), process.counts[member_id])
        if best_key is None or (key[0] < best_key[0] and key[1] < best_key[1]):
            best, best_key = member_id, key
    return best


def _assign_standby(
    stateful_tasks: list[Task],
    replicas: int,
    processes: Mapping[str, _Process],
    member_process: Mapping[str, _Process],
    prev_standby: Mapping[Task, list[str]],
    total_quota: _Quota,
) -> None:
    leftover: list[tuple[Task, int]] = []
    for task in sorted(stateful_tasks, key=lambda t: (t[1], t[0]), reverse=True):
        remaining = replicas
        while remaining > 0:
            candidate = _least_loaded_prev(prev_standby.get(task), member_process, task)
            if candidate is None:
                break
            process = member_process[candidate]
            if process.counts[candidate] >= total_quota.per_member:
                break
            total_quota.reached(process.add(candidate, task, False))
            remaining -= 1
        if remaining:
            leftover.append((task, remaining))
    leftover.sort(reverse=True)
    for task, remaining in leftover:
        for _ in range(remaining):
            eligible = [p for p in processes.values() if task not in p.tasks]
            if not eligible:
                break  # fewer processes than replicas: Kafka logs it and assigns what it can
            process = min(eligible, key=lambda p: (p.load(), p.process_id))
            total_quota.reached(process.add(process.least_loaded_member(), task, False))


def _compact(tasks: Iterable[Task]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for sub, p in tasks:
        out.setdefault(sub, set()).add(p)
    return {sub: frozenset(ps) for sub, ps in out.items()}
