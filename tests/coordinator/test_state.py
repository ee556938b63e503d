from __future__ import annotations

import itertools

import pytest

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.state import (
    VALID_PREVIOUS,
    GroupState,
    IllegalStateTransition,
    transition_to,
)

E, PR, CR, S, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

LEGAL = {
    (S, PR),
    (CR, PR),
    (E, PR),  # T2, T3, T4
    (PR, CR),  # T5
    (PR, E),  # T6
    (CR, S),  # T7
    *((state, D) for state in GroupState),  # T8, T9
}


def test_states_carry_kafkas_strings() -> None:
    assert [s.value for s in GroupState] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]


def test_valid_previous_table_is_kafkas() -> None:
    assert dict(VALID_PREVIOUS) == {
        E: {PR},
        PR: {S, CR, E},
        CR: {PR},
        S: {CR},
        D: set(GroupState),
    }


@pytest.mark.parametrize(("current", "target"), list(itertools.product(GroupState, GroupState)))
def test_transition_guard(current: GroupState, target: GroupState) -> None:
    if (current, target) in LEGAL:
        assert transition_to(current, target) is target
    else:
        with pytest.raises(IllegalStateTransition):
            transition_to(current, target)


def test_no_shortcut_from_preparing_to_stable_nor_stable_to_empty() -> None:
    with pytest.raises(IllegalStateTransition, match="PreparingRebalance -> Stable"):
        transition_to(PR, S)
    with pytest.raises(IllegalStateTransition, match="Stable -> Empty"):
        transition_to(S, E)


def test_group_transition_records_previous_state_and_time() -> None:
    group = ClassicGroup("g", state_ms=5)
    group.transition_to(PR, 10)
    assert (group.state, group.previous_state, group.state_ms) == (PR, E, 10)
    with pytest.raises(IllegalStateTransition):
        group.transition_to(S, 11)
    assert (group.state, group.state_ms) == (PR, 10)  # a refused transition changes nothing
