"""Starting the commits of several share consumers together (coordinator/server/share_write_gather.py):
a member's operation waits for the other members that wrote recently while the writer is idle,
at most for the last commit's time; a member alone, or one arriving while a commit is under way,
goes at once."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.server.share_write_gather import WriteGather
from storage.memory import MemoryStore
from storage.writer import BatchWriter
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio

COMMIT_MS = 5


async def _writer() -> BatchWriter:
    store = MemoryStore(latency_ms=COMMIT_MS)
    await store.open()
    return BatchWriter(store)


def _gather(writer: BatchWriter, max_wait_s: float = 0.05) -> WriteGather:
    return WriteGather(
        lambda: writer.idle, lambda: writer.stats.last_write_latency_s, max_wait_s=max_wait_s
    )


async def _operate(gather: WriteGather, writer: BatchWriter, member: str, partition: int) -> None:
    await gather.turn(member)
    await writer.write([offset(partition=partition)])


async def test_members_arriving_apart_share_one_commit() -> None:
    writer = await _writer()
    gather = _gather(writer)
    for n, member in enumerate("abc"):  # each has written recently
        await _operate(gather, writer, member, n)
    before, held, gathered = writer.stats.batches_written, gather.held, gather.gathered

    async def later(member: str, partition: int, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        await _operate(gather, writer, member, partition)

    await asyncio.gather(later("a", 0, 0), later("b", 1, 0.001), later("c", 2, 0.002))
    assert writer.stats.batches_written - before == 1
    assert writer.stats.last_batch_writes == 3
    assert (gather.held - held, gather.gathered - gathered) == (2, 1)  # "c" came last: no wait
    await writer.close()


async def test_a_member_alone_is_never_held() -> None:
    writer = await _writer()
    gather = _gather(writer)
    loop = asyncio.get_running_loop()
    for n in range(3):
        started = loop.time()
        await gather.turn("a")
        assert loop.time() - started < 0.001
        await writer.write([offset(partition=n)])
    assert gather.held == 0
    await writer.close()


async def test_a_member_that_does_not_come_holds_the_others_at_most_one_commits_time() -> None:
    writer = await _writer()
    gather = _gather(writer)
    await _operate(gather, writer, "a", 0)
    await _operate(gather, writer, "b", 1)  # held: "a" wrote recently; "a" never comes again
    loop = asyncio.get_running_loop()
    started = loop.time()
    await gather.turn("b")
    waited = loop.time() - started
    assert gather.held == 2
    assert writer.stats.last_write_latency_s * 0.5 <= waited < 0.05


async def test_nobody_is_held_while_a_commit_is_under_way() -> None:
    writer = await _writer()
    gather = _gather(writer)
    await _operate(gather, writer, "a", 0)
    await _operate(gather, writer, "b", 1)
    held = gather.held
    under_way = writer.write([offset(partition=9)])  # a commit is under way
    await asyncio.sleep(0)
    assert not writer.idle
    await gather.turn("a")
    assert gather.held == held
    await under_way
    await writer.close()


async def test_members_that_wrote_long_ago_are_not_waited_for() -> None:
    writer = await _writer()
    now = [0.0]
    gather = WriteGather(
        lambda: writer.idle, lambda: writer.stats.last_write_latency_s, clock=lambda: now[0]
    )
    await gather.turn("a")
    now[0] = 1.0  # "a" wrote a second ago: it is not expected
    await gather.turn("b")
    assert gather.held == 0
    await writer.close()
