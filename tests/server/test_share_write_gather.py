"""Starting the commits of several share consumers together (coordinator/server/share_write_gather.py):
where commits take longer than the members need to come back, a member's operation waits for
the other members that operated recently, at most twice the commit time, and their writes
share one commit; a member alone, members coming back slower than a commit, and members that
operated long ago are not waited for."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.server.share_write_gather import WriteGather
from storage.memory import MemoryStore
from storage.writer import BatchWriter
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio


async def _writer(commit_ms: float) -> BatchWriter:
    store = MemoryStore(latency_ms=commit_ms)
    await store.open()
    return BatchWriter(store)


def _gather(writer: BatchWriter) -> WriteGather:
    return WriteGather(lambda: writer.stats.last_write_latency_s)


async def _operate(gather: WriteGather, writer: BatchWriter, member: str, partition: int) -> None:
    await gather.turn(member)
    await writer.write([offset(partition=partition)])
    gather.answered(member)


async def _cycles(
    gather: WriteGather, writer: BatchWriter, members: str, cycles: int, turnaround_s: float
) -> None:
    async def member(name: str, partition: int) -> None:
        await asyncio.sleep(0.002 * partition)  # the first comes alone
        for _ in range(cycles):
            await _operate(gather, writer, name, partition)
            await asyncio.sleep(turnaround_s)

    await asyncio.gather(*(member(name, n) for n, name in enumerate(members)))


async def test_members_quicker_than_a_commit_share_one() -> None:
    writer = await _writer(commit_ms=10)
    gather = _gather(writer)
    await _cycles(gather, writer, "abc", 8, turnaround_s=0.001)
    # Alternating, three members take two commits a cycle (16 here); gathered, one a cycle
    # once the turnaround is learnt.
    assert writer.stats.batches_written <= 13
    assert gather.gathered > 0
    await writer.close()


async def test_members_slower_than_a_commit_are_not_waited_for() -> None:
    writer = await _writer(commit_ms=1)
    gather = _gather(writer)
    await _cycles(gather, writer, "abc", 8, turnaround_s=0.01)
    assert gather.held == 0
    await writer.close()


async def test_a_member_alone_is_never_held() -> None:
    writer = await _writer(commit_ms=10)
    gather = _gather(writer)
    await _cycles(gather, writer, "a", 5, turnaround_s=0)
    assert gather.held == 0
    await writer.close()


async def test_a_member_that_does_not_come_holds_the_others_at_most_twice_a_commit() -> None:
    writer = await _writer(commit_ms=10)
    gather = _gather(writer)
    await _cycles(gather, writer, "ab", 3, turnaround_s=0.001)
    assert gather.commit_s is not None
    held = gather.held
    loop = asyncio.get_running_loop()
    started = loop.time()
    await gather.turn("b")  # "a" operated recently but does not come again
    waited = loop.time() - started
    assert gather.held == held + 1
    assert waited < 2 * gather.commit_s + 0.01
    await writer.close()


async def test_members_that_operated_long_ago_are_not_waited_for() -> None:
    writer = await _writer(commit_ms=10)
    now = [0.0]
    gather = WriteGather(lambda: 0.01, clock=lambda: now[0])
    for _ in range(3):  # a quick turnaround learnt
        await gather.turn("a")
        gather.answered("a")
    assert gather.turnaround_s == 0
    now[0] = 1.0  # "a" operated a second ago: it is not expected
    await gather.turn("b")
    assert gather.held == 0
    await writer.close()


async def test_quick_commits_are_not_gathered() -> None:
    writer = await _writer(commit_ms=0.5)  # a healthy disk: alternating is as quick
    gather = _gather(writer)
    await _cycles(gather, writer, "abc", 8, turnaround_s=0)
    assert gather.held == 0
    await writer.close()
