"""Reading ahead for share fetches (coordinator/server/share_read_ahead.py): a fetch at the offset
read ahead takes that answer without a read of its own; empty or failed answers and other
offsets are read again; partitions without records ready are not waited for when others have
some, nor for reads under way when others have records on hand, and read while a read under
way is waited for; entries are bounded in number
and age, and their bytes are held in the server's byte budget."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from coordinator.server.byte_budget import ByteBudget
from coordinator.server.share_read_ahead import READ_AHEAD_WAIT_MS, ReadAhead
from coordinator.server.share_records import FetchedPartition, TopicPartition

A, B = ("t", 0), ("t", 1)


class Log:
    """A RecordReader over logs of single-record batches, recording every read."""

    def __init__(self, ends: dict[TopicPartition, int]) -> None:
        self.ends = ends
        self.reads: list[tuple[dict[TopicPartition, int], int]] = []
        self.failing = False
        self.isolation: list[bool] = []

    async def fetch(
        self,
        wanted: Mapping[TopicPartition, int],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        committed_only: bool = False,
    ) -> dict[TopicPartition, FetchedPartition]:
        self.reads.append((dict(wanted), max_wait_ms))
        self.isolation.append(committed_only)
        await asyncio.sleep(0)
        if self.failing:
            return {tp: FetchedPartition(6) for tp in wanted}
        return {tp: self._answer(tp, offset) for tp, offset in wanted.items()}

    def _answer(self, tp: TopicPartition, offset: int) -> FetchedPartition:
        batches = tuple((o, o, o - offset, o - offset + 1) for o in range(offset, self.ends[tp]))
        return FetchedPartition(0, b"x" * len(batches), batches, self.ends[tp])

    async def start_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, 7)


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_fetches_within_an_answer_read_ahead_take_it_without_reads_of_their_own() -> None:
    log = Log({A: 10})
    source = ReadAhead(log)
    source.read_ahead({A: 4}, 1 << 20)
    await settle()
    assert log.reads == [({A: 4}, READ_AHEAD_WAIT_MS)]  # waiting only for some records
    answer = await source.fetch({A: 4}, 500, 1, 1 << 20)
    assert [b[0] for b in answer[A].batches] == [4, 5, 6, 7, 8, 9]
    answer = await source.fetch({A: 7}, 500, 1, 1 << 20)  # further on in the same answer
    assert [b[0] for b in answer[A].batches] == [7, 8, 9]
    assert [answer[A].records[s:e] for _, _, s, e in answer[A].batches] == [b"x"] * 3
    assert len(log.reads) == 1 and source.hits == 2
    source.read_ahead({A: 8}, 1 << 20)  # 8 is on hand: the read goes on from its end
    await settle()
    assert log.reads[-1] == ({A: 10}, READ_AHEAD_WAIT_MS)
    log.ends[A] = 12
    await source.fetch({A: 10}, 500, 1, 1 << 20)
    assert log.reads[-1] == ({A: 10}, 500)  # that read found the log end: read again, waiting


@pytest.mark.asyncio
async def test_the_answers_of_ordinary_reads_serve_the_next_fetches() -> None:
    log = Log({A: 10, B: 3})
    source = ReadAhead(log)
    await source.fetch({A: 2, B: 3}, 500, 1, 1 << 20)
    answer = await source.fetch({A: 6}, 500, 1, 1 << 20)
    assert [b[0] for b in answer[A].batches] == [6, 7, 8, 9] and len(log.reads) == 1
    await source.fetch({A: 10}, 500, 1, 1 << 20)  # read past it: read again
    assert log.reads[-1] == ({A: 10}, 500) and source.pending == 0


@pytest.mark.asyncio
async def test_other_offsets_empty_and_failed_answers_are_read_again() -> None:
    log = Log({A: 10, B: 3})
    source = ReadAhead(log)
    source.read_ahead({A: 4, B: 3}, 1 << 20)  # B is at its log end
    await settle()
    await source.fetch({B: 3}, 500, 1, 1 << 20)
    assert log.reads[-1] == ({B: 3}, 500)  # empty: read again, waiting MaxWaitMs
    await source.fetch({A: 3}, 500, 1, 1 << 20)  # before the read ahead: not in it
    assert log.reads[-1] == ({A: 3}, 500) and source.hits == 0
    log = Log({A: 10})
    source = ReadAhead(log)
    log.failing = True
    source.read_ahead({A: 6}, 1 << 20)
    await settle()
    log.failing = False
    answer = await source.fetch({A: 6}, 500, 1, 1 << 20)
    assert not answer[A].error_code and log.reads[-1] == ({A: 6}, 500)


@pytest.mark.asyncio
async def test_partitions_without_records_are_not_waited_for_when_others_have_some() -> None:
    log = Log({A: 10, B: 3})
    source = ReadAhead(log)
    source.read_ahead({A: 4}, 1 << 20)
    answer = await source.fetch({A: 4, B: 3}, 500, 1, 1 << 20)  # the read ahead still under way
    assert ({B: 3}, 500) in log.reads  # B read meanwhile, not after it
    assert len(answer[A].batches) == 6 and answer[B].batches == ()
    answer = await source.fetch({A: 5, B: 3}, 500, 1, 1 << 20)  # A on hand: B not waited for
    assert len(answer[A].batches) == 5 and B not in answer
    log.failing = True
    await settle()  # B is read ahead for the next fetch, and that read fails
    assert log.reads[-1] == ({B: 3}, READ_AHEAD_WAIT_MS)
    answer = await source.fetch({A: 6, B: 3}, 500, 1, 1 << 20)
    assert len(answer[A].batches) == 4 and answer[B].error_code == 6  # its error is answered


@pytest.mark.asyncio
async def test_entries_are_bounded_in_number_and_age() -> None:
    now = [0.0]
    log = Log({("t", n): 10 for n in range(5)})
    source = ReadAhead(log, max_entries=3, max_age_s=1.0, clock=lambda: now[0])
    for n in range(5):
        now[0] += 0.1
        source.read_ahead({("t", n): 0}, 1 << 20)
    assert source.pending == 3
    await source.fetch({("t", 0): 0}, 0, 1, 1 << 20)
    assert source.hits == 0  # the oldest went first
    await source.fetch({("t", 4): 0}, 0, 1, 1 << 20)
    assert source.hits == 1
    now[0] = 2.0
    await source.fetch({("t", 3): 0}, 0, 1, 1 << 20)
    assert source.hits == 1 and source.pending == 1  # too old: dropped, read again (and kept)
    source.read_ahead({A: 1}, 1 << 20)
    await source.close()
    assert source.pending == 0
    assert await source.start_offsets([A], -2) == {A: 7}


class SlowReadAhead(Log):
    """A log whose reads ahead wait upstream (no records yet) while ordinary reads answer."""

    async def fetch(
        self,
        wanted: Mapping[TopicPartition, int],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        committed_only: bool = False,
    ) -> dict[TopicPartition, FetchedPartition]:
        if max_wait_ms == READ_AHEAD_WAIT_MS:
            await asyncio.sleep(10)
        return await super().fetch(wanted, max_wait_ms, min_bytes, max_bytes, committed_only)


@pytest.mark.asyncio
async def test_a_read_ahead_under_way_is_waited_for_no_longer_than_the_fetch_would_wait() -> None:
    log = SlowReadAhead({A: 10})
    source = ReadAhead(log)
    source.read_ahead({A: 4}, 1 << 20)
    answer = await asyncio.wait_for(source.fetch({A: 4}, 0, 1, 1 << 20), 1)
    assert len(answer[A].batches) == 6 and log.reads[-1] == ({A: 4}, 0)
    await source.close()


@pytest.mark.asyncio
async def test_read_committed_and_read_uncommitted_answers_are_not_shared() -> None:
    log = Log({A: 10})
    source = ReadAhead(log)
    source.read_ahead({A: 4}, 1 << 20)  # read_uncommitted
    await settle()
    await source.fetch({A: 4}, 500, 1, 1 << 20, committed_only=True)
    assert source.hits == 0 and log.reads[-1] == ({A: 4}, 500) and log.isolation[-1] is True
    source.read_ahead({A: 6}, 1 << 20, committed_only=True)  # 6 is on hand read_committed
    await settle()
    assert log.reads[-1] == ({A: 10}, READ_AHEAD_WAIT_MS) and log.isolation[-1] is True
    await source.fetch({A: 6}, 500, 1, 1 << 20, committed_only=True)
    await source.fetch({A: 5}, 500, 1, 1 << 20)
    assert source.hits == 2 and len(log.reads) == 3


@pytest.mark.asyncio
async def test_a_fetch_with_records_on_hand_does_not_wait_for_reads_under_way_for_others() -> None:
    log = SlowReadAhead({A: 10, B: 10})
    source = ReadAhead(log)
    await source.fetch({A: 0}, 500, 1, 1 << 20)  # kept for the next fetches
    source.read_ahead({B: 3}, 1 << 20)  # under way for 10 s
    answer = await asyncio.wait_for(source.fetch({A: 2, B: 3}, 5000, 1, 1 << 20), 1)
    assert [b[0] for b in answer[A].batches] == list(range(2, 10)) and B not in answer
    assert log.reads == [({A: 0}, 500)]  # B is left to the read under way (still upstream)
    await source.close()


@pytest.mark.asyncio
async def test_records_read_ahead_are_held_in_the_servers_byte_budget() -> None:
    log = Log({A: 10, B: 10})
    budget = ByteBudget(8)
    source = ReadAhead(log, budget=budget)
    source.read_ahead({A: 4}, 1 << 20)
    await settle()
    assert budget.used == 6 and source.pending == 1  # offsets 4-9, one byte each
    source.read_ahead({B: 0}, 1 << 20)
    await settle()
    assert budget.used == 6 and source.pending == 1  # 10 more bytes do not fit: not kept
    await source.fetch({B: 0}, 500, 1, 1 << 20)
    assert log.reads[-1] == ({B: 0}, 500) and budget.used == 6  # read again, and not kept either
    answer = await source.fetch({A: 8}, 500, 1, 1 << 20)
    assert [b[0] for b in answer[A].batches] == [8, 9] and budget.used == 6
    await source.fetch({A: 10}, 0, 1, 1 << 20)  # read past: dropped, its bytes given back
    assert budget.used == 0 and source.pending == 0
    budget.take(8)  # the server's memory spent elsewhere: nothing is read ahead
    reads = len(log.reads)
    source.read_ahead({A: 0}, 1 << 20)
    await settle()
    assert len(log.reads) == reads and source.pending == 0
    budget.give_back(8)
    source.read_ahead({A: 0}, 1 << 20)
    await settle()
    assert budget.used == 0 and source.pending == 0  # 10 bytes never fit under a limit of 8
    await source.close()


@pytest.mark.asyncio
async def test_partitions_without_a_read_under_way_are_read_while_others_are_waited_for() -> None:
    log = SlowReadAhead({A: 10, B: 10})
    source = ReadAhead(log)
    source.read_ahead({A: 4}, 1 << 20)  # under way for 10 s (the log end, say)
    answer = await asyncio.wait_for(source.fetch({A: 4, B: 0}, 5000, 1, 1 << 20), 1)
    assert len(answer[B].batches) == 10 and A not in answer  # B's records, at once
    assert log.reads == [({B: 0}, 5000)]
    await source.close()
