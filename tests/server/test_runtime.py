"""The runtime's commit path with a real event loop, BatchWriter and memory store: state is
applied before the reply leaves, and a write that lands after its timeout is applied too."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.server.runtime import Clock, Runtime
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic, OffsetFetchResponse
from storage.memory import MemoryStore
from storage.writer import BatchWriter

pytestmark = pytest.mark.asyncio


class Reply:
    """A ReplyTo that, like a connection dispatching its next pipelined request inside
    ``send``, asks the shard for the committed offset the moment the reply leaves."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.response: Any = None
        self.offset_seen_at_send: int | None = None
        self.sends = 0
        self.done = asyncio.get_running_loop().create_future()

    def send(self, response: Any) -> None:
        self.sends += 1
        self.response = response
        self.offset_seen_at_send = fetch(self.runtime)
        if not self.done.done():
            self.done.set_result(None)


class Sink:
    def __init__(self) -> None:
        self.response: Any = None

    def send(self, response: Any) -> None:
        self.response = response


def context(runtime: Runtime, reply_to: Any, version: int) -> RequestContext:
    return RequestContext(runtime.clock.now_ms(), runtime.clock.wall_ms(), version, "c", "/h", reply_to)


def fetch(runtime: Runtime) -> int:
    sink = Sink()
    request = OffsetFetchRequest(
        group_id="g", topics=[OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
    )
    runtime.apply(runtime.coordinator.fetch_offsets(context(runtime, sink, 7), request))
    response: OffsetFetchResponse = sink.response
    return response.topics[0].partitions[0].committed_offset


def commit(runtime: Runtime, offset: int) -> Reply:
    reply = Reply(runtime)
    partition = OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
    request = OffsetCommitRequest(
        group_id="g", topics=[OffsetCommitRequestTopic(name="t", partitions=[partition])]
    )
    runtime.apply(runtime.coordinator.commit_offsets(context(runtime, reply, 8), request))
    return reply


def runtime_over(store: MemoryStore, write_timeout_ms: int) -> Runtime:
    loop = asyncio.get_running_loop()
    clock = Clock(loop)
    shard = GroupCoordinator(BrokerGroupSettings())
    shard.load([], [], clock.now_ms(), clock.wall_ms())
    return Runtime(shard, BatchWriter(store), clock, write_timeout_ms)


def error_code(response: OffsetCommitResponse) -> int:
    return response.topics[0].partitions[0].error_code


async def test_a_commit_reply_leaves_after_its_offset_is_visible() -> None:
    store = MemoryStore()
    await store.open()
    runtime = runtime_over(store, write_timeout_ms=5000)
    for offset in (42, 43):
        reply = commit(runtime, offset)
        await asyncio.wait_for(reply.done, 5)
        assert error_code(reply.response) == 0
        assert reply.offset_seen_at_send == offset
    runtime.stop_timers()


async def test_a_commit_that_lands_after_its_timeout_is_served() -> None:
    store = MemoryStore(latency_ms=300)
    await store.open()
    runtime = runtime_over(store, write_timeout_ms=30)
    reply = commit(runtime, 42)
    await asyncio.wait_for(reply.done, 5)
    assert error_code(reply.response) == ErrorCode.REQUEST_TIMED_OUT
    assert reply.offset_seen_at_send == -1
    await asyncio.wait_for(runtime.writer.write([]), 5)  # a barrier: the late write has landed
    await asyncio.sleep(0)  # its done-callback runs
    assert ("g", "t", 0) in store.data.offsets
    assert fetch(runtime) == 42
    runtime.stop_timers()


async def test_each_write_times_out_at_its_own_deadline_under_one_timer() -> None:
    # The first write stalls the store for 300 ms; writes queued behind it at different times
    # each time out write_timeout_ms after they were made, not at the first one's deadline.
    store = MemoryStore(latency_ms=300)
    await store.open()
    runtime = runtime_over(store, write_timeout_ms=100)
    loop = asyncio.get_running_loop()
    first = commit(runtime, 1)
    await asyncio.sleep(0.06)
    second = commit(runtime, 2)
    started = loop.time()
    await asyncio.wait_for(first.done, 5)
    assert not second.done.done()  # the first one's deadline is not the second's
    await asyncio.wait_for(second.done, 5)
    waited = loop.time() - started
    assert 0.09 <= waited < 0.25
    assert error_code(first.response) == error_code(second.response) == ErrorCode.REQUEST_TIMED_OUT
    assert (first.sends, second.sends) == (1, 1)
    await asyncio.wait_for(runtime.writer.write([]), 5)
    assert fetch(runtime) == 2  # both landed late and were applied in order
    assert runtime.pending_writes == 0
    runtime.stop_timers()


async def test_writes_that_settle_in_time_leave_no_timer_behind() -> None:
    store = MemoryStore()
    await store.open()
    runtime = runtime_over(store, write_timeout_ms=50)
    replies = [commit(runtime, offset) for offset in range(1, 20)]
    await asyncio.wait_for(asyncio.gather(*(reply.done for reply in replies)), 5)
    assert all(error_code(reply.response) == 0 for reply in replies)
    await asyncio.sleep(0.1)  # past every deadline: nothing is answered twice or timed out
    assert [reply.sends for reply in replies] == [1] * len(replies)
    assert all(error_code(reply.response) == 0 for reply in replies)
    assert runtime.pending_writes == 0
    runtime.stop_timers()
