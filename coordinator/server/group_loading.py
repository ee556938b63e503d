"""A single node's groups, loaded shard by shard after the server starts serving.

docs/performance.md#loading-in-the-background explains the design and why it is safe. The
shards are Kafka's (``offsets.topic.num.partitions``, ``partitionFor``), the same as several
nodes share; ``ShardMap.loading`` holds those not loaded yet and the shard gate answers their
groups COORDINATOR_LOAD_IN_PROGRESS. Every group id is read before the server serves (so that
shards without groups are served from the start); then loading one shard is one step: read its groups' rows in one
snapshot, ``GroupCoordinator.load_more`` them (sessions start at that moment), mark the shard served, yield
to the event loop; the next shard is read while one is built. A request for a shard still
waiting moves it to the front of the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, TypeVar

from coordinator.core.shard_map import ShardMap, ShardState
from coordinator.core.sharding import shard_of
from coordinator.server.runtime import Runtime
from coordinator.server.tasks import cancel_and_wait
from storage.base import GroupLoadingStore, StoreError
from storage.records import LoadedState

log = logging.getLogger(__name__)

_T = TypeVar("_T")

RETRY_S: Final = 1.0  # after a failed read (the database is unreachable): the same shard again


@contextlib.contextmanager
def long_lived_objects() -> Iterator[None]:
    """Around building objects that live as long as the server (a shard's groups and offsets):
    no collector passes over them while they are built, and they are frozen afterwards so that
    later full passes skip them (docs/performance.md#loading-and-the-garbage-collector). The
    collection first walks only what was allocated since the last freeze (requests' leftovers),
    so that garbage cycles of requests are not frozen with the shard."""
    gc.collect()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        gc.enable()


class GroupLoader:
    """Loads every shard of ``shard_map.loading`` into ``runtime.coordinator``; ``on_done`` is
    called once, after the last one."""

    def __init__(
        self,
        store: GroupLoadingStore,
        runtime: Runtime,
        shard_map: ShardMap,
        on_done: Callable[[float], None],
        started: float,
    ) -> None:
        """``on_done`` gets the seconds since ``started`` (monotonic: when the server began to load)."""
        self.store = store
        self.runtime = runtime
        self.shard_map = shard_map
        self.on_done = on_done
        self.started = started
        self.on_shard: Callable[[], None] | None = None  # after each shard is loaded
        self.order: list[int] = []  # the shards in the order they were loaded
        self._wanted: deque[int] = deque()
        self.task: asyncio.Task[None] | None = None
        self._reads: set[asyncio.Task[LoadedState]] = set()  # at most one: the shard read next
        self._by_shard: dict[int, list[str]] = {}  # the group ids of each shard not read yet
        shard_map.on_wanted = self.want

    async def read_ids(self) -> None:
        """Read every group id and sort them into shards (before the server serves: a failure
        ends the start, as any failed load at start). Shards without a stored group have nothing
        to load: they are served at once."""
        shards = self.shard_map.shards
        for group_id in await self.store.group_ids():
            self._by_shard.setdefault(shard_of(group_id, shards), []).append(group_id)
        for shard in sorted(self.shard_map.loading - self._by_shard.keys()):
            self.shard_map.move(shard, ShardState.ACTIVE)

    def start(self) -> asyncio.Task[None]:
        """Load the shards of ``read_ids`` in the background."""
        self.task = asyncio.get_running_loop().create_task(self._run(), name="group-loading")
        return self.task

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():  # a failed load ends the server (app.serve)
            await cancel_and_wait(self.task)
        for read in list(self._reads):
            read.cancel()
            with contextlib.suppress(asyncio.CancelledError, StoreError):
                await read

    def want(self, shard: int) -> None:
        """A request waits for ``shard``: it is loaded next (after the one being read)."""
        if shard not in self._wanted:
            self._wanted.append(shard)

    async def _run(self) -> None:
        by_shard = self._by_shard
        pending = deque(sorted(self.shard_map.loading))
        reading = self._read_next(pending, by_shard, None)
        while reading is not None:
            shard, read = reading
            with long_lived_objects():
                state = await read
                # The store reads the next shard while this one is built (SQLite steps
                # without the GIL): a shard wanted meanwhile is read right after it.
                reading = self._read_next(pending, by_shard, shard)
                self.runtime.load_groups(state)
                del state
            self.shard_map.move(shard, ShardState.ACTIVE)
            self.order.append(shard)
            if self.on_shard is not None:
                self.on_shard()
            await asyncio.sleep(0)  # requests that arrived meanwhile go first
        self.shard_map.on_wanted = None
        self.on_done(time.monotonic() - self.started)

    def _read_next(
        self, pending: deque[int], by_shard: dict[int, list[str]], building: int | None
    ) -> tuple[int, asyncio.Task[LoadedState]] | None:
        """Start reading the next shard: the oldest wanted one, else the next in order (None
        when every shard is read); ``building`` is the shard read last, not loaded yet."""
        loading = self.shard_map.loading
        shard = None
        while self._wanted and shard is None:
            wanted = self._wanted.popleft()
            if wanted in loading and wanted != building and wanted in by_shard:
                shard = wanted
        while shard is None and pending:
            candidate = pending.popleft()
            if candidate in loading and candidate != building and candidate in by_shard:
                shard = candidate
        if shard is None:
            return None
        group_ids = by_shard.pop(shard)
        read = asyncio.get_running_loop().create_task(
            self._retrying(shard, lambda: self.store.load_groups(group_ids)),
            name=f"group-loading-shard-{shard}",
        )
        self._reads.add(read)
        read.add_done_callback(self._reads.discard)
        return shard, read

    async def _retrying(self, shard: int, read: Callable[[], Awaitable[_T]]) -> _T:
        """Until it succeeds: the shard is FAILED meanwhile (its groups keep answering
        COORDINATOR_LOAD_IN_PROGRESS, retriable), and nothing of theirs was acknowledged since
        the restart."""
        failing = False
        while True:
            try:
                result = await read()
            except StoreError as exc:
                if not failing:
                    log.error("cannot load shard %d, retrying every %.0f s: %s", shard, RETRY_S, exc)
                    failing = True
                    self.shard_map.move(shard, ShardState.FAILED)
                await asyncio.sleep(RETRY_S)
                self.shard_map.move(shard, ShardState.LOADING)
                continue
            if failing:
                log.warning("could load shard %d again", shard)
            return result
