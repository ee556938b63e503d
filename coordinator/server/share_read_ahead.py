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
from dataclasses import dataclass, replace
from typing import Final

from coordinator.server.share_records import FetchedPartition, RecordReader, TopicPartition

MAX_ENTRIES: Final = 64
MAX_AGE_S: Final = 5.0
# The upstream may answer a Fetch with MaxWaitMs 0 before reading anything (Tansu does): a read
# ahead waits this long at most for records (MinBytes 1 answers as soon as there are some).
READ_AHEAD_WAIT_MS: Final = 100

_Read = asyncio.Future[dict[TopicPartition, FetchedPartition]]


@dataclass(frozen=True, slots=True)
class _Ahead:
    offset: int  # where the read starts
    read: _Read  # one read may serve several partitions
    started: float
    committed_only: bool  # read_committed: answers are not shared with read_uncommitted reads


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
        rest: dict[TopicPartition, int] = {}
        for tp, offset in wanted.items():
            answer = await self._from_ahead(tp, offset, max_wait_ms, committed_only)
            if answer is not None:
                ready[tp] = answer
                self.hits += 1
            else:
                rest[tp] = offset
        if rest:
            # Records are ready for some partitions: the others are not waited for (as a broker
            # answers once MinBytes is there).
            fetched = await self.reader.fetch(
                rest, 0 if ready else max_wait_ms, min_bytes, max_bytes, committed_only
            )
            ready.update(fetched)
            self._keep(fetched, rest, committed_only)
        return ready

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
        for tp in kept:
            entries = self._ahead.setdefault(tp, [])
            entries[:] = [a for a in entries if a.offset != offsets[tp] or a.committed_only != committed_only]
            entries.append(_Ahead(offsets[tp], read, started, committed_only))
        self._bound()

    def read_ahead(
        self, wanted: Mapping[TopicPartition, int], max_bytes: int, committed_only: bool = False
    ) -> None:
        """Have the records from ``wanted`` (topic-partition: offset) on hand for the next fetch:
        read from there in the background, or, where an answer read before already holds that
        offset, from the end of that answer on (one read ahead of what is on hand)."""
        self._drop_old()
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
        read.add_done_callback(_retrieve)
        started = self.clock()
        for tp, offset in new.items():
            self._ahead.setdefault(tp, []).append(_Ahead(offset, read, started, committed_only))
        self._bound()

    async def start_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        return await self.reader.start_offsets(partitions, timestamp)

    async def close(self) -> None:
        reads = {ahead.read for entries in self._ahead.values() for ahead in entries}
        self._ahead.clear()
        for read in reads:
            read.cancel()
        for read in reads:
            with contextlib.suppress(BaseException):
                await read

    @property
    def pending(self) -> int:
        """Answers read ahead and kept."""
        return sum(len(entries) for entries in self._ahead.values())

    async def _from_ahead(
        self, tp: TopicPartition, offset: int, max_wait_ms: int, committed_only: bool
    ) -> FetchedPartition | None:
        """The batches from ``offset`` on out of an answer read ahead, if one holds them; answers
        read past, failed or empty are dropped."""
        for ahead in list(self._ahead.get(tp, ())):
            if ahead.committed_only != committed_only or ahead.offset > offset:
                continue  # another isolation level, or read from further on: the records before it are not in it
            if not ahead.read.done():
                # Wait for it no longer than the fetch would wait (shielded: others may too).
                done, _ = await asyncio.wait([ahead.read], timeout=max(max_wait_ms, 0) / 1000)
                if not done:
                    return None
            answer = _answer(ahead.read, tp)
            if answer is None or answer.error_code or not answer.batches:
                self._remove(tp, ahead)
                continue
            part = from_offset(answer, offset)
            if part is None:
                self._remove(tp, ahead)  # read past
                continue
            return part
        return None

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
    batch of it is below ``offset``."""
    for n, (_, last, start, _) in enumerate(answer.batches):
        if last >= offset:
            if n == 0:
                return answer
            kept = answer.batches[n:]
            return replace(
                answer,
                records=answer.records[start:],
                batches=tuple((base, last_offset, s - start, e - start) for base, last_offset, s, e in kept),
            )
    return None


def _answer(read: _Read, tp: TopicPartition) -> FetchedPartition | None:
    if read.cancelled() or read.exception() is not None:
        return None
    return read.result().get(tp)


def _retrieve(read: _Read) -> None:
    if not read.cancelled():
        read.exception()  # a failed read ahead is read again: nothing to report here
