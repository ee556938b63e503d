"""The groups of every kind: one group id space, one group limit (docs/group-model.md).

Every kind registers its table of groups (``GroupKind.groups``, the same mapping for the kind's
lifetime), so that a group id is looked up in one place and ``group.max.groups`` counts the
groups of every kind. The *default*
kind answers the classic group APIs for ids no kind holds and holds the groups that only have
offsets (Kafka's simple groups). The *conversion* resolves ids stored under two kinds (only a
conversion between them whose write failed leaves that, docs/migration.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Protocol, TypeVar

from coordinator.core.group import ClassicProtocolApi, Group, GroupKind

log = logging.getLogger(__name__)

K = TypeVar("K")


class DefaultKind(GroupKind, ClassicProtocolApi, Protocol):
    def create_offsets_group(self, group_id: str) -> Group:
        """A new Empty group that holds only committed offsets (Kafka's simple group)."""
        ...


class Conversion(Protocol):
    def resolve_stored_twice(self, group_ids: set[str]) -> None:
        """Ids loaded under two kinds: keep the one the group changed to last."""
        ...


class GroupRegistry:
    """The registered kinds of group and the group id space they share."""

    def __init__(self, max_groups: int) -> None:
        self.max_groups = max_groups
        self.kinds: tuple[GroupKind, ...] = ()
        self._tables: tuple[Mapping[str, Group], ...] = ()
        self._holders: tuple[tuple[Mapping[str, Group], GroupKind], ...] = ()
        self._default: DefaultKind | None = None
        self.conversion: Conversion | None = None

    def register(self, kind: GroupKind) -> None:
        """Add a kind (ListGroups and the metrics list kinds in registration order)."""
        if any(k.name == kind.name for k in self.kinds):
            raise ValueError(f"group kind {kind.name!r} registered twice")
        self.kinds = (*self.kinds, kind)
        self._tables = (*self._tables, kind.groups)
        self._holders = (*self._holders, (kind.groups, kind))

    def register_default(self, kind: DefaultKind) -> None:
        """Add the kind that answers the classic group APIs for unknown ids and holds the
        groups that only have offsets."""
        self.register(kind)
        self._default = kind

    @property
    def default(self) -> DefaultKind:
        if self._default is None:
            raise RuntimeError("no default group kind registered")
        return self._default

    def kind(self, cls: type[K]) -> K:
        """The registered kind of class ``cls`` (typed access for views and tests)."""
        for kind in self.kinds:
            if isinstance(kind, cls):
                return kind
        raise LookupError(f"no group kind {cls.__name__} registered")

    # -- the group id space ------------------------------------------------------------------

    def holder(self, group_id: str) -> GroupKind | None:
        """The kind holding ``group_id``, None when no kind does."""
        for table, kind in self._holders:
            if group_id in table:
                return kind
        return None

    def classic_protocol(self, group_id: str) -> ClassicProtocolApi:
        """Who answers SyncGroup, Heartbeat and LeaveGroup for ``group_id``: the kind holding
        it (the default kind answers for its own groups), else the default kind (the hot path of
        classic heartbeats: one call)."""
        default = self._default
        if default is None:
            raise RuntimeError("no default group kind registered")
        for table, kind in self._holders:
            if group_id in table:
                if kind is default:
                    return default
                api = kind.classic_protocol(group_id, False)
                return default if api is None else api
        return default

    def holds(self, group_id: str) -> bool:
        # A loop, not any() over a generator: this runs for every offset replayed.
        for table in self._tables:  # noqa: SIM110
            if group_id in table:
                return True
        return False

    def group(self, group_id: str) -> Group | None:
        for table in self._tables:
            group = table.get(group_id)
            if group is not None:
                return group
        return None

    def __iter__(self) -> Iterator[Group]:
        """Every group, kind by kind in registration order."""
        for table in self._tables:
            yield from table.values()

    def count(self) -> int:
        return sum(len(table) for table in self._tables)

    def ids(self) -> set[str]:
        held: set[str] = set()
        for table in self._tables:
            held |= table.keys()
        return held

    def at_group_limit(self) -> bool:
        """group.max.groups reached: no new group may be created (Kafka's share-group rule)."""
        if self.count() < self.max_groups:
            return False
        log.warning("refusing a new group: group.max.groups (%d) reached", self.max_groups)
        return True

    def create_offsets_group(self, group_id: str) -> None:
        self.default.create_offsets_group(group_id)

    def resolve_stored_twice(self, group_ids: set[str]) -> None:
        """After loading ``group_ids``: those now held by two kinds are left to the conversion."""
        seen: set[str] = set()
        twice: set[str] = set()
        for table in self._tables:
            here = table.keys() & group_ids
            twice |= here & seen
            seen |= here
        if not twice:
            return
        if self.conversion is None:
            raise RuntimeError(f"groups stored under two kinds and no conversion: {sorted(twice)[:5]}")
        self.conversion.resolve_stored_twice(twice)
