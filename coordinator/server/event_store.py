"""Persisting group events (``group.events.persist``): so `groups history` and the console's
timeline survive a restart.

The core records events in bounded rings per group and, when persistence is on, keeps the new
ones aside; this task hands them to storage once a second, in their own batch (events are not
acknowledged state: no reply waits for them, and a lost second of events loses no offsets).
At start the newest ``ring size`` events of every group within the retention are put back into
the rings before the groups load. Storage keeps events for ``group.events.retention.ms`` and
never more than ``MAX_ROWS`` rows (pruned once a minute, oldest first). While storage fails,
events wait in memory (at most ``coordinator.core.events.MAX_UNSAVED``, oldest dropped first)
and one line is logged per incident.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from coordinator.core.events import DEFAULT_MAX_GROUPS, DEFAULT_RING_SIZE, GroupEvent, GroupEvents
from coordinator.server.tasks import cancel_and_wait
from storage.base import StoreError
from storage.records import GroupEventRecord

log = logging.getLogger(__name__)

# Rows kept at most: every event the rings of all groups can hold.
MAX_ROWS: Final = DEFAULT_RING_SIZE * DEFAULT_MAX_GROUPS
FLUSH_INTERVAL_S: Final = 1.0
PRUNE_INTERVAL_S: Final = 60.0


def to_record(event: GroupEvent) -> GroupEventRecord:
    return GroupEventRecord(
        event.group_id, event.seq, event.time_ms, event.kind, event.protocol, event.state,
        event.generation, event.member_id, event.message, json.dumps(dict(event.details), sort_keys=True),
    )  # fmt: skip


def to_event(record: GroupEventRecord) -> GroupEvent:
    try:
        details = json.loads(record.details)
    except ValueError:
        details = {}
    return GroupEvent(
        record.seq, record.time_ms, record.group_id, record.kind, record.protocol, record.state,
        record.generation, record.member_id, record.message, details if isinstance(details, dict) else {},
    )  # fmt: skip


class EventPersister:
    def __init__(
        self,
        events: GroupEvents,
        store: Any,
        retention_ms: int,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        flush_interval_s: float = FLUSH_INTERVAL_S,
        prune_interval_s: float = PRUNE_INTERVAL_S,
    ) -> None:
        self.events = events
        self.store = store
        self.retention_ms = retention_ms
        self.wall_ms = wall_ms
        self.flush_interval_s = flush_interval_s
        self.prune_interval_s = prune_interval_s
        self.failing = False
        self._task: asyncio.Task[None] | None = None
        self._next_prune = 0.0

    async def restore(self) -> int:
        """Put the stored events back into the rings, then keep every new one for storage."""
        since = self.wall_ms() - self.retention_ms
        records = await self.store.load_events(self.events.ring_size, since)
        self.events.restore([to_event(r) for r in records])
        self.events.persist()
        return len(records)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="group-event-persister")

    async def stop(self) -> None:
        """Stop the loop and write what is left (storage closes after this)."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.flush()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval_s)
            await self.flush()
            if time.monotonic() >= self._next_prune:
                self._next_prune = time.monotonic() + self.prune_interval_s
                with contextlib.suppress(StoreError):  # logged by flush when storage is down
                    await self.store.prune_events(self.wall_ms() - self.retention_ms, MAX_ROWS)

    async def flush(self) -> None:
        taken = self.events.take_unsaved()
        if not taken:
            return
        try:
            await self.store.append_events([to_record(e) for e in taken])
        except StoreError as exc:
            self.events.give_back(taken)
            if not self.failing:
                log.error("cannot store %d group events (kept in memory, retried): %s", len(taken), exc)
            self.failing = True
            return
        if self.failing:
            log.info("group events are stored again (%d dropped meanwhile)", self.events.unsaved_dropped)
        self.failing = False
