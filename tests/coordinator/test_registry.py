"""The registry of groups: one group id space and one group limit for every kind
(docs/group-model.md#the-registry)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from coordinator.core.classic.manager import ClassicGroupManager
from coordinator.core.consumer.manager import ConsumerGroupManager
from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.registry import GroupRegistry
from tests.coordinator.harness import WALL_START_MS, Reply


@dataclass
class FakeKind:
    """Just what the registry reads of a kind: its name and its table of groups."""

    name: str
    groups: dict[str, Any] = field(default_factory=dict)

    def create_offsets_group(self, group_id: str) -> object:
        self.groups[group_id] = object()
        return self.groups[group_id]


@dataclass
class FakeConversion:
    resolved: list[set[str]] = field(default_factory=list)

    def resolve_stored_twice(self, group_ids: set[str]) -> None:
        self.resolved.append(group_ids)


def registry_of(*kinds: FakeKind, max_groups: int = 10) -> GroupRegistry:
    registry = GroupRegistry(max_groups)
    registry.register_default(kinds[0])  # type: ignore[arg-type]
    for kind in kinds[1:]:
        registry.register(kind)  # type: ignore[arg-type]
    return registry


def test_one_id_space_over_every_kind() -> None:
    a, b = FakeKind("a", {"x": "group x"}), FakeKind("b", {"y": "group y"})
    registry = registry_of(a, b)
    assert registry.holder("x") is a and registry.holder("y") is b and registry.holder("z") is None
    assert registry.group("y") == "group y" and registry.group("z") is None
    assert registry.holds("x") and not registry.holds("z")
    assert registry.ids() == {"x", "y"} and registry.count() == 2
    assert list(registry) == ["group x", "group y"]  # kind by kind, in registration order


def test_the_group_limit_counts_every_kind() -> None:
    a, b = FakeKind("a", {"x": 1}), FakeKind("b", {"y": 2})
    registry = registry_of(a, b, max_groups=3)
    assert not registry.at_group_limit()
    b.groups["z"] = 3
    assert registry.at_group_limit()


def test_offsets_only_groups_go_to_the_default_kind() -> None:
    a, b = FakeKind("a"), FakeKind("b")
    registry = registry_of(a, b)
    registry.create_offsets_group("simple")
    assert registry.holder("simple") is a


def test_a_kind_name_registers_once() -> None:
    registry = registry_of(FakeKind("a"))
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(FakeKind("a"))  # type: ignore[arg-type]


def test_ids_stored_under_two_kinds_go_to_the_conversion() -> None:
    a, b = FakeKind("a", {"both": 1, "only-a": 2}), FakeKind("b", {"both": 3, "only-b": 4})
    registry = registry_of(a, b)
    with pytest.raises(RuntimeError, match="no conversion"):
        registry.resolve_stored_twice({"both", "only-a"})
    conversion = FakeConversion()
    registry.conversion = conversion
    registry.resolve_stored_twice({"only-a", "only-b"})
    registry.resolve_stored_twice({"both", "only-a", "only-b"})
    assert conversion.resolved == [{"both"}]


def test_the_coordinator_registers_both_kinds_in_listing_order() -> None:
    coordinator = GroupCoordinator(BrokerGroupSettings())
    assert coordinator.groups_by_protocol() == {"classic": 0, "consumer": 0, "share": 0, "streams": 0}
    assert isinstance(coordinator.kind(ClassicGroupManager), ClassicGroupManager)
    assert isinstance(coordinator.kind(ConsumerGroupManager), ConsumerGroupManager)
    with pytest.raises(LookupError):
        coordinator.kind(FakeKind)


def test_a_request_no_kind_serves_is_refused() -> None:
    coordinator = GroupCoordinator(BrokerGroupSettings())
    ctx = RequestContext(0, WALL_START_MS, 0, "c", "/h", Reply(0, 0))
    with pytest.raises(LookupError, match="no kind of group serves object"):
        coordinator.handle(ctx, object())


def test_classic_requests_go_to_the_kind_holding_the_group_or_to_the_default_kind() -> None:
    a, b = FakeKind("a", {"x": 1}), FakeKind("b", {"y": 2, "z": 3})
    b.classic_protocol = lambda group_id, joining: "b's classic members" if group_id == "y" else None  # type: ignore[attr-defined]
    registry = registry_of(a, b)
    assert registry.classic_protocol("x") is a
    assert registry.classic_protocol("y") == "b's classic members"
    assert registry.classic_protocol("z") is a  # b declines: the default kind answers
    assert registry.classic_protocol("unknown") is a
