"""Equal small immutable values held by many groups are one object; the tables stay bounded."""

from __future__ import annotations

import pytest

from coordinator.core import shared_values
from coordinator.core.shared_values import shared_partition, shared_set


def test_equal_sets_become_one_object() -> None:
    first = shared_set(frozenset({1, 2, 3}))
    again = shared_set(frozenset([3, 2, 1]))
    assert again is first
    assert again == frozenset({1, 2, 3})
    assert shared_set(frozenset({1, 2})) is not first


def test_equal_partitions_become_one_tuple() -> None:
    first = shared_partition("orders", 7)
    assert shared_partition("orders", 7) is first
    assert first == ("orders", 7)


def test_large_sets_are_kept_as_they_are() -> None:
    big = frozenset(range(shared_values.MAX_SHARED_SET_SIZE + 1))
    assert shared_set(big) is big
    assert shared_set(frozenset(list(big))) is not big  # an equal one is not swapped for it


def test_a_full_table_hands_values_back_unshared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_values, "_sets", {})
    monkeypatch.setattr(shared_values, "MAX_ENTRIES", 2)
    for n in range(10):
        shared_set(frozenset({n}))
    assert len(shared_values._sets) == 2
    value = frozenset({99})
    assert shared_set(value) is value
    assert shared_set(frozenset({99})) is not value  # not remembered: the table is full
