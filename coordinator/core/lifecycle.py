"""What the shard needs of each kind of group manager (classic groups, KIP-848 consumer groups).

Both managers load their groups from stored records, restart their timers once everything is
loaded, unload when the shard goes away, handle their own timer kinds and delete their groups.
A deletion is a pending change: the records to write and the change to apply once they are
durable (nothing is removed before that, so a failed write has nothing to undo).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.core.effects import Effects
from coordinator.core.timers import TimerKey
from storage.records import Record

TimerHandler = Callable[[TimerKey, Effects], None]


@dataclass(slots=True)
class PendingChange:
    """Records to write and the state change they carry, applied once they are durable."""

    records: list[Record] = field(default_factory=list)
    apply: Callable[[], None] = lambda: None


class GroupLifecycle(Protocol):
    def load(self, records: Sequence[Record]) -> None:
        """Rebuild groups from the stored records of this manager's kinds (others are ignored)."""
        ...

    def on_loaded(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """Everything (or the groups of ``group_ids``) is loaded: restart member sessions and other timers."""
        ...

    def unload(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """The shard is gone: every group (or those of ``group_ids``) goes away, parked requests
        are answered."""
        ...

    def timer_handlers(self) -> Mapping[str, TimerHandler]:
        """The timer kinds this manager schedules (the first element of their keys)."""
        ...

    def holds(self, group_id: str) -> bool: ...

    def validate_delete(self, group_id: str) -> int:
        """DeleteGroups: NONE, NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND."""
        ...

    def deletion(self, group_id: str, expiring: bool) -> PendingChange:
        """Delete a group this manager holds (DeleteGroups, or ``expiring`` by the retention
        sweep). Applied, it removes the group unless it gained members in the meantime."""
        ...
