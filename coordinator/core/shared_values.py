"""One object for equal small immutable values that many groups hold.

Thousands of groups subscribe to the same topics and, with deterministic assignors, own the same
partition sets ({0, 1, 2} of "orders" in every group of three members); each would otherwise
keep its own frozenset (216 bytes empty, ~470 with five partitions). Handing out one canonical
object per value keeps idle groups small. The tables are bounded: past their limit a value is
returned as it is, so memory can never grow without bound and behaviour never changes (the
values are immutable; only identity differs). Large sets are not shared: they rarely repeat and
hashing them on every assignment would cost more than it saves.

The same holds for the small values every member of every group repeats: its client id and host,
its protocol type, the (name, metadata) pairs it offers, its timeouts, its assignment bytes and
the topic names of committed offsets (``shared_value``). Each decoded request carries fresh
copies, so without sharing an idle group keeps one copy of each per member
(docs/performance.md#memory-per-idle-group).
"""

from __future__ import annotations

from typing import Final, TypeVar

T = TypeVar("T")

MAX_SHARED_SET_SIZE: Final = 64  # elements; larger sets are kept as they are
MAX_ENTRIES: Final = 1 << 16  # per table
MAX_SHARED_VALUE_SIZE: Final = 1024  # bytes or characters; longer values are kept as they are

SharedValue = TypeVar("SharedValue", str, bytes, int, tuple[tuple[str, bytes], ...])

_sets: dict[frozenset[object], frozenset[object]] = {}
_partitions: dict[tuple[str, int], tuple[str, int]] = {}
_values: dict[object, object] = {}
_supports: dict[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]] = {}


def shared_set(value: frozenset[T]) -> frozenset[T]:
    """The canonical frozenset equal to ``value`` (``value`` itself if it becomes canonical)."""
    if len(value) > MAX_SHARED_SET_SIZE:
        return value
    found = _sets.get(value)
    if found is not None:
        return found  # type: ignore[return-value]  # equal to value, so of the same element type
    if len(_sets) < MAX_ENTRIES:
        _sets[value] = value
    return value


def shared_partition(topic: str, partition: int) -> tuple[str, int]:
    """The canonical ``(topic, partition)`` tuple."""
    key = (topic, partition)
    found = _partitions.get(key)
    if found is not None:
        return found
    if len(_partitions) < MAX_ENTRIES:
        _partitions[key] = key
    return key


def shared_value(value: SharedValue) -> SharedValue:
    """The canonical object equal to ``value``: a string, bytes, an int, or a classic member's
    (name, metadata) protocol pairs. Long strings and bytes are returned as they are."""
    kind = type(value)
    if kind is str or kind is bytes:
        size = len(value)  # type: ignore[arg-type]
    elif kind is int:
        size = 0
    elif isinstance(value, tuple):
        size = sum(len(name) + len(metadata) for name, metadata in value)
    else:
        return value  # a bool (equal to 0 and 1: never handed out for an int) or a subclass
    if size > MAX_SHARED_VALUE_SIZE:
        return value
    found = _values.get(value)
    if found is not None:
        return found  # type: ignore[return-value]  # equal to value, so of the same type
    if len(_values) < MAX_ENTRIES:
        _values[value] = value
    return value


def shared_support(value: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """The canonical (protocol name, supporting members) pairs of a classic group."""
    found = _supports.get(value)
    if found is not None:
        return found
    if len(value) <= MAX_SHARED_SET_SIZE and len(_supports) < MAX_ENTRIES:
        _supports[value] = value
    return value
