"""Reading a share-partition's next records while its consumer works on the last ones
(docs/share-groups.md, "Reading ahead").

Once records are acquired, the share-partition's next fetch offset is known: the leader asks
:class:`ReadAhead` to read from there at once (``MaxWaitMs`` 0, so nothing is held upstream), and
the next ShareFetch at that offset takes the answer instead of waiting for a round trip to the
upstream. Only records are read ahead, never acquired: the acquisition and its write happen
when a ShareFetch takes them, as without reading ahead.

The answers of ordinary reads are kept the same way: a
ShareFetch usually acquires a batch or two of what the upstream returned, and the next fetches
take the rest from there.

An answer read ahead is used only when it holds records: an error or an empty answer (the log
end) is read again, so errors are fresh and ``MaxWaitMs`` is waited as before. A fetch some of
whose partitions have records on hand answers with those at once: the others are read ahead
for the next fetch (or left to a read under way), not waited for, and an error read ahead for
them is answered. Memory is bounded: at most ``max_entries`` answers, each kept
``max_age_s`` at most, one per (topic-partition, offset), so share groups reading the same
partition at the same offset share it; and the bytes kept are reserved in the server's
:class:`ByteBudget` (the same ``buffer.memory.bytes`` as every buffered request and answer),
only while they fit under its limit: an answer that does not fit is not kept, and no read
ahead starts while the budget is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from coordinator.server.byte_budget import ByteBudget
from coordinator.server.share_records import FetchedPartition, RecordReader, TopicPartition

MAX_ENTRIES: Final = 64
MAX_AGE_S: Final = 5.0
# The upstream may answer a Fetch with MaxWaitMs 0 before reading anything (Tansu does): a read
# ahead waits this long at most for records (MinBytes 1 answers as soon as there are some).
READ_AHEAD_WAIT_MS: Final = 100

_Read = asyncio.Future[dict[TopicPartition, FetchedPartition]]


@dataclass(slots=True, eq=False)
class _Ahead:
    offset: int  # where the read starts
    read: _Read  # one read may serve several partitions
    started: float
    committed_only: bool  # read_committed: answers are not shared with read_uncommitted reads
    held: int = 0  # bytes of this partition's answer reserved in the budget


class ReadAhead:
    """A share_records.RecordSource over a RecordReader, reading ahead where it is told to."""

    def __init__(
        self,
        reader: RecordReader,
        max_entries: int = MAX_ENTRIES,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
        budget: ByteBudget | None = None,
    ) -> None:
        self.reader = reader
        self.budget = budget if budget is not None else ByteBudget()
        self.max_entries = max_entries
        self.max_age_s = max_age_s
        self.clock = clock
        self._ahead: dict[TopicPartition, list[_Ahead]] = {}  # per partition, oldest first
        self.hits = 0  # partitions answered from what was read ahead, for tests and the bench

    async def fetch(
        self,
        wanted: Mapping[TopicPartition, int],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        committed_only: bool = False,
    ) -> dict[TopicPartition, FetchedPartition]:
        self._drop_old()
        ready: dict[TopicPartition, FetchedPartition] = {}
        under_way: dict[TopicPartition, _Read] = {}
        failed: dict[TopicPartition, FetchedPartition] = {}
        rest: dict[TopicPartition, int] = {}
        for tp, offset in wanted.items():
            answer, read, error = self._on_hand(tp, offset, committed_only)
            if answer is not None:
                ready[tp] = answer
                continue
            if read is not None:
                under_way[tp] = read
            else:
                rest[tp] = offset
            if error is not None:
                failed[tp] = error
        self.hits += len(ready)
        if ready:
            if rest:
                # Records are on hand for some partitions: the others are not waited for (as a
                # broker answers once MinBytes is there) nor read now, but read ahead for the next
                # fetch; those with a read under way are left to it. An error read ahead is answered.
                ready.update((tp, failed[tp]) for tp in rest if tp in failed)
                self.read_ahead(
                    {tp: o for tp, o in rest.items() if tp not in failed}, max_bytes, committed_only
                )
            return ready
        return await self._wait(wanted, under_way, rest, max_wait_ms, min_bytes, max_bytes, committed_only)

    async def _wait(
        self,
        wanted: Mapping[TopicPartition, int],
        under_way: dict[TopicPartition, _Read],
        rest: dict[TopicPartition, int],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        committed_only: bool,
    ) -> dict[TopicPartition, FetchedPartition]:
        """Nothing on hand: the partitions without a read under way are read now, and the fetch
        answers with the first records that arrive, from that read or a read under way, waiting
        no longer than ``max_wait_ms`` for the reads under way (shielded: other fetches may wait
        for them too). A read of its own still under way then is kept for the next fetches."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000
        own: asyncio.Task[dict[TopicPartition, FetchedPartition]] | None = None
        if rest:
            own = loop.create_task(self.reader.fetch(rest, max_wait_ms, min_bytes, max_bytes, committed_only))
            own.add_done_callback(_retrieve)  # the fetch may be cancelled while it is under way
        ready: dict[TopicPartition, FetchedPartition] = {}
        while not ready and (under_way or (own is not None and not own.done())):
            reads: set[asyncio.Future[Any]] = set(under_way.values())
            if own is not None and not own.done():
                reads.add(own)
            remaining = deadline - loop.time()
            if under_way and remaining <= 0:
                break
            await asyncio.wait(
                reads, timeout=remaining if under_way else None, return_when=asyncio.FIRST_COMPLETED
            )
            for tp, read in list(under_way.items()):
                if not read.done():
                    continue
                answer, again, error = self._on_hand(tp, wanted[tp], committed_only)
                if answer is not None:
                    ready[tp] = answer
                    self.hits += 1
                if again is not None and answer is None:
                    under_way[tp] = again
                else:
                    del under_way[tp]
                    if error is not None:
                        ready[tp] = error
            if own is not None and own.done():
                break
        if own is not None:
            if own.done() or not ready:
                fetched = await own
                self._keep(fetched, rest, committed_only)
                ready.update(fetched)
            else:
                own.add_done_callback(lambda done: self._keep_late(done, rest, committed_only))
        if under_way and not ready:
            # The reads under way took longer than the fetch would wait: read now, not waiting.
            offsets = {tp: wanted[tp] for tp in under_way}
            fetched = await self.reader.fetch(offsets, 0, min_bytes, max_bytes, committed_only)
            self._keep(fetched, offsets, committed_only)
            ready.update(fetched)
        return ready

    def _keep_late(
        self,
        read: asyncio.Task[dict[TopicPartition, FetchedPartition]],
        offsets: Mapping[TopicPartition, int],
        committed_only: bool,
    ) -> None:
        if not read.cancelled() and read.exception() is None:
            self._keep(read.result(), offsets, committed_only)

    def _keep(
        self,
        fetched: dict[TopicPartition, FetchedPartition],
        offsets: Mapping[TopicPartition, int],
        committed_only: bool,
    ) -> None:
        """Keep an answer's records for the next fetches: a fetch usually acquires a batch or two
        of what the upstream returned."""
        kept = {tp: answer for tp, answer in fetched.items() if not answer.error_code and answer.batches}
        if not kept:
            return
        read: _Read = asyncio.get_running_loop().create_future()
        read.set_result(kept)
        started = self.clock()
        for tp, answer in kept.items():
            for old in [
                a
                for a in self._ahead.get(tp, ())
                if a.offset == offsets[tp] and a.committed_only == committed_only
            ]:
                self._remove(tp, old)
            if self.budget.reserve_within(len(answer.records)):
                self._ahead.setdefault(tp, []).append(
                    _Ahead(offsets[tp], read, started, committed_only, len(answer.records))
                )
        self._bound()

    def read_ahead(
        self, wanted: Mapping[TopicPartition, int], max_bytes: int, committed_only: bool = False
    ) -> None:
        """Have the records from ``wanted`` (topic-partition: offset) on hand for the next fetch:
        read from there in the background, or, where an answer read before already holds that
        offset, from the end of that answer on (one read ahead of what is on hand)."""
        self._drop_old()
        if self.budget.used >= self.budget.limit:
            return  # the server's memory is spent: the next fetches read for themselves
        new: dict[TopicPartition, int] = {}
        for tp, offset in wanted.items():
            start = self._read_from(tp, offset, committed_only)
            if start is not None:
                new[tp] = start
        if not new:
            return
        read = asyncio.get_running_loop().create_task(
            self.reader.fetch(new, READ_AHEAD_WAIT_MS, 1, max_bytes, committed_only)
        )
        read.add_done_callback(self._arrived)
        started = self.clock()
        for tp, offset in new.items():
            self._ahead.setdefault(tp, []).append(_Ahead(offset, read, started, committed_only))
        self._bound()

    def _arrived(self, read: _Read) -> None:
        """A read ahead answered: its records are kept if the budget has room for them."""
        if not read.cancelled():
            read.exception()  # a failed read ahead is read again: nothing to report here
        for tp, entries in list(self._ahead.items()):
            for ahead in [a for a in entries if a.read is read]:
                answer = _answer(read, tp)
                size = 0 if answer is None or answer.error_code else len(answer.records)
                if self.budget.reserve_within(size):
                    ahead.held = size
                else:
                    self._remove(tp, ahead)

    async def start_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        return await self.reader.start_offsets(partitions, timestamp)

    async def close(self) -> None:
        reads = {ahead.read for entries in self._ahead.values() for ahead in entries}
        for tp, entries in list(self._ahead.items()):
            for ahead in list(entries):
                self._remove(tp, ahead)
        for read in reads:
            read.cancel()
        for read in reads:
            with contextlib.suppress(BaseException):
                await read

    @property
    def pending(self) -> int:
        """Answers read ahead and kept."""
        return sum(len(entries) for entries in self._ahead.values())

    def _on_hand(
        self, tp: TopicPartition, offset: int, committed_only: bool
    ) -> tuple[FetchedPartition | None, _Read | None, FetchedPartition | None]:
        """The batches from ``offset`` on out of an answer on hand, if one holds them, else a
        read under way that may, and an error read ahead; answers read past, failed or empty
        are dropped."""
        under_way = None
        failed = None
        for ahead in list(self._ahead.get(tp, ())):
            if ahead.committed_only != committed_only or ahead.offset > offset:
                continue  # another isolation level, or read from further on: the records before it are not in it
            if not ahead.read.done():
                under_way = under_way or ahead.read
                continue
            answer = _answer(ahead.read, tp)
            if answer is None or answer.error_code or not answer.batches:
                self._remove(tp, ahead)
                if answer is not None and answer.error_code:
                    failed = answer
                continue
            part = from_offset(answer, offset)
            if part is None:
                self._remove(tp, ahead)  # read past
                continue
            return part, None, None
        return None, under_way, failed

    def _read_from(self, tp: TopicPartition, offset: int, committed_only: bool) -> int | None:
        """Where to read ahead for a next fetch at ``offset``: past the answers on hand that hold
        it, or None when a read under way will (or an answer found the log end there)."""
        start = offset
        same = [a for a in self._ahead.get(tp, ()) if a.committed_only == committed_only]
        for ahead in sorted(same, key=lambda a: a.offset):
            if ahead.offset > start:
                break
            if not ahead.read.done():
                return None
            answer = _answer(ahead.read, tp)
            if answer is None or answer.error_code or not answer.batches:
                if ahead.offset == start:
                    return None  # the next fetch reads again, waiting as it should
                continue
            start = max(start, answer.batches[-1][1] + 1)
        return start

    def _remove(self, tp: TopicPartition, ahead: _Ahead) -> None:
        entries = self._ahead.get(tp, [])
        if ahead in entries:
            entries.remove(ahead)
            self.budget.give_back(ahead.held)
            ahead.held = 0
        if not entries:
            self._ahead.pop(tp, None)

    def _drop_old(self) -> None:
        oldest = self.clock() - self.max_age_s
        for tp, entries in list(self._ahead.items()):
            for ahead in [a for a in entries if a.started < oldest]:
                self._remove(tp, ahead)

    def _bound(self) -> None:
        # A read under way that is dropped is left to finish (it waits for nothing upstream);
        # cancelling it would cost its upstream connection.
        while self.pending > self.max_entries:
            tp, ahead = min(
                ((tp, entries[0]) for tp, entries in self._ahead.items()), key=lambda e: e[1].started
            )
            self._remove(tp, ahead)


def from_offset(answer: FetchedPartition, offset: int) -> FetchedPartition | None:
    """``answer`` from the first batch holding ``offset`` or after it on, or None when every
    batch of it is below ``offset``. The records are shared, not copied: the batches that are
    left keep their places in them."""
    batches = answer.batches
    if not batches or batches[-1][1] < offset:
        return None
    if batches[0][1] >= offset:
        return answer
    lasts = [last for _, last, _, _ in batches]
    return replace(answer, batches=batches[bisect_left(lasts, offset) :])


def _answer(read: _Read, tp: TopicPartition) -> FetchedPartition | None:
    if read.cancelled() or read.exception() is not None:
        return None
    return read.result().get(tp)


def _retrieve(read: asyncio.Future[Any]) -> None:
    if not read.cancelled():
        read.exception()  # whoever awaits it sees the error; nobody else reports it
