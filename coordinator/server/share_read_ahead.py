"""Reading a share-partition's next records while its consumer works on the last ones
(docs/share-groups.md, "Reading ahead").

Once records are acquired, the share-partition's next fetch offset is known: the leader asks
:class:`ReadAhead` to read from there at once (``MaxWaitMs`` 0, so nothing is held upstream), and
the next ShareFetch at that offset takes the answer instead of waiting for a round trip to the
upstream. Only records are read ahead, never acquired: the acquisition and its write happen
when a ShareFetch takes them, as without reading ahead.

An answer read ahead is used only when it holds records: an error or an empty answer (the log
end) is read again, so errors are fresh and ``MaxWaitMs`` is waited as before. Memory is bounded:
at most ``max_entries`` answers (each at most the upstream's per-partition limit), each kept
``max_age_s`` at most; one per (topic-partition, offset), so share groups reading the same
partition at the same offset share it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from coordinator.server.share_records import FetchedPartition, RecordReader, TopicPartition

MAX_ENTRIES: Final = 64
MAX_AGE_S: Final = 5.0

_Read = asyncio.Task[dict[TopicPartition, FetchedPartition]]


@dataclass(frozen=True, slots=True)
class _Ahead:
    read: _Read  # one read may serve several partitions
    started: float


class ReadAhead:
    """A share_records.RecordSource over a RecordReader, reading ahead where it is told to."""

    def __init__(
        self,
        reader: RecordReader,
        max_entries: int = MAX_ENTRIES,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.max_entries = max_entries
        self.max_age_s = max_age_s
        self.clock = clock
        self._ahead: dict[tuple[TopicPartition, int], _Ahead] = {}  # oldest first
        self.hits = 0  # fetches answered from a read ahead, for tests and the bench

    async def fetch(
        self, wanted: Mapping[TopicPartition, int], max_wait_ms: int, min_bytes: int, max_bytes: int
    ) -> dict[TopicPartition, FetchedPartition]:
        self._drop_old()
        ready: dict[TopicPartition, FetchedPartition] = {}
        rest: dict[TopicPartition, int] = {}
        for tp, offset in wanted.items():
            answer = await self._take(tp, offset)
            if answer is not None and not answer.error_code and answer.batches:
                ready[tp] = answer
                self.hits += 1
            else:
                rest[tp] = offset
        if rest:
            # Records are ready for some partitions: the others are not waited for (as a broker
            # answers once MinBytes is there).
            fetched = await self.reader.fetch(rest, 0 if ready else max_wait_ms, min_bytes, max_bytes)
            ready.update(fetched)
        return ready

    def read_ahead(self, wanted: Mapping[TopicPartition, int], max_bytes: int) -> None:
        """Start reading ``wanted`` (topic-partition: offset) in the background."""
        self._drop_old()
        new = {tp: offset for tp, offset in wanted.items() if (tp, offset) not in self._ahead}
        if not new:
            return
        read = asyncio.get_running_loop().create_task(self.reader.fetch(new, 0, 1, max_bytes))
        read.add_done_callback(_retrieve)
        started = self.clock()
        for tp, offset in new.items():
            self._ahead[(tp, offset)] = _Ahead(read, started)
        while len(self._ahead) > self.max_entries:
            self._forget(next(iter(self._ahead)))

    async def start_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        return await self.reader.start_offsets(partitions, timestamp)

    async def close(self) -> None:
        reads = {ahead.read for ahead in self._ahead.values()}
        self._ahead.clear()
        for read in reads:
            read.cancel()
        for read in reads:
            with contextlib.suppress(BaseException):
                await read

    @property
    def pending(self) -> int:
        """Answers read ahead and not yet taken."""
        return len(self._ahead)

    async def _take(self, tp: TopicPartition, offset: int) -> FetchedPartition | None:
        ahead = self._ahead.pop((tp, offset), None)
        if ahead is None:
            return None
        try:
            answer = await asyncio.shield(ahead.read)  # another fetch may be waiting for it too
        except Exception:
            return None
        return answer.get(tp)

    def _drop_old(self) -> None:
        oldest = self.clock() - self.max_age_s
        for key in [key for key, ahead in self._ahead.items() if ahead.started < oldest]:
            self._forget(key)

    def _forget(self, key: tuple[TopicPartition, int]) -> None:
        # A read under way is left to finish (it waits for nothing upstream); cancelling it would
        # cost its upstream connection.
        del self._ahead[key]


def _retrieve(read: _Read) -> None:
    if not read.cancelled():
        read.exception()  # a failed read ahead is read again: nothing to report here
