"""The sticky task assignor of streams groups and the topology configuration, on their own
(docs/streams-groups.md#task-assignment, docs/streams-groups.md#the-topology)."""

from __future__ import annotations

import pytest

from coordinator.core.streams.assignor import AssignmentMember, MemberTasks, assign
from coordinator.core.streams.topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    InternalTopic,
    InvalidTopology,
    Subtopology,
    Topology,
    configure,
)


def _active(result: dict[str, MemberTasks]) -> dict[str, set[tuple[str, int]]]:
    return {m: {(s, p) for s, ps in t.active.items() for p in ps} for m, t in result.items()}


def _members(result: dict[str, MemberTasks], process: dict[str, str] | None = None) -> list[AssignmentMember]:
    return [
        AssignmentMember(m, (process or {}).get(m, m), dict(t.active), dict(t.standby))
        for m, t in result.items()
    ]


def test_every_task_is_assigned_once_and_balanced() -> None:
    tasks = {"0": 4, "1": 4}
    result = assign(tasks, frozenset({"1"}), [AssignmentMember(m, m) for m in "abc"], 0)
    active = _active(result)
    everything = [t for ts in active.values() for t in ts]
    assert sorted(everything) == [(s, p) for s in "01" for p in range(4)]
    assert sorted(len(ts) for ts in active.values()) == [2, 3, 3]
    # Stateful tasks are balanced on their own: 4 over 3 members.
    stateful = sorted(len([t for t in ts if t[0] == "1"]) for ts in active.values())
    assert stateful == [1, 1, 2]


def test_a_new_member_takes_only_what_balance_needs() -> None:
    tasks = {"0": 6, "1": 6}
    first = assign(tasks, frozenset({"1"}), [AssignmentMember(m, m) for m in "ab"], 0)
    second = assign(tasks, frozenset({"1"}), [*_members(first), AssignmentMember("c", "c")], 0)
    before, after = _active(first), _active(second)
    moved = sum(len(before[m] - after[m]) for m in "ab")
    assert moved == len(after["c"]) == 4  # 12 tasks over 3 members: c gets 4, all from the others
    assert all(len(after[m]) == 4 for m in "abc")


def test_assignment_is_stable_when_nothing_changes() -> None:
    tasks = {"0": 5, "1": 3}
    first = assign(tasks, frozenset({"1"}), [AssignmentMember(m, m) for m in "abc"], 1)
    again = assign(tasks, frozenset({"1"}), _members(first), 1)
    assert _active(again) == _active(first)
    assert {m: t.standby for m, t in again.items()} == {m: t.standby for m, t in first.items()}


def test_standbys_never_share_a_process_with_their_active_task() -> None:
    tasks = {"0": 4}
    process = {"a1": "p1", "a2": "p1", "b1": "p2"}
    members = [AssignmentMember(m, p) for m, p in process.items()]
    result = assign(tasks, frozenset({"0"}), members, 1)
    for task in [("0", p) for p in range(4)]:
        active_on = {process[m] for m, t in result.items() if task[1] in t.active.get("0", ())}
        standby_on = {process[m] for m, t in result.items() if task[1] in t.standby.get("0", ())}
        assert len(active_on) == 1 and len(standby_on) == 1
        assert active_on != standby_on


def test_a_leaving_member_only_moves_its_own_tasks() -> None:
    tasks = {"0": 6}
    first = assign(tasks, frozenset(), [AssignmentMember(m, m) for m in "abc"], 0)
    remaining = [m for m in _members(first) if m.member_id != "c"]
    second = assign(tasks, frozenset(), remaining, 0)
    before, after = _active(first), _active(second)
    for m in "ab":
        assert before[m] <= after[m]


def test_chained_repartition_topics_take_the_count_of_their_writers() -> None:
    topology = Topology(
        1,
        (
            Subtopology("0", ("in",), repartition_sink_topics=("r1",)),
            Subtopology("1", ("r1",), ("r2",), (InternalTopic("r1"),)),
            Subtopology("2", ("r2",), (), (InternalTopic("r2"),), (InternalTopic("store-changelog"),)),
        ),
    )
    configured = configure(topology, {"in": 5}.get)
    assert configured.tasks == {"0": 5, "1": 5, "2": 5}
    assert {n: t.partitions for n, t in configured.to_create.items()} == {
        "r1": 5,
        "r2": 5,
        "store-changelog": 5,
    }


def test_copartitioned_repartition_topics_follow_the_external_topic() -> None:
    topology = Topology(
        1,
        (
            Subtopology("0", ("big",), repartition_sink_topics=("rep",)),
            Subtopology(
                "1",
                ("small", "rep"),
                (),
                (InternalTopic("rep"),),
                (),
                (frozenset({"small", "rep"}),),
            ),
        ),
    )
    configured = configure(topology, {"big": 8, "small": 2}.get)
    assert configured.to_create["rep"].partitions == 2
    assert configured.tasks["1"] == 2


def test_a_fixed_repartition_count_disagreeing_with_its_copartition_group() -> None:
    topology = Topology(
        1,
        (
            Subtopology("0", ("a",), repartition_sink_topics=("rep",)),
            Subtopology("1", ("b", "rep"), (), (InternalTopic("rep", 3),), (), (frozenset({"b", "rep"}),)),
        ),
    )
    configured = configure(topology, {"a": 4, "b": 2}.get)
    assert configured.status is not None and configured.status[0] == INCORRECTLY_PARTITIONED_TOPICS


def test_a_repartition_topic_nobody_writes_is_an_invalid_topology() -> None:
    topology = Topology(1, (Subtopology("0", ("orphan",), (), (InternalTopic("orphan"),)),))
    with pytest.raises(InvalidTopology, match="never used as a sink topic"):
        configure(topology, lambda topic: None)


def test_a_task_nobody_keeps_goes_to_the_member_reporting_the_most_state_for_it() -> None:
    # The task's active member left; b and c are equally loaded, c reports more of its state.
    tasks = {"0": 1}
    members = [
        AssignmentMember("b", "b", task_offsets={("0", 0): 10}),
        AssignmentMember("c", "c", task_offsets={("0", 0): 500}),
    ]
    assert _active(assign(tasks, frozenset({"0"}), members, 0)) == {"b": set(), "c": {("0", 0)}}


def test_a_previous_standby_ranks_before_members_reporting_more_state() -> None:
    tasks = {"0": 1}
    members = [
        AssignmentMember("b", "b", standby={"0": frozenset({0})}, task_offsets={("0", 0): 10}),
        AssignmentMember("c", "c", task_offsets={("0", 0): 500}),
    ]
    assert _active(assign(tasks, frozenset({"0"}), members, 0)) == {"b": {("0", 0)}, "c": set()}


def test_standbys_go_to_the_members_reporting_the_most_state() -> None:
    tasks = {"0": 1}
    members = [
        AssignmentMember("a", "a", active={"0": frozenset({0})}),
        AssignmentMember("b", "b", task_offsets={("0", 0): 10}),
        AssignmentMember("c", "c", task_offsets={("0", 0): 500}),
    ]
    result = assign(tasks, frozenset({"0"}), members, 1)
    assert {m: t.standby for m, t in result.items()} == {"a": {}, "b": {}, "c": {"0": frozenset({0})}}
