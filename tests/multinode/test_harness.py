"""The harness's own pure parts: Kafka's shard function and the double-ownership check."""

from __future__ import annotations

from typing import Any

from tests.multinode.support import double_ownership, java_string_hash, shard_of


def test_shard_function_is_kafkas() -> None:
    # Values of Java's String.hashCode (signed 32 bits), and partitionFor's & 0x7fffffff.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") - (1 << 32) == -(1 << 31)  # Integer.MIN_VALUE
    assert shard_of("polygenelubricants", 50) == 0
    assert shard_of("my-group", 50) == (java_string_hash("my-group") & 0x7FFFFFFF) % 50
    assert java_string_hash("\U0001f600") == (0xD83D * 31 + 0xDE00)  # UTF-16 code units


def _owns(t: float, member: str, parts: list[int], group: str = "g") -> dict[str, Any]:
    return {"e": "owns", "t": t, "m": member, "g": group, "parts": parts}


def test_hand_over_after_revocation_is_not_double_ownership() -> None:
    events = [
        _owns(1.0, "a", [0, 1]),
        _owns(1.1, "b", [2, 3]),
        _owns(2.0, "a", [0]),  # a gives 1 up ...
        _owns(2.5, "b", [1, 2, 3]),  # ... before b takes it
        _owns(3.0, "a", []),
        _owns(3.1, "b", [0], group="other"),  # another group's partition 0
    ]
    assert double_ownership(events) == []


def test_taking_a_partition_still_owned_is_reported() -> None:
    events = [_owns(1.0, "a", [0, 1]), _owns(2.0, "b", [1]), _owns(3.0, "a", [0])]
    [problem] = double_ownership(events)
    assert "g partition 1: owned by b while a still owned it" in problem


def _acked(t: float, member: str, partitions: list[int], made: float, group: str = "g") -> dict[str, Any]:
    """A commit acknowledged at ``t``: its offsets are the wall clock in µs when it was made."""
    offsets = {str(p): int(made * 1e6) for p in partitions}
    return {"e": "acked", "t": t, "m": member, "g": group, "offsets": offsets}


def test_a_late_revocation_callback_is_tolerated_only_where_allowed_and_without_commits() -> None:
    late = [_owns(1.0, "a", [0, 1]), _owns(2.0, "b", [1]), _owns(2.01, "a", [0])]
    assert double_ownership(late, frozenset({"g"})) == []
    assert len(double_ownership(late)) == 1  # another kind of group: a second owner
    committed = [*late[:2], _acked(2.005, "a", [0, 1], made=2.002), late[2]]
    [problem] = double_ownership(committed, frozenset({"g"}))
    assert "g partition 1: owned by b while a still owned it" in problem and "committed it after" in problem
    in_flight = [*late[:2], _acked(2.005, "a", [0, 1], made=1.9), late[2]]  # made before b took it
    assert double_ownership(in_flight, frozenset({"g"})) == []
    slow = [*late[:2], _owns(3.5, "a", [0])]
    [problem] = double_ownership(slow, frozenset({"g"}))
    assert "given up 1.500 s later" in problem
    never = late[:2]
    [problem] = double_ownership(never, frozenset({"g"}))
    assert "never given up" in problem
